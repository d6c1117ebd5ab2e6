"""gpureclaim.release() on a real GPU with Torch and CuPy (GPU machine; skips
without a GPU, Torch or CuPy).

- The design record's scenario (Torch and CuPy started, a 1 GiB Torch tensor
  in a list that contains itself, a 1 GiB CuPy array, all names deleted):
  release_cached_memory() returns exactly 2.147483648 and the per-process
  NVML figure (the one nvidia-smi lists) returns to its start; three runs.
- The same while another process allocates and frees on the GPU in a loop.
- A fresh process that imports gpureclaim (and torch, unused) and releases:
  0.0, no context opened, the driver not initialised.
- After a matmul, release(workspaces=True) brings Torch's reserved bytes to 0.

The package: $GPURECLAIM_PYTHONPATH (default build/python, from
`make python-ext`), or an installed gpureclaim.
"""
import json
import os
import subprocess
import sys
import textwrap
import time

from gpu_machine import PKG, needs



pytestmark = needs("torch, cupy")


def run(code, timeout=300):
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    src = "import json, os, sys, gc, subprocess\n" + textwrap.dedent(code)
    p = subprocess.run([sys.executable, "-c", src], env=env, capture_output=True,
                       text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def smi_mib(pid):
    """nvidia-smi's used_memory (MiB) for pid, or None if not listed."""
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                          "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        p, m = [x.strip() for x in line.split(",")]
        if int(p) == pid:
            return int(m)
    return None


SCENARIO = """
import torch, cupy, gpureclaim

GiB = 1 << 30
keep = (torch.zeros(1, device="cuda"), cupy.zeros(1))
torch.cuda.synchronize()
gpureclaim.release()
dev = torch.cuda.current_device()
start = gpureclaim.process_memory()[dev]
results = []
for run in range(3):
    t = torch.empty(GiB, dtype=torch.uint8, device="cuda")
    cycle = [t]
    cycle.append(cycle)
    a = cupy.empty(GiB, dtype=cupy.uint8)
    torch.cuda.synchronize()
    held = gpureclaim.process_memory()[dev] - start
    del t, cycle, a
    gb = gpureclaim.release_cached_memory()
    end = gpureclaim.process_memory()[dev]
    results.append(dict(gb=gb, held=held, end=end, start=start))
smi = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                      "--format=csv,noheader,nounits"], capture_output=True,
                     text=True).stdout
mine = [int(l.split(",")[1]) for l in smi.splitlines()
        if int(l.split(",")[0]) == os.getpid()]
print(json.dumps(dict(results=results, smi_mib=mine, end=end)))
"""


def check_scenario(r):
    for x in r["results"]:
        assert x["held"] == 2 * (1 << 30)
        assert x["gb"] == 2.147483648, x
        assert x["end"] == x["start"], x
    # our per-process figure is the one nvidia-smi lists (MiB)
    assert r["smi_mib"] == [r["end"] // (1 << 20)]


def test_reference_cycle_scenario_exact():
    check_scenario(run(SCENARIO))


def test_scenario_while_another_process_allocates():
    churn = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import time, torch
        end = time.time() + 120
        while time.time() < end:
            x = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
            del x
            torch.cuda.empty_cache()
    """)])
    try:
        time.sleep(5)  # the other process is up and churning
        assert churn.poll() is None
        check_scenario(run(SCENARIO))
    finally:
        churn.kill()
        churn.wait()


def test_fresh_process_opens_nothing():
    r = run("""
    import torch, gpureclaim
    r = gpureclaim.release()
    maps = open("/proc/self/maps").read()
    out = dict(gb=r.gb, torch_init=torch.cuda.is_initialized(),
               libcuda="libcuda.so" in maps, in_use=gpureclaim.devices_in_use(),
               notes=r.notes)
    smi = subprocess.run(["nvidia-smi", "--query-compute-apps=pid",
                          "--format=csv,noheader"], capture_output=True, text=True).stdout
    out["listed"] = str(os.getpid()) in [l.strip() for l in smi.splitlines()]
    print(json.dumps(out))
    """)
    assert r["gb"] == 0.0
    assert r["torch_init"] is False
    assert r["in_use"] == []
    assert r["listed"] is False
    # not loaded at all, or loaded by torch but never initialised
    assert not r["libcuda"] or any("not initialised" in n for n in r["notes"]), r


def test_workspaces_bring_reserved_to_zero():
    r = run("""
    import torch, gpureclaim
    a = torch.randn(1024, 1024, device="cuda")
    b = a @ a
    torch.cuda.synchronize()
    del a, b
    gpureclaim.release()
    kept = torch.cuda.memory_reserved()
    r = gpureclaim.release(workspaces=True)
    print(json.dumps(dict(kept=kept, after=torch.cuda.memory_reserved(),
                          bytes=r.bytes)))
    """)
    assert r["after"] == 0, r
    assert r["bytes"] == r["kept"], r
