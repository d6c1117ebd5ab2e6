"""`gpureclaim trace` on a real GPU (run on the GPU machine; skips without one).

- The design record's scenario (a 1 GiB torch tensor and a 1 GiB CuPy array,
  freed by empty_cache / free_all_blocks) shows two 1 GiB allocations and
  their frees, attributed to a torch/c10 library and to a CuPy library.
- With PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True the VMM calls
  (cuMemCreate/Map/Unmap/Release) appear and the bytes created equal the
  bytes released.
- A CuPy FFT shows its cuFFT work area being allocated.
- The traced program's exit code and stdout are unchanged; where CUPTI was
  found is printed.
- gpureclaim_trace_pause/resume called from the program leave out what
  happens in between.
Each of these runs with both backends (the interposer, CUPTI). Then:
- the interposer and CUPTI at once (GPURECLAIM_TRACE_CROSSCHECK) count the
  same calls of every operation: nothing reaches the driver by a path the
  interposer does not see;
- through a stand-in of HAMi-core preloaded after the tracer
  (tests/trace/hook_lib.c: its own dlsym and cuGetProcAddress hand out its
  cuMemAlloc_v2, cuMemFree_v2, cuMemAllocAsync): Torch's calls still reach
  the hook, and the interposer still records every one, as CUPTI counts;
- a block traced from inside a running Torch process (gpureclaim.trace, as
  in a notebook; CUPTI attached late, or the dormant interposer): the bytes
  balance;
- the live query (gpureclaim_trace_live) sees a live tensor;
- a block in which CUDA is first used books its allocation on its device;
- 10,000 alloc/free pairs on 4 threads: no free before its allocation
  (the log's one monotonic clock), nothing held at the end;
- with RMM installed, the --rmm-csv export matches the log RMM's own
  logging adaptor writes for the same allocations.

The log is parsed here with the layout of docs/trace.md (not with the C
reader), which checks the documentation too.
The tool: $GPURECLAIM_BIN (default build/cli/gpureclaim); the Python
package: $GPURECLAIM_PYTHONPATH (default build/python).
"""
import json
import os
import pathlib
import struct
import subprocess
import sys

import pytest
from gpu_machine import HAVE_GPU, has

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("GPURECLAIM_BIN", str(ROOT / "build/cli/gpureclaim"))
PYPATH = os.environ.get("GPURECLAIM_PYTHONPATH", str(ROOT / "build/python"))
GiB = 1 << 30


pytestmark = pytest.mark.skipif(not HAVE_GPU,
                                reason="no NVIDIA GPU (nvidia-smi -L)")


def _has(module):
    return has(f"import {module}")


def read_log(path):
    """Records of a trace log as dicts, per docs/trace.md."""
    data = pathlib.Path(path).read_bytes()
    assert data[:8] == b"GPRTRACE"
    version, hsize, rsize, flags, pid = struct.unpack_from("<HHHHI", data, 8)
    assert version == 1 and flags & 1, (version, flags)
    strings, recs = [], []
    off = hsize
    while off < len(data):
        tag, count, plen = struct.unpack_from("<4sIQ", data, off)
        off += 16
        p = data[off:off + plen]
        if tag == b"META":  # key=value lines; what recorded the log
            pass
        elif tag == b"STRS":
            (first,) = struct.unpack_from("<I", p, 0)
            assert first == len(strings)
            q = 4
            for _ in range(count):
                (n,) = struct.unpack_from("<I", p, q)
                strings.append(p[q + 4:q + 4 + n].decode("utf-8", "replace"))
                q += 4 + n
        elif tag == b"RECS":
            for i in range(count):
                f = struct.unpack_from("<QQQQQQIIIIihH", p, i * rsize)
                recs.append(dict(zip(
                    ("t", "dur", "wait", "addr", "bytes", "aux", "tid", "op",
                     "lib", "site", "result", "device", "flags"), f)))
        off += plen

    def s(i):
        return strings[i] if i < len(strings) else "[unknown]"

    for r in recs:
        r["op"] = s(r["op"])
        r["lib"] = s(r["lib"])
        r["site"] = s(r["site"])
    return recs


@pytest.fixture(params=["interpose", "cupti"])
def backend(request):
    """Each test taking it runs with both backends."""
    return request.param


def trace(tmp_path, code, env_extra=None, name="run.trace", backend=None,
          args=()):
    out = tmp_path / name
    env = dict(os.environ)
    env.update(env_extra or {})
    cmd = [BIN, "trace", "-o", str(out)] + list(args)
    if backend:
        cmd += ["--backend", backend]
    r = subprocess.run(cmd + ["--", sys.executable, "-c", code],
                       capture_output=True, text=True, timeout=600, env=env)
    print(r.stderr)
    return r, out


def said(r, backend):
    """What `gpureclaim trace` says it uses, for the backend asked."""
    return ("gpureclaim trace: interposer " if backend == "interpose"
            else "gpureclaim trace: CUPTI ") in r.stderr


SCENARIO = """
import torch, cupy
a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda:0")
b = cupy.empty(1 << 30, dtype=cupy.uint8)
torch.cuda.synchronize(); cupy.cuda.Device(0).synchronize()
del a, b
torch.cuda.empty_cache()
cupy.get_default_memory_pool().free_all_blocks()
print("done")
"""


@pytest.mark.skipif(not (_has("torch") and _has("cupy")),
                    reason="needs torch and cupy")
def test_design_record_scenario(tmp_path, backend):
    r, out = trace(tmp_path, SCENARIO, backend=backend, args=["--verbose"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"
    assert said(r, backend)  # says what it found, asked
    recs = read_log(out)
    big = [x for x in recs if x["op"] == "cuMemAlloc_v2"
           and x["result"] == 0 and x["bytes"] == GiB]
    libs = [x["lib"] for x in big]
    assert any("torch" in l or "c10" in l for l in libs), libs
    assert any("cupy" in l for l in libs), libs
    for a in big:
        frees = [x for x in recs if x["op"] == "cuMemFree_v2"
                 and x["addr"] == a["addr"] and x["t"] > a["t"]]
        assert frees, f"no free of {a}"
        assert frees[0]["bytes"] == GiB and frees[0]["flags"] & 2
        assert a["device"] == 0
    rep = json.loads(subprocess.run([BIN, "report", str(out), "--json"],
                                    capture_output=True, text=True,
                                    check=True).stdout)
    assert rep["peak_bytes"] >= 2 * GiB


@pytest.mark.skipif(not _has("torch"), reason="needs torch")
def test_expandable_segments_vmm(tmp_path, backend):
    code = """
import torch
a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda:0")
torch.cuda.synchronize()
del a
torch.cuda.empty_cache()
"""
    r, out = trace(tmp_path, code,
                   {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
                   backend=backend)
    assert r.returncode == 0, r.stderr
    recs = [x for x in read_log(out) if x["result"] == 0]
    ops = {x["op"] for x in recs}
    for op in ("cuMemCreate", "cuMemMap", "cuMemUnmap", "cuMemRelease",
               "cuMemAddressReserve"):
        assert op in ops, (op, ops)
    created = sum(x["bytes"] for x in recs if x["op"] == "cuMemCreate")
    released = sum(x["bytes"] for x in recs if x["op"] == "cuMemRelease")
    mapped = sum(x["bytes"] for x in recs if x["op"] == "cuMemMap")
    unmapped = sum(x["bytes"] for x in recs if x["op"] == "cuMemUnmap")
    assert created >= GiB
    assert created == released, (created, released)
    assert mapped == unmapped, (mapped, unmapped)


@pytest.mark.skipif(not _has("cupy"), reason="needs cupy")
def test_cupy_fft_work_area(tmp_path, backend):
    code = """
import cupy
x = cupy.ones(1 << 22, dtype=cupy.complex64)
cupy.cuda.Device(0).synchronize()
y = cupy.fft.fft(x)
cupy.cuda.Device(0).synchronize()
"""
    r, out = trace(tmp_path, code, backend=backend)
    assert r.returncode == 0, r.stderr
    allocs = [x for x in read_log(out)
              if x["op"].startswith("cuMemAlloc") and x["result"] == 0]
    fft = [x for x in allocs if "cufft" in x["lib"].lower()]
    # CuPy hands cuFFT a work area from its own pool: then the allocation
    # made while planning is CuPy's, after the two 32 MiB arrays.
    by_cupy = [x for x in allocs if "cupy" in x["lib"].lower()]
    assert fft or len(by_cupy) >= 3, [(x["lib"], x["bytes"]) for x in allocs]


@pytest.mark.skipif(not _has("torch"), reason="needs torch")
def test_exit_code_and_output_unchanged(tmp_path, backend):
    code = ("import sys, torch; torch.ones(1, device='cuda'); "
            "print('hello'); sys.stderr.write('to-stderr\\n'); "
            "raise SystemExit(4)")
    r, out = trace(tmp_path, code, backend=backend)
    assert r.returncode == 4
    assert r.stdout == "hello\n"
    assert "to-stderr" in r.stderr
    assert out.exists()
    assert (out.stat().st_mode & 0o777) == 0o600


@pytest.mark.skipif(not _has("torch"), reason="needs torch")
def test_profiler_alongside(tmp_path, backend):
    """torch.profiler also wants CUPTI. With CUPTI whoever comes second is
    told, the program finishes with its own exit code either way; the
    interposer leaves CUPTI to the profiler: both get their events."""
    code = """
import torch
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
    torch.ones(1 << 20, device="cuda").sum().item()
print("ok", sum(e.device_type == torch.autograd.DeviceType.CUDA
                for e in p.events()) > 0)
"""
    r, out = trace(tmp_path, code, backend=backend)
    assert r.returncode == 0, r.stderr
    if backend == "interpose":
        assert r.stdout.strip().endswith("ok True"), r.stdout
        assert out.exists() and "already in use" not in r.stderr
    else:
        assert "ok" in r.stdout
        assert out.exists() or "already in use" in r.stderr


@pytest.mark.skipif(not _has("torch"), reason="needs torch")
def test_pause_resume(tmp_path, backend):
    """gpureclaim_trace_pause/resume from the traced program: what is
    allocated while paused is not in the log, before and after are."""
    code = """
import ctypes, os, torch
torch.ones(1, device="cuda")
tr = ctypes.CDLL(None)  # found as include/gpureclaim_trace.h shows
MiB = 1 << 20
a = torch.empty(3 * MiB, dtype=torch.uint8, device="cuda"); del a
assert tr.gpureclaim_trace_pause() == 0
b = torch.empty(5 * MiB, dtype=torch.uint8, device="cuda"); del b
assert tr.gpureclaim_trace_resume() == 0
c = torch.empty(7 * MiB, dtype=torch.uint8, device="cuda"); del c
print("ok")
"""
    r, out = trace(tmp_path, code, {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
                   backend=backend)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ok\n"
    sizes = [x["bytes"] for x in read_log(out)
             if x["op"] == "cuMemAlloc_v2" and x["result"] == 0]
    assert 3 << 20 in sizes and 7 << 20 in sizes, sizes
    assert 5 << 20 not in sizes, sizes


CROSSCHECK = """
import torch
for _ in range(2000):
    x = torch.empty(1 << 20, dtype=torch.uint8, device="cuda"); del x
y = torch.empty(1 << 30, dtype=torch.uint8, device="cuda"); del y
torch.cuda.synchronize()
print("done")
"""


@pytest.mark.skipif(not _has("torch"), reason="needs torch")
@pytest.mark.parametrize("alloc_conf", ["", "expandable_segments:True"])
def test_interposer_sees_what_cupti_sees(tmp_path, alloc_conf):
    """The interposer records, CUPTI counts beside it: per operation the
    same numbers, so no allocation reaches the driver by a private path,
    context events included (the runtime's primary context). Caching off
    (one driver call per tensor), and with expandable segments (c10's VMM
    calls through cudaGetDriverEntryPoint). Every answer the driver gave
    for an entry point of the table was wrapped: the runtime's look-ups of
    cuDevicePrimaryCtxRelease/Reset at version 7000 get the older ABIs."""
    env = {"GPURECLAIM_TRACE_CROSSCHECK": "1",
           "PYTORCH_NO_CUDA_MEMORY_CACHING": "" if alloc_conf else "1",
           "PYTORCH_CUDA_ALLOC_CONF": alloc_conf}
    env = {k: v for k, v in env.items() if v}
    r, out = trace(tmp_path, CROSSCHECK, env, backend="auto")
    assert r.returncode == 0, r.stderr
    line = [x for x in r.stderr.splitlines() if "crosscheck" in x]
    assert line and line[0].endswith("the same"), line
    assert "context_created=1/1" in line[0], line
    assert "unknown driver answers" not in r.stderr, r.stderr
    recs = read_log(out)
    allocs = [x for x in recs if x["op"] in ("cuMemAlloc_v2", "cuMemCreate")
              and x["result"] == 0]
    assert sum(x["bytes"] for x in allocs) >= (1 << 30), len(allocs)


HOOK_LIB = pathlib.Path(os.environ.get(
    "GPURECLAIM_HOOK_LIB",
    pathlib.Path(BIN).resolve().parents[1] / "tests/trace/libhook.so"))

HOOKED = """
import ctypes, sys, torch
for _ in range(500):
    x = torch.empty(1 << 20, dtype=torch.uint8, device="cuda"); del x
torch.cuda.synchronize()
calls = (ctypes.c_long * 4).in_dll(ctypes.CDLL(sys.argv[1]),
                                   "gpr_test_hook_calls")
print("hook calls", list(calls))
"""


@pytest.mark.skipif(not _has("torch"), reason="needs torch")
@pytest.mark.skipif(not HOOK_LIB.exists(), reason=f"no {HOOK_LIB} (built by "
                    "scripts/gpu-check.sh build or the test build)")
def test_through_another_driver_hook(tmp_path):
    """HAMi-core's way, as /etc/ld.so.preload puts it after LD_PRELOAD: the
    CUDA runtime's table of driver functions comes through the hook's
    cuGetProcAddress, whose answers are its own functions. The hook must
    still see every allocation (or the limit it enforces would be
    bypassed while tracing), and the tracer must still record each one:
    CUPTI, counting beside it, agrees per operation."""
    env = {"LD_PRELOAD": str(HOOK_LIB), "PYTORCH_NO_CUDA_MEMORY_CACHING": "1",
           "GPURECLAIM_TRACE_CROSSCHECK": "1"}
    out = tmp_path / "hooked.trace"
    r = subprocess.run([BIN, "trace", "-o", str(out), "--", sys.executable,
                        "-c", HOOKED, str(HOOK_LIB)], capture_output=True,
                       text=True, timeout=600, env=dict(os.environ, **env))
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stderr
    calls = json.loads(r.stdout.split("hook calls", 1)[1].strip())
    assert calls[0] >= 500 and calls[1] >= 500, calls  # alloc, free
    line = [x for x in r.stderr.splitlines() if "crosscheck" in x]
    assert line and line[0].endswith("the same"), line
    recs = read_log(out)
    n = sum(x["op"] == "cuMemAlloc_v2" and x["bytes"] == 1 << 20
            for x in recs)
    assert n >= 500, n
    rep = subprocess.run([BIN, "report", str(out)], capture_output=True,
                         text=True)
    assert "through another interposer's functions" in rep.stdout, rep.stdout
    assert "cuMemAlloc_v2=" in rep.stdout.split("through another", 1)[1]
    assert "unknown driver answers" not in rep.stdout, rep.stdout


NOTEBOOK = """
import json, os, sys, torch, gpureclaim
torch.ones(1, device="cuda")                  # the notebook's earlier cells
keep = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
with gpureclaim.trace(sys.argv[1]) as t:      # the cell being traced
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    b = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    del a, b
rep = t.report()
assert "<svg" in rep._repr_html_()
print(json.dumps(dict(backend=t.backend, d=rep.to_dict())))
"""


@pytest.mark.skipif(not _has("torch"), reason="needs torch")
@pytest.mark.parametrize("how", ["late-cupti", "dormant-interposer"])
def test_notebook_style_block(tmp_path, how):
    """A block traced inside a running Torch process, no relaunch: CUPTI
    attached at run time, or the interposer preloaded dormant (`gpureclaim
    trace --dormant -- jupyter lab`). What the block allocated, it freed."""
    log = tmp_path / "cell.trace"
    env = dict(os.environ, PYTORCH_NO_CUDA_MEMORY_CACHING="1",
               PYTHONPATH=PYPATH + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-c", NOTEBOOK, str(log)]
    if how == "dormant-interposer":
        cmd = [BIN, "trace", "-q", "--dormant", "--"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                       env=env)
    print(r.stderr)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["backend"] == ("cupti" if how == "late-cupti" else "interpose")
    d = out["d"]
    ops = {o["op"]: o for o in d["operations"]}
    assert ops["cuMemAlloc_v2"]["bytes"] == (1 << 30) + (256 << 20), ops
    assert ops["cuMemFree_v2"]["bytes"] == (1 << 30) + (256 << 20), ops
    assert d["held_at_end_bytes"] == 0 and d["peak_bytes"] >= 1 << 30
    libs = [l["library"] for l in d["libraries"] if l["allocated_bytes"]]
    assert any("torch" in l or "c10" in l for l in libs), libs


FIRST_CUDA = """
import json, sys, torch, gpureclaim
with gpureclaim.trace(sys.argv[1]) as t:      # CUDA first used in the block
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
print(json.dumps(t.report().to_dict()))
"""


@pytest.mark.skipif(not _has("torch"), reason="needs torch")
@pytest.mark.parametrize("how", ["late-cupti", "dormant-interposer"])
def test_a_block_that_first_uses_cuda_knows_its_device(tmp_path, how):
    """The driver loaded inside the traced block: the allocation is on
    device 0, as its context (not `?`, dev -1)."""
    log = tmp_path / "first.trace"
    env = dict(os.environ, PYTORCH_NO_CUDA_MEMORY_CACHING="1",
               PYTHONPATH=PYPATH + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-c", FIRST_CUDA, str(log)]
    if how == "dormant-interposer":
        cmd = [BIN, "trace", "-q", "--dormant", "--"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                       env=env)
    print(r.stderr)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout.strip().splitlines()[-1])
    assert [g["device"] for g in d["devices"]] == [0], d["devices"]
    big = [a for a in d["never_freed"] if a["bytes"] == GiB]
    assert big and all(a["device"] == 0 for a in big), d["never_freed"]


CHURN = """
import threading, torch
torch.ones(1, device="cuda")
def loop():
    for _ in range(2500):
        x = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
        del x
ts = [threading.Thread(target=loop) for _ in range(4)]
for t in ts: t.start()
for t in ts: t.join()
"""


@pytest.mark.skipif(not _has("torch"), reason="needs torch")
def test_churn_frees_after_allocations(tmp_path, backend):
    """10,000 alloc/free pairs on 4 threads, caching off: whatever the
    log's clock (the TSC where the kernel keeps time by it), every free
    comes after its allocation: none unmatched, nothing held at the end,
    the peak at most what the 4 threads held at once."""
    r, out = trace(tmp_path, CHURN, {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
                   backend=backend)
    assert r.returncode == 0, r.stderr
    rep = json.loads(subprocess.run([BIN, "report", str(out), "--json"],
                                    capture_output=True, text=True,
                                    check=True).stdout)
    print(rep["meta"].get("clock"), rep["unmatched_frees"],
          rep["held_at_end_bytes"], rep["peak_bytes"])
    ops = {o["op"]: o["calls"] for o in rep["operations"]}
    assert ops.get("cuMemAlloc_v2", 0) >= 10000, ops
    assert rep["unmatched_frees"] == 0
    assert rep["never_freed_count"] == 0 and rep["held_at_end_bytes"] == 0
    assert rep["peak_bytes"] <= 4 << 20, rep["peak_bytes"]


@pytest.mark.skipif(not _has("torch"), reason="needs torch")
def test_live_query(tmp_path, backend):
    """gpureclaim_trace_live, as gpureclaim.explain finds it."""
    code = """
import ctypes, torch
class Row(ctypes.Structure):
    _fields_ = [("sz", ctypes.c_size_t), ("device", ctypes.c_int),
                ("kind", ctypes.c_int), ("library", ctypes.c_char_p),
                ("bytes", ctypes.c_uint64), ("count", ctypes.c_uint64)]
x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
rows, n = (Row * 16)(), ctypes.c_size_t()
rows[0].sz = ctypes.sizeof(Row)
assert ctypes.CDLL(None).gpureclaim_trace_live(rows, 16, ctypes.byref(n)) == 0
for r in rows[:n.value]:
    print(r.device, r.kind, r.library.decode(), r.bytes, r.count)
"""
    r, out = trace(tmp_path, code, {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
                   backend=backend)
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines()]
    mine = [x for x in rows if x[0] == "0" and x[1] == "0"
            and int(x[3]) >= 64 << 20
            and ("torch" in x[2] or "c10" in x[2])]
    assert mine, rows


@pytest.mark.skipif(not (_has("rmm") and _has("torch")), reason="needs rmm")
def test_rmm_csv_matches_rmm_own_log(tmp_path):
    """The same allocations, logged by RMM's logging adaptor and exported
    by `report --rmm-csv`: the same actions, pointers and sizes in the same
    order (RMM's CudaMemoryResource: one cuMemAlloc_v2 per allocate)."""
    rmm_log = tmp_path / "rmm.csv"
    code = f"""
import rmm
rmm.reinitialize(logging=True, log_file_name={str(rmm_log)!r})
bufs = [rmm.DeviceBuffer(size=s) for s in (1 << 20, 3 << 20, 5 << 20)]
del bufs[1]
bufs.append(rmm.DeviceBuffer(size=7 << 20))
del bufs
rmm.reinitialize()  # flushes the log
"""
    r, out = trace(tmp_path, code)
    assert r.returncode == 0, r.stderr
    ours = tmp_path / "ours.csv"
    subprocess.run([BIN, "report", str(out), "--rmm-csv", str(ours)],
                   check=True, capture_output=True)
    theirs_path = next(tmp_path.glob("rmm.dev0.csv"))

    def rows(path):
        import csv
        with open(path, newline="") as f:
            return [(x["Action"], int(x["Pointer"], 16), int(x["Size"]))
                    for x in csv.DictReader(f)]
    theirs = rows(theirs_path)
    mine = [x for x in rows(ours) if x[1] in {p for _, p, _ in theirs}]
    assert theirs and mine == theirs, (mine, theirs)
