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

The log is parsed here with the layout of docs/trace.md (not with the C
reader), which checks the documentation too.
The tool: $GPURECLAIM_BIN (default build/cli/gpureclaim).
"""
import json
import os
import pathlib
import shutil
import struct
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("GPURECLAIM_BIN", str(ROOT / "build/cli/gpureclaim"))
GiB = 1 << 30


def _has_gpu():
    if not shutil.which("nvidia-smi"):
        return False
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                           timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and b"GPU" in r.stdout


pytestmark = pytest.mark.skipif(not _has_gpu(),
                                reason="no NVIDIA GPU (nvidia-smi -L)")


def _has(module):
    r = subprocess.run([sys.executable, "-c", f"import {module}"],
                       capture_output=True)
    return r.returncode == 0


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
        if tag == b"STRS":
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


def trace(tmp_path, code, env_extra=None, name="run.trace"):
    out = tmp_path / name
    env = dict(os.environ)
    env.update(env_extra or {})
    r = subprocess.run([BIN, "trace", "-o", str(out), "--", sys.executable,
                        "-c", code], capture_output=True, text=True,
                       timeout=600, env=env)
    print(r.stderr)
    return r, out


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
def test_design_record_scenario(tmp_path):
    r, out = trace(tmp_path, SCENARIO)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"
    assert "gpureclaim trace: CUPTI " in r.stderr  # says what it found
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
def test_expandable_segments_vmm(tmp_path):
    code = """
import torch
a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda:0")
torch.cuda.synchronize()
del a
torch.cuda.empty_cache()
"""
    r, out = trace(tmp_path, code,
                   {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
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
def test_cupy_fft_work_area(tmp_path):
    code = """
import cupy
x = cupy.ones(1 << 22, dtype=cupy.complex64)
cupy.cuda.Device(0).synchronize()
y = cupy.fft.fft(x)
cupy.cuda.Device(0).synchronize()
"""
    r, out = trace(tmp_path, code)
    assert r.returncode == 0, r.stderr
    allocs = [x for x in read_log(out)
              if x["op"].startswith("cuMemAlloc") and x["result"] == 0]
    fft = [x for x in allocs if "cufft" in x["lib"].lower()]
    # CuPy hands cuFFT a work area from its own pool: then the allocation
    # made while planning is CuPy's, after the two 32 MiB arrays.
    by_cupy = [x for x in allocs if "cupy" in x["lib"].lower()]
    assert fft or len(by_cupy) >= 3, [(x["lib"], x["bytes"]) for x in allocs]


@pytest.mark.skipif(not _has("torch"), reason="needs torch")
def test_exit_code_and_output_unchanged(tmp_path):
    code = ("import sys, torch; torch.ones(1, device='cuda'); "
            "print('hello'); sys.stderr.write('to-stderr\\n'); "
            "raise SystemExit(4)")
    r, out = trace(tmp_path, code)
    assert r.returncode == 4
    assert r.stdout == "hello\n"
    assert "to-stderr" in r.stderr
    assert out.exists()
    assert (out.stat().st_mode & 0o777) == 0o600


@pytest.mark.skipif(not _has("torch"), reason="needs torch")
def test_profiler_alongside(tmp_path):
    """torch.profiler also wants CUPTI: whoever comes second is told, the
    program finishes with its own exit code either way."""
    code = """
import torch
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
    torch.ones(1 << 20, device="cuda").sum().item()
print("ok")
"""
    r, out = trace(tmp_path, code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("ok")
    assert out.exists() or "already in use" in r.stderr


@pytest.mark.skipif(not _has("torch"), reason="needs torch")
def test_pause_resume(tmp_path):
    """gpureclaim_trace_pause/resume from the traced program: what is
    allocated while paused is not in the log, before and after are."""
    code = """
import ctypes, os, torch
torch.ones(1, device="cuda")
tr = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"],
                 mode=os.RTLD_NOW | os.RTLD_NOLOAD)
MiB = 1 << 20
a = torch.empty(3 * MiB, dtype=torch.uint8, device="cuda"); del a
assert tr.gpureclaim_trace_pause() == 0
b = torch.empty(5 * MiB, dtype=torch.uint8, device="cuda"); del b
assert tr.gpureclaim_trace_resume() == 0
c = torch.empty(7 * MiB, dtype=torch.uint8, device="cuda"); del c
print("ok")
"""
    r, out = trace(tmp_path, code, {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ok\n"
    sizes = [x["bytes"] for x in read_log(out)
             if x["op"] == "cuMemAlloc_v2" and x["result"] == 0]
    assert 3 << 20 in sizes and 7 << 20 in sizes, sizes
    assert 5 << 20 not in sizes, sizes
