"""explain() never calls a user's tensor a workspace, never repeats advice
that was followed, and shows what users cannot see otherwise: CUDA graph
private pools, the rest split by library when traced, the context
measured. Simulated driver, fake torch with a stand-in libtorch_cuda.so
(tests/fixtures), fake tracer."""
import os

import pytest

from conftest import FAKES_BUILD

MiB = 1 << 20
CONTEXT = 512 * MiB

HELPERS = """
from scenario import parts, check

def ws_addresses(e):
    return sorted(b["address"] for p in e.gpus[0].parts if p.kind == "workspace"
                  for b in p.detail["blocks"])

def advised(e):
    return sorted((p.kind, p.source, p.advice_key) for p in e.gpus[0].parts
                  if p.advice_key)
"""


def run(scenario, code, **kw):
    return scenario(HELPERS + code, **kw)


USER_BUFFERS = """
import torch
a = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
c = torch.matmul(a, a)
out = torch.addmm(None, a, a)
a.backward()                       # autograd's thread: a second cuBLAS handle
user = [torch.empty(32 << 20, dtype=torch.uint8, device="cuda"), torch.empty(1 << 20, dtype=torch.uint8, device="cuda")]
mine = sorted(t.data_ptr() for t in user)
e1 = check(gpureclaim.explain())
rel = gpureclaim.release(workspaces=True)
e2 = check(gpureclaim.explain())
def kinds(e):
    return {p.kind + ":" + p.source: [b["address"] for b in (p.detail or {}).get("blocks", [])]
            for p in e.gpus[0].parts}
emit(dict(mine=mine, ws1=ws_addresses(e1), ws2=ws_addresses(e2),
          p1=parts(e1), p2=parts(e2), k1=kinds(e1), k2=kinds(e2),
          adv1=advised(e1), adv2=advised(e2), notes=e1.notes,
          un=[(p.how, p.evidence, p.exact, p.detail["scan"]) for p in e1.gpus[0].parts
              if p.kind == "unattributed"]))
"""


@pytest.mark.parametrize("layout", ["2.11", "2.13"])
def test_user_buffers_of_workspace_sizes_are_never_workspaces(scenario, layout):
    r = run(scenario, USER_BUFFERS, env={"FAKE_TORCH_LAYOUT": layout})
    # the map gives exactly the real workspaces: two cuBLAS (two handles),
    # one cuBLASLt; the user's 32 MiB and 1 MiB buffers are live
    assert r["p1"]["workspace:cuBLAS"] == 2 * 32 * MiB
    assert r["p1"]["workspace:cuBLASLt"] == MiB
    assert not set(r["mine"]) & set(r["ws1"])
    assert "unattributed:torch" not in r["p1"]
    assert r["p1"]["live:torch"] >= 33 * MiB
    # after release(workspaces=True): no workspace, the buffers still live
    assert "workspace:cuBLAS" not in r["p2"] and r["ws2"] == []
    assert "unattributed:torch" not in r["p2"]
    assert r["p2"]["live:torch"] == r["p1"]["live:torch"]
    assert ("workspace", "cuBLAS", "release_workspaces") in [tuple(a) for a in r["adv1"]]
    assert not any(a[2] == "release_workspaces" for a in r["adv2"])


@pytest.mark.parametrize("env,why", [
    ({"FAKE_TORCH_LAYOUT": "", "FAKE_TORCH_VERSION": "2.11.0"},
     "libtorch_cuda.so is not loaded"),
    ({"FAKE_TORCH_VERSION": "2.9.1"}, "torch 2.9.1: its workspace map's layout was not checked"),
])
def test_without_the_map_workspace_sized_blocks_are_unattributed(scenario, env, why):
    r = run(scenario, USER_BUFFERS, env=env)
    # size alone: never "workspace"; the heap scan finds the user's tensors
    assert "workspace:cuBLAS" not in r["p1"] and r["ws1"] == []
    assert r["p1"]["unattributed:torch"] == 2 * 32 * MiB + MiB
    assert not set(r["mine"]) & set(r["k1"]["unattributed:torch"])
    [(how, evidence, exact, scan)] = r["un"]
    assert why in how and "no Python tensor points into" in how
    assert evidence == "tensor_scan" and exact is False
    assert scan["tensors"] >= 2 and scan["ms"] >= 0
    # no advice for it, before or after release(workspaces=True)
    assert not any(a[0] == "unattributed" for a in r["adv1"] + r["adv2"])
    assert "unattributed:torch" not in r["p2"]  # the clear freed them
    assert r["p2"]["live:torch"] == r["p1"]["live:torch"]


def test_buffers_surviving_the_clear_are_said_to(scenario):
    # no map, and the buffers held where the heap scan cannot see them
    # (C++ holds autograd's saved tensors the same way): unattributed, and
    # after release(workspaces=True) said to be no workspaces
    r = run(scenario, """
import torch
a = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
torch.matmul(a, a)
held = [torch.cuda._pool(0).malloc(32 << 20), torch.cuda._pool(0).malloc(1 << 20)]
e1 = check(gpureclaim.explain())
gpureclaim.release(workspaces=True)
e2 = check(gpureclaim.explain())
[u] = [p for p in e2.gpus[0].parts if p.kind == "unattributed"]
emit(dict(p1=parts(e1), p2=parts(e2), how=u.how, advice=u.advice,
          at=u.detail["survived_release_at"], adv=advised(e2)))
""", env={"FAKE_TORCH_LAYOUT": ""})
    assert r["p1"]["unattributed:torch"] == 33 * MiB + 32 * MiB
    assert r["p2"]["unattributed:torch"] == 33 * MiB
    assert "2 of them survived release(workspaces=True): not workspaces" in r["how"]
    assert r["at"] > 0 and r["advice"] == ""
    assert all(a[0] != "unattributed" for a in r["adv"])


def test_frozen_objects_are_not_seen_and_it_says_so(scenario):
    r = run(scenario, """
import torch
a = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
torch.matmul(a, a)
user = torch.empty(32 << 20, dtype=torch.uint8, device="cuda")
gc.freeze()                                   # user's tensor now frozen
e = check(gpureclaim.explain())
[u] = [p for p in e.gpus[0].parts if p.kind == "unattributed"]
emit(dict(p=parts(e), how=u.how, frozen=u.detail["scan"]["frozen"], advice=u.advice))
""", env={"FAKE_TORCH_LAYOUT": ""})
    # the scan cannot clear the frozen tensor: unattributed, no advice
    assert r["p"]["unattributed:torch"] == 2 * 32 * MiB
    assert r["frozen"] > 0 and "gc.freeze() froze" in r["how"]
    assert r["advice"] == ""


def test_a_malformed_or_busy_map_is_discarded_with_a_note(scenario):
    r = run(scenario, """
import torch
a = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
torch.addmm(None, a, a)
os.environ["CUBLASLT_WORKSPACE_SIZE"] = "2048"  # the Lt entry no longer fits
bad = check(gpureclaim.explain())
del os.environ["CUBLASLT_WORKSPACE_SIZE"]
torch._C._wslib.fake_ws_hold(1)                 # a writer holds the lock
busy = check(gpureclaim.explain())
torch._C._wslib.fake_ws_hold(0)
ok = check(gpureclaim.explain())
def how(e):
    return [p.how for p in e.gpus[0].parts if p.kind == "unattributed"]
emit(dict(bad=parts(bad), busy=parts(busy), ok=parts(ok), bad_how=how(bad),
          busy_how=how(busy)))
""")
    assert "workspace:cuBLAS" not in r["bad"] and "workspace:cuBLAS" not in r["busy"]
    # discarded, the blocks are judged by size: the Lt one no longer has it
    assert r["bad"]["unattributed:torch"] == 32 * MiB
    assert r["busy"]["unattributed:torch"] == 33 * MiB
    assert "is no live block of 2097152 bytes" in r["bad_how"][0]
    assert "(discarded)" in r["bad_how"][0]
    assert "stayed locked by a writer" in r["busy_how"][0]
    assert r["ok"]["workspace:cuBLAS"] == 32 * MiB
    assert r["ok"]["workspace:cuBLASLt"] == MiB


def test_history_frames_decide_only_with_cpp_frames(scenario):
    code = """
import torch
torch.cuda.memory._record_memory_history()
a = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
torch.addmm(None, a, a)
e = check(gpureclaim.explain())
emit(dict(p=parts(e), ev=sorted({p.evidence for p in e.gpus[0].parts
                                 if p.kind in ("workspace", "unattributed")})))
"""
    # C++ frames, named as addr2line or dladdr gives them: the right class
    r = run(scenario, code, env={"FAKE_TORCH_LAYOUT": ""})
    assert r["p"]["workspace:cuBLAS"] == 32 * MiB
    assert r["p"]["workspace:cuBLASLt"] == MiB
    assert r["ev"] == ["history"]
    # stacks="python": the user's matmul line only, no evidence either way
    r = run(scenario, code, env={"FAKE_TORCH_LAYOUT": "", "FAKE_STACKS": "python"})
    assert "workspace:cuBLAS" not in r["p"]
    assert r["p"]["unattributed:torch"] == 33 * MiB


FOLLOW = {
    "release": "gpureclaim.release()",
    "release_workspaces": "gpureclaim.release(workspaces=True)",
    "release_workspaces_pins": "gpureclaim.release(workspaces=True)",
    "delete_graphs": "graphs.clear(); gpureclaim.release()",
    "clear_torch_plans": "torch.backends.cuda.cufft_plan_cache[0].clear()",
    "free_arrays": "keep.clear(); cupy_keep.clear(); gc.collect()",
    "free_pinning_blocks": "keep.clear(); gc.collect()",
}


def test_advice_is_never_repeated_after_being_followed(scenario):
    r = run(scenario, f"""
import torch, cupy
FOLLOW = {FOLLOW!r}
keep = [torch.empty(8 << 20, dtype=torch.uint8, device="cuda")]
x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda"); del x           # releasable
big = torch.empty(64 << 20, dtype=torch.uint8, device="cuda"); del big
keep += [torch.empty(16 << 20, dtype=torch.uint8, device="cuda")]           # fragmented
a = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
torch.addmm(None, a, a); del a                            # workspaces
torch.fft.fft2(torch.empty(4 << 20, dtype=torch.uint8, device="cuda"))       # torch plans
cupy_keep = [cupy.empty(8 << 20, dtype=cupy.uint8)]
y = cupy.empty(32 << 20, dtype=cupy.uint8); del y                           # cupy releasable
graphs = [torch.cuda.CUDAGraph()]
with torch.cuda.graph(graphs[0]):
    tmp = torch.empty(16 << 20, dtype=torch.uint8, device="cuda"); del tmp   # graph pool, free
def advice(e):
    return [(p.kind, p.source, p.advice_key) for p in e.gpus[0].parts
            if p.advice_key and (p.bytes or not p.known)]
followed = []
e = check(gpureclaim.explain())
for step in range(20):
    todo = advice(e)
    if not todo:
        break
    exec(FOLLOW[todo[0][2]])
    e = check(gpureclaim.explain())
    # followed, the part it was given for is gone
    assert todo[0] not in advice(e), (todo[0], str(e))
    followed.append(todo[0])
emit(dict(followed=followed, left=advice(e), last=parts(e)))
""")
    done = {tuple(f)[2] for f in r["followed"]}
    assert {"release", "release_workspaces", "delete_graphs", "clear_torch_plans",
            "free_arrays"} <= done, r["followed"]
    assert r["left"] == []


def test_a_graph_pool_is_shown_and_kept_out_of_releasable(scenario):
    r = run(scenario, """
import torch
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    out = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
    tmp = torch.empty(16 << 20, dtype=torch.uint8, device="cuda"); del tmp
x = torch.empty(4 << 20, dtype=torch.uint8, device="cuda"); del x
steps = {}
def step(name):
    e = check(gpureclaim.explain())
    gp = [p for p in e.gpus[0].parts if p.kind == "graph_pool"]
    steps[name] = dict(p=parts(e), gp=[(p.source, p.advice_key, p.detail["pools"]) for p in gp])
step("captured")
gpureclaim.release(); step("released")
del g; gpureclaim.release(); step("graph deleted")
del out; gpureclaim.release(); step("output freed")
emit(steps)
""")
    s = r.data
    cap = s["captured"]
    [(src, adv, pools)] = cap["gp"]
    assert src == "torch CUDA graphs" and adv == "delete_graphs"
    [pool] = pools
    assert pool["graphs"] == 1 and pool["made_by"] == "graph"
    assert pool["reserved"] == 24 * MiB and pool["live"] == 8 * MiB
    assert cap["p"]["graph_pool:torch CUDA graphs"] == 24 * MiB
    assert cap["p"]["releasable:torch"] == 4 * MiB   # the pool's free is not in it
    assert cap["p"]["live:torch"] == 0
    # empty_cache() cannot return the pool while the graph lives
    assert s["released"]["p"]["graph_pool:torch CUDA graphs"] == 24 * MiB
    assert s["released"]["p"]["releasable:torch"] == 0
    # the graph gone: its free segments returned, the output's stays, no advice
    [(src, adv, pools)] = s["graph deleted"]["gp"]
    assert src == "torch CUDA graphs, none live" and adv is None
    assert pools[0]["reserved"] == 8 * MiB and pools[0]["graphs"] == 0
    assert s["output freed"]["gp"] == []


def test_a_failed_capture_pool_has_no_advice(scenario):
    r = run(scenario, """
import torch
g = torch.cuda.CUDAGraph()
g.capture_begin()
t = torch.empty(8 << 20, dtype=torch.uint8, device="cuda"); del t
torch.cuda._alloc.set_capture(torch.cuda._alloc.DEFAULT)   # capture failed
gpureclaim.release()
e = check(gpureclaim.explain())
[p] = [p for p in e.gpus[0].parts if p.kind == "graph_pool"]
emit(dict(source=p.source, advice=p.advice, how=p.how, bytes=p.bytes))
""")
    assert r["source"] == "torch CUDA graphs, none live"
    assert r["advice"] == "" and "pytorch#190348" in r["how"]
    assert r["bytes"] == 8 * MiB


TRACED = """
import ctypes, torch, simcuda
lib = simcuda.lib()
t = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
simcuda.set_current(0)
# NCCL's buffers: physical VMM memory on the GPU, and on the host
class Props(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("ht", ctypes.c_int), ("lt", ctypes.c_int),
                ("id", ctypes.c_int), ("rest", ctypes.c_ubyte * 72)]
h = ctypes.c_ulonglong()
assert lib.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(6 << 20),
                       ctypes.byref(Props(1, 0, 1, 0)), ctypes.c_ulonglong(0)) == 0
hh = ctypes.c_ulonglong()
assert lib.cuMemCreate(ctypes.byref(hh), ctypes.c_size_t(8 << 20),
                       ctypes.byref(Props(1, 0, 3, 0)), ctypes.c_ulonglong(0)) == 0
d = simcuda.alloc(0, 2 << 20)   # cuDNN's own cudaMalloc
os.environ["FAKE_TRACE_ROWS"] = ";".join([
    f"0:0:torch/lib/libc10_cuda.so:{64 << 20}:1",
    f"0:2:nvidia/nccl/lib/libnccl.so.2:{6 << 20}:3",
    f"-1:2:nvidia/nccl/lib/libnccl.so.2:{8 << 20}:2",
    f"0:0:nvidia/cudnn/lib/libcudnn_engines.so.9:{2 << 20}:1"])
LOAD
e = check(gpureclaim.explain())
g = e.gpus[0]
[nccl] = [p for p in g.parts if p.source == "NCCL"]
emit(dict(p=parts(e), rest=g.parts[-1].detail, rest_src=g.parts[-1].source,
          nccl=dict(exact=nccl.exact, evidence=nccl.evidence, detail=nccl.detail,
                    advice=nccl.advice), text=str(e)))
"""


@pytest.mark.parametrize("load", ["global", "injection"])
def test_the_rest_split_by_library_from_a_trace(scenario, load):
    tracer = os.path.join(FAKES_BUILD, "libfake_tracer.so")
    how = ("ctypes.CDLL(os.environ['TRACER'], mode=ctypes.RTLD_GLOBAL)" if load == "global"
           else "ctypes.CDLL(os.environ['CUDA_INJECTION64_PATH'])")  # as the driver: local
    env = {"TRACER": tracer}
    if load == "injection":
        env["CUDA_INJECTION64_PATH"] = tracer
    r = run(scenario, TRACED.replace("LOAD", f"_tracer = {how}"), env=env)
    p = r["p"]
    # Torch's own allocation is Torch's part, not counted again
    assert p["live:torch"] == 64 * MiB
    assert r["rest"]["framework_bytes_in_trace"] == {"torch": 64 * MiB}
    assert p["unreported:NCCL"] == 6 * MiB
    assert p["unreported:cuDNN"] == 2 * MiB
    # NCCL's host memory is not on the GPU
    assert r["rest"]["host_bytes_in_trace"] == {"NCCL": 8 * MiB}
    assert p["rest:context, modules, driver-internal"] == CONTEXT
    assert r["rest"]["traced"] is True
    n = r["nccl"]
    assert n["exact"] is True and n["evidence"] == "trace" and n["advice"] == ""
    assert n["detail"]["library"] == "nvidia/nccl/lib/libnccl.so.2"
    assert n["detail"]["allocations"] == 3 and n["detail"]["kinds"] == ["VMM physical"]
    assert "allocated, unreported" in r["text"]


def test_not_recording_tracer_changes_nothing(scenario):
    r = run(scenario, """
import ctypes, torch
t = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
_tracer = ctypes.CDLL(os.environ["TRACER"], mode=ctypes.RTLD_GLOBAL)
e = check(gpureclaim.explain())
emit(dict(p=parts(e), traced=e.gpus[0].parts[-1].detail["traced"]))
""", env={"TRACER": os.path.join(FAKES_BUILD, "libfake_tracer.so")})
    assert r["traced"] is False
    assert r["p"]["rest:context, modules, unreported"] == CONTEXT


def test_context_measured_once_per_process_and_gpu(scenario):
    r = run(scenario, """
import torch
t = torch.empty(8 << 20, dtype=torch.uint8, device="cuda:1")
plain = parts(check(gpureclaim.explain()), 1)
e1 = check(gpureclaim.explain(measure_context=True))
# a second probe would fail: the figure must come from the first one
os.environ["GPURECLAIM_SIM"] = "nonsense"
e2 = check(gpureclaim.explain(measure_context=True))
e3 = check(gpureclaim.explain())
[c] = [p for p in e1.gpus[0].parts if p.kind == "context"]
emit(dict(plain=plain, p1=parts(e1, 1), p2=parts(e2, 1), p3=parts(e3, 1),
          exact=c.exact, evidence=c.evidence, how=c.how, notes=e2.notes))
""", sim="gpus=2")
    assert "context:CUDA driver" not in r["plain"]
    for p in (r["p1"], r["p2"], r["p3"]):
        assert p["context:CUDA driver"] == CONTEXT
        assert p["rest:context, modules, unreported"] == 0
    assert r["exact"] is False and r["evidence"] == "probe"
    assert "lower bound" in r["how"] and "GPU-5111a000" in r["how"]
    assert r["notes"] == []


def test_a_failed_context_probe_is_a_note(scenario):
    r = run(scenario, """
import torch
t = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
gpureclaim.explain()   # the driver found before the variable changes
os.environ["GPURECLAIM_CUDA_LIBRARY"] = "/nonexistent/libcuda.so.1"
e = check(gpureclaim.explain(measure_context=True))
emit(dict(p=parts(e), notes=e.notes))
""")
    assert "context:CUDA driver" not in r["p"]
    assert any("context not measured: the probe process failed" in n
               and "cannot load the driver" in n for n in r["notes"]), r["notes"]


def test_what_release_did_is_kept_for_every_gpu(scenario):
    # kept per GPU in Python (frameworks/torch.py), no slots: every GPU the
    # simulator has (16) remembers its own release(workspaces=True)
    r = run(scenario, """
import torch
held = []
for d in range(16):
    a = torch.empty(4 << 20, dtype=torch.uint8, device=f"cuda:{d}")
    torch.matmul(a, a)
    held.append(torch.cuda._pool(d).malloc(32 << 20))  # held in C++
gpureclaim.release(workspaces=True)
e = check(gpureclaim.explain())
emit({g.device: [p.how for p in g.parts if p.kind == "unattributed"]
      for g in e.gpus})
""", sim="gpus=16", env={"FAKE_TORCH_LAYOUT": ""}, timeout=300)
    assert sorted(r.data, key=int) == [str(d) for d in range(16)]
    for d, how in r.data.items():
        assert "1 of them survived release(workspaces=True)" in how[0], (d, how)
