"""gpureclaim.explain() on a real GPU (GPU machine; skips without a GPU or
Torch). Each scenario runs in a fresh interpreter and prints its
explanation to stderr (pytest -s shows it: docs/explain.md quotes it).

- After a matmul and teardown, the 32 MiB Torch still holds (on sm_90) is
  attributed to the cuBLAS workspace; release(workspaces=True) empties it.
- Fragmentation: small live tensors among freed blocks of one segment: the
  unreleasable part equals inactive_split_bytes and names the pinning blocks.
- JAX in the same process (XLA_PYTHON_CLIENT_MEM_FRACTION=0.05): its pool is
  shown (skips without JAX).
- The article's case without downloads: a ~1 GB model of random weights
  (16 nn.Linear(4096, 4096)), three inference rounds, del model + gc +
  empty_cache: every MB of the remainder is attributed. The rest must be
  the context: within TOLERANCE of the context measured in a fresh process
  that loaded Torch and ran one small Linear (the same kernels' modules).

The package: $GPURECLAIM_PYTHONPATH (default build/python), or installed.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PKG = os.environ.get("GPURECLAIM_PYTHONPATH", str(ROOT / "build/python"))
MiB = 1 << 20
# Kernel modules loaded lazily (CUDA_MODULE_LOADING=LAZY) differ with the
# shapes a process ran: the rest may exceed the fresh process's context by
# that much and still be "context only".
TOLERANCE = 64 * MiB


def _has(cmd):
    r = subprocess.run([sys.executable, "-c", cmd], capture_output=True)
    return r.returncode == 0


def _has_gpu():
    if not shutil.which("nvidia-smi"):
        return False
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and b"GPU" in r.stdout


HAVE_GPU = _has_gpu()
pytestmark = [
    pytest.mark.skipif(not HAVE_GPU, reason="no NVIDIA GPU (nvidia-smi -L)"),
    pytest.mark.skipif(
        HAVE_GPU and not _has("import torch; assert torch.cuda.is_available()"),
        reason="torch with CUDA needed"),
]

PRELUDE = """
import gc, json, os, sys
import torch, gpureclaim
MiB = 1 << 20
def parts(e, dev=0):
    [g] = [g for g in e.gpus if g.device == dev]
    out = {}
    for p in g.parts:
        k = p.kind + ":" + p.source
        out[k] = out.get(k, 0) + p.bytes
    return out
def total_ok(e):
    for g in e.gpus:
        assert sum(p.bytes for p in g.parts if p.known) == g.driver
def show(title, e):
    sys.stderr.write("\\n=== " + title + " ===\\n" + str(e) + "\\n")
"""


def run(code, env=None, timeout=600):
    e = dict(os.environ)
    e["PYTHONPATH"] = PKG + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:False"
    e.update(env or {})
    p = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
                       env=e, capture_output=True, text=True, timeout=timeout)
    sys.stderr.write(p.stderr)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_matmul_workspace_is_attributed_and_freed():
    r = run("""
a = torch.randn(4096, 4096, device="cuda")
b = a @ a
torch.cuda.synchronize()
del a, b
gc.collect(); torch.cuda.empty_cache()
e = gpureclaim.explain(); total_ok(e); show("after a matmul and teardown", e)
before = parts(e)
ws_how = [p.how for p in e.gpus[0].parts if p.source == "cuBLAS"]
alloc = torch.cuda.memory_allocated(0)
cap = torch.cuda.get_device_capability(0)
gpureclaim.release(workspaces=True)
e2 = gpureclaim.explain(); total_ok(e2); show("after release(workspaces=True)", e2)
print(json.dumps(dict(before=before, after=parts(e2), alloc=alloc, cap=cap,
                      how=ws_how, reserved=torch.cuda.memory_reserved(0))))
""")
    want = 32 * MiB if tuple(r["cap"]) == (9, 0) else 4096 * 1024 * 2 + 16 * 1024 * 8
    assert r["before"]["workspace:cuBLAS"] == want, r
    assert r["alloc"] == r["before"]["workspace:cuBLAS"] + r["before"].get(
        "workspace:cuBLASLt", 0) + r["before"]["live:torch"]
    assert r["before"]["live:torch"] == 0, r
    assert "workspace:cuBLAS" not in r["after"]
    assert r["reserved"] == 0


def test_fragmentation_names_the_pinning_blocks():
    r = run("""
big = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")
del big
small = [torch.empty(16 * MiB, dtype=torch.uint8, device="cuda") for _ in range(4)]
ptrs = [t.data_ptr() for t in small]
del small[2], small[0]          # free blocks between live ones, one segment
torch.cuda.empty_cache()
e = gpureclaim.explain(); total_ok(e); show("fragmentation", e)
[frag] = [p for p in e.gpus[0].parts if p.kind == "fragmented"]
split = torch.cuda.memory_stats(0)["inactive_split_bytes.all.current"]
print(json.dumps(dict(frag=frag.bytes, detail=frag.detail, split=split,
                      live=[t.data_ptr() for t in small], ptrs=ptrs)))
""")
    assert r["frag"] == r["split"] and r["frag"] >= 32 * MiB, r
    pinned = r["detail"]["pinned"]
    seg = [s for s in pinned if s["largest_live_address"] in r["live"]]
    assert seg, r
    assert seg[0]["live_blocks"] >= 2 and seg[0]["largest_live"] == 16 * MiB


@pytest.mark.skipif(HAVE_GPU and not _has("import jax"), reason="jax needed")
def test_jax_pool_is_shown():
    r = run("""
import jax, jax.numpy as jnp
t = torch.ones(1, device="cuda")
x = jnp.ones(1000); x.block_until_ready()
e = gpureclaim.explain(); total_ok(e); show("torch + jax", e)
stats = jax.devices()[0].memory_stats()
print(json.dumps(dict(p=parts(e), stats={k: stats.get(k) for k in
                      ("pool_bytes", "bytes_in_use", "bytes_reserved")})))
""", env={"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.05"})
    p = r["p"]
    assert p["pool:jax"] > 0 and p["live:jax"] > 0
    pool = r["stats"]["pool_bytes"] or r["stats"]["bytes_reserved"]
    assert p["pool:jax"] + p["live:jax"] == pool


def _fresh_context():
    return run("""
m = torch.nn.Linear(256, 256).cuda()
with torch.no_grad():
    m(torch.randn(8, 256, device="cuda"))
torch.cuda.synchronize()
del m; gc.collect()
gpureclaim.release(workspaces=True)
driver = gpureclaim.process_memory()[torch.cuda.current_device()]
print(json.dumps(dict(context=driver - torch.cuda.memory_reserved())))
""")["context"]


def test_article_case_every_mb_attributed():
    context = _fresh_context()
    r = run("""
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(16)]).cuda()
rows = []
for i in range(3):
    with torch.no_grad():
        x = torch.randn(8, 4096, device="cuda")
        out = model(x)
    torch.cuda.synchronize()
    del out, x
    torch.cuda.empty_cache()
    rows.append(parts(gpureclaim.explain()))
del model; gc.collect(); torch.cuda.empty_cache()
e = gpureclaim.explain(); total_ok(e); show("the article's case, after del model + gc + empty_cache", e)
g = e.gpus[0]
print(json.dumps(dict(p=parts(e), rest=g.rest, driver=g.driver, source=g.source,
                      allocated=torch.cuda.memory_allocated(0),
                      reserved=torch.cuda.memory_reserved(0), rounds=rows)))
""")
    sys.stderr.write(f"fresh torch context: {context / MiB:.1f} MiB; "
                     f"rest: {r['rest'] / MiB:.1f} MiB\n")
    p = r["p"]
    assert r["source"] == "driver"
    # the remainder Torch holds is all explained: no live tensor is left
    assert p["live:torch"] == 0, p
    assert p["workspace:cuBLAS"] > 0
    assert r["allocated"] == p["workspace:cuBLAS"] + p.get("workspace:cuBLASLt", 0)
    # and what the driver holds beyond Torch is the context
    assert 0 <= r["rest"] <= context + TOLERANCE, (r["rest"], context)
    assert r["rest"] >= context - TOLERANCE, (r["rest"], context)
