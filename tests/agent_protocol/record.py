"""Records the exchanges of a real agent for tests/agent_protocol/: a
process of the simulated driver with the agent (fake Torch holding 256
MiB live and 512 MiB cached) is asked each request of REAL, as the
clients write it, and the answer's bytes are kept as they came (its pid
and timings included: the clients read neither). Run after `make all`,
from the checkout: python3 tests/agent_protocol/record.py
"""
import json
import os
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from agentkit import Target, sim_env  # noqa: E402

from exchanges import request_line  # noqa: E402

CODE = """\
keep = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
t = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
del t
"""

# name, what, op, args: asked in this order (the release empties the cache)
REAL = [
    ("status", "status: the process, its Python and frameworks, the bytes "
     "per GPU", "status", {}),
    ("explain", "explain of GPU 0: its parts, the text, the groups C "
     "reads", "explain", {"devices": [0]}),
    ("release", "release with the workspaces: the bytes, exact, and the "
     "flat fields C reads", "release", {"workspaces": True}),
    ("trace_not_started", "trace stop of a trace never started: ok false, "
     "kind error, one line", "trace", {"action": "stop"}),
    ("unknown_op", "an operation the agent does not have: kind error, "
     "what it has", "no_such_op", {}),
    ("unknown_argument", "an argument release does not take: kind error, "
     "what it takes", "release", {"gpu": 0}),
]


def ask(path, line):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(path)
    s.sendall(line.encode())
    got = b""
    while not got.endswith(b"\n"):
        chunk = s.recv(1 << 16)
        if not chunk:
            break
        got += chunk
    s.close()
    return got.decode()


def main():
    env = sim_env()
    with Target(env, CODE) as t:
        path = os.path.join(env["GPURECLAIM_AGENT_DIR"], f"{t.pid}.sock")
        for name, what, op, args in REAL:
            x = {"what": what,
                 "ask": {"op": op, "args": args, "timeout": 10}}
            x["request"] = request_line(x)
            answer = ask(path, request_line(x, time.monotonic() + 10))
            x["answer"] = [answer]
            doc = json.loads(answer)
            x["expect"] = ({"ok": True} if doc["ok"] else
                           {"kind": doc["kind"], "says": doc["error"]})
            with open(os.path.join(HERE, f"{name}.json"), "w") as f:
                json.dump(x, f, indent=1)
                f.write("\n")
            print(name, "ok" if doc["ok"] else doc["kind"])


if __name__ == "__main__":
    main()
