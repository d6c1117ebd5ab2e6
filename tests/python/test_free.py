"""free_plan() and free() on the simulated driver with the fake Torch
(its caching allocator's segments, its autograd graph): each step's
statement and exact bytes, the driver's drop equal to the promise, the
steps that never run by themselves (another module's global, a class
attribute) and those that cannot run (a running frame, C++), a plan made
stale by the program, statements picked, IPython's caches and the magics."""
import pytest

MiB = 1 << 20
ACT = 32 * MiB
W = 64 * MiB

SETUP = """
import torch
lin = torch.nn.Linear(4096, 4096, bias=False, device="cuda")
x = torch.randn(2048, 4096, device="cuda")

def steps(plan):
    return [[s.statement, s.kind, s.releasable, s.bytes] for s in plan]

def report(r):
    return dict(promised=r.releasable, released=r.released,
                ran=[s["statement"] for s in r.steps if s["error"] is None],
                errors=[s["error"] for s in r.steps if s["error"]],
                skipped=[[s["statement"], s["why"]] for s in r.skipped])
"""


def test_the_loops_history_planned_and_freed_step_by_step(scenario):
    r = scenario(SETUP + """
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
total = 0
for _ in range(6):
    loss = torch.relu(lin(x)).pow(2).sum()
    total = total + loss
torch.relu(lin(x)).pow(2).sum().backward()
plan = gpureclaim.free_plan()
first = report(gpureclaim.free(plan[:1]))
rest = report(gpureclaim.free(plan[1:]))
emit(dict(steps=steps(plan), first=first, rest=rest, text=str(plan),
          html=plan._repr_html_(), cannot=[c.why for c in plan.cannot],
          left=torch.cuda.memory_allocated(), d=plan.to_dict()))
""")
    # del total frees iterations 1-5 (the 6th is loss's too) and total's
    # small segment; loss the 6th (and its own small block's segment);
    # lin and opt together the weight: bytes two steps hold count at the
    # later one
    assert r["steps"] == [
        ["del total", "run", 5 * ACT, 5 * ACT + 4],
        ["opt.zero_grad(set_to_none=True)", "run", W, W],
        ["del loss", "run", ACT + 2 * MiB, ACT + 4],
        ["del lin", "run", 0, 0],
        ["del opt", "run", W, W],
        ["del x", "run", ACT, ACT]]
    assert r["first"]["ran"] == ["del total"]
    assert r["first"]["promised"] == r["first"]["released"] == 5 * ACT
    assert r["rest"]["promised"] == r["rest"]["released"] == \
        2 * W + 2 * ACT + 2 * MiB
    assert r["left"] == 0 and r["cannot"] == []
    assert "del total" in r["text"] and "releasable" in r["text"]
    assert "total: the autograd graph of `total`" in r["text"]
    assert "<table" in r["html"]
    assert r["d"]["releasable"] == 2 * W + 7 * ACT + 2 * MiB


def test_what_no_step_frees_is_said_and_left_alone(scenario):
    r = scenario(SETUP + """
import ctypes, threading
ev, go = threading.Event(), threading.Event()
def fetch():
    batch = torch.randn(1024, 4096, device="cuda")  # 16 MiB
    go.set()
    ev.wait()
th = threading.Thread(target=fetch, name="loader")
th.start()
go.wait()
held = torch.randn(512, 4096, device="cuda")  # 8 MiB
ctypes.pythonapi.Py_IncRef(ctypes.py_object(held))  # an extension's
del held
t = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
torch._C._save_for_backward(t)  # C++ keeps its storage, no tensor
del t
plan = gpureclaim.free_plan()
rep = report(gpureclaim.free(plan))
ev.set()
th.join()
emit(dict(cannot=sorted([c.why, c.bytes] for c in plan.cannot),
          rep=rep, steps=steps(plan)))
""")
    assert r["cannot"] == sorted([
        ['a running frame fetch() (thread "loader") holds it until it '
         'returns', 16 * MiB],
        ["held from outside Python's heap (an extension or C++ refers to an "
         "object on the way)", 8 * MiB],
        ["held in C++ (no Python object views it: a tensor's .grad, the "
         "autograd graph, a saved tensor, an extension)", 4 * MiB]])
    assert [s[0] for s in r["steps"]] == ["del lin", "del x"]
    assert r["rep"]["promised"] == r["rep"]["released"] == W + ACT


def test_steps_outside_main_run_only_when_picked(scenario):
    r = scenario(SETUP + """
import types
mod = sys.modules["mymod"] = types.ModuleType("mymod")
mod.cache = torch.randn(1024, 4096, device="cuda")  # 16 MiB
class Cache:
    t = torch.randn(512, 4096, device="cuda")  # 8 MiB
del lin
plan = gpureclaim.free_plan()
whole = report(gpureclaim.free(plan))
picked = report(gpureclaim.free([s for s in plan if s.kind == "named"]))
emit(dict(steps=steps(plan), whole=whole, picked=picked,
          left=torch.cuda.memory_allocated(), mod=hasattr(mod, "cache")))
""")
    assert r["steps"] == [["del x", "run", ACT, ACT],
                          ["del mymod.cache", "named", 16 * MiB, 16 * MiB],
                          ["del Cache.t", "named", 8 * MiB, 8 * MiB]]
    assert r["whole"]["ran"] == ["del x"]
    assert r["whole"]["promised"] == r["whole"]["released"] == ACT
    assert [s for s, _ in r["whole"]["skipped"]] == ["del mymod.cache",
                                                     "del Cache.t"]
    assert r["whole"]["skipped"][0][1].startswith("outside __main__")
    assert r["picked"]["ran"] == ["del mymod.cache", "del Cache.t"]
    assert r["picked"]["released"] == 24 * MiB == r["picked"]["promised"]
    assert r["left"] == 0 and r["mod"] is False


def test_a_stale_plan_a_statement_and_a_cycle(scenario):
    r = scenario(SETUP + """
gc.disable()
class Node:
    pass
a, b = Node(), Node()
a.other, b.other = b, a
a.t = torch.randn(1024, 4096, device="cuda")  # 16 MiB, in a cycle
del a, b
y = z = torch.randn(512, 4096, device="cuda")  # 8 MiB, two names
plan = gpureclaim.free_plan()
del x  # the program goes on: the plan is stale
stale = report(gpureclaim.free(plan))
emit(dict(steps=steps(plan), stale=stale,
          again=report(gpureclaim.free("del lin")),
          left=torch.cuda.memory_allocated()))
""")
    assert r["steps"] == [["del lin", "run", W, W], ["del x", "run", ACT, ACT],
                          ["del y", "run", 0, 0],
                          ["del z", "run", 8 * MiB, 8 * MiB],
                          ["gc.collect()", "run", 16 * MiB, 16 * MiB]]
    s = r["stale"]
    assert s["ran"] == ["del lin", "del y", "del z", "gc.collect()"]
    assert s["skipped"] == [["del x", "not in the plan made now: it frees "
                             "nothing now"]]
    assert s["promised"] == s["released"] == W + 8 * MiB + 16 * MiB
    assert r["again"]["skipped"][0][0] == "del lin" and r["left"] == 0


def test_ipython_out_and_the_last_traceback_freed_with_one_call(scenario):
    pytest.importorskip("IPython")
    r = scenario("""
import torch
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance(colors="NoColor")
for cell in [
    "import torch, gpureclaim",
    "%load_ext gpureclaim",
    "torch.randn(2048, 4096, device='cuda')",  # shown: Out[3]
    "def train(batch):\\n    raise RuntimeError('loss is nan')",
    "train(torch.randn(1024, 4096, device='cuda'))",
    "plan = %gpureclaim free",
    "report = %gpureclaim free --yes",
    "%gpureclaim",
]:
    shell.run_cell(cell, store_history=True)
plan, rep = shell.user_ns["plan"], shell.user_ns["report"]
emit(dict(plan=[(s.statement, s.releasable) for s in plan],
          promised=rep.releasable, released=rep.released,
          errors=[s["error"] for s in rep.steps if s["error"]],
          left=torch.cuda.memory_allocated()))
""")
    stmts = [s for s, _ in r["plan"]]
    assert "%reset -f out" in stmts
    assert "sys.last_traceback = sys.last_value = sys.last_exc = None" in \
        stmts or "sys.last_traceback = sys.last_value = None" in stmts
    assert "get_ipython().InteractiveTB.tb = None" in stmts
    assert sum(b for _, b in r["plan"]) == ACT + 16 * MiB
    assert r["errors"] == []
    assert r["promised"] == r["released"] == ACT + 16 * MiB
    assert r["left"] == 0
