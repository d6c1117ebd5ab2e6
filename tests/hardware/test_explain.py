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

- User buffers of the workspace sizes (32 MiB, 1 MiB) after a matmul and an
  nn.Linear: never workspaces; Torch's workspace map read and checked
  (torch 2.11/2.13); release(workspaces=True) frees exactly the map's bytes.
- A training step with backward: the map's workspaces, per handle (the
  autograd thread has its own cuBLAS handle).
- A captured CUDA graph: its private pool, graphs = 1, kept by
  empty_cache(), returned by release() once the graph is deleted.
- RMM (skips without rmm: scripts/gpu-check.sh stage `rmm` installs it): a
  CUDA async resource trimmed by release() (exact bytes, NVML's drop), a
  PoolMemoryResource reported and not released.
- Two ranks of an NCCL all-reduce (2 GPUs, the tracer with the live
  query): the communicators' buffers are an "unreported" NCCL part.

The package: $GPURECLAIM_PYTHONPATH (default build/python), or installed.
"""
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
from gpu_machine import HAVE_GPU, PKG, ROOT, has, needs

MiB = 1 << 20
# Kernel modules loaded lazily (CUDA_MODULE_LOADING=LAZY) differ with the
# shapes a process ran: the rest may exceed the fresh process's context by
# that much and still be "context only".
TOLERANCE = 64 * MiB


pytestmark = needs("torch")

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
[frag] = [p for p in e.gpus[0].parts if p.kind == "not_releasable"]
split = torch.cuda.memory_stats(0)["inactive_split_bytes.all.current"]
print(json.dumps(dict(frag=frag.bytes, detail=frag.detail, split=split,
                      live=[t.data_ptr() for t in small], ptrs=ptrs)))
""")
    assert r["frag"] == r["split"] and r["frag"] >= 32 * MiB, r
    pinned = r["detail"]["pinned"]
    seg = [s for s in pinned if s["largest_live_address"] in r["live"]]
    assert seg, r
    assert seg[0]["live_blocks"] >= 2 and seg[0]["largest_live"] == 16 * MiB


@pytest.mark.skipif(HAVE_GPU and not has("import jax"), reason="jax needed")
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


def test_user_buffers_of_workspace_sizes_are_never_workspaces():
    r = run("""
a = torch.randn(4096, 4096, device="cuda")
b = a @ a
lin = torch.nn.Linear(4096, 4096).cuda()
with torch.no_grad():
    y = lin(a)                               # addmm: the cuBLASLt path
torch.cuda.synchronize()
del a, b, y
user = [torch.empty(32 * MiB, dtype=torch.uint8, device="cuda"),
        torch.empty(1 * MiB, dtype=torch.uint8, device="cuda")]
mine = [t.data_ptr() for t in user]
e = gpureclaim.explain(); total_ok(e); show("after a matmul, nn.Linear and user buffers of 32 MiB and 1 MiB", e)
ws = [(p.source, p.bytes, p.evidence, [b["address"] for b in p.detail["blocks"]])
      for p in e.gpus[0].parts if p.kind == "workspace" and p.known]
un = [(p.bytes, p.advice) for p in e.gpus[0].parts if p.kind == "unattributed"]
alloc = torch.cuda.memory_allocated(0)
rel = gpureclaim.release(workspaces=True)
e2 = gpureclaim.explain(); total_ok(e2); show("after release(workspaces=True)", e2)
print(json.dumps(dict(version=torch.__version__, mine=mine, ws=ws, un=un,
                      p1=parts(e), p2=parts(e2), drop=alloc - torch.cuda.memory_allocated(0),
                      notes=rel.notes, live=[t.data_ptr() for t in user])))
""")
    sys.stderr.write(json.dumps({k: r[k] for k in ("version", "ws", "un", "notes")}) + "\n")
    addrs = {a for w in r["ws"] for a in w[3]}
    assert not addrs & set(r["mine"]), r
    assert all(adv == "" for _, adv in r["un"]), r
    if r["version"].split(".")[:2] in (["2", "11"], ["2", "13"]):
        # the map read and checked: the workspaces, exactly
        assert r["ws"] and all(w[2] == "workspace_map" for w in r["ws"]), r
        assert not r["un"], r
        assert r["drop"] == sum(w[1] for w in r["ws"]), r
    assert "workspace:cuBLAS" not in r["p2"]
    assert r["p2"]["live:torch"] >= 33 * MiB
    assert r["live"] == r["mine"]


def test_training_step_workspaces_per_handle():
    r = run("""
model = torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
                            torch.nn.Linear(2048, 2048)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(64, 2048, device="cuda")
loss = model(x).square().mean()
loss.backward()
opt.step(); opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
e = gpureclaim.explain(); total_ok(e); show("after one training step", e)
ws = [(p.source, p.bytes, p.evidence, p.detail["blocks"]) for p in e.gpus[0].parts
      if p.kind == "workspace" and p.known]
print(json.dumps(dict(version=torch.__version__, ws=ws, p=parts(e))))
""")
    for src, nbytes, ev, blocks in r["ws"]:
        handles = sorted({b["handle"] for b in blocks})
        sys.stderr.write(f"{src}: {len(blocks)} workspace(s), {nbytes} bytes, "
                         f"{len(handles)} handle(s), streams "
                         f"{sorted({b['stream'] for b in blocks})} ({ev})\n")
    if r["version"].split(".")[:2] in (["2", "11"], ["2", "13"]):
        [cublas] = [w for w in r["ws"] if w[0] == "cuBLAS"]
        # forward on this thread, backward on autograd's: two handles
        assert len({b["handle"] for b in cublas[3]}) >= 2, r["ws"]


def test_cuda_graph_private_pool():
    r = run("""
x = torch.ones(16 * MiB // 4, device="cuda")
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(2):
        y = x * 2                                  # warm-up off capture
torch.cuda.current_stream().wait_stream(s)
del y
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    tmp = x * 3
    out = tmp + 1
    del tmp
torch.cuda.synchronize()
torch.cuda.empty_cache()
e = gpureclaim.explain(); total_ok(e); show("a captured CUDA graph", e)
gp = [(p.source, p.bytes, p.advice_key, p.detail["pools"]) for p in e.gpus[0].parts
      if p.kind == "graph_pool"]
before = parts(e)
gpureclaim.release()
kept = parts(gpureclaim.explain())
del g
rel = gpureclaim.release()
e2 = gpureclaim.explain(); total_ok(e2); show("the graph deleted, released", e2)
print(json.dumps(dict(gp=gp, before=before, kept=kept, after=parts(e2),
                      released=rel.bytes)))
""")
    [(src, nbytes, adv, pools)] = r["gp"]
    assert src == "torch CUDA graphs" and adv == "delete_graphs", r
    assert sum(p["graphs"] for p in pools) == 1
    assert r["kept"]["graph_pool:torch CUDA graphs"] == nbytes
    after = r["after"].get("graph_pool:torch CUDA graphs, none live", 0)
    assert after < nbytes and r["released"] >= nbytes - after - 2 * MiB, r


_RMM = HAVE_GPU and has("import rmm")


@pytest.mark.skipif(not _RMM, reason="rmm needed (scripts/gpu-check.sh stage rmm)")
def test_rmm_async_resource_trimmed_and_pool_reported():
    r = run("""
import rmm
rmm.mr.set_per_device_resource(0, rmm.mr.CudaAsyncMemoryResource())
buf = rmm.DeviceBuffer(size=1 << 30)
keep = rmm.DeviceBuffer(size=64 * MiB)
del buf
torch.cuda.synchronize()
mem0 = gpureclaim.process_memory()[0]
rel = gpureclaim.release(collect=False)
mem1 = gpureclaim.process_memory()[0]
e = gpureclaim.explain(); total_ok(e); show("RMM async pool, trimmed", e)
again = gpureclaim.release(collect=False)
pool = rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size=256 * MiB)
rmm.mr.set_per_device_resource(0, rmm.mr.StatisticsResourceAdaptor(pool))
pbuf = rmm.DeviceBuffer(size=64 * MiB)
rel2 = gpureclaim.release(collect=False)
e2 = gpureclaim.explain(); total_ok(e2); show("RMM pool resource", e2)
print(json.dumps(dict(released=rel.bytes, drop=mem0 - mem1, p=parts(e),
                      again=again.bytes, notes2=rel2.notes, p2=parts(e2))))
""")
    assert r["released"] == r["drop"] and r["released"] >= 1 << 30, r
    assert r["p"]["live:rmm"] >= 64 * MiB
    assert r["p"].get("releasable:rmm (CUDA async pool)", 0) == 0
    assert abs(r["again"]) < 4 * MiB
    assert any("PoolMemoryResource" in n and "never shrink" in n for n in r["notes2"])
    assert r["p2"]["pool:rmm"] == 192 * MiB and r["p2"]["live:rmm"] == 64 * MiB


def _gpus():
    r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return r.stdout.count("GPU ") if r.returncode == 0 else 0


BIN = os.environ.get("GPURECLAIM_BIN", str(ROOT / "build/cli/gpureclaim"))
# the tracer of BIN's build folder (<build>/cli/gpureclaim)
TRACER = os.environ.get(
    "GPURECLAIM_TRACE_LIBRARY",
    str(pathlib.Path(BIN).resolve().parent.parent / "trace/inject/libgpureclaim_trace.so"))


def _tracer_has_live_query():
    r = subprocess.run([sys.executable, "-c",
                        "import ctypes, sys; l = ctypes.CDLL(sys.argv[1]); "
                        "assert hasattr(l, 'gpureclaim_trace_live')", TRACER],
                       capture_output=True)
    return r.returncode == 0


RANK = r"""
import json, os, sys
import torch, torch.distributed as dist, gpureclaim

rank = int(os.environ["RANK"])
torch.cuda.set_device(rank)
dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
t = torch.ones(1 << 20, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
e = gpureclaim.explain(devices=[rank])
sys.stderr.write(f"\n=== rank {rank} ===\n{e}\n")
g = e.gpus[0]
print(json.dumps(dict(unreported={p.source: p.bytes for p in g.parts if p.kind == "unreported"},
                      rest=g.parts[-1].detail, value=t[0].item())))
dist.destroy_process_group()
"""


@pytest.mark.skipif(HAVE_GPU and _gpus() < 2, reason="two GPUs needed")
@pytest.mark.skipif(HAVE_GPU and not _tracer_has_live_query(),
                    reason="the tracer has no gpureclaim_trace_live yet (issue 14)")
def test_nccl_buffers_show_as_nccl_in_the_rest(tmp_path):
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT="29531", NCCL_NVLS_ENABLE="0",
                   TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
                   PYTORCH_CUDA_ALLOC_CONF="expandable_segments:False",
                   PYTHONPATH=PKG + (os.pathsep + os.environ["PYTHONPATH"]
                                     if os.environ.get("PYTHONPATH") else ""))
        procs.append(subprocess.Popen(
            [BIN, "trace", "-o", str(tmp_path / f"rank{rank}.trace"), "--",
             sys.executable, "-c", RANK], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        sys.stderr.write(err)
        assert p.returncode == 0, out + err
        r = json.loads(out.strip().splitlines()[-1])
        assert r["value"] == 2.0
        assert r["rest"]["traced"] is True, r
        assert r["unreported"].get("NCCL", 0) > 0, r
