"""A process on the simulated driver for the metrics tests: GPU argv[1],
argv[2] MiB live and argv[3] MiB cached in the fake torch, an agent when
argv[4] is 1 (gpureclaim.agent.start()), a stand-in at the agent's socket
that never answers when it is 2, one that answers garbage when 3, one that
answers every request with the line in GPR_WORKLOAD_ANSWER when 4; then one
line READY {json} (its
pid and its own figures) and it waits until its stdin closes. Any further
arguments are only there to be in its command line."""
import json
import os
import sys

import torch

import gpureclaim

MiB = 1 << 20
gpu, keep, cached, agent = (int(a) for a in sys.argv[1:5])
dev = f"cuda:{gpu}"
held = torch.empty(keep * MiB, dtype=torch.uint8, device=dev) if keep else None
if cached:
    dropped = torch.empty(cached * MiB, dtype=torch.uint8, device=dev)
    del dropped
path = None
if agent == 1:
    from gpureclaim import agent as _agent

    path = _agent.start()
elif agent in (2, 3, 4):
    import socket
    import threading

    from gpureclaim import agent as _agent

    path = os.path.join(_agent.server_dir(), f"{os.getpid()}.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    os.chmod(path, 0o600)
    srv.listen(8)
    held_conns = []

    def serve():
        while True:
            c, _ = srv.accept()
            held_conns.append(c)  # silent: kept open, never answered
            if agent == 3:
                c.recv(65536)
                c.sendall(b'{"v": 1, "ok": true, "pid": 1, "res\x00\n')
                c.close()
            elif agent == 4:
                c.recv(65536)
                c.sendall(os.environ["GPR_WORKLOAD_ANSWER"].encode() + b"\n")
                c.close()

    threading.Thread(target=serve, daemon=True).start()
e = gpureclaim.explain()
g = next(x for x in e.gpus if x.device == gpu)
print("READY " + json.dumps({
    "pid": os.getpid(), "agent": path, "driver": g.driver,
    "releasable": g.part("releasable"), "live": g.part("live")}),
    flush=True)
sys.stdin.read()
