"""gpureclaim.trace: tracing from inside the program, on the sim.

Each scenario runs in a fresh interpreter (conftest.py). With the tracer
preloaded dormant (as `gpureclaim trace --dormant` starts a program) the
interposer records the fake frameworks' calls into the simulated driver;
without it, CUPTI is attached late through the test suite's fake CUPTI,
whose fake_call() stands for a driver call.
"""
import os
import shutil

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY_PATH = os.path.abspath(os.environ.get("GPR_PY_PATH", os.path.join(ROOT, "build", "python")))
BUILD = os.path.dirname(PY_PATH)
TRACER = os.path.join(PY_PATH, "gpureclaim", "libgpureclaim_trace.so")
FAKE_CUPTI = os.path.join(BUILD, "tests", "trace", "libcupti-fake.so")
GiB = 1 << 30

# the program started under `gpureclaim trace --dormant`
DORMANT = {"LD_PRELOAD": TRACER, "GPURECLAIM_TRACE_DORMANT": "1",
           "GPURECLAIM_CUPTI_LIBRARY": FAKE_CUPTI}
# no preload: CUPTI (the fake) attached when the trace starts
LATE = {"GPURECLAIM_CUPTI_LIBRARY": FAKE_CUPTI, "LD_PRELOAD": ""}

FAKE_CALL = """
import ctypes
fake = ctypes.CDLL(os.environ["GPURECLAIM_CUPTI_LIBRARY"])
class Params(ctypes.Structure):
    _fields_ = [("dptr", ctypes.POINTER(ctypes.c_uint64)),
                ("bytesize", ctypes.c_size_t)]
class FreeParams(ctypes.Structure):
    _fields_ = [("dptr", ctypes.c_uint64)]

def fake_alloc(addr, n):  # cuMemAlloc_v2 as CUPTI reports it
    out = ctypes.c_uint64(addr)
    p = Params(ctypes.pointer(out), n)
    fake.fake_call(243, ctypes.byref(p), 0, ctypes.c_void_p(1), None, None)

def fake_free(addr):  # cuMemFree_v2
    p = FreeParams(addr)
    fake.fake_call(245, ctypes.byref(p), 0, ctypes.c_void_p(1), None, None)
"""


def test_trace_a_block_with_the_dormant_interposer(scenario, tmp_path):
    log = tmp_path / "cell.trace"
    r = scenario(f"""
import torch, cupy
before = gpureclaim._c._trace_status()
torch.empty(1 << 20, dtype=torch.uint8, device="cuda")      # before the block: not in the log
with gpureclaim.trace({str(log)!r}) as t:
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    a = cupy.empty(256 << 20, dtype=cupy.uint8)
    del x, a
    torch.cuda.empty_cache()
    cupy.get_default_memory_pool().free_all_blocks()
rep = t.report()
d = rep.to_dict()
emit(dict(before=before, traced=t.traced, backend=t.backend, text=str(rep),
          html=rep._repr_html_(), d=d))
""", env=DORMANT)
    assert r["before"]["interposer"] is True and r["before"]["session"] == 0
    assert r["traced"] and r["backend"] == "interpose"
    d = r["d"]
    assert d["backend"] == "interpose" and d["meta"]["started_by"] == "program"
    ops = {o["op"]: o for o in d["operations"]}
    assert ops["cuMemAlloc_v2"]["calls"] == 2
    assert ops["cuMemAlloc_v2"]["bytes"] == GiB + (256 << 20)
    # the bytes balance: all the block allocated, it freed
    assert d["peak_bytes"] == GiB + (256 << 20) and d["held_at_end_bytes"] == 0
    assert d["never_freed_count"] == 0
    assert "Recorded by the interposer" in r["text"]
    assert r["text"].startswith(f"Trace {log}:")
    # the HTML renderer of `report --html`, as a fragment for the notebook
    assert "<table" in r["html"] and "<svg" in r["html"]
    assert "<!DOCTYPE" not in r["html"] and "cuMemAlloc_v2" in r["html"]
    assert "&lt;" not in r["html"].split("<svg")[1][:20]


def test_trace_errors_are_clear(scenario, tmp_path):
    r = scenario(f"""
import warnings
out = {{}}
def attempt(name, fn):
    try:
        fn()
        out[name] = None
    except Exception as e:
        out[name] = [type(e).__name__, str(e)]

t = gpureclaim.trace({str(tmp_path / "a.trace")!r})
attempt("stop without start", t.stop)
attempt("report before start", t.report)
t.start()
attempt("start twice", t.start)
attempt("report while recording", t.report)
u = gpureclaim.trace({str(tmp_path / "b.trace")!r})
attempt("nested", u.start)
attempt("nested with", lambda: u.__enter__())
t.stop()
attempt("stop twice", t.stop)
open({str(tmp_path / "notes.txt")!r}, "w").write("precious")
attempt("not a trace log", gpureclaim.trace({str(tmp_path / "notes.txt")!r}).start)
attempt("bad backend", lambda: gpureclaim.trace(backend="gpu"))
# an old log is replaced, as `gpureclaim trace -o` does
with gpureclaim.trace({str(tmp_path / "a.trace")!r}) as again:
    pass
out["replaced"] = again.traced
emit(out)
""", env=DORMANT)
    assert r["stop without start"] == ["Error", "gpureclaim.trace: this trace was not started"]
    assert r["report before start"][0] == "Error"
    assert "started already" in r["start twice"][1]
    assert "stop the trace before its report" in r["report while recording"][1]
    for k in ("nested", "nested with"):
        assert r[k][0] == "Error", r[k]
        assert "already tracing to" in r[k][1] and "a.trace" in r[k][1]
        assert "traces do not nest" in r[k][1]
    assert "stopped already" in r["stop twice"][1]
    assert r["not a trace log"][0] == "Error"
    assert "not a trace log" in r["not a trace log"][1]
    assert open(tmp_path / "notes.txt").read() == "precious"
    assert r["bad backend"][0] == "ValueError"
    assert r["replaced"] is True


def test_trace_attaches_cupti_late(scenario, tmp_path):
    log = tmp_path / "late.trace"
    r = scenario(FAKE_CALL + f"""
fake_alloc(0x7f0000000000, 1 << 20)     # before: CUPTI not attached
with gpureclaim.trace({str(log)!r}) as t:
    fake_alloc(0x7f1000000000, 4096)
    fake_free(0x7f1000000000)
    fake_free(0x7f0000000000)
fake_alloc(0x7f2000000000, 8192)        # after: detached again
d = t.report().to_dict()
# the live query of gpureclaim.explain finds the tracer the same way
live = hasattr(ctypes.CDLL(None), "gpureclaim_trace_live")
emit(dict(backend=t.backend, d=d, enabled=fake.fake_enabled(1, 243), live=live))
""", env=LATE)
    assert r["backend"] == "cupti" and r["d"]["backend"] == "cupti"
    ops = {o["op"]: o["calls"] for o in r["d"]["operations"]}
    assert ops == {"cuMemAlloc_v2": 1, "cuMemFree_v2": 2}, ops
    assert r["d"]["unmatched_frees"] == 1
    assert r["enabled"] == 0  # the callbacks are off after the block
    assert r["live"]


def test_a_busy_cupti_warns_once_and_keeps_the_other_tool(scenario, tmp_path):
    log = tmp_path / "busy.trace"
    r = scenario(FAKE_CALL + f"""
import warnings
fake.fake_other_subscribe()             # torch.profiler, say, holds CUPTI
fake_alloc(0x7f0000000000, 4096)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    line = sys._getframe().f_lineno + 1
    with gpureclaim.trace({str(log)!r}) as t:
        fake_alloc(0x7f1000000000, 4096)
rep = t.report()
fake_alloc(0x7f2000000000, 4096)
emit(dict(warnings=[str(x.message) for x in w], traced=t.traced,
          where=[(x.filename, x.lineno) for x in w], line=line,
          text=str(rep), d=rep.to_dict(), other=fake.fake_other_calls(),
          exists=os.path.exists({str(log)!r}), html=rep._repr_html_()))
""", env=LATE)
    # the views' renderer: the reason as a warning line, escaped
    assert "not traced: CUPTI is already in use" in r["html"]
    assert r["html"].startswith('<div class="gpr">')
    # the reason, the way out, and the user's own line
    assert r["warnings"] == [
        "gpureclaim.trace: CUPTI is already in use by another tool "
        "(fake-profiler); this run is not traced; nothing traced in this "
        "block; to trace without CUPTI, run the program under `gpureclaim "
        "trace --dormant -- ...` (a notebook: `gpureclaim trace --dormant "
        "-- jupyter lab`)"]
    assert r["where"] == [["<string>", r["line"]]]
    assert r["traced"] is False and r["d"]["traced"] is False
    assert r["text"].startswith("not traced: CUPTI is already in use")
    assert r["other"] == 3  # the other tool saw every call, before and after
    assert r["exists"] is False


def test_without_the_tracer_the_warning_names_every_place(scenario, tmp_path):
    # the package without the tracer beside it, nothing preloaded
    pkg = tmp_path / "pkg" / "gpureclaim"
    shutil.copytree(os.path.join(PY_PATH, "gpureclaim"), pkg,
                    ignore=shutil.ignore_patterns("libgpureclaim_trace.so",
                                                  "*.p"))
    r = scenario(f"""
import warnings
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    with gpureclaim.trace({str(tmp_path / "x.trace")!r}) as t:
        pass
emit(dict(warnings=[str(x.message) for x in w], traced=t.traced))
""", env=dict(LATE, PYTHONPATH=os.pathsep.join(
        [str(pkg.parent), os.path.join(ROOT, "tests", "python", "fakes")])))
    assert r["traced"] is False
    (msg,) = r["warnings"]
    assert msg.startswith("gpureclaim.trace: the tracer library is not "
                          "loaded and was not found; looked at: "
                          "GPURECLAIM_TRACE_LIBRARY (not set); "
                          f"{pkg}/libgpureclaim_trace.so")
    assert "--dormant" not in msg  # no interposer either: not a way out


@pytest.mark.parametrize("how", ["with", "magic"])
def test_a_block_that_first_uses_cuda_knows_its_devices(scenario, tmp_path,
                                                         how):
    """Under `gpureclaim trace --dormant`, the driver first loaded inside
    the block: the allocation and the context both on device 0."""
    log = tmp_path / "first.trace"
    r = scenario(f"""
import torch
mapped = libcuda_mapped()
if {how!r} == "with":
    with gpureclaim.trace({str(log)!r}) as t:
        x = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    d = t.report().to_dict()
else:
    class FakeIPython:
        def __init__(self):
            self.magics, self.ns = {{}}, {{"torch": torch}}
        def register_magic_function(self, fn, kind, name):
            self.magics[(kind, name)] = fn
        def run_cell(self, cell):
            exec(cell, self.ns)
    ip = FakeIPython()
    gpureclaim.load_ipython_extension(ip)
    d = ip.magics[("line_cell", "gpureclaim")](
        {str(log)!r}, "x = torch.empty(1 << 20, dtype=torch.uint8, device='cuda')").to_dict()
emit(dict(mapped=mapped, d=d))
""", env=DORMANT)
    assert r["mapped"] is False  # CUDA not used before the block
    d = r["d"]
    assert [g["device"] for g in d["devices"]] == [0]
    assert [a["device"] for a in d["never_freed"]] == [0]


def test_a_forked_child_is_not_traced(scenario, tmp_path):
    log = tmp_path / "fork.trace"
    r = scenario(f"""
import torch
t = gpureclaim.trace({str(log)!r}).start()
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
pid = os.fork()
if pid == 0:
    code = 0
    try:  # the child's driver calls are not recorded (nor do they work)
        y = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    except Exception:
        pass
    try:
        t.stop()
        code |= 1
    except gpureclaim.Error as e:
        code |= 0 if "forked child" in str(e) else 2
    try:
        gpureclaim.trace({str(tmp_path / "child.trace")!r}).start()
        code |= 4
    except gpureclaim.Error as e:
        code |= 0 if "forked from a traced one" in str(e) else 8
    os._exit(code)
_, status = os.waitpid(pid, 0)
del x
torch.cuda.empty_cache()
t.stop()
d = t.report().to_dict()
emit(dict(child=os.waitstatus_to_exitcode(status),
          ops={{o["op"]: o["calls"] for o in d["operations"]}},
          held=d["held_at_end_bytes"],
          child_log=os.path.exists({str(tmp_path / "child.trace")!r})))
""", env=DORMANT)
    assert r["child"] == 0
    # nothing from the child (its own tensor, its context)
    assert r["ops"] == {"context_created": 1, "cuMemAlloc_v2": 1,
                        "cuMemFree_v2": 1}, r["ops"]
    assert r["held"] == 0
    assert r["child_log"] is False


def test_the_cell_magic(scenario, tmp_path):
    log = tmp_path / "magic.trace"
    r = scenario(f"""
import torch
class FakeIPython:
    def __init__(self):
        self.magics, self.ns = {{}}, {{"torch": torch}}
    def register_magic_function(self, fn, kind, name):
        self.magics[(kind, name)] = fn
    def run_cell(self, cell):
        exec(cell, self.ns)
ip = FakeIPython()
gpureclaim.load_ipython_extension(ip)
rep = ip.magics[("line_cell", "gpureclaim")]({str(log)!r}, "x = torch.empty(1 << 20, dtype=torch.uint8, device='cuda')")
emit(dict(kind=type(rep).__name__, d=rep.to_dict()))
""", env=DORMANT)
    assert r["kind"] == "TraceReport"
    assert r["d"]["never_freed_count"] == 1  # the cell kept x
    assert r["d"]["file"] == str(log)


@pytest.mark.parametrize("env", [DORMANT, LATE], ids=["interpose", "cupti"])
def test_the_live_query_sees_what_the_session_holds(scenario, tmp_path, env):
    log = tmp_path / "live.trace"
    r = scenario(FAKE_CALL + f"""
import torch
class Row(ctypes.Structure):
    _fields_ = [("sz", ctypes.c_size_t), ("device", ctypes.c_int),
                ("kind", ctypes.c_int), ("library", ctypes.c_char_p),
                ("bytes", ctypes.c_uint64), ("count", ctypes.c_uint64)]
def live():
    fn = ctypes.CDLL(None).gpureclaim_trace_live
    rows, n = (Row * 8)(), ctypes.c_size_t()
    rows[0].sz = ctypes.sizeof(Row)
    rc = fn(rows, 8, ctypes.byref(n))
    return rc, [(x.device, x.kind, x.library.decode(), x.bytes, x.count)
                for x in rows[:n.value]]
with gpureclaim.trace({str(log)!r}) as t:
    if t.backend == "interpose":
        x = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
    else:
        fake_alloc(0x7f1000000000, 4 << 20)
    during = live()
after = live()
emit(dict(during=during, after=after))
""", env=env)
    rc, rows = r["during"]
    assert rc == 0 and len(rows) == 1, rows
    device, kind, lib, nbytes, count = rows[0]
    assert kind == 0 and nbytes == 4 << 20 and count == 1
    assert lib  # the caller's library, as the report names it
    assert r["after"][0] == -20006  # no session: GPURECLAIM_TRACE_E_NOT_TRACED


def test_explain_splits_the_rest_with_the_real_tracer(scenario, tmp_path):
    """Issue 13's explain() finds this tracer's live query by dlsym and
    books NCCL-style cuMemCreate memory on the host as host memory."""
    log = tmp_path / "explain.trace"
    r = scenario(f"""
import ctypes, torch, simcuda
from scenario import parts, check
lib = simcuda.lib()
class Props(ctypes.Structure):   # CUmemAllocationProp's head
    _fields_ = [("type", ctypes.c_int), ("ht", ctypes.c_int), ("lt", ctypes.c_int),
                ("id", ctypes.c_int), ("rest", ctypes.c_ubyte * 72)]
x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")   # before the session: not in it
simcuda.set_current(0)
with gpureclaim.trace({str(log)!r}) as t:
    h, hh = ctypes.c_ulonglong(), ctypes.c_ulonglong()
    assert lib.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(6 << 20),
                           ctypes.byref(Props(1, 0, 1, 0)), ctypes.c_ulonglong(0)) == 0
    assert lib.cuMemCreate(ctypes.byref(hh), ctypes.c_size_t(8 << 20),
                           ctypes.byref(Props(1, 0, 3, 0)), ctypes.c_ulonglong(0)) == 0
    e = check(gpureclaim.explain())
    rest = e.gpus[0].parts[-1].detail
emit(dict(backend=t.backend, p=parts(e), rest=rest))
""", env=DORMANT)
    assert r["backend"] == "interpose"
    rest = r["rest"]
    assert rest["traced"] is True
    # the calls came through ctypes: libffi is the calling library
    [(lib, host)] = rest["host_bytes_in_trace"].items()
    assert lib.startswith("libffi") and host == 8 << 20, rest
    assert r["p"]["unreported:" + lib] == 6 << 20, r["p"]
    assert r["p"]["live:torch"] == 64 << 20
