"""explain(holders=True) on the simulated driver with the fake frameworks
(Torch, CuPy, JAX): each kind of root is named as a user types it, views of one storage are
one allocation with every name, a cycle and a C++ holder are told apart,
the budget cuts the walk and says so; and every piece of advice, followed
(the chains' statements run, the traceback cleared, the thread ended),
frees the bytes."""
import pytest

from conftest import SANITIZED

MiB = 1 << 20

HELPERS = """
import torch

def holders(**kw):
    e = gpureclaim.explain(holders=True, **kw)
    return e, e.holders["blocks"]

def chains(blocks, nbytes):
    (b,) = [b for b in blocks if b["bytes"] == nbytes]
    return b, [c["path"] for c in b["chains"]]

DONE = []

def follow(b, ns):
    # the advice: each statement its chains give (those a statement that
    # empties a container covers need none), each run once
    out = []
    for c in b["chains"]:
        if c["drop"] and not c["covered"] and c["drop"] not in DONE:
            exec(c["drop"], ns)
            DONE.append(c["drop"])
            out.append(c["drop"])
    return out
"""


def run(scenario, code, **kw):
    return scenario(HELPERS + code, **kw)


def test_globals_views_and_nested_containers(scenario):
    r = run(scenario, """
import cupy
t = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
v = t.view(-1)
lst = [0, {"k": torch.empty(16 << 20, dtype=torch.uint8, device="cuda")}]
a = cupy.empty(8 << 20, dtype=cupy.uint8)
av = a.view()
e, blocks = holders()
out = {}
for n in (64 << 20, 16 << 20):
    b, paths = chains(blocks, n)
    out[n] = dict(paths=paths, arrays=b["arrays"], state=b["state"],
                  advice=b["advice"], drops=follow(b, globals()))
(cb,) = [b for b in blocks if b["framework"] == "cupy"]
out["cupy"] = dict(paths=[c["path"] for c in cb["chains"]],
                   arrays=cb["arrays"], drops=follow(cb, globals()))
gc.collect()
emit(dict(out=out, torch_after=torch.cuda.memory_allocated(),
          cupy_after=cupy.get_default_memory_pool().used_bytes(),
          walk=e.holders["walk"], text=str(e),
          keys=sorted(e.to_dict()["holders"])))
""")
    out = r["out"]
    big = out[str(64 * MiB)]
    # a view of the storage: one allocation, both names, counted once
    assert big["arrays"] == 2 and sorted(big["paths"]) == ["t", "v"]
    assert big["state"] == "held" and big["advice"] == "del t; del v"
    assert out[str(16 * MiB)]["paths"] == ["lst[1]['k']"]
    assert out[str(16 * MiB)]["drops"] == ["del lst"]
    assert out["cupy"]["arrays"] == 2
    assert sorted(out["cupy"]["paths"]) == ["a", "av"]
    # the advice followed: the bytes are gone
    assert r["torch_after"] == 0 and r["cupy_after"] == 0
    w = r["walk"]
    assert w["stopped"] is None and w["examined"] == w["objects"] > 1000
    assert r["keys"] == ["blocks", "graphs", "notes", "walk"]
    assert "Who holds the largest live allocations" in r["text"]
    assert "lst[1]['k']" in r["text"]
    assert "2 arrays share it" in r["text"]


def test_jax_arrays(scenario):
    r = run(scenario, """
import jax
x = jax.device_array(64 << 20)
keep = {"x": x}
gone = jax.device_array(16 << 20)
gone.delete()  # a deleted array holds nothing
e, blocks = holders()
(b,) = [b for b in blocks if b["framework"] == "jax"]
paths = sorted(c["path"] for c in b["chains"])
drops = follow(b, globals())
emit(dict(paths=paths, bytes=b["bytes"], drops=drops,
          after=jax.devices()[0].memory_stats()["bytes_in_use"]))
""")
    assert r["paths"] == ["keep['x']", "x"] and r["bytes"] == 64 * MiB
    assert sorted(r["drops"]) == ["del keep", "del x"]
    assert r["after"] == 0


MODULES = """
class Module:
    # as torch.nn.Module: parameters and submodules in dicts that
    # __getattr__ reads (the chain is named as the user types it)
    def __init__(self):
        self.__dict__["_parameters"] = {}
        self.__dict__["_modules"] = {}
    def __getattr__(self, k):
        for d in ("_parameters", "_modules"):
            if k in self.__dict__[d]:
                return self.__dict__[d][k]
        raise AttributeError(k)
class Linear(Module):
    def __init__(self, n):
        super().__init__()
        self._parameters["weight"] = torch.empty(n, dtype=torch.uint8, device="cuda")
class ModuleList(Module):
    def __init__(self, mods):
        super().__init__()
        for i, m in enumerate(mods):
            self._modules[str(i)] = m
    def __getitem__(self, i):
        return self._modules[str(i)]
class MLP(Module):
    def __init__(self, n):
        super().__init__()
        self._modules["up_proj"] = Linear(n)
class Layer(Module):
    def __init__(self, n):
        super().__init__()
        self._modules["mlp"] = MLP(n)
class Net(Module):
    def __init__(self):
        super().__init__()
        self._modules["layers"] = ModuleList(
            [Layer((i + 1) << 20) for i in range(4)])
class AdamW:
    def __init__(self, params):
        self.param_groups = [{"params": list(params)}]
        self.state = {}
        for p in params:
            self.state[p] = {"exp_avg": torch.empty(p.nbytes * 8, dtype=torch.uint8,
                                                    device="cuda"),
                             "step": 1}
"""


def test_module_tree_and_optimizer_state(scenario):
    r = run(scenario, MODULES + """
model = Net()
opt = AdamW([model.layers[3].mlp.up_proj.weight])
e, blocks = holders()
w, wpaths = chains(blocks, 4 << 20)
s, spaths = chains(blocks, 32 << 20)
_, l0 = chains(blocks, 1 << 20)
drops = follow(w, globals()) + follow(s, globals())
gc.collect()
emit(dict(wpaths=wpaths, spaths=spaths, l0=l0, drops=drops,
          advice=w["advice"], after=torch.cuda.memory_allocated()))
""")
    assert r["l0"] == ["model.layers[0].mlp.up_proj.weight"]
    # the weight the optimizer holds: both roots, each by its own name
    assert "model.layers[3].mlp.up_proj.weight" in r["wpaths"]
    assert any(p.startswith("opt.") for p in r["wpaths"]), r["wpaths"]
    assert r["spaths"] == ["opt.state[...]['exp_avg']"]
    assert set(r["drops"]) == {"del model", "del opt"}
    assert r["after"] == 0


def test_last_traceback_frames(scenario):
    r = run(scenario, """
def train(batch):
    raise RuntimeError("out of patience")
try:
    train(torch.empty(8 << 20, dtype=torch.uint8, device="cuda"))
except RuntimeError:
    sys.last_type, sys.last_value, sys.last_traceback = sys.exc_info()
e, blocks = holders()
b, paths = chains(blocks, 8 << 20)
drops = follow(b, globals())
gc.collect()
emit(dict(paths=paths, drops=drops, after=torch.cuda.memory_allocated(),
          last_exc=sys.version_info >= (3, 12)))
""")
    assert sorted(r["paths"]) == [
        "sys.last_traceback: frame train() local 'batch'",
        "sys.last_value.__traceback__: frame train() local 'batch'"]
    assert r["drops"] == [
        "sys.last_traceback = sys.last_value = sys.last_exc = None"
        if r["last_exc"] else "sys.last_traceback = sys.last_value = None"]
    assert r["after"] == 0


def test_a_threads_running_frame(scenario):
    r = run(scenario, """
import threading
ev, go = threading.Event(), threading.Event()
def fetch():
    x = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
    go.set()
    ev.wait()
th = threading.Thread(target=fetch, name="loader")
th.start()
go.wait()
e, blocks = holders()
b, paths = chains(blocks, 8 << 20)
ev.set()
th.join()
after_thread = torch.cuda.memory_allocated()
# a function's local, named while it runs, freed by its del: the walk's
# copy of the locals does not keep it
def step():
    y = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
    _, bl = holders()
    named = chains(bl, 4 << 20)[1]
    del y
    return named, torch.cuda.memory_allocated()
named, after_del = step()
emit(dict(paths=paths, advice=b["advice"], after_thread=after_thread,
          named=named, after_del=after_del))
""")
    assert r["paths"] == ["thread \"loader\": frame fetch() local 'x'"]
    assert r["advice"] == "a running frame fetch() holds it until it returns"
    assert r["after_thread"] == 0
    assert r["named"] == ["thread \"MainThread\": frame step() local 'y'"]
    assert r["after_del"] == 0


def test_closure_cell_and_class_attribute(scenario):
    r = run(scenario, """
def make():
    x = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
    def f():
        return x
    return f
fn = make()
class Cache:
    t = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
e, blocks = holders()
b1, p1 = chains(blocks, 8 << 20)
b2, p2 = chains(blocks, 4 << 20)
drops = follow(b1, globals()) + follow(b2, globals())
gc.collect()
emit(dict(p1=p1, p2=p2, drops=drops, after=torch.cuda.memory_allocated()))
""")
    assert r["p1"] == ["fn.__closure__[0].cell_contents (closure variable "
                       "'x')"]
    assert r["p2"] == ["Cache.t"]
    assert r["drops"] == ["del fn", "del Cache.t"]
    assert r["after"] == 0


def test_ipython_output_cache(scenario):
    pytest.importorskip("IPython")
    r = run(scenario, """
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_cell("import torch, gpureclaim", store_history=True)
shell.run_cell("torch.empty(16 << 20, dtype=torch.uint8, device='cuda')", store_history=True)
shell.run_cell("1 + 1", store_history=True)
shell.run_cell("e = gpureclaim.explain(holders=True)", store_history=True)
e = shell.user_ns.pop("e")
(b,) = e.holders["blocks"]
paths = [c["path"] for c in b["chains"]]
advice = b["advice"]
del e
# the advice, typed into the shell as it reads
shell.run_cell(advice.replace("; ", "\\n"), store_history=True)
gc.collect()
emit(dict(paths=paths, advice=advice, after=torch.cuda.memory_allocated()))
""")
    assert "Out[2]" in r["paths"] and "_2" in r["paths"], r["paths"]
    assert "%reset -f out" in r["advice"]
    assert r["after"] == 0, r["advice"]


def test_a_cycle_is_unreachable(scenario):
    r = run(scenario, """
gc.disable()
class Node:
    pass
a, b = Node(), Node()
a.other, b.other = b, a
b.t = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
selfish = [torch.empty(4 << 20, dtype=torch.uint8, device="cuda")]
selfish.append(selfish)  # a list that holds itself
del a, b, selfish
e, blocks = holders()
(blk, own) = blocks
gc.collect()
emit(dict(state=blk["state"], chains=blk["chains"], advice=blk["advice"],
          own=own["state"], text=str(e), after=torch.cuda.memory_allocated()))
""")
    assert r["state"] == "garbage" and r["chains"] == []
    assert r["own"] == "garbage"
    assert r["advice"] == "gc.collect() frees it"
    assert "unreachable: in a reference cycle (gc.collect() frees it)" in \
        r["text"]
    assert r["after"] == 0


def test_held_only_in_cpp(scenario):
    r = run(scenario, """
import ctypes
t = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
torch._C._save_for_backward(t)  # autograd's saved tensor, as a stand-in
del t
u = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
ctypes.pythonapi.Py_IncRef(ctypes.py_object(u))  # an extension's reference
del u
e, blocks = holders()
emit(dict(states={b["bytes"]: (b["state"], b["arrays"]) for b in blocks},
          text=str(e)))
""")
    assert r["states"] == {str(8 * MiB): ["cpp", 0], str(4 * MiB): ["cpp", 1]}
    assert ("no Python reference: held in C++ (a tensor's .grad, the "
            "autograd graph, a saved tensor, an extension)") in r["text"]


def test_the_budget_cuts_the_walk_and_says_where(scenario):
    r = run(scenario, """
keep = [torch.empty(2 << 20, dtype=torch.uint8, device="cuda") for _ in range(3)]
e1, b1 = holders(holders_max_objects=1024)
e2, b2 = holders(holders_budget=1e-9)
e3, b3 = holders()
emit(dict(w1=e1.holders["walk"], s1=[b["state"] for b in b1],
          w2=e2.holders["walk"], s2=[b["state"] for b in b2],
          s3=[b["state"] for b in b3], text=str(e1)))
""")
    w1, w2 = r["w1"], r["w2"]
    assert w1["stopped"] == "objects" and w1["examined"] == 1024
    assert w1["objects"] > 1024
    assert w2["stopped"] == "time" and w2["examined"] < w2["objects"]
    assert set(r["s2"]) == {"unknown"}
    assert "stopped by its object budget after 1024 of" in r["text"]
    assert r["s3"] == ["held"] * 3


def test_the_walks_threads_make_the_graph_one_thread_makes(scenario):
    """The pass in threads (objects whose traverse is CPython's own read
    there, classes marked once they are done, every other type's objects
    traversed here after: a generator's frame, itertools' and
    functools' C objects) gives the graph and the arrays one thread
    gives, every object traversed."""
    r = run(scenario, """
import collections, functools, itertools
from gpureclaim import _gpureclaim as _c
from gpureclaim._explain import _holders as H
class Holder:
    cache = torch.empty(2 << 20, dtype=torch.uint8, device="cuda")
def make():
    x = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    return lambda: x
fn = make()
def gen():
    y = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    yield y
g = gen()
next(g)
chain = itertools.chain([torch.empty(1 << 20, dtype=torch.uint8, device="cuda")])
dq = collections.deque([{"t": torch.empty(1 << 20, dtype=torch.uint8, device="cuda")}])
part = functools.partial(print, torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
cached = functools.lru_cache()(lambda k: k)
cached(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
pad = [[i] for i in range(150000)]  # past 64k objects: threads
roots, frames, skips, cleared = H._roots([])
objs = gc.get_objects() + frames
arrays = _c._of_types(objs, (torch.Tensor,), 1)
arrays4 = _c._of_types(objs, (torch.Tensor,), 4)
same_arrays = [id(a) for a in arrays] == [id(a) for a in arrays4]
del arrays4
stops = [x[1] if type(x) is tuple else x.obj for x in roots.values()]
out = []
for th in (1, 4, 3):
    heap, _, examined, total, stopped, ms = _c._heap(
        objs, stops, skips, 600.0, len(objs), (), th)
    graph, ms = _c._climb(heap, arrays)
    del heap
    out.append(({k: (v[0], sorted(map(id, v[1]))) for k, v in graph.items()},
                examined, total, stopped))
    del graph
for loc in cleared:
    dict.clear(loc)
emit(dict(same_arrays=same_arrays, arrays=len(arrays), objects=len(objs),
          reached=len(out[0][0]), same=[o[0] == out[0][0] for o in out],
          complete=[o[1] == o[2] == len(objs) for o in out],
          stopped=[o[3] for o in out]))
""")
    assert r["same_arrays"] and r["arrays"] >= 7
    assert r["objects"] > 150000 and r["reached"] > r["arrays"]
    assert r["same"] == [True, True, True]
    assert r["complete"] == [True, True, True]
    assert r["stopped"] == [None, None, None]


def test_a_hook_with_types_reads_only_those_objects(scenario):
    """Holders.types given, arrays() gets only the objects of those
    classes, picked out by the pass; left out, every object: the same
    chains either way."""
    r = run(scenario, """
import dataclasses
from gpureclaim.frameworks import TABLE
t = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
(fw,) = [f for f in TABLE if f.name == "torch"]
seen = []
h0 = fw.holders
def spy(call, objs):
    seen.append(len(objs))
    return h0.arrays(call, objs)
paths = []
for types in (h0.types, None):
    object.__setattr__(fw, "holders",
                       dataclasses.replace(h0, arrays=spy, types=types))
    e, blocks = holders()
    paths.append(chains(blocks, 8 << 20)[1])
object.__setattr__(fw, "holders", h0)
emit(dict(seen=seen, paths=paths, objects=e.holders["walk"]["objects"]))
""")
    assert r["paths"] == [["t"], ["t"]]
    few, every = r["seen"]
    assert 1 <= few < 50
    assert every == r["objects"] > 1000


def test_the_walk_runs_no_user_code(scenario):
    r = run(scenario, """
calls = []
class Trap:
    def __eq__(self, o): calls.append("eq"); return False
    def __hash__(self): calls.append("hash"); return 1
    def __getattr__(self, k): calls.append("getattr " + k); raise AttributeError(k)
    def __getattribute__(self, k):
        if k != "__dict__":
            calls.append("getattribute " + k)
        return object.__getattribute__(self, k)
    @property
    def __class__(self): calls.append("class"); return Trap
    @property
    def prop(self): calls.append("prop"); return 1
class Slotted:
    __slots__ = ("held",)
trap = Trap()
object.__setattr__(trap, "inner", {Trap(): torch.empty(8 << 20, dtype=torch.uint8, device="cuda")})
s = Slotted()
s.held = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
class Lazy:  # a module stand-in whose every attribute is computed
    def __getattr__(self, k): calls.append("lazy " + k); raise AttributeError(k)
sys.modules["lazy_stand_in"] = Lazy()
calls.clear()
e, blocks = holders()
emit(dict(calls=calls, p1=chains(blocks, 8 << 20)[1],
          p2=chains(blocks, 4 << 20)[1]))
""")
    assert r["calls"] == []
    assert r["p1"] == ["trap.inner[...]"]
    assert r["p2"] == ["s.held"]


def test_arguments_and_the_command_line(scenario, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\n"
                      "weights = {'w': torch.empty(8 << 20, dtype=torch.uint8, device='cuda')}\n"
                      "def train(batch):\n"
                      "    raise ValueError('diverged')\n"
                      "train(torch.empty(4 << 20, dtype=torch.uint8, device='cuda'))\n")
    r = run(scenario, f"""
import subprocess
errors = []
for kw in (dict(holders="yes"), dict(holders=True, holders_budget=0),
           dict(holders=True, holders_max_objects=-1)):
    try:
        gpureclaim.explain(**kw)
    except (TypeError, ValueError) as x:
        errors.append(type(x).__name__ + ": " + str(x))
p = subprocess.run([sys.executable, "-m", "gpureclaim", "explain",
                    "--holders", {str(script)!r}], capture_output=True,
                   text=True)
h = subprocess.run([sys.executable, "-m", "gpureclaim", "explain", "--help"],
                   capture_output=True, text=True)
e = gpureclaim.explain()
emit(dict(errors=errors, rc=p.returncode, out=p.stdout, err=p.stderr,
          help=h.stdout, plain=e.holders, html=gpureclaim.explain(
              holders=True)._repr_html_()))
""")
    assert len(r["errors"]) == 3
    assert r["errors"][0].startswith("TypeError: explain(): holders must be")
    assert "holders_budget must be a positive" in r["errors"][1]
    assert r["rc"] == 1, r["err"]
    assert "weights['w']" in r["out"]
    assert "sys.last_traceback: frame train() local 'batch'" in r["out"]
    assert "--holders" in r["help"]
    assert r["plain"] is None
    assert "Who holds the largest live allocations" in r["html"]


def test_the_walk_leaks_nothing(scenario):
    if SANITIZED:
        pytest.skip("ASan's quarantine of freed memory grows the RSS")
    r = run(scenario, """
t = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
for _ in range(20):
    gpureclaim.explain(holders=True)
gc.collect()
before = rss_bytes()
for _ in range(200):
    e = gpureclaim.explain(holders=True)
gc.collect()
emit(dict(grew=rss_bytes() - before, objects=len(gc.get_objects()),
          paths=[c["path"] for c in e.holders["blocks"][0]["chains"]]))
""")
    assert r["paths"] == ["t"]
    assert r["grew"] < 4 * MiB, r


def test_keys_that_are_not_strings_run_no_code(scenario):
    """Issue 34, finding 9: a key of another type in a global namespace or
    an instance's __dict__, beside the array: naming the edge hashed it
    (its __hash__, then its __eq__, ran: raising, they made explain()
    raise, "explain failed: RuntimeError" through the agent)."""
    r = run(scenario, """
class Evil:
    armed = False
    def __hash__(self):
        if Evil.armed:
            raise RuntimeError("__hash__ ran")
        return 7
    def __eq__(self, o):
        if Evil.armed:
            raise RuntimeError("__eq__ ran")
        return self is o
class Box:
    pass
box = Box()
box.__dict__[Evil()] = {"inner": torch.empty(8 << 20, dtype=torch.uint8, device="cuda")}
globals()[Evil()] = {"inner": torch.empty(4 << 20, dtype=torch.uint8, device="cuda")}
Evil.armed = True
try:
    e, blocks = holders()
    b1, p1 = chains(blocks, 8 << 20)
    b2, p2 = chains(blocks, 4 << 20)
    emit(dict(p1=p1, p2=p2, s1=b1["state"], s2=b2["state"]))
except Exception as x:
    emit(dict(raised=f"{type(x).__name__}: {x}"))
""")
    assert "raised" not in r.data, r["raised"]
    assert r["s1"] == r["s2"] == "held"
    assert r["p1"] == ["box[...]['inner']"], r["p1"]
    assert r["p2"] == ["[...]['inner']"], r["p2"]


def test_a_dict_growing_in_another_thread_never_fails_the_walk(scenario):
    """Issue 34, finding 10: a thread adds to a dict that holds an array
    while explain(holders=True) names the chains: 30 of 30 walks raised
    "dictionary changed size during iteration". The walk reads each
    dict's entries at once, in C."""
    r = run(scenario, """
import threading
sys.setswitchinterval(1e-6)
t = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
grown = {"t": t}
class Box:
    pass
box = Box()
box.t = t
stop = []
def grow():
    i = 0
    while not stop:
        grown[i] = i
        box.__dict__[f"a{i % 5000}"] = i
        i += 1
        if i % 20000 == 0:
            for k in range(i - 20000, i):
                del grown[k]
th = threading.Thread(target=grow)
th.start()
failed = []
try:
    for _ in range(30):
        try:
            e, blocks = holders()
            chains(blocks, 8 << 20)
        except Exception as x:
            failed.append(f"{type(x).__name__}: {x}")
finally:
    stop.append(1)
    th.join()
emit(dict(failed=failed))
""", timeout=300)
    assert r["failed"] == [], r["failed"][:3]
