"""The agent on a real GPU (GPU machine; skips without a GPU, Torch or
CuPy): processes holding Torch and CuPy cache, started with
GPURECLAIM_AGENT=1, released from outside.

- `gpureclaim release --pid N --json`: NVML's figure for that pid (as
  `gpureclaim ps --json` reads it, what nvidia-smi lists) falls by exactly
  the reported bytes, and the process goes on.
- `gpureclaim reclaim --json` over three such processes: each one's
  returned bytes are its NVML drop, exactly; the total is their sum.

The package: $GPURECLAIM_PYTHONPATH (default build/python); the command:
$GPURECLAIM_BIN (default build/cli/gpureclaim).
"""
import json
import subprocess
import sys

from gpu_machine import GPR, agent_env, needs

MiB = 1 << 20


pytestmark = needs("torch, cupy")

#: a process with Torch and CuPy cache (torch_mib, cupy_mib), a live
#: tensor, the agent on; "ready" once it holds them, exits on stdin's end
TARGET = """\
import os, sys, torch, cupy

keep = torch.ones(64 << 20, dtype=torch.uint8, device="cuda")
t = torch.empty({torch_mib} << 20, dtype=torch.uint8, device="cuda")
a = cupy.empty({cupy_mib} << 20, dtype=cupy.uint8)
torch.cuda.synchronize()
del t, a
print("ready", flush=True)
sys.stdin.read()
print(int(keep.sum().item()) == (64 << 20), flush=True)
"""


def env():
    return agent_env()


def start(torch_mib, cupy_mib):
    p = subprocess.Popen(
        [sys.executable, "-c", TARGET.format(torch_mib=torch_mib,
                                             cupy_mib=cupy_mib)],
        env=env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    assert line == "ready\n", (line, p.stderr.read() if p.poll() else "")
    return p


def end(p):
    p.stdin.close()
    out = p.stdout.read()
    p.wait(60)
    assert p.returncode == 0 and out == "True\n", (out, p.stderr.read())


def nvml(pid):
    """NVML's figure for pid on each GPU (bytes), from `gpureclaim ps`."""
    r = subprocess.run([GPR, "ps", "--json"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return {g["index"]: q["bytes"] for g in json.loads(r.stdout)["gpus"]
            for q in g.get("processes", []) if q["pid"] == pid}


def gpr(*args):
    r = subprocess.run([GPR, *map(str, args)], capture_output=True,
                       text=True, timeout=120, env=env())
    return r


def test_release_pid_from_outside_drops_nvmls_figure_exactly():
    p = start(1024, 512)
    try:
        before = nvml(p.pid)
        r = gpr("release", "--pid", p.pid, "--json")
        assert r.returncode == 0, r.stderr
        rep = json.loads(r.stdout)
        after = nvml(p.pid)
        print(f"\nreleased {rep['bytes']} bytes in {rep['seconds']:.4f} s "
              f"(in the process); NVML {before} -> {after}")
        assert rep["source"] == "driver"
        assert rep["bytes"] >= 1536 * MiB
        drop = sum(before.values()) - sum(after.values())
        assert drop == rep["bytes"]
        for g in rep["gpus"]:
            assert before[g["nvml_index"]] - after[g["nvml_index"]] == \
                g["released"]
    finally:
        end(p)


def test_reclaim_over_three_processes_each_exact():
    procs = [start(m, m // 2) for m in (512, 1024, 1536)]
    try:
        before = {p.pid: nvml(p.pid) for p in procs}
        r = gpr("reclaim", "--json")
        assert r.returncode == 0, (r.stdout, r.stderr)
        rep = json.loads(r.stdout)
        got = {x["pid"]: x for x in rep["processes"]}
        total = 0
        for p in procs:
            after = nvml(p.pid)
            drop = sum(before[p.pid].values()) - sum(after.values())
            assert got[p.pid]["returned"] == drop, (p.pid, got[p.pid])
            total += drop
        print(f"\nreclaim: {rep['total']} bytes from {len(procs)} processes "
              f"in {rep['seconds']:.4f} s")
        assert rep["total"] == total
        assert rep["failed"] == []
    finally:
        for p in procs:
            end(p)
