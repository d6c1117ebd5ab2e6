"""gpureclaim on two GPUs (GPU machine with 2 or more GPUs; skips with fewer,
or without Torch and CuPy).

- A process that used only GPU 1 (Torch, GPU 1 made current before any CUDA
  call): release() visits GPU 1 alone, returns exactly the 256 MiB it
  dropped, and GPU 0 gains no context (nvidia-smi never lists our pid there,
  Torch has no primary context on it).
- Torch on GPU 0 and CuPy on GPU 1 (512 MiB each, the tensor in a reference
  cycle), then both on both: per GPU and per framework, the bytes released
  are exactly those dropped there; each framework's current device is what
  it was before the call.
- `gpureclaim ps --json` lists both GPUs and a process holding memory on
  both, on each with nvidia-smi's figure (MiB * 2**20).

Each scenario runs in a fresh interpreter with CUDA_DEVICE_ORDER=PCI_BUS_ID,
so CUDA ordinals are nvidia-smi's indices (all GPUs stay visible).
The package: $GPURECLAIM_PYTHONPATH (default build/python); the tool:
$GPURECLAIM_BIN (default build/cli/gpureclaim). `pytest -s` shows the figures.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PKG = os.environ.get("GPURECLAIM_PYTHONPATH", str(ROOT / "build/python"))
BIN = os.environ.get("GPURECLAIM_BIN", str(ROOT / "build/cli/gpureclaim"))
MiB = 1 << 20


def _env():
    env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID")
    env["PYTHONPATH"] = PKG + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _has(cmd):
    r = subprocess.run([sys.executable, "-c", cmd], env=_env(), capture_output=True)
    return r.returncode == 0


def _gpu_count():
    if not shutil.which("nvidia-smi"):
        return 0
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    if r.returncode != 0:
        return 0
    return sum(line.startswith("GPU ") for line in r.stdout.splitlines())


N_GPUS = _gpu_count()
pytestmark = [
    pytest.mark.skipif(N_GPUS < 2, reason=f"needs 2 NVIDIA GPUs, nvidia-smi -L lists {N_GPUS}"),
    pytest.mark.skipif(
        N_GPUS >= 2 and not _has("import torch, cupy; assert torch.cuda.device_count() >= 2"),
        reason="torch with CUDA on 2 GPUs and cupy needed"),
]

# Runs in the scenario's process: nvidia-smi's view of a pid, by GPU index.
PRELUDE = """
import gc, json, os, subprocess, sys
MiB = 1 << 20

def smi(query):
    out = subprocess.run(["nvidia-smi", "--query-" + query, "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    return [[f.strip() for f in line.split(",")] for line in out.splitlines() if line.strip()]

def smi_mib(pid):
    '''{GPU index: used MiB} of pid's compute contexts, as nvidia-smi lists them.'''
    index = {uuid: int(i) for i, uuid in smi("gpu=index,uuid")}
    return {index[u]: int(m) if m.isdigit() else None
            for p, u, m in smi("compute-apps=pid,gpu_uuid,used_memory") if int(p) == pid}
"""


def run(code, timeout=300):
    src = PRELUDE + textwrap.dedent(code)
    p = subprocess.run([sys.executable, "-c", src], env=_env(), capture_output=True,
                       text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def per_gpu(report):
    """{device: bytes released} of a Release.to_dict()."""
    return {g["device"]: g["released"] for g in report["gpus"]}


def per_releaser(report, names=("torch", "cupy")):
    """{(releaser, device): its own drop, live + cached before - after} (the
    once-per-call rows left out; a row that could not tell fails)."""
    out = {}
    for r in report["releasers"]:
        if r["name"] in names and r["device"] >= 0:
            key = (r["name"], r["device"])
            assert r["before"] is not None and r["after"] is not None, r
            drop = sum(r["before"].values()) - sum(r["after"].values())
            out[key] = out.get(key, 0) + drop
    return out


def show(what, report):
    print(f"\n{what}: {report['bytes']} bytes, per GPU {per_gpu(report)}, "
          f"{report['seconds'] * 1e3:.1f} ms (gc: {report['collected']}, "
          f"{report['collect_seconds'] * 1e3:.1f} ms), source {report['source']}")


def test_gpu1_only_release_leaves_gpu0_untouched():
    r = run("""
    import torch, cupy, gpureclaim  # cupy imported, unused: it must not open GPU 0 either
    torch.cuda.set_device(1)        # before any CUDA call
    keep = torch.zeros(1, device="cuda:1")
    torch.cuda.synchronize()
    gpureclaim.release()
    start = gpureclaim.process_memory()[1]
    t = torch.empty(256 * MiB, dtype=torch.uint8, device="cuda:1")
    torch.cuda.synchronize()
    held = gpureclaim.process_memory()[1] - start
    smi_before = smi_mib(os.getpid())
    del t
    rep = gpureclaim.release().to_dict()
    has_ctx = getattr(torch._C, "_cuda_hasPrimaryContext", None)
    print(json.dumps(dict(
        report=rep, held=held, smi_before=smi_before, smi_after=smi_mib(os.getpid()),
        in_use=gpureclaim.devices_in_use(), memory=sorted(gpureclaim.process_memory()),
        torch_ctx0=has_ctx(0) if has_ctx else None, torch_dev=torch.cuda.current_device())))
    """)
    rep = r["report"]
    show("GPU 1 only", rep)
    assert r["held"] == 256 * MiB, r
    # the scenario itself kept off GPU 0, or the checks below would mean nothing
    assert list(r["smi_before"]) == ["1"], r["smi_before"]
    assert [g["device"] for g in rep["gpus"]] == [1], rep
    assert rep["gpus"][0]["nvml_index"] == 1, rep
    assert rep["source"] == "driver", rep
    assert rep["bytes"] == 256 * MiB, rep
    assert per_gpu(rep) == {1: 256 * MiB}, rep
    assert per_releaser(rep, ("torch",)) == {("torch", 1): 256 * MiB}, rep
    assert list(r["smi_after"]) == ["1"], r["smi_after"]  # JSON keys are strings
    assert r["in_use"] == [1] and r["memory"] == [1], r
    assert r["torch_ctx0"] in (False, None), r
    assert r["torch_dev"] == 1, r


def test_torch_and_cupy_on_two_gpus_exact_per_gpu():
    r = run("""
    import torch, cupy, gpureclaim
    N = 512 * MiB
    gc.disable()  # the tensor's cycle stays until gpureclaim collects it
    # contexts and a small live allocation for both frameworks on both GPUs,
    # so the drops below are the only change
    keep = []
    for d in (0, 1):
        keep.append(torch.zeros(1, device=f"cuda:{d}"))
        with cupy.cuda.Device(d):
            keep.append(cupy.zeros(1))
        torch.cuda.synchronize(d)
        cupy.cuda.Device(d).synchronize()
    gpureclaim.release()

    def drop(torch_on, cupy_on):
        for d in torch_on:
            cycle = [torch.empty(N, dtype=torch.uint8, device=f"cuda:{d}")]
            cycle.append(cycle)
            torch.cuda.synchronize(d)
        for d in cupy_on:
            with cupy.cuda.Device(d):
                a = cupy.empty(N, dtype=cupy.uint8)
                cupy.cuda.Device(d).synchronize()
                del a

    def phase(torch_on, cupy_on, current):
        start = gpureclaim.process_memory()
        drop(torch_on, cupy_on)
        now = gpureclaim.process_memory()
        torch.cuda.set_device(current)
        cupy.cuda.runtime.setDevice(current)
        before = [torch.cuda.current_device(), cupy.cuda.runtime.getDevice()]
        rep = gpureclaim.release().to_dict()
        after = [torch.cuda.current_device(), cupy.cuda.runtime.getDevice()]
        return dict(report=rep, held={d: now[d] - start[d] for d in (0, 1)},
                    before=before, after=after)

    # current device 1 catches a reset to 0; 0 catches one left on the last GPU visited
    print(json.dumps([phase([0], [1], current=1), phase([0, 1], [0, 1], current=0)]))
    """)
    N = 512 * MiB
    expected = [  # (name, per GPU, per framework and GPU, current device)
        ("torch 0 + cupy 1", {0: N, 1: N},
         {("torch", 0): N, ("torch", 1): 0, ("cupy", 0): 0, ("cupy", 1): N}, 1),
        ("both on both", {0: 2 * N, 1: 2 * N},
         {("torch", 0): N, ("torch", 1): N, ("cupy", 0): N, ("cupy", 1): N}, 0),
    ]
    for ph, (name, gpus, frameworks, current) in zip(r, expected):
        rep = ph["report"]
        show(name, rep)
        assert ph["held"] == {str(d): b for d, b in gpus.items()}, ph["held"]
        assert rep["source"] == "driver", rep
        assert rep["collected"] is True, rep  # the tensor's cycle needed gc
        assert per_gpu(rep) == gpus, rep
        assert rep["bytes"] == sum(gpus.values()), rep
        assert per_releaser(rep) == frameworks, rep
        assert ph["before"] == [current, current], ph
        assert ph["after"] == ph["before"], ph


HOLDER = """
import sys, torch, cupy
t = torch.empty(256 << 20, dtype=torch.uint8, device="cuda:0")
torch.cuda.synchronize(0)
with cupy.cuda.Device(1):
    a = cupy.empty(768 << 20, dtype=cupy.uint8)
    cupy.cuda.Device(1).synchronize()
print("ready", flush=True)
sys.stdin.read()
"""


def smi_apps():
    """{(pid, gpu uuid): bytes} and {index: uuid} from nvidia-smi."""
    def query(q):
        out = subprocess.run(["nvidia-smi", "--query-" + q, "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
        return [[f.strip() for f in line.split(",")] for line in out.splitlines() if line.strip()]
    apps = {(int(p), u): int(m) * MiB if m.isdigit() else None
            for p, u, m in query("compute-apps=pid,gpu_uuid,used_memory")}
    return apps, {int(i): u for i, u in query("gpu=index,uuid")}


def test_ps_lists_a_process_on_both_gpus():
    child = subprocess.Popen([sys.executable, "-c", HOLDER], env=_env(), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline().strip()
        assert line == "ready", f"holder did not allocate: {line!r}"
        t0 = time.perf_counter()
        p = subprocess.run([BIN, "ps", "--json"], capture_output=True, text=True, timeout=60)
        ms = (time.perf_counter() - t0) * 1e3
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        apps, uuids = smi_apps()
    finally:
        child.stdin.close()
        child.wait(timeout=60)
    gpus = {g["index"]: g for g in doc["gpus"]}
    assert {0, 1} <= set(gpus), doc
    ours = {}
    for i, least in ((0, 256 * MiB), (1, 768 * MiB)):
        assert gpus[i]["uuid"] == uuids[i], (gpus[i], uuids)
        procs = [x for x in gpus[i].get("processes", []) if x["pid"] == child.pid]
        assert len(procs) == 1, (i, gpus[i])
        proc = procs[0]
        assert proc["bytes_known"] is True, proc
        assert proc["bytes"] == apps[(child.pid, uuids[i])], (i, proc, apps)
        assert proc["bytes"] >= least, proc  # the allocation, plus the context
        ours[i] = proc["bytes"]
    print(f"\nps --json: {len(gpus)} GPUs in {ms:.1f} ms; pid {child.pid} holds {ours} bytes "
          f"(= nvidia-smi)")
