"""A process on the simulated driver for the metrics tests: GPU argv[1],
argv[2] MiB live and argv[3] MiB cached in the fake torch, an agent when
argv[4] is 1 (gpureclaim.agent.start()); then one line READY {json} (its
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
if agent:
    from gpureclaim import agent as _agent

    path = _agent.start()
e = gpureclaim.explain()
g = next(x for x in e.gpus if x.device == gpu)
print("READY " + json.dumps({
    "pid": os.getpid(), "agent": path, "driver": g.driver,
    "releasable": g.part("releasable"), "live": g.part("live")}),
    flush=True)
sys.stdin.read()
