"""gpureclaim.release() on the simulated driver with the fake frameworks."""
import re

GiB = 1 << 30
CONTEXT = 512 << 20  # the sim's default context size

CYCLE = """
import torch, cupy
gc.disable()  # the cycle waits for the release's collection, not a chance one
t = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
cycle = [t]
cycle.append(cycle)
a = cupy.empty(1 << 30, dtype=cupy.uint8)
start = gpureclaim.process_memory()
del t, cycle, a
"""


def test_reference_cycle_returns_exactly_the_dropped_bytes(scenario):
    r = scenario(CYCLE + """
gc_runs = []
gc.callbacks.append(lambda phase, info: phase == "start" and gc_runs.append(1))
r = gpureclaim.release()
emit(dict(r.to_dict(), start=start, end=gpureclaim.process_memory(),
          gc_runs=len(gc_runs)))
""")
    assert r["bytes"] == 2 * GiB
    assert r["gb"] == 2.147483648
    assert r["source"] == "driver"
    assert r["collected"] is True and r["gc_runs"] == 1
    assert r["start"] == {"0": 2 * GiB + CONTEXT}
    assert r["end"] == {"0": CONTEXT}
    [g] = r["gpus"]
    assert (g["device"], g["before"], g["after"]) == (0, 2 * GiB + CONTEXT, CONTEXT)
    rows = {(x["name"], x["device"]): x for x in r["releasers"]}

    def released(row):
        return sum(row["before"].values()) - sum(row["after"].values())

    assert released(rows[("torch", 0)]) == GiB
    assert released(rows[("cupy", 0)]) == GiB


def test_release_cached_memory_is_the_drop_in_float(scenario):
    r = scenario(CYCLE + "emit(gpureclaim.release_cached_memory())")
    assert r.data == 2.147483648


def test_collect_auto_skips_gc_when_nothing_is_live(scenario):
    r = scenario("""
import torch, cupy
gc.disable()  # no automatic collection: only the release's could run
gc_runs = []
gc.callbacks.append(lambda phase, info: phase == "start" and gc_runs.append(1))
t = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
a = cupy.empty(1 << 30, dtype=cupy.uint8)
del t, a
r = gpureclaim.release()
emit(dict(bytes=r.bytes, collected=r.collected, gc_runs=len(gc_runs)))
""")
    assert r["bytes"] == 2 * GiB
    assert r["collected"] is False and r["gc_runs"] == 0


def test_collect_false_leaves_the_cycle_and_true_always_collects(scenario):
    r = scenario(CYCLE + """
gc.disable()
r1 = gpureclaim.release(collect=False)
r2 = gpureclaim.release(collect=True)
r3 = gpureclaim.release(collect=True)
emit([(r.bytes, r.collected) for r in (r1, r2, r3)])
""")
    assert r.data == [[GiB, False], [GiB, True], [0, True]]


def test_only_opened_gpus_are_visited(scenario):
    r = scenario("""
import torch, cupy
t = torch.empty(64 << 20, dtype=torch.uint8, device="cuda:1")
cupy.cuda.Device(3).use()
a = cupy.empty(64 << 20, dtype=cupy.uint8)
del t, a
ctx_calls = sim().gprsim_ctx_calls()
r = gpureclaim.release()
emit(dict(visited=[g.device for g in r.gpus], bytes=r.bytes,
          in_use=gpureclaim.devices_in_use(),
          new_contexts=sim().gprsim_ctx_calls() - ctx_calls,
          active=[primary_active(d) for d in range(4)],
          torch_calls=[c for c in torch.cuda.calls if c[0] in ("enter", "exit")],
          current=(torch.cuda.current_device(), cupy.cuda.runtime.getDevice())))
""", sim="gpus=4")
    assert r["visited"] == [1, 3]
    assert r["in_use"] == [1, 3]
    assert r["bytes"] == 128 << 20
    assert r["new_contexts"] == 0
    assert r["active"] == [False, True, False, True]
    # Torch was made current only where it holds memory, then restored.
    assert r["torch_calls"] == [["enter", 1], ["exit", 3]]
    assert r["current"] == [3, 3]


def test_previous_device_without_context_is_not_opened(scenario):
    r = scenario("""
import torch, cupy
t = torch.empty(64 << 20, dtype=torch.uint8, device="cuda:1")  # device 0 stays current, unopened
del t
r = gpureclaim.release()
emit(dict(bytes=r.bytes, visited=[g.device for g in r.gpus],
          current=torch.cuda.current_device(), notes=r.notes,
          active=[primary_active(d) for d in range(2)]))
""", sim="gpus=2")
    assert r["bytes"] == 64 << 20
    assert r["visited"] == [1]
    assert r["current"] == 0
    assert r["active"] == [False, True]
    # CuPy cannot switch back to a device without a context: it says so
    assert any(n.startswith("cupy: GPU 1") and "no context" in n for n in r["notes"]), r["notes"]


def test_requested_devices_narrow_the_visit(scenario):
    r = scenario("""
import cupy
for d in (0, 1):
    with cupy.cuda.Device(d):
        a = cupy.empty(64 << 20, dtype=cupy.uint8)
        del a
r = gpureclaim.release(devices=[1, 2])
emit(dict(visited=[g.device for g in r.gpus], bytes=r.bytes, notes=r.notes))
""", sim="gpus=3")
    assert r["visited"] == [1]
    assert r["bytes"] == 64 << 20
    assert any("GPU 2" in n for n in r["notes"])


def test_a_gpu_that_cannot_be_opened_is_skipped_with_a_note(scenario):
    r = scenario("""
import cupy
for d in (0, 2):
    with cupy.cuda.Device(d):
        a = cupy.empty(64 << 20, dtype=cupy.uint8)
        del a
r = gpureclaim.release()
emit(dict(visited=[g.device for g in r.gpus], bytes=r.bytes, notes=r.notes))
""", sim="gpus=3;fault=broken:1")
    assert r["visited"] == [0, 2]
    assert r["bytes"] == 128 << 20
    assert any("GPU 1" in n for n in r["notes"]), r["notes"]


def test_previous_current_device_is_restored(scenario):
    r = scenario("""
import torch, cupy
for d in (0, 1):
    x = torch.empty(64 << 20, dtype=torch.uint8, device=f"cuda:{d}")
    with cupy.cuda.Device(d):
        y = cupy.empty(64 << 20, dtype=cupy.uint8)
    del x, y
torch.cuda.set_device(1)
torch.cuda.calls.clear()
cupy.cuda.runtime.calls.clear()
r = gpureclaim.release()
emit(dict(bytes=r.bytes, torch=torch.cuda.current_device(),
          cupy=cupy.cuda.runtime.getDevice(), calls=list(torch.cuda.calls),
          cupy_calls=list(cupy.cuda.runtime.calls)))
""", sim="gpus=2")
    assert r["bytes"] == 4 * (64 << 20)
    assert r["torch"] == 1 and r["cupy"] == 1
    guards = [c for c in r["calls"] if c[0] in ("enter", "exit")]
    # Torch's empty_cache empties every device: GPU 1 had nothing left
    assert guards == [["enter", 0], ["exit", 1]]
    assert ["setDevice", 0] in r["cupy_calls"]
    assert r["cupy_calls"][-1] == ["setDevice", 1]


def test_plan_cache_cleared_only_when_it_holds_plans(scenario):
    r = scenario("""
import cupy
from cupy.fft import _cache
a = cupy.empty(256 << 20, dtype=cupy.uint8)
gpureclaim.release()
no_plans = list(_cache.clear_calls)
b = cupy.fft.fft2(a)
del a, b
r1 = gpureclaim.release()
with_plans = list(_cache.clear_calls)
r2 = gpureclaim.release()
emit(dict(no_plans=no_plans, with_plans=with_plans, after=list(_cache.clear_calls),
          bytes=r1.bytes, pool=cupy.get_default_memory_pool().total_bytes()))
""")
    assert r["no_plans"] == []
    assert r["with_plans"] == [0]
    assert r["after"] == [0]  # empty cache: not cleared again
    # the array, the result and the plan's work area all went back
    assert r["bytes"] == (256 << 20) * 2 + (128 << 20)
    assert r["pool"] == 0


def test_async_pool_trimmed_where_used(scenario):
    r = scenario("""
import cupy
gpureclaim.release()
none_trimmed = list(cupy.cuda.runtime.trims)
cupy.cuda.set_allocator(cupy.cuda.MemoryAsyncPool().malloc)
a = cupy.empty(128 << 20, dtype=cupy.uint8)
del a
r = gpureclaim.release()
emit(dict(before=none_trimmed, trims=list(cupy.cuda.runtime.trims), bytes=r.bytes,
          pinned=cupy.get_default_pinned_memory_pool().free_calls))
""")
    assert r["before"] == []
    assert r["trims"] == [[0, 0]]
    assert r["bytes"] == 128 << 20
    assert r["pinned"] >= 1


def test_no_framework_is_imported_and_cuda_untouched(scenario):
    r = scenario("""
r = gpureclaim.release()
info = dict(gb=gpureclaim.release_cached_memory(), notes=r.notes,
            in_use=gpureclaim.devices_in_use(), mem=gpureclaim.process_memory(),
            releasers=[(x.name, x.active) for x in gpureclaim.releasers()],
            mapped=libcuda_mapped(),
            imported=[m for m in ("torch", "cupy", "jax", "numba", "numba.cuda",
                                  "mlx", "mlx.core") if m in sys.modules])
lb = sim()
info.update(init_calls=lb.gprsim_init_calls(), ctx_calls=lb.gprsim_ctx_calls())
emit(info)
""")
    assert r["gb"] == 0.0
    assert r["imported"] == []
    assert r["mapped"] is False
    assert r["in_use"] == [] and r["mem"] == {}
    assert r["init_calls"] == 0 and r["ctx_calls"] == 0
    assert all(not active for _, active in r["releasers"])
    assert any("not loaded" in n for n in r["notes"])


def test_nothing_measured_says_why_once(scenario):
    """Without a GPU in use the plain call returns 0.0 and warns once per
    process (a NothingMeasuredWarning naming the reason); the report's
    source is "none" and its notes say why; verbose=True prints the reason
    instead of warning; the library prints nothing uninvited."""
    r = scenario("""
import io, contextlib, warnings
out = io.StringIO()
with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out):
    warnings.simplefilter("always")
    first = gpureclaim.release_cached_memory()
    second = gpureclaim.release_cached_memory()
quiet = out.getvalue()
with warnings.catch_warnings(record=True) as verbose_caught, contextlib.redirect_stdout(out):
    warnings.simplefilter("always")
    gpureclaim._warned_nothing = False
    gpureclaim.release_cached_memory(verbose=True)
r = gpureclaim.release()
emit(dict(values=[first, second], quiet=quiet, verbose=out.getvalue(),
          caught=[(w.category.__name__, str(w.message)) for w in caught],
          verbose_caught=len(verbose_caught), source=r.source,
          text=repr(r), lines=r.verbose_lines()))
""")
    assert r["values"] == [0.0, 0.0]
    assert r["quiet"] == ""
    [(kind, message)] = r["caught"]
    assert kind == "NothingMeasuredWarning"
    assert "measured nothing and returns 0.0" in message
    assert "CUDA driver not loaded" in message
    assert r["verbose_caught"] == 0
    assert r["verbose"].startswith("gpureclaim: released nothing: CUDA driver "
                                   "not loaded")
    assert r["source"] == "none"
    assert "nothing was measured" in r["text"] and "from the driver" not in r["text"]


def test_imported_but_unused_torch_opens_nothing(scenario):
    r = scenario("""
import torch, cupy
import ctypes
lb = sim(); lb.cuInit(0)  # the driver loaded and initialised, no context
r = gpureclaim.release()
emit(dict(bytes=r.bytes, gpus=len(r.gpus), torch_init=torch.cuda.is_initialized(),
          ctx_calls=lb.gprsim_ctx_calls(),
          why={x.name: x.why for x in gpureclaim.releasers()}))
""", sim="gpus=2")
    assert r["bytes"] == 0 and r["gpus"] == 0
    assert r["torch_init"] is False
    assert r["ctx_calls"] == 0
    assert r["why"]["torch"] == "torch imported, CUDA not initialised"


def test_eight_threads_at_once(scenario):
    r = scenario("""
import threading, torch, cupy
errors, totals = [], []
barrier = threading.Barrier(8)
def work(i):
    try:
        barrier.wait()
        for k in range(20):
            if i % 2:
                x = torch.empty((1 + i) << 20, dtype=torch.uint8, device="cuda")
            else:
                x = cupy.empty((1 + i) << 20, dtype=cupy.uint8)
            del x
            r = gpureclaim.release(collect=False)
            totals.append(r.bytes)
            gpureclaim.devices_in_use(); gpureclaim.process_memory()
    except Exception as e:
        errors.append(repr(e))
ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
for t in ts: t.start()
for t in ts: t.join()
final = gpureclaim.release()
emit(dict(errors=errors, calls=len(totals), mem=gpureclaim.process_memory(),
          torch=torch.cuda.memory_reserved(0),
          cupy=cupy.get_default_memory_pool().total_bytes()))
""")
    assert r["errors"] == []
    assert r["calls"] == 160
    assert r["mem"] == {"0": CONTEXT}
    assert r["torch"] == 0 and r["cupy"] == 0


def test_call_in_a_forked_child(scenario):
    r = scenario("""
import torch
t = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
del t
rfd, wfd = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(rfd)
    try:
        r = gpureclaim.release()
        out = dict(bytes=r.bytes, source=r.source, notes=r.notes,
                   in_use=gpureclaim.devices_in_use() if False else None)
    except Exception as e:
        out = dict(error=repr(e))
    os.write(wfd, json.dumps(out).encode())
    os._exit(0)
os.close(wfd)
child = json.loads(os.read(rfd, 65536).decode())
_, status = os.waitpid(pid, 0)
parent = gpureclaim.release()
emit(dict(child=child, status=status, parent=parent.bytes))
""")
    assert r["status"] == 0
    assert "error" not in r["child"], r["child"]
    assert r["child"]["bytes"] == 0
    assert any("fork" in n for n in r["child"]["notes"]), r["child"]
    assert r["parent"] == GiB  # the parent's cache is untouched by the child


def test_user_releaser_that_raises(scenario):
    r = scenario("""
import cupy
pool = {"cached": []}
def good_release(device):
    while pool["cached"]:
        pool["cached"].pop()
def bad_release(device):
    raise ValueError("pool on fire")
gpureclaim.register("bad", bad_release)
gpureclaim.register("good", good_release,
                    held=lambda d: sum(x.nbytes for x in pool["cached"]),
                    live=lambda d: 0)
pool["cached"].append(cupy.empty(256 << 20, dtype=cupy.uint8))  # 'cached' by the user's pool
a = cupy.empty(256 << 20, dtype=cupy.uint8); del a
r = gpureclaim.release()
rows = {(x.name, x.device): x for x in r.releasers}
emit(dict(bytes=r.bytes, notes=r.notes, bad=rows[("bad", 0)].status,
          good=rows[("good", 0)].released,
          names=[x.name for x in gpureclaim.releasers() if x.kind == "user"]))
""")
    # the good pool handed its array to cupy's pool, which cupy's releaser
    # ran before it: the array comes back on the next release, not lost
    assert r["bad"] < 0
    assert any("bad" in n and "ValueError: pool on fire" in n for n in r["notes"]), r["notes"]
    assert r["good"] == 256 << 20
    assert r["names"] == ["bad", "good"]


def test_user_releaser_returns_its_pool(scenario):
    r = scenario("""
import simcuda
simcuda.lib(); simcuda.set_current(0)
blocks = [simcuda.alloc(0, 64 << 20) for _ in range(3)]
live = [blocks.pop()]
def release(device):
    while blocks:
        simcuda.free(blocks.pop())
gpureclaim.register("mine", release, held=lambda d: (len(blocks) + len(live)) * (64 << 20),
                    live=lambda d: len(live) * (64 << 20))
r1 = gpureclaim.release()
gpureclaim.unregister("mine")
try:
    gpureclaim.unregister("mine")
    missing = None
except KeyError as e:
    missing = str(e)
emit(dict(bytes=r1.bytes, collected=r1.collected, missing=missing,
          names=[x.name for x in gpureclaim.releasers()]))
""")
    assert r["bytes"] == 128 << 20
    assert r["collected"] is True  # live bytes remained: auto collected
    assert "mine" in r["missing"]
    assert "mine" not in r["names"]


def test_callback_cannot_reenter(scenario):
    r = scenario("""
import simcuda
simcuda.lib(); simcuda.set_current(0)
seen = []
def rel(device):
    try:
        gpureclaim.release()
    except RuntimeError as e:
        seen.append(str(e))
    try:
        gpureclaim.register("x", rel)
    except Exception as e:
        seen.append(type(e).__name__)
gpureclaim.register("reenter", rel)
r = gpureclaim.release()
emit(dict(seen=seen))
""")
    assert "inside a releaser" in r["seen"][0]
    assert len(r["seen"]) == 2


def test_workspaces(scenario):
    r = scenario("""
import torch
a = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
c = torch.matmul(a, a)
del a, c
r1 = gpureclaim.release()
kept = torch.cuda.memory_reserved(0)
r2 = gpureclaim.release(workspaces=True)
emit(dict(kept=kept, r1=r1.bytes, r2=r2.bytes, after=torch.cuda.memory_reserved(0)))
""")
    assert r["kept"] == 32 << 20
    assert r["r1"] == 128 << 20
    assert r["r2"] == 32 << 20
    assert r["after"] == 0


def test_numba_pending_deallocations(scenario):
    r = scenario("""
import numba.cuda
x = numba.cuda.device_array(128 << 20)
del x
before = gpureclaim.process_memory()
r = gpureclaim.release()
emit(dict(bytes=r.bytes, clears=numba.cuda.current_context().deallocations.clear_calls))
""")
    assert r["bytes"] == 128 << 20
    assert r["clears"] == 1


def test_jax_pool_is_reported_not_released(scenario):
    r = scenario("""
import jax
jax.numpy_ones(256)
r = gpureclaim.release()
emit(dict(bytes=r.bytes, notes=r.notes, mem=gpureclaim.process_memory()))
""", env={"FAKE_JAX_POOL": str(1 << 30), "XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"})
    assert r["bytes"] == 0
    assert r["mem"] == {"0": GiB + CONTEXT}
    [note] = [n for n in r["notes"] if n.startswith("jax")]
    assert "1.074 GB" in note and "256 bytes in use" in note
    assert "XLA_PYTHON_CLIENT_PREALLOCATE=unset" in note
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION=.5" in note
    assert "XLA_PYTHON_CLIENT_ALLOCATOR" in note


def test_allocator_counters_where_nvml_is_absent(scenario):
    r = scenario(CYCLE + """
r = gpureclaim.release()
emit(dict(bytes=r.bytes, source=r.source, notes=r.notes))
""", sim="gpus=1;fault=nvml-absent")
    assert r["source"] == "allocators"
    assert r["bytes"] == 2 * GiB


def test_verbose_line_and_report_shapes(scenario):
    r = scenario(CYCLE + """
import io, contextlib
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    r = gpureclaim.release(verbose=True)
again = io.StringIO()
with contextlib.redirect_stdout(again):
    gpureclaim.release(verbose=True)      # nothing left to release
    x = torch.empty(1 << 20, dtype=torch.uint8, device="cuda"); del x
    gpureclaim.release_cached_memory(verbose=True)
emit(dict(out=buf.getvalue(), repr=repr(r), html=r._repr_html_(),
          keys=sorted(r.to_dict()), float=float(r), again=again.getvalue()))
""")
    # binary units; release() says what it released, never what another
    # function returns (issue 33)
    assert r["out"] == (
        "GPU 0: released 2.0 GiB, 512.0 MiB in use, 79.5 GiB free\n"
        "released 2.0 GiB (2147483648 bytes)\n")
    # release_cached_memory() says its own figure, in units of 1e9 bytes
    assert r["again"] == (
        "GPU 0: released 0 B, 512.0 MiB in use, 79.5 GiB free\n"
        "released 0 B (0 bytes)\n"
        "GPU 0: released 2.0 MiB, 512.0 MiB in use, 79.5 GiB free\n"
        "released 2.0 MiB (2097152 bytes); release_cached_memory() "
        "returns 0.002097152 (units of 1e9 bytes)\n")
    assert "2147483648 bytes" in r["repr"] and "torch" in r["repr"]
    assert r["html"].startswith('<div class="gpr">')
    assert '<table class="gpr-tab">' in r["html"]
    assert r["keys"] == sorted(["released", "bytes", "gb", "source",
                                "seconds", "collected",
                                "collect_seconds", "gpus", "releasers", "notes"])
    assert r["float"] == 2.147483648



def test_torch_counters_read_through_one_stats_call(scenario):
    """held() reads Torch's allocated and reserved bytes from one
    torch._C._cuda_memoryStats call, and falls back to the public pair when
    that private call is gone; both give the same exact figures."""
    r = scenario("""
import torch
def drop_and_release():
    x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    y = torch.empty(32 << 20, dtype=torch.uint8, device="cuda")
    del x
    r = gpureclaim.release(collect=False)
    row = [x for x in r.to_dict()["releasers"]
           if x["name"] == "torch" and x["device"] == 0][0]
    del y
    torch.cuda.empty_cache()
    return dict(bytes=r.bytes, live=row["before"]["live"],
                cached=row["before"]["cached"])
fast = drop_and_release()
del torch._C._cuda_memoryStats
emit(dict(fast=fast, slow=drop_and_release()))
""")
    assert r["fast"] == r["slow"]
    assert r["fast"]["bytes"] == 64 << 20
    assert (r["fast"]["live"], r["fast"]["cached"]) == (32 << 20, 64 << 20)


def test_numba_active_context_failure_is_the_note(scenario):
    # __enter__ of Numba's active-context guard raising must not be
    # followed by a call to __exit__ with that exception still pending
    # (CPython turns that into a SystemError that hides the real cause)
    r = scenario("""
import numba.cuda
from numba.cuda.cudadrv import driver as drv
x = numba.cuda.device_array(128 << 20)
del x
calls = []
def bad_enter(self):
    raise RuntimeError("no current context query")
def exit_(self, *exc):
    calls.append("exit")
    return False
drv._ActiveContext.__enter__ = bad_enter
drv._ActiveContext.__exit__ = exit_
r = gpureclaim.release()
emit(dict(notes=r.notes, exits=len(calls),
          rows=[x.status for x in r.releasers if x.name == "numba"]))
""")
    assert any("RuntimeError: no current context query" in n for n in r["notes"]), r["notes"]
    assert not any("SystemError" in n for n in r["notes"]), r["notes"]
    assert r["exits"] == 0
    assert min(r["rows"]) < 0, r["rows"]  # the once-per-call row failed


def test_a_framework_that_raises_is_a_note_never_an_exception(scenario):
    # every framework's releaser goes through the one trampoline: what it
    # raises becomes a note naming the step, the row fails with the code
    # of a failed releaser, and the other releasers still run
    r = scenario("""
import torch, cupy
t = torch.empty(64 << 20, dtype=torch.uint8, device="cuda"); del t
a = cupy.empty(32 << 20, dtype=cupy.uint8); del a
def boom(*args, **kw):
    raise RuntimeError("allocator on fire")
torch.cuda.empty_cache = boom
torch._C._host_emptyCache = boom
r = gpureclaim.release()
rows = {(x.name, x.device): x.status for x in r.releasers}
torch.cuda.memory_stats = torch.cuda.memory_allocated = boom
e = gpureclaim.explain()
emit(dict(bytes=r.bytes, notes=r.notes, torch=rows[("torch", 0)],
          once=rows[("torch", -1)], cupy=rows[("cupy", 0)],
          code=gpureclaim._c.errors["GPR_E_RELEASER"][0], explained=e.notes,
          parts=[p.source for p in e.gpus[0].parts]))
""")
    assert r["bytes"] == 32 << 20  # CuPy's went back
    assert ("torch: release on GPU 0 failed: RuntimeError: allocator on fire"
            in r["notes"]), r["notes"]
    assert ("torch: release on the once-per-call step failed: host cache: "
            "RuntimeError: allocator on fire" in r["notes"]), r["notes"]
    assert r["torch"] == r["once"] == r["code"] and r["cupy"] == 0
    assert r["explained"] == ["torch: GPU 0: RuntimeError: allocator on fire"]
    assert "cupy" in r["parts"]


def test_frameworks_are_registered_as_a_users_pool_is(scenario):
    r = scenario("""
out = {}
try:
    gpureclaim._c.register("cupy", lambda d: None)
except ValueError as e:
    out["again"] = str(e)
gpureclaim.register("mine", lambda d: None)
emit(dict(out=out, core=gpureclaim._c.releaser_names()))
""")
    # one list in the core: the table's frameworks first, then the user's
    assert r["core"] == ["torch", "cupy", "numba", "jax", "rmm", "mps", "mlx",
                         "mine"]
    assert "already registered" in r["out"]["again"]
