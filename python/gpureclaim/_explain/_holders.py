"""explain(holders=True): who keeps the largest live blocks alive, by the
names a user would type (docs/explain.md, "Who holds it").

For each framework with a holders hook (frameworks/, ``Holders``: what an
array is, the allocation it views and its size), the ten largest
allocations per GPU that arrays view (views of one allocation counted
once) and the framework's live blocks that no array views. Then one walk
of the heap, generic: the roots are collected (every module's namespace,
IPython's user namespace and shell, each running frame's locals, every
class; a traceback's frames are climbed past, to what holds the
traceback), ``gc.get_objects()`` is read, and the
C extension (``_gpureclaim._heap`` and ``_climb``, python/src/referrers.c) climbs
from the arrays to the roots over tp_traverse edges, within a budget of
time and objects. Here the climb is read back, breadth first, into the
shortest chain from each root: each edge is named by looking, never by
calling (a dict's items, a list's index, an instance's own ``__dict__``,
a slot's descriptor, a frame's locals), so no user code runs.

An allocation whose arrays no root reaches is "unreachable" when every
reference to every object above it comes from the heap (a reference
cycle: gc.collect() frees it), else held from C or C++; a live block no
array views is held in C++.
"""
from __future__ import annotations

import gc
import os
import re
import sys
import time
import types
from bisect import bisect_left
from collections import deque
from typing import Any, Callable, Optional

from .. import _gpureclaim as _c
from ..frameworks import TABLE
from ..frameworks._base import describe

TOP = 10  #: allocations named per framework and GPU
MAX_CHAINS = 12  #: chains kept per allocation (the advice follows them all)
MAX_NODES = 20000  #: nodes read back per allocation
DEFAULT_BUDGET_S = 1.0
_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_FrameType = types.FrameType
_MemberType = types.MemberDescriptorType
_EXC = {a: BaseException.__dict__[a].__get__
        for a in ("__traceback__", "__context__", "__cause__", "args")}
_GEN = {types.GeneratorType: ".gi_frame", types.CoroutineType: ".cr_frame",
        types.AsyncGeneratorType: ".ag_frame"}
_get_mro = type.__dict__["__mro__"].__get__
_get_qualname = type.__dict__["__qualname__"].__get__
_get_module = type.__dict__["__module__"].__get__
_CO_OPTIMIZED = 1  # a function's frame: f_locals is a copy


def _items(d: Any) -> list:
    """A mapping's (key, value) pairs: a dict's (a subclass's too) read at
    once in C (_dict_items: nothing hashed, no user code, and another
    thread adding to it cannot make the walk fail); a class's read-only
    proxy (a static type's namespace) through its own items()."""
    if d is None:
        return []
    if issubclass(type(d), dict):
        return _c._dict_items(d)
    return list(d.items())


def _get(d: Any, name: str) -> Any:
    """d[name] for a string name, comparing only keys that are strings
    (a lookup would hash the name and could call another key's __eq__)."""
    for k, v in _items(d):
        if type(k) is str and k == name:
            return v
    return None


class _Root:
    """A root: what the chain starts with. kind "namespace" (a module's or
    IPython's globals: prefix "" for __main__), "locals" (a running
    frame's f_locals) and "frame" (that frame; label: the frame in words,
    with its thread), "class", "shell" (IPython's, prefix
    "get_ipython()")."""

    __slots__ = ("kind", "prefix", "label", "obj")

    def __init__(self, kind: str, prefix: str, label: str, obj: Any):
        self.kind, self.prefix, self.label, self.obj = kind, prefix, label, obj


def _ipython() -> tuple:
    """(IPython's shell, its user namespace) when one runs in this process
    (read from its class, never by importing IPython), else (None, None)."""
    mod = sys.modules.get("IPython.core.interactiveshell")
    d = _c._instance_dict(mod) if mod is not None else None
    cls = _get(d, "InteractiveShell")
    if not isinstance(cls, type):
        return None, None
    for k in _get_mro(cls):
        inst = _get(_c._instance_dict(k), "_instance")
        if inst is not None:
            ns = _get(_c._instance_dict(inst), "user_ns")
            return inst, ns if type(ns) is dict else None
    return None, None


def _thread_names() -> dict:
    th = sys.modules.get("threading")
    active = _get(_c._instance_dict(th), "_active") if th else None
    out = {}
    for tid, t in _items(active):
        name = _get(_c._instance_dict(t), "_name")
        out[tid] = name if isinstance(name, str) else str(tid)
    return out


def _ours(f: Any) -> bool:
    return f.f_code.co_filename.startswith(_PKG)


def _roots(namespaces: list) -> tuple:
    """(roots by id (each a _Root, or a module's (name, namespace)),
    objects to add to the walk, our own frames to skip,
    the locals copies to clear after it). namespaces: more globals, named
    as __main__'s (a script run by `gpureclaim explain`)."""
    roots: dict = {}

    def add(kind: str, prefix: str, label: str, obj: Any) -> None:
        if obj is not None and id(obj) not in roots:
            roots[id(obj)] = _Root(kind, prefix, label, obj)

    main = sys.modules.get("__main__")
    if main is not None:
        add("namespace", "", "__main__", _c._instance_dict(main))
    shell, ns = _ipython()
    if ns is not None:
        add("namespace", "", "IPython", ns)
    if shell is not None:
        # its caches (user_ns_hidden, the display hook) by one name
        add("shell", "get_ipython()", "IPython", shell)
    for ns in namespaces:
        add("namespace", "", "__main__", ns)
    # thousands of modules: each a (name, namespace) pair (read in C),
    # made a _Root only if a chain starts there (_root_of)
    _c._namespaces(sys.modules, roots)
    frames, skips, cleared = [], [], []
    names = _thread_names()
    for tid, f in sys._current_frames().items():
        who = f'thread "{names.get(tid, tid)}"'
        while f is not None:
            if _ours(f):
                skips.append(f)
            else:
                # a running frame's tp_traverse shows none of its locals:
                # its f_locals (a copy, for a function) is the root
                loc = f.f_locals
                if type(loc) is not dict:  # 3.13's proxy: a copy
                    loc = dict(loc)
                if id(loc) not in roots:
                    add("locals", "", f"{who}: {_frame_word(f)}", loc)
                    frames.append(loc)
                    if f.f_code.co_flags & _CO_OPTIMIZED:
                        cleared.append(loc)
                add("frame", "", f"{who}: {_frame_word(f)}", f)
            f = f.f_back
    seen = set()
    tbs = [getattr(sys, "last_traceback", None)]
    for name in ("last_value", "last_exc"):
        v = getattr(sys, name, None)
        if v is not None and issubclass(type(v), BaseException):
            tbs.append(_EXC["__traceback__"](v))
    for tb in tbs:
        while type(tb) is types.TracebackType and id(tb) not in seen:
            seen.add(id(tb))
            # the frames are no roots: the walk climbs on to whatever
            # holds them (sys.last_traceback, IPython's InteractiveTB.tb)
            f = tb.tb_frame
            if not f.f_code.co_flags & _CO_OPTIMIZED and \
                    type(f.f_globals) is dict:
                # a module's frame: its names are globals
                add("namespace", "", "__main__", f.f_globals)
            tb = tb.tb_next
    return roots, frames, skips, cleared


def _key(k: Any) -> str:
    if type(k) is str:
        return repr(k)
    if type(k) in (int, bool) or k is None:
        return repr(k)
    return "..."


def _empty_cell(c: Any) -> bool:
    try:
        c.cell_contents
    except ValueError:
        return True
    return False


def _frame_word(f: Any) -> str:
    return f"frame {f.f_code.co_name}()"


class _Namer:
    """Names the edge parent -> child as the text a user would type.
    overlay: {(id(parent), id(child)): [step]} of the edges the frameworks
    read outside the heap (Holders.graph), their steps tokens (_TOKEN);
    edge_names: ((classes, names(parent, child)), ...) of the frameworks
    whose own traverse shows edges the generic reading misses."""

    def __init__(self, attr_dicts: frozenset, overlay: Optional[dict] = None,
                 edge_names: tuple = ()):
        self.attr_dicts = attr_dicts
        self.overlay = overlay or {}
        self.edge_names = edge_names
        #: {id(object): words}: a chain through one of them says so
        #: (Holders.marks: an optimizer's parameter no model holds)
        self.marks: dict = {}

    def dict_step(self, d: dict, child: Any, attrs: Any) -> list:
        out = []
        for k, v in _items(d):
            if v is child:
                if attrs == "locals":
                    out.append(f" local {k!r}")
                elif attrs and type(k) is str and _IDENT.match(k):
                    out.append(f".{k}")
                elif attrs == "index" and type(k) is str and k.isdigit():
                    out.append(f"[{k}]")
                else:
                    out.append(f"[{_key(k)}]")
            if k is child:
                out.append(" (a key)")
        return out

    def steps(self, parent: Any, child: Any, mode: Any) -> tuple:
        """([names of the edge], mode of the child): mode True when the
        child is a dict read as attributes (an instance's __dict__),
        "index" when read as attributes with digit keys as indexes."""
        t = type(parent)
        names = self.overlay.get((id(parent), id(child)))
        if names:
            return names, False
        for classes, fn in self.edge_names:
            if any(c in classes for c in _get_mro(t)):
                try:
                    names = fn(parent, child)
                except Exception:
                    names = None
                if names:
                    return names, False
        if issubclass(t, dict):
            names = self.dict_step(parent, child, mode)
            if mode and type(child) is dict:
                for k, v in _items(parent):
                    if v is child and type(k) is str and \
                            k in self.attr_dicts:
                        return [""], "index"
            return names, False
        if t is list or t is tuple:
            return [f"[{i}]" for i, v in enumerate(parent) if v is child], \
                False
        if issubclass(t, (set, frozenset)):
            return [" (in a set)"], False
        if t is _FrameType:
            loc = parent.f_locals
            if loc is child:  # the locals a traceback's reader made
                return [""], "locals"
            if type(loc) is not dict:  # 3.13's FrameLocalsProxy
                loc = dict(loc)
            inner = (child.cell_contents if type(child) is types.CellType
                     and not _empty_cell(child) else child)
            names = [f" local {k!r}" for k, v in _items(loc)
                     if v is inner]
            return names or [" (a local)"], False
        if t is types.CellType:
            return [".cell_contents"], False
        if t is types.TracebackType:
            if parent.tb_frame is child:
                return [".tb_frame"], False
            return [".tb_next"], False
        if t is types.FunctionType:
            for a in ("__closure__", "__defaults__", "__kwdefaults__",
                      "__globals__"):
                if getattr(parent, a) is child:
                    return [f".{a}"], a == "__globals__"
        if t is types.MethodType:
            if parent.__self__ is child:
                return [".__self__"], False
            return [".__func__"], False
        if issubclass(t, BaseException):
            for a, get in _EXC.items():  # the base's, never a property
                if get(parent) is child:
                    return [f".{a}"], False
        if t in _GEN:
            return [_GEN[t]], False
        own = _c._instance_dict(parent)
        if own is not None:
            if own is child:
                return [""], True
            # its attributes, stored in the object itself (3.11's inline
            # values): the edge skips the dict
            for k, v in _items(own):
                if v is child and type(k) is str and k in self.attr_dicts:
                    return [""], "index"
            names = self.dict_step(own, child, True)
            if names:
                return names, False
        for k in _get_mro(t):
            for name, desc in _items(_c._instance_dict(k)):
                if type(desc) is _MemberType:
                    try:
                        if desc.__get__(parent, t) is child:
                            return [f".{name}"], False
                    except Exception:
                        pass
        return [f" (via a {_get_qualname(t)})"], False


# IPython's output cache, in its user namespace; %reset -f out clears it,
# its display hook's _, __, ___ too (not their copies in user_ns_hidden)
_IPY_CACHE = re.compile(r"(Out|_oh|_[0-9]+|_{1,3})(\[|\Z)")
_RESET_OUT = "%reset -f out"
_CLEAR_TB = ("sys.last_traceback = sys.last_value = sys.last_exc = None"
             if sys.version_info >= (3, 12) else
             "sys.last_traceback = sys.last_value = None")


def _root_text(r: _Root, first: str, tail: list, ipython: bool) -> tuple:
    """(the chain's beginning, the statement that drops the reference, the
    index in the chain's nodes of the container that statement empties
    for every chain through it, or None)."""
    if r.kind == "namespace":
        name = first[1:] if first.startswith(".") else first
        text = f"{r.prefix}{name}"
        if ipython and _IPY_CACHE.match(text):
            # Out, _N, _, __, ___ and the display hook's copies
            return text, _RESET_OUT, 0 if text[-1:] != "_" and \
                not text[1:].isdigit() else None
        if ipython and text.startswith("sys.displayhook"):
            return text, _RESET_OUT, 1
        if text in ("sys.last_traceback", "sys.last_value", "sys.last_exc"):
            return text, _CLEAR_TB, None
        return text, f"del {text}" if _IDENT.match(name) else "", None
    if r.kind == "shell":
        if tail[:1] == [".user_ns_hidden"] and len(tail) > 1 and \
                tail[1].startswith("["):
            return (r.prefix + first,
                    f"del {r.prefix}.user_ns_hidden{tail[1]}", None)
        if tail[:1] in ([".displayhook"], [".history_manager"]):
            return r.prefix + first, _RESET_OUT, None
        if tail[:2] == [".InteractiveTB", ".tb"]:  # the last traceback shown
            return r.prefix + first, f"{r.prefix}.InteractiveTB.tb = None", \
                None
        return r.prefix + first, "", None
    if r.kind == "class":
        cls = r.obj
        mod, qual = _get_module(cls), _get_qualname(cls)
        text = ("" if mod in ("__main__", "builtins") else f"{mod}.") + qual
        drop = f"del {text}{tail[0]}" if len(tail) == 1 and \
            tail[0].startswith(".") else ""
        return text + first, drop, None
    if r.kind == "locals":
        name = first[1:] if first.startswith(".") else first
        first = f" local {name!r}"
    text = f"{r.label}{first}"
    if r.label.startswith("sys.last_traceback"):
        return text, _CLEAR_TB, None
    return text, "", None


def _is_root(roots: dict, p: Any) -> bool:
    return id(p) in roots or issubclass(type(p), type)


def _root_of(roots: dict, p: Any) -> _Root:
    r = roots.get(id(p))
    if r is None:  # a class, named when first reached
        r = roots[id(p)] = _Root("class", "", "", p)
    elif type(r) is tuple:  # a module's namespace (_roots)
        r = roots[id(p)] = _Root("namespace", f"{r[0]}.", r[0], r[1])
    return r


def _chains(namer: _Namer, graph: dict, roots: dict, starts: list,
            ipython: bool, with_roots: bool = False) -> tuple:
    """(the shortest chain from each root to any of starts, an
    allocation's arrays; the state: "held", "garbage" when the climb
    reached no root and every node above has no reference from outside the
    heap, "cpp" when some has, "unknown" when the node cap cut it; for
    each chain that ends at a leaf's .grad the path to the leaf ("" when
    it reads as a graph), else None; with_roots: the chains' roots
    (_Root) too)."""
    # breadth first up the graph (C: through an autograd graph it reads
    # thousands of nodes): via {id(node): its child on the way down}
    via, found, outside, todo = _c._paths(graph, roots, list(starts),
                                          MAX_NODES, MAX_CHAINS * 4)
    out = []
    keys: set = set()
    for p, n in found:
        r = _root_of(roots, p)
        names, mode = namer.steps(p, n, r.kind in ("namespace", "locals"))
        # a container holding it under several keys gives a chain each
        tails: list = [[]]
        node, closure, said, nodes = n, None, "", [n]
        while True:
            child = via[id(node)]
            if child is None:
                break
            s, mode = namer.steps(node, child, mode)
            s = s or [" (?)"]
            if s[0] == ".tb_frame":  # a traceback's frames, by name
                s = [f": {_frame_word(child)}"]
                for t in tails:
                    while t and t[-1] == ".tb_next":
                        t.pop()
            if closure is not None and s[0].startswith("["):
                # fn.__closure__[i]: name the variable that cell is
                try:
                    var = closure[int(s[0][1:-1])]
                    said = f" (closure variable {var!r})"
                except (ValueError, IndexError):
                    pass
            closure = (node.__code__.co_freevars
                       if s[0] == ".__closure__" else None)
            tails = [t + [x] if x else t for t in tails for x in s][:4]
            node = child
            nodes.append(node)
        ids = {id(x) for x in nodes}
        if namer.marks:
            said += next((namer.marks[x] for x in ids if x in namer.marks),
                         "")
        for first in names:
            for tail in tails:
                text, drop, cover = _root_text(r, first, tail, ipython)
                path, grad = _render(text, tail)
                if path in keys:  # one chain a name
                    continue
                keys.add(path)
                out.append(({"path": path + said, "root": r.kind,
                             "drop": drop, "covered": False},
                            ids, id(nodes[cover]) if cover is not None
                            and cover < len(nodes) - 1 else None, grad, r))
    out.sort(key=lambda c: (len(c[0]["path"]), c[0]["path"]))
    out = out[:MAX_CHAINS]
    # a statement that empties a container frees what reaches the array
    # through it: those chains need no statement of their own
    for c, ids, mine, _, _ in out:
        c["covered"] = mine is None and any(
            cover in ids for _, _, cover, _, _ in out if cover is not None)
    state = ("held" if out else "unknown" if todo
             else "garbage" if outside == 0 else "cpp")
    res = ([c for c, *_ in out], state, [x[3] for x in out])
    return res + ([x[4] for x in out],) if with_roots else res


# The steps of the edges a framework keeps outside the heap (Holders.graph),
# as the namer gives them: a mark, the step as code (".grad_fn"), and for
# a node its name (AddBackward0)
_MARKS = {"grad_fn": "\x00G", "next": "\x00N", "saved": "\x00S",
          "grad": "\x00R"}
_ELIDE = 4  #: nodes of a graph's chain shown whole; more: the first, the last two


def _token(kind: str, step: str, label: str = "") -> str:
    return f"{_MARKS[kind]}{step}\x01{label}"


def _render(text: str, tail: list) -> tuple:
    """(the chain as it reads, the path to a leaf whose .grad it ends at
    or None). Through an autograd graph: "total: the autograd graph of
    `total` (AddBackward0 <- ... <- ReluBackward0._saved_result)"; else
    the steps as code."""
    out, owner, labels = text, None, []
    for s in tail:
        if s[:1] != "\x00":
            if labels:
                labels[-1] += s
            else:
                out += s
            continue
        step, _, label = s[2:].partition("\x01")
        mark = s[:2]
        if mark == _MARKS["grad_fn"] and not labels:
            owner, labels = out, [label]
        elif labels and mark == _MARKS["next"]:
            labels.append(label)
        elif labels:
            labels[-1] += step
        else:
            out += step
    grad = tail[-1][:2] == _MARKS["grad"] if tail else False
    if not labels:
        return out, out[:-len(".grad")] if grad else None
    if len(labels) > _ELIDE:
        labels = labels[:1] + ["..."] + labels[-2:]
    return (f"{owner}: the autograd graph of `{owner}` "
            f"({' <- '.join(labels)})"), "" if grad else None


#: what a block no chain reaches is held by, in words (its "why")
_STATES = {
    "garbage": "unreachable: in a reference cycle (gc.collect() frees it)",
    "cpp": "no Python reference: held in C++ ({cpp})",
    "unknown": "no root found within the walk's budget",
}


def _advice(state: str, chains: list, cpp: str) -> str:
    if state == "garbage":
        return "gc.collect() frees it"
    if state == "cpp":
        return (f"no Python name to delete: free what holds it in C++ "
                f"({cpp})")
    if state == "unknown":
        return "not found within the walk's budget: give it a larger one"
    drops = []
    for c in chains:
        if c["drop"] and not c["covered"] and c["drop"] not in drops:
            drops.append(c["drop"])
    frames = sorted({c["path"].split(": ")[1].split(" local")[0]
                     for c in chains if c["root"] == "locals"
                     and not c["covered"]})
    # %reset -f out last: it deletes some of user_ns_hidden's keys
    drops.sort(key=lambda d: d == _RESET_OUT)
    out = "; ".join(drops)
    if frames:
        out += ("; " if out else "") + (
            f"a running {', '.join(frames)} holds it until it returns")
    return out


def _hooks() -> list:
    """Each framework in use with a holders hook: (framework, hook, the
    classes of its arrays or None: the hook reads every object then)."""
    out = []
    for f in TABLE:
        h = f.holders
        if h is None or f.probe()[0] is None:
            continue
        types = None
        if h.types is not None:
            try:
                types = tuple(t for t in h.types() if isinstance(t, type))
            except Exception:
                types = None  # it reads every object, as without
        out.append((f, h, types))
    return out


def _arrays(call: Any, f: Any, h: Any, objs: list) -> tuple:
    """(framework, hook, arrays, blocks, odd) of one hook, odd the reason
    in words where it raised (arrays None)."""
    try:
        arrays, blocks, odd = h.arrays(call, objs)
    except Exception as e:
        return f, h, None, None, describe(e)
    return f, h, arrays, blocks, odd


def _group(found: list, targets: list, where: dict, notes: list) -> dict:
    """The allocations, from the hooks' arrays: (framework, device) ->
    (hook, {storage: [bytes, [indices in targets] or None (no array views
    it)]}). Every array ends up held in targets alone (the climb counts
    references): those of a hook with types are there already (where:
    id -> index), the others are added; found is emptied."""
    groups: dict = {}
    while found:
        f, h, arrays, blocks, odd = found.pop()
        if arrays is None:
            notes.append(f"{f.name}: arrays not read: {odd}")
            continue
        per = groups.setdefault(f.name, (h, {}))[1]
        _add_arrays(per, arrays, targets, where)
        if odd:
            notes.append(f"{f.name}: {odd} array(s) skipped: asking them "
                         f"for their memory raised")
        starts: dict = {}  # device -> the storages' addresses, sorted
        for dev, addr, size in blocks or ():
            d = per.setdefault(dev, {})
            at = starts.get(dev)
            if at is None:
                at = starts[dev] = sorted(d)
            k = bisect_left(at, addr)
            if k == len(at) or at[k] >= addr + size:
                d[addr] = [size, None]  # no array views it
    return {(fw, dev): (h, d) for fw, (h, per) in groups.items()
            for dev, d in per.items()}


def _add_arrays(per: dict, arrays: list, targets: list, where: dict) -> None:
    """Adds (array, device, storage, bytes) entries to per: {device:
    {storage: [bytes, [indices]]}}, arrays emptied."""
    while arrays:
        a, dev, ptr, n = arrays.pop()
        i = where.get(id(a))
        if i is None:
            i = where[id(a)] = len(targets)
            targets.append(a)
        g = per.setdefault(dev, {}).setdefault(ptr, [n, []])
        if g[1] is None:  # a block no array was seen to view, till now
            g[1] = []
        g[1].append(i)


def walk(call: Any, budget_s: float = DEFAULT_BUDGET_S,
         max_objects: Optional[int] = None,
         namespaces: tuple = (), planner: Optional[Callable] = None,
         top: int = TOP) -> dict:
    """The "holders" entry of explain()'s raw dict: the walk stops after
    budget_s seconds (of which gc.get_objects() takes its share) or
    max_objects objects (None: all).

    The hooks that say their arrays' classes (Holders.types) get only
    the objects of those classes, picked out by the C pass itself (one
    read of each object, not one more per framework); the others read
    every object before the pass. The climb starts at every object of
    those classes (Torch's CPU tensors too: their autograd graphs hold GPU
    tensors) and at the others' arrays; then the frameworks' graphs
    (Holders.graph) add the edges they keep outside the heap.

    planner(walked) -> dict, given, runs on what the walk found before
    its references are dropped (free_plan(): gpureclaim/_explain/_free.py); its
    answer is the entry's "plan". top: allocations named per framework
    and GPU."""
    t0 = time.perf_counter()
    # no collection while it walks: one would run finalizers (user code)
    # and cost more than the walk (a full one of 450k objects, 30 ms and
    # more, in whichever phase allocated last); it comes after instead
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _walk(call, budget_s, max_objects, namespaces, t0, planner,
                     top)
    finally:
        if collecting:
            gc.enable()


class Walked:
    """What the walk found, for a planner: graph {id: (ext, parents)}
    (the climb's, the frameworks' graphs merged in), roots, targets (the
    arrays and the objects climbed from), groups (as _group gives them),
    the namer of each framework (namers) and ipython (a shell runs),
    overlay {id(child): [child, (parent, kind, step), ...]} of the
    frameworks' graphs,
    stopped (None, or why the walk was cut), call, hooks (as _hooks
    gives them), graphs (the summaries of the autograd graphs)."""

    __slots__ = ("graph", "roots", "targets", "groups", "namers", "ipython",
                 "overlay", "stopped", "call", "hooks", "graphs")

    def __init__(self, **kw: Any):
        for k, v in kw.items():
            setattr(self, k, v)


def _walk(call: Any, budget_s: float, max_objects: Optional[int],
          namespaces: tuple, t0: float, planner: Optional[Callable],
          top: int) -> dict:
    roots, frames, skips, cleared = _roots(list(namespaces))
    t1 = time.perf_counter()
    objs = gc.get_objects()
    objs.extend(frames)
    t2 = time.perf_counter()
    hooks = _hooks()
    found = [_arrays(call, f, h, objs) for f, h, types in hooks
             if types is None]
    typed = [(f, h, types) for f, h, types in hooks if types is not None]
    # every class is a root too (the C walk stops at each): a _Root is made
    # only for one a chain starts at (_root_of)
    stops = [r[1] if type(r) is tuple else r.obj for r in roots.values()]
    t3 = time.perf_counter()
    left = budget_s - (t3 - t0)
    most = max_objects if max_objects is not None else len(objs)
    nroots, graph = len(roots), {}
    targets: list = []
    where: dict = {}
    spans: dict = {}
    notes: list = []
    overlays: list = []
    out: dict = {}
    try:
        heap, picked, examined, total, stopped, ms_c = _c._heap(
            objs, stops, skips, max(left, 0.0), most,
            tuple(t for _, _, t in typed))
        t4 = time.perf_counter()
        for (f, h, _), of_types in zip(typed, picked):
            lo = len(targets)
            targets += of_types
            spans[f.name] = (lo, len(targets))
            found.append(_arrays(call, f, h, of_types))
        of_types = picked = None  # only targets may hold the arrays
        # (a loop variable would hold the last one: the climb counts it)
        where.update((id(a), i) for i, a in enumerate(targets))
        groups = _group(found, targets, where, notes)
        t5 = time.perf_counter()
        graph, ms_climb = _c._climb(heap, targets)
        del objs, heap
        t6 = time.perf_counter()
        ms_walk = (t6 - t0) * 1e3
        overlay, names, labels, edge_names = _graphs(
            call, hooks, spans, targets, groups, where, graph, overlays,
            notes, budget_s - (t6 - t0))
        t7 = time.perf_counter()
        blocks, graphs = _name(groups, graph, roots, targets, stopped,
                               names, edge_names, overlay, labels, top)
        for f, h, _ in hooks:  # what the walk cannot follow, where it matters
            if h.cannot and any(b["framework"] == f.name and
                                b["state"] == "cpp" for b in blocks):
                notes.append(f"{f.name}: {h.cannot}")
        reached = len(graph)
        t8 = time.perf_counter()
        phases = {"roots": (t1 - t0) * 1e3, "objects": (t2 - t1) * 1e3,
                  "arrays": (t3 - t2 + t5 - t4) * 1e3, "index": ms_c[0],
                  "pass": ms_c[1], "climb": ms_climb[0],
                  "graph": ms_climb[1], "autograd": (t7 - t6) * 1e3,
                  "names": (t8 - t7) * 1e3}
        if planner is not None:
            out["plan"] = planner(Walked(
                graph=graph, roots=roots, targets=targets, groups=groups,
                namers=_namers(groups, names, edge_names),
                ipython=_has_shell(roots), overlay=overlay,
                stopped=stopped, call=call, hooks=hooks, graphs=graphs))
            phases["plan"] = (time.perf_counter() - t8) * 1e3
    finally:
        # the copies of the running functions' locals that _roots made:
        # left filled, they would hold the arrays after a del
        for loc in cleared:
            dict.clear(loc)
        # our own frames (skips) hold these lists: a cycle that would keep
        # every frame named, and its locals, until the next collection
        for x in (skips, frames, stops, cleared, targets, overlays):
            x.clear()
        roots.clear()
        graph.clear()
        where.clear()
    out.update({"blocks": blocks, "graphs": graphs, "notes": notes,
                "walk": {"objects": total, "examined": examined,
                         "stopped": stopped, "budget_s": budget_s,
                         "max_objects": max_objects, "roots": nroots,
                         "reached": reached, "walk_ms": ms_walk,
                         "ms": (time.perf_counter() - t0) * 1e3,
                         "phases_ms": phases}})
    return out


def _graphs(call: Any, hooks: list, spans: dict, targets: list,
            groups: dict, where: dict, graph: dict, overlays: list,
            notes: list, left: float) -> tuple:
    """The frameworks' graphs (Holders.graph) merged into the climb's:
    each child gets its parents there, its references from outside the
    heap counted as explained (ext 0), and the GPU arrays found there join
    their allocations. (overlay {id(child): [child, (parent, kind, step),
    ...]}, the steps' names {(id(parent), id(child)): [token]}, the nodes'
    labels, the frameworks' edge namers)."""
    overlay: dict = {}
    names: dict = {}
    labels: dict = {}
    edge_names: dict = {}
    for f, h, types in hooks:
        if h.edge_names is not None and types:
            edge_names[f.name] = ((frozenset(types), h.edge_names),)
        if h.graph is None or f.name not in spans:
            continue
        lo, hi = spans[f.name]
        try:
            ov = h.graph(call, targets[lo:hi], left)
        except Exception as e:
            notes.append(f"{f.name}: its graph was not read: {describe(e)}")
            continue
        if ov is None:
            continue
        overlays.append(ov)
        notes += ov.notes
        for why, n in ov.unread.items():
            notes.append(f"{f.name}: {n} saved value(s) of the autograd "
                         f"graph not read: " + _UNREAD.get(why, why))
        labels.update(ov.labels)
        for p, c, step, kind in ov.edges:
            e = overlay.get(id(c))
            if e is None:
                e = overlay[id(c)] = [c]
            e.append((p, kind, step))
            names.setdefault((id(p), id(c)), []).append(
                _token(kind, step, ov.labels.get(id(c), "")))
        per: dict = {}
        _add_arrays(per, list(ov.arrays), targets, where)
        for dev, d in per.items():
            g = groups.setdefault((f.name, dev), (h, {}))[1]
            for ptr, (n, idx) in d.items():
                had = g.setdefault(ptr, [n, []])
                if had[1] is None:
                    had[1] = []
                had[1] += [i for i in idx if i not in had[1]]
    for k, (c, *ps) in overlay.items():
        g = graph.get(k)
        graph[k] = (0, (g[1] if g else ()) + tuple(p for p, _, _ in ps))
    return overlay, names, labels, edge_names


#: why saved values of a graph were not read, in words
_UNREAD = {
    "user code": "a saved-tensor hook packed them (activation "
                 "checkpointing, save_on_cpu): its unpack would run; what "
                 "they keep shows as held in C++",
    "modified": "modified in place since they were saved (reading them "
                "raises); what they keep shows as held in C++",
}


def _has_shell(roots: dict) -> bool:
    return any(type(r) is _Root and r.kind == "shell"
               for r in roots.values())


def _namers(groups: dict, names: dict, edge_names: dict) -> dict:
    out = {}
    for (fw, _), (h, _) in groups.items():
        if fw not in out:
            out[fw] = _Namer(frozenset(h.attr_dicts), names,
                             sum(edge_names.values(), ()))
    return out


def _name(groups: dict, graph: dict, roots: dict, targets: list,
          stopped: Optional[str], names: dict, edge_names: dict,
          overlay: dict, labels: dict, top: int) -> tuple:
    """The blocks of the answer (each allocation's chains, state, advice)
    and the autograd graphs that hold memory only they hold."""
    ipython = _has_shell(roots)
    namers = _namers(groups, names, edge_names)
    marks: dict = {}
    for h, _ in groups.values():
        if h.marks is not None:
            try:
                marks.update(h.marks(graph, overlay))
            except Exception:
                pass
    for namer in namers.values():
        namer.marks = marks
    blocks_out = []
    for (fw, dev), (h, d) in groups.items():
        namer = namers[fw]
        # the largest first; of one size, by address (a stable answer)
        for ptr, (n, idx) in sorted(d.items(),
                                    key=lambda kv: (-kv[1][0], kv[0]))[:top]:
            if not idx:  # no array views it: C++ holds it, or the
                # walk was cut before it reached the arrays that view it
                state, chains, grads = "unknown" if stopped else "cpp", \
                    [], []
            else:
                chains, state, grads = _chains(
                    namer, graph, roots, [targets[i] for i in idx], ipython)
                if state != "held" and stopped:
                    state = "unknown"
            if any(grads):
                _grad_drops(h, chains, grads)
            blocks_out.append({
                "framework": fw, "device": dev, "address": ptr, "bytes": n,
                "arrays": len(idx) if idx else 0, "state": state,
                "why": _STATES.get(state, "").format(cpp=h.cpp),
                "chains": chains, "advice": _advice(state, chains, h.cpp)})
    blocks_out.sort(key=lambda b: (b["framework"], b["device"], -b["bytes"],
                                   b["address"]))
    advise = next((h.graph_advice for h, _ in groups.values()
                   if h.graph_advice is not None), None)
    return blocks_out, _graph_summaries(groups, graph, roots, targets,
                                        overlay, labels, namers, ipython,
                                        top, advise)


# a path a user can type: names, attributes, int or str indexes
_TYPEABLE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*|\[(\d+|'[^'\\]*')\])*\Z")


def _grad_drops(h: Any, chains: list, grads: list) -> None:
    """The chains that end at a leaf's .grad: their statement drops the
    .grad (the framework's, Holders.clear: an optimizer's zero_grad),
    whatever else their roots hold."""
    typeable = [g for g in grads if g and _TYPEABLE.match(g)]
    stmt = ""
    if typeable:
        stmt = (h.clear(typeable) if h.clear is not None else None) or \
            f"{min(typeable, key=len)}.grad = None"
    for c, g in zip(chains, grads):
        if g is not None:
            c["drop"] = stmt


def _graph_summaries(groups: dict, graph: dict, roots: dict, targets: list,
                     overlay: dict, labels: dict, namers: dict,
                     ipython: bool, top: int,
                     advise: Optional[Callable]) -> list:
    """The autograd graphs that hold memory no Python name holds (saved
    activations): per tensor whose grad_fn starts one, named as its
    chains name it, the largest first. A graph inside another (loss's,
    in total's after total = total + loss) counts what the outer one has
    not counted already."""
    if not overlay or not namers:
        return []
    where = {}
    for (fw, dev), (h, d) in groups.items():
        for ptr, (n, idx) in d.items():
            for i in idx or ():
                where[id(targets[i])] = (fw, dev, ptr, n)
    # the allocations only the graphs' edges reach: every array of them
    # has parents in a graph and none on the heap
    heap_parents: dict = {}
    for k, (c, *ps) in overlay.items():
        heap_parents[k] = len(graph[k][1]) - len(ps)
    held: dict = {}
    for a, at in where.items():
        held[at] = held.get(at, True) and heap_parents.get(a, 1) == 0
    children: dict = {}
    heads = []
    inner = set()
    for k, (c, *ps) in overlay.items():
        for p, kind, step in ps:
            children.setdefault(id(p), []).append((c, kind, step))
            if kind == "grad_fn":
                heads.append((p, c))
            elif kind == "next":
                inner.add(k)
    heads.sort(key=lambda h: id(h[1]) in inner)  # outer graphs first
    seen: set = set()
    out = []
    namer = next(iter(namers.values()))
    for t, head in heads:
        if id(head) in seen:
            continue
        seen.add(id(head))
        via = {id(head): (None, 0)}  # node -> (its parent, depth)
        todo = deque([head])
        found: dict = {}  # allocation -> (node, step, depth)
        while todo:
            n = todo.popleft()
            depth = via[id(n)][1]
            for c, kind, step in children.get(id(n), ()):
                if kind == "next" and id(c) not in seen:
                    seen.add(id(c))
                    via[id(c)] = (n, depth + 1)
                    todo.append(c)
                elif kind == "saved":
                    at = where.get(id(c))
                    if at is not None and held.get(at) and at not in found:
                        found[at] = (n, step, depth)
        if not found:
            continue
        nbytes = sum(at[3] for at in found)
        # the largest, the farthest of those: the graph's whole depth
        big = max(found, key=lambda at: (at[3], found[at][2]))
        n, step, _ = found[big]
        chain = [n]
        while via[id(chain[-1])][0] is not None:
            chain.append(via[id(chain[-1])][0])
        names = [labels.get(id(n), "?") for n in reversed(chain)]
        names[-1] += step
        out.append((nbytes, t, head, len(found), names))
    out.sort(key=lambda x: -x[0])
    summaries = []
    for nbytes, t, head, count, chain in out[:top]:
        chains, state, _ = _chains(namer, graph, roots, [t], ipython)
        name = chains[0]["path"] if chains else "a tensor no name holds"
        drop = next((c["drop"] for c in chains if c["drop"]), "")
        if len(chain) > _ELIDE:
            chain = chain[:1] + ["..."] + chain[-2:]
        advice = drop
        if _TYPEABLE.match(name) and advise is not None:
            advice = advise(name, labels.get(id(head), ""), [
                labels.get(id(c), "") for c, kind, _ in
                children.get(id(head), ()) if kind == "next"])
        if drop and advice != drop:
            advice += f"; `{drop}` frees it now"
        summaries.append({
            "tensor": name, "state": state, "saved": count,
            "bytes": nbytes, "nodes": chain,
            "path": f"{name}: the autograd graph of `{name}` "
                    f"({' <- '.join(chain)})",
            "advice": advice})
    return summaries
