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
from collections import deque
from typing import Any, Optional

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
    cls = d.get("InteractiveShell") if d else None
    if not isinstance(cls, type):
        return None, None
    for k in _get_mro(cls):
        inst = (_c._instance_dict(k) or {}).get("_instance")
        if inst is not None:
            ns = (_c._instance_dict(inst) or {}).get("user_ns")
            return inst, ns if type(ns) is dict else None
    return None, None


def _thread_names() -> dict:
    th = sys.modules.get("threading")
    active = (_c._instance_dict(th) or {}).get("_active") if th else None
    out = {}
    for tid, t in dict(active or {}).items():
        name = (_c._instance_dict(t) or {}).get("_name")
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
    """Names the edge parent -> child as the text a user would type."""

    def __init__(self, attr_dicts: frozenset):
        self.attr_dicts = attr_dicts

    def dict_step(self, d: dict, child: Any, attrs: Any) -> list:
        out = []
        for k, v in dict.items(d):
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
        if issubclass(t, dict):
            names = self.dict_step(parent, child, mode)
            if mode and type(child) is dict:
                for k, v in dict.items(parent):
                    if v is child and k in self.attr_dicts:
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
            names = [f" local {k!r}" for k, v in dict.items(loc)
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
            for k, v in dict.items(own):
                if v is child and k in self.attr_dicts:
                    return [""], "index"
            names = self.dict_step(own, child, True)
            if names:
                return names, False
        for k in _get_mro(t):
            for name, desc in (_c._instance_dict(k) or {}).items():
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
            ipython: bool) -> tuple:
    """(the shortest chain from each root to any of starts, an
    allocation's arrays; the state: "held", "garbage" when the climb
    reached no root and every node above has no reference from outside the
    heap, "cpp" when some has, "unknown" when the node cap cut it)."""
    via: dict = {}  # id(node) -> (node, its child on the way down)
    todo: deque = deque()
    for a in starts:
        if id(a) not in via:
            via[id(a)] = (a, None)
            todo.append(a)
    found: list = []
    outside = 0
    while todo and len(via) < MAX_NODES:
        n = todo.popleft()
        ext, parents = graph.get(id(n), (1, ()))
        outside += ext > 0
        for p in parents:
            if _is_root(roots, p):
                if len(found) < MAX_CHAINS * 4:
                    found.append((p, n))
                continue
            if id(p) not in via and id(p) in graph:
                via[id(p)] = (p, n)
                todo.append(p)
    out = []
    keys: set = set()
    for p, n in found:
        r = _root_of(roots, p)
        names, mode = namer.steps(p, n, r.kind in ("namespace", "locals"))
        # a container holding it under several keys gives a chain each
        tails: list = [[]]
        node, closure, said, nodes = n, None, "", [n]
        while True:
            child = via[id(node)][1]
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
        for first in names:
            for tail in tails:
                text, drop, cover = _root_text(r, first, tail, ipython)
                key = text + "".join(tail)
                if key in keys:  # one chain a name
                    continue
                keys.add(key)
                out.append(({"path": text + "".join(tail) + said,
                             "root": r.kind, "drop": drop,
                             "covered": False},
                            ids, id(nodes[cover]) if cover is not None
                            and cover < len(nodes) - 1 else None))
    out.sort(key=lambda c: (len(c[0]["path"]), c[0]["path"]))
    out = out[:MAX_CHAINS]
    # a statement that empties a container frees what reaches the array
    # through it: those chains need no statement of their own
    for c, ids, mine in out:
        c["covered"] = mine is None and any(
            cover in ids for d, _, cover in out if cover is not None)
    state = ("held" if out else "unknown" if todo
             else "garbage" if outside == 0 else "cpp")
    return [c for c, _, _ in out], state


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


def _group(found: list, targets: list, groups: dict, notes: list) -> None:
    """The allocations to name, from the hooks' arrays: (framework,
    device) -> the largest (storage, [bytes, indices in targets or None]);
    the arrays end up held in targets alone (the climb counts references),
    found emptied."""
    while found:
        f, h, arrays, blocks, odd = found.pop()
        if arrays is None:
            notes.append(f"{f.name}: arrays not read: {odd}")
            continue
        per: dict = {}
        while arrays:
            a, dev, ptr, n = arrays.pop()
            g = per.setdefault(dev, {}).setdefault(ptr, [n, []])
            g[1].append(len(targets))
            targets.append(a)
        a = None
        if odd:
            notes.append(f"{f.name}: {odd} array(s) skipped: asking them "
                         f"for their memory raised")
        for dev, addr, size in blocks or ():
            d = per.setdefault(dev, {})
            if not any(addr <= p < addr + size for p in d):
                d[addr] = [size, None]  # no array views it
        for dev, d in per.items():
            top = sorted(d.items(), key=lambda kv: -kv[1][0])[:TOP]
            groups[(f.name, dev)] = (h, top)


def walk(call: Any, budget_s: float = DEFAULT_BUDGET_S,
         max_objects: Optional[int] = None,
         namespaces: tuple = ()) -> dict:
    """The "holders" entry of explain()'s raw dict: the walk stops after
    budget_s seconds (of which gc.get_objects() takes its share) or
    max_objects objects (None: all).

    The hooks that say their arrays' classes (Holders.types) get only
    the objects of those classes, picked out by the C pass itself (one
    read of each object, not one more per framework); the others read
    every object before the pass."""
    t0 = time.perf_counter()
    # no collection while it walks: one would run finalizers (user code)
    # and cost more than the walk (a full one of 450k objects, 30 ms and
    # more, in whichever phase allocated last); it comes after instead
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _walk(call, budget_s, max_objects, namespaces, t0)
    finally:
        if collecting:
            gc.enable()


def _walk(call: Any, budget_s: float, max_objects: Optional[int],
          namespaces: tuple, t0: float) -> dict:
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
    groups: dict = {}
    notes: list = []
    try:
        heap, picked, examined, total, stopped, ms_c = _c._heap(
            objs, stops, skips, max(left, 0.0), most,
            tuple(t for _, _, t in typed))
        t4 = time.perf_counter()
        for (f, h, _), of_types in zip(typed, picked):
            found.append(_arrays(call, f, h, of_types))
        of_types = picked = None  # only targets may hold the arrays
        _group(found, targets, groups, notes)
        t5 = time.perf_counter()
        graph, ms_climb = _c._climb(heap, targets)
        del objs, heap
        t6 = time.perf_counter()
        ms_walk = (t6 - t0) * 1e3
        blocks = _name(groups, graph, roots, targets, stopped)
        reached = len(graph)
        phases = {"roots": (t1 - t0) * 1e3, "objects": (t2 - t1) * 1e3,
                  "arrays": (t3 - t2 + t5 - t4) * 1e3, "index": ms_c[0],
                  "pass": ms_c[1], "climb": ms_climb[0],
                  "graph": ms_climb[1],
                  "names": (time.perf_counter() - t6) * 1e3}
    finally:
        # the copies of the running functions' locals that _roots made:
        # left filled, they would hold the arrays after a del
        for loc in cleared:
            dict.clear(loc)
        # our own frames (skips) hold these lists: a cycle that would keep
        # every frame named, and its locals, until the next collection
        for x in (skips, frames, stops, cleared, targets):
            x.clear()
        roots.clear()
        graph.clear()
    return {"blocks": blocks, "notes": notes,
            "walk": {"objects": total, "examined": examined,
                     "stopped": stopped, "budget_s": budget_s,
                     "max_objects": max_objects, "roots": nroots,
                     "reached": reached, "walk_ms": ms_walk,
                     "ms": (time.perf_counter() - t0) * 1e3,
                     "phases_ms": phases}}


def _name(groups: dict, graph: dict, roots: dict, targets: list,
          stopped: Optional[str]) -> list:
    """The blocks of the answer: each allocation's chains, state, advice."""
    ipython = any(type(r) is _Root and r.kind == "shell"
                  for r in roots.values())
    namer_cache: dict = {}
    blocks_out = []
    for (fw, dev), (h, top) in groups.items():
        namer = namer_cache.get(fw)
        if namer is None:
            namer = namer_cache[fw] = _Namer(frozenset(h.attr_dicts))
        for ptr, (n, idx) in top:
            if idx is None:  # no array views it: C++ holds it, or the
                # walk was cut before it reached the arrays that view it
                state, chains = "unknown" if stopped else "cpp", []
            else:
                chains, state = _chains(namer, graph, roots,
                                        [targets[i] for i in idx], ipython)
                if state != "held" and stopped:
                    state = "unknown"
            blocks_out.append({
                "framework": fw, "device": dev, "address": ptr, "bytes": n,
                "arrays": len(idx) if idx else 0, "state": state,
                "why": _STATES.get(state, "").format(cpp=h.cpp),
                "chains": chains, "advice": _advice(state, chains, h.cpp)})
    blocks_out.sort(key=lambda b: (b["framework"], b["device"], -b["bytes"]))
    return blocks_out
