"""free_plan() and free(): the holders' answer as statements to run, each
with the bytes the driver gets back (docs/explain.md, "Free it for me").

The plan is made from the heap walk of explain(holders=True)
(gpureclaim/_explain/_holders.py) over every live allocation, not only the largest:
its graph (the climb's, with the frameworks' graphs merged in) is read as
edges from the roots. A step is a statement that cuts some of them: ``del
total`` the reference of __main__'s namespace to ``total``, ``%reset -f
out`` IPython's output cache, ``opt.zero_grad(set_to_none=True)`` the
references of its parameters to their ``.grad``. What reaches an
allocation but no statement cuts (a running frame's locals, an object held
from outside the heap, a name no statement can delete) keeps it: such
allocations are the plan's "cannot" rows, never guessed at.

Each step's figure is exact for the order of the plan: an allocation is
freed by the first step after which no root reaches any of its arrays (a
widest-path search over the graph, each edge removed by its step), so the
figures of the steps add up to what the plan frees, and bytes two steps
hold count at the later one. What the driver gets back is counted in the
allocator's segments (Holders.segments): a segment goes back, whole, once
every live block in it is freed. The steps are ordered by what each frees
alone (the steps that alone cut every path to an allocation: a greatest
fixed point over the same graph), the steps that run by default first.

free(plan) walks again (a plan made before may be stale), runs the steps
of the new plan whose statements the old one picked, in the new plan's
order, releases the caches, and reports the drop of the driver's
per-process figure beside what the new plan promised for those steps.
Statements run as a user would type them (exec in the namespace they name,
IPython's magic through the shell), from generated text whose names were
checked to be names and literal keys. A step outside __main__ and the
notebook's namespace (another module's global, a class attribute) runs
only when picked by itself; a running frame's locals are never touched.
"""
from __future__ import annotations

import gc
import heapq
import json
import re
import sys
import time
from collections import deque
from typing import Any, Iterable, Optional, Union

from .. import _gpureclaim as _c
from . import _holders as H
from ._holders import _TYPEABLE
from ._views import Explanation, Rendered

INF = 1 << 40
DEFAULT_BUDGET_S = 10.0
_GC = "gc.collect()"
#: a step's kind: it runs with the plan, only when picked, or never
RUN, NAMED, CANNOT = "run", "named", "cannot"
_FIRST_NAME = re.compile(r"[A-Za-z_]\w*")


class _Step:
    """A statement being planned: its action, the edges it cuts are
    numbered by it."""

    __slots__ = ("statement", "kind", "action", "drops", "order")

    def __init__(self, statement: str, kind: str, action: tuple):
        self.statement, self.kind, self.action = statement, kind, action
        self.drops: list = []
        self.order = 0


class _Planner:
    """The plan of one walk (H.Walked): steps from the edges out of the
    roots, their figures from the graph."""

    def __init__(self, w: Any):
        self.w = w
        self.steps: dict = {}  # statement -> _Step
        self.reasons: list = []  # why a source is permanent, in words
        self.namer = next(iter(w.namers.values()), None) or H._Namer(
            frozenset())
        self.shell = next((r.obj for r in w.roots.values()
                           if type(r) is H._Root and r.kind == "shell"),
                          None)
        self.kinds: dict = {}
        self.classes: dict = {}  # id(a class's dict) -> the class

    # -- statements
    def step(self, statement: str, kind: str, action: tuple,
             drop: str) -> _Step:
        s = self.steps.get(statement)
        if s is None:
            s = self.steps[statement] = _Step(statement, kind, action)
        if drop and drop not in s.drops:
            s.drops.append(drop)
        return s

    def reason(self, why: str) -> int:
        if why not in self.reasons:
            self.reasons.append(why)
        return self.reasons.index(why)

    def root_edges(self, r: Any, p: Any, v: Any) -> list:
        """The edge root p -> v, one entry per name it has: (step or None,
        reason or None). Into one of IPython's containers (kinds): always
        there (its own edges have the statements)."""
        if id(v) in self.kinds:
            return [(None, self.reason("IPython keeps it"))]
        if r.kind == "shell":
            return self.kind_edges("shell", p, v)
        if id(v) in self.classes:  # a class's own dict
            return [(None, self.reason(f"the class {H._get_qualname(p)} "
                                       f"keeps it"))]
        ns = r.kind in ("namespace", "locals")
        names = self.namer.steps(p, v, ns)[0] or [" (?)"]
        return [self.root_statement(r, first) for first in names]

    def root_statement(self, r: Any, first: str) -> tuple:
        if r.kind == "namespace":
            name = first[1:] if first.startswith(".") else first
            text = f"{r.prefix}{name}"
            if self.w.ipython and H._IPY_CACHE.match(text):
                return self.magic(text), None
            if text in ("sys.last_traceback", "sys.last_value",
                        "sys.last_exc"):
                return self.step(H._CLEAR_TB, RUN, (
                    "exec", {"sys": sys}, H._CLEAR_TB), text), None
            if r.prefix and name.startswith("_"):
                return None, self.reason(
                    f"another module's private global ({text})")
            if H._IDENT.match(name) and type(r.obj) is dict:
                return self.step(f"del {text}", RUN if not r.prefix
                                 else NAMED, ("exec", r.obj, f"del {name}"),
                                 text), None
            return None, self.reason(
                f"a global no statement names ({text})")
        if r.kind == "class":
            return self.class_statement(r.obj, first)
        # a running frame's locals, or the frame
        thread, _, frame = r.label.partition(": ")
        return None, self.reason(
            f"a running {frame or thread} ({thread}) holds it until it "
            f"returns")

    def class_statement(self, cls: type, first: str) -> tuple:
        if first.startswith(".") and H._IDENT.match(first[1:]):
            mod, qual = H._get_module(cls), H._get_qualname(cls)
            text = ("" if mod in ("__main__", "builtins") else
                    f"{mod}.") + qual + first
            return self.step(f"del {text}", NAMED,
                             ("delattr", cls, first[1:]), text), None
        return None, self.reason(f"the class {H._get_qualname(cls)} "
                                 f"keeps it")

    def magic(self, drop: str) -> _Step:
        return self.step(H._RESET_OUT, RUN, ("magic", self.shell, "reset",
                                             "-f out"), drop)

    def ipython_kinds(self) -> dict:
        """IPython's containers, by identity: {id: kind}: the shell's own
        dict and trait values, its user_ns_hidden, InteractiveTB, display
        hook and history manager (and their own dicts and trait values:
        "<kind>-dict"), the output cache (Out), the configurables list."""
        kinds: dict = {}
        shell = self.shell
        if shell is None:
            return kinds

        def own(o: Any, kind: str) -> Any:
            """o's attributes, read as data (its own dict, then traitlets'
            _trait_values), the dicts marked as o's."""
            d = _c._instance_dict(o)
            tv = d.get("_trait_values") if type(d) is dict else None
            for x in (d, tv):
                if type(x) is dict:
                    kinds[id(x)] = kind + "-dict"

            def get(name: str) -> Any:
                for x in (d, tv):
                    if type(x) is dict and name in x:
                        return x[name]
                return None
            return get

        get = own(shell, "shell")
        for name, kind in (("user_ns_hidden", "hidden"),
                           ("InteractiveTB", "itb"), ("displayhook", "dh"),
                           ("history_manager", "hm"),
                           ("configurables", "conf")):
            x = get(name)
            if x is not None:
                kinds[id(x)] = kind
                if kind in ("itb", "dh", "hm"):
                    g = own(x, kind)
                    if kind == "hm" and g("output_hist") is not None:
                        kinds[id(g("output_hist"))] = "out"
        ns = get("user_ns")
        if type(ns) is dict and ns.get("_oh") is not None:
            kinds[id(ns["_oh"])] = "out"
        kinds[id(shell)] = "shell"
        return kinds

    # what each of IPython's containers keeps, by the step's name: a step
    # (statement, text), "" (a container: always there), or None (no
    # statement: what keeps it, in words)
    _SHELL = {".last_execution_result": (
        "get_ipython().last_execution_result = None",
        "get_ipython().last_execution_result"),
        ".user_ns_hidden": "", ".InteractiveTB": "", ".displayhook": "",
        ".history_manager": "", ".configurables": "", "._trait_values": "",
        "": ""}

    def kind_edges(self, kind: str, v: Any, w_: Any) -> list:
        """The edge v -> w_ out of an IPython container: (step, reason)
        per name."""
        if id(w_) in self.kinds:
            return [(None, None)]
        base = kind[:-5] if kind.endswith("-dict") else kind
        names = self.namer.steps(v, w_, kind.endswith("-dict"))[0]
        if base == "class":
            return [self.class_statement(self.classes[id(v)], nm)
                    for nm in names or [" (?)"]]
        if base == "out":
            return [(self.magic("Out"), None)]
        if base == "conf":
            return [(None, None)]
        if base == "hidden":
            out = []
            for k, x in dict.items(v):
                if x is w_ and type(k) is str:
                    text = f"get_ipython().user_ns_hidden[{k!r}]"
                    out.append((self.exec_shell(f"del {text}", text), None))
            return out or [(None, self.reason(
                "IPython's user_ns_hidden keeps it under a key no "
                "statement names"))]
        out = []
        for nm in names or [" (?)"]:
            if nm in ("", "._trait_values"):
                out.append((None, None))
            elif base == "shell" and nm in self._SHELL:
                x = self._SHELL[nm]
                out.append((self.exec_shell(*x), None) if x else (None, None))
            elif base == "itb" and nm == ".tb":
                text = "get_ipython().InteractiveTB.tb"
                out.append((self.exec_shell(f"{text} = None", text), None))
            elif base == "dh" and nm in ("._", ".__", ".___", ".shell"):
                out.append((self.magic(f"get_ipython().displayhook{nm}"),
                            None) if nm != ".shell" else (None, None))
            elif base == "hm" and nm in (".output_hist", ".shell"):
                out.append((None, None))
            else:
                where = {"shell": "", "itb": ".InteractiveTB",
                         "dh": ".displayhook",
                         "hm": ".history_manager"}.get(base, "")
                out.append((None, self.reason(
                    f"IPython keeps it (get_ipython(){where}{nm})")))
        return out

    def exec_shell(self, statement: str, text: str) -> _Step:
        return self.step(statement, RUN, (
            "exec", {"get_ipython": self.get_ipython}, statement), text)

    def get_ipython(self) -> Any:
        return self.shell

    def grad_statement(self, param: Any) -> tuple:
        """(the step that drops a leaf's .grad, None) or (None, why none
        does)."""
        w = self.w
        chains, _, _, rootobjs = H._chains(self.namer, w.graph, w.roots,
                                           [param], w.ipython, True)
        typeable = [(c["path"], r) for c, r in zip(chains, rootobjs)
                    if c["root"] == "namespace" and _TYPEABLE.match(c["path"])]
        if not typeable:
            return None, self.reason("a .grad whose tensor has no name a "
                                     "statement can use")
        clear = next((h.clear for h, _ in w.groups.values()
                      if h.clear is not None), None)  # Torch's
        paths = [p for p, _ in typeable]
        stmt = (clear(paths) if clear is not None else None) or \
            f"{min(paths, key=len)}.grad = None"
        first = _FIRST_NAME.match(stmt)[0]
        path, r = min(((p, r) for p, r in typeable
                       if _FIRST_NAME.match(p)[0] == first),
                      key=lambda pr: len(pr[0]))
        if type(r.obj) is not dict:
            return None, self.reason("a .grad whose tensor's root is no "
                                     "namespace")
        return self.step(stmt, RUN if not r.prefix else NAMED, (
            "exec", r.obj, stmt[len(r.prefix):] if r.prefix else stmt),
            f"{min(paths, key=len)}.grad"), None

    # -- the graph
    def plan(self) -> dict:
        w = self.w
        if w.stopped:
            return {"steps": [], "cannot": [], "notes": [
                f"the heap walk was cut ({w.stopped}): no plan; give "
                f"free_plan() a larger budget"], "cached": 0}
        graph, roots = w.graph, w.roots
        ids = list(graph)
        pos = {k: i for i, k in enumerate(ids)}
        n = len(ids)
        obj: list = [None] * n
        for t in w.targets:
            i = pos.get(id(t))
            if i is not None:
                obj[i] = t
        for ext, parents in graph.values():
            for p in parents:
                i = pos.get(id(p))
                if i is not None:
                    obj[i] = p
        grad_of: set = set()  # (id(param), id(grad))
        for k, (c, *ps) in w.overlay.items():
            for p, kind, _ in ps:
                if kind == "grad":
                    grad_of.add((id(p), k))
        grad_steps: dict = {}  # id(param) -> (step or None, reason)
        self.kinds = self.ipython_kinds()
        # a class's own dict (its attributes: statements, Cls.attr)
        for k, (_, parents) in graph.items():
            for p in parents:
                if issubclass(type(p), type) and obj[pos[k]] is \
                        _c._instance_dict(p):
                    self.kinds[k] = "class-dict"
                    self.classes[k] = p
        # incoming edges: inc[i] = [(parent index or -1, step, reason)]
        inc: list = [[] for _ in range(n)]
        ext_why = self.reason("held from outside Python's heap (an "
                              "extension or C++ refers to an object on "
                              "the way)")
        frames = {id(r.obj) for r in roots.values() if type(r) is H._Root
                  and r.kind in ("locals", "frame")}
        for i, k in enumerate(ids):
            ext, parents = graph[k]
            # a running frame's locals hold their objects from its frame:
            # the reference from outside the heap is the frame's
            if ext > 0 and k not in self.kinds and not any(
                    id(p) in frames for p in parents):
                inc[i].append((-1, None, ext_why))
            seen: set = set()
            for p in parents:
                if id(p) in seen:
                    continue
                seen.add(id(p))
                j = pos.get(id(p))
                if j is not None:
                    if (id(p), k) in grad_of:
                        st = grad_steps.get(id(p))
                        if st is None:
                            st = grad_steps[id(p)] = self.grad_statement(p)
                        inc[i].append((j, *st))
                    elif id(p) in self.kinds:
                        for st in self.kind_edges(self.kinds[id(p)], p,
                                                  obj[i]):
                            inc[i].append((j, *st))
                    else:
                        inc[i].append((j, None, None))
                elif H._is_root(roots, p):
                    r = H._root_of(roots, p)
                    for st in self.root_edges(r, p, obj[i]):
                        inc[i].append((-1, *st))
        return self.figures(ids, pos, inc, obj)

    def storages(self, pos: dict) -> list:
        """(framework, device, address, bytes, [node indices] or None,
        hook) of every live allocation."""
        out = []
        for (fw, dev), (h, d) in self.w.groups.items():
            for ptr, (nb, idx) in d.items():
                nodes = None
                if idx:
                    nodes = [pos[k] for k in (id(self.w.targets[i])
                                              for i in idx) if k in pos]
                out.append((fw, dev, ptr, nb, nodes, h))
        return out

    def figures(self, ids: list, pos: dict, inc: list, obj: list) -> dict:
        n = len(ids)
        steps = list(self.steps.values())
        for k, s in enumerate(steps):
            s.order = k
        children: list = [[] for _ in range(n)]  # [(child, step, why)]
        for i in range(n):
            for j, s, why in inc[i]:
                if j >= 0:
                    children[j].append((i, s, why))
        stor = self.storages(pos)
        # what each step frees alone: steps that cut every path (bits)
        alone = self.alone(n, inc, children, len(steps))
        bytes_alone = [0] * len(steps)
        for fw, dev, ptr, nb, nodes, h in stor:
            if nodes:
                m = -1
                for i in nodes:
                    m &= alone[i]
                if m != -1:
                    for k in range(len(steps)):
                        if m >> k & 1:
                            bytes_alone[k] += nb
        rank = {RUN: 0, NAMED: 1}
        steps.sort(key=lambda s: (rank.get(s.kind, 2),
                                  -bytes_alone[s.order], s.statement))
        for k, s in enumerate(steps):
            s.order = k
        t, why = self.widest(n, inc, children)
        # each allocation: the step that frees it (-1: garbage: the
        # collector frees it; INF: none), or why none does
        freed = {}
        cannot: dict = {}
        for fw, dev, ptr, nb, nodes, h in stor:
            if not nodes:
                at, reason = INF, f"held in C++ (no Python object views " \
                                  f"it: {h.cpp})"
            else:
                at = max(t[i] for i in nodes)
                reason = None
                if at >= INF:
                    k = next(why[i] for i in nodes if t[i] >= INF)
                    reason = self.reasons[k] if k is not None else \
                        "held by an object no statement reaches"
            freed[(fw, dev, ptr)] = at
            if reason is not None:
                c = cannot.setdefault(reason, [0, 0])
                c[0] += nb
                c[1] += 1
        # what a step drops, as the holders name it: a tensor's graph so
        graphs = {g["tensor"]: g["path"] for g in self.w.graphs}
        out_steps = [{"statement": s.statement, "kind": s.kind,
                      "bytes": 0, "releasable": 0, "arrays": 0,
                      "drops": [graphs.get(d, d) for d in s.drops[:8]],
                      "action": s.action}
                     for s in steps]
        gc_step = {"statement": _GC, "kind": RUN, "bytes": 0,
                   "releasable": 0, "arrays": 0,
                   "drops": ["reference cycles no root reaches"],
                   "action": ("gc",)}
        for fw, dev, ptr, nb, nodes, h in stor:
            at = freed[(fw, dev, ptr)]
            if at >= INF:
                continue
            st = gc_step if at < 0 else out_steps[at]
            st["bytes"] += nb
            st["arrays"] += 1
        cached = self.releasable(stor, freed, out_steps, gc_step)
        useful = self.useful(stor, freed, inc)
        out_steps = [s for k, s in enumerate(out_steps) if k in useful]
        if gc_step["bytes"]:
            out_steps.append(gc_step)
        return {"steps": out_steps,
                "cannot": [{"why": w, "bytes": b, "arrays": a}
                           for w, (b, a) in cannot.items()],
                "notes": self.notes(stor), "cached": cached}

    @staticmethod
    def useful(stor: list, freed: dict, inc: list) -> set:
        """The steps (orders) that cut an edge into an object above an
        allocation the plan frees: a step that frees nothing itself may
        be one another needs (del lin and del opt both hold a weight)."""
        todo = [i for fw, dev, ptr, nb, nodes, h in stor
                if 0 <= freed[(fw, dev, ptr)] < INF for i in nodes or ()]
        up = set(todo)
        while todo:
            i = todo.pop()
            for j, _, _ in inc[i]:
                if j >= 0 and j not in up:
                    up.add(j)
                    todo.append(j)
        return {s.order for i in up for _, s, _ in inc[i] if s is not None}

    def releasable(self, stor: list, freed: dict, steps: list,
                   gc_step: dict) -> int:
        """Each step's bytes back to the driver: a segment goes back once
        every live block in it is freed; where a framework's segments are
        not read, its arrays' bytes. The bytes of segments with no live
        block (what release() returns now) are returned apart."""
        cached = 0
        done = set()
        for (fw, dev), (h, d) in self.w.groups.items():
            if fw in done:
                continue
            done.add(fw)
            segs = None
            if h.segments is not None:
                try:
                    segs = h.segments(self.w.call)
                except Exception:
                    segs = None
            if segs is None:
                for f, dv, ptr, nb, nodes, hh in stor:
                    at = freed[(f, dv, ptr)]
                    if f == fw and at < INF:
                        (gc_step if at < 0 else steps[at])["releasable"] += nb
                continue
            for dv, addr, size, live in segs:
                if not live:
                    cached += size
                    continue
                at = max(freed.get((fw, dv, a), INF) for a in live)
                if at < INF:
                    (gc_step if at < 0 else steps[at])["releasable"] += size
        return cached

    def notes(self, stor: list) -> list:
        out = []
        for h in {id(h): h for *_, h in stor}.values():
            if h.release_note:
                out.append(h.release_note)
        return out

    @staticmethod
    def alone(n: int, inc: list, children: list, k: int) -> list:
        """Per node, the steps whose edges alone cut every path from the
        roots to it (bit k: step k): the greatest fixed point of "cut by k
        where every incoming edge is cut by k or comes from a node cut by
        k", a root's edge cut by its step only. -1: every step (no root
        reaches it). Nodes in topological order first (each read once: the
        heap's trees and the autograd graphs), then what cycles leave."""
        a = [-1] * n
        indeg = [sum(1 for j, _, _ in inc[i] if j >= 0) for i in range(n)]
        order = deque(i for i in range(n) if indeg[i] == 0)

        def value(i: int) -> int:
            m = -1
            for j, s, _ in inc[i]:
                cut = 1 << s.order if s is not None else 0
                m &= cut if j < 0 else (a[j] | cut)
            return m
        while order:
            i = order.popleft()
            a[i] = value(i)
            for c, _, _ in children[i]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    order.append(c)
        todo = deque(i for i in range(n) if indeg[i] > 0)
        queued = set(todo)
        while todo:
            i = todo.popleft()
            queued.discard(i)
            m = value(i)
            if m != a[i]:
                a[i] = m
                for c, _, _ in children[i]:
                    if c not in queued:
                        queued.add(c)
                        todo.append(c)
        return a

    @staticmethod
    def widest(n: int, inc: list, children: list,
               off: Optional[_Step] = None) -> tuple:
        """Per node, the number of steps after which a root still reaches
        it, minus one (the step that frees it; -1: no root reaches it;
        INF: none frees it), and for INF the reason of a source that keeps
        it: the widest path from the roots, each edge's width the order of
        the step that cuts it (INF: none; also the steps of `off`)."""
        t = [-1] * n
        why = [None] * n
        heap = []
        seq = 0  # ties never compare the reasons
        for i in range(n):
            for j, s, r in inc[i]:
                if j < 0:
                    heap.append((-(s.order if s is not None and s is not off
                                   else INF), i, seq, r))
                    seq += 1
        heapq.heapify(heap)
        while heap:
            nv, i, _, r = heapq.heappop(heap)
            val = -nv
            if val <= t[i]:
                continue
            t[i] = val
            why[i] = r
            for c, s, why_c in children[i]:
                cv = min(val, s.order if s is not None and s is not off
                         else INF)
                if cv > t[c]:
                    seq += 1
                    heapq.heappush(heap, (-cv, c, seq, why_c if why_c is
                                          not None and cv >= INF else r))
        return t, why


def _planner(w: Any) -> dict:
    return _Planner(w).plan()


# ----------------------------------------------------------------- the API

class FreeStep:
    """One step of a :class:`FreePlan`: ``statement`` (what a user would
    type), ``kind`` ("run": free(plan) runs it; "named": another module's
    global or a class attribute, run only when picked by itself;
    "cannot": no statement frees it, ``why`` says what keeps it),
    ``releasable`` (bytes the driver gets back after the steps above it),
    ``bytes`` (live bytes it frees), ``arrays`` (allocations), ``drops``
    (what it drops, as the holders name it)."""

    __slots__ = ("index", "statement", "kind", "releasable", "bytes",
                 "arrays", "drops", "why")

    def __init__(self, index: int, d: dict):
        self.index = index
        self.statement: str = d.get("statement", "")
        self.kind: str = d.get("kind", CANNOT)
        self.releasable: int = d.get("releasable", 0)
        self.bytes: int = d["bytes"]
        self.arrays: int = d["arrays"]
        self.drops: list = list(d.get("drops", ()))
        self.why: str = d.get("why", "")

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self) -> str:
        return (f"FreeStep({self.index}, {self.statement or self.why!r}, "
                f"releasable={self.releasable})")


class FreePlan(Rendered):
    """The result of :func:`free_plan`: ``steps`` (:class:`FreeStep`, those
    free() runs first), ``cannot`` (what no statement frees, each a
    FreeStep of kind "cannot"), ``releasable`` (what free(plan) promises
    the driver gets back), ``cached`` (what release() returns before any
    step), ``notes``, ``walk`` (the walk's figures). ``plan[i]`` a step,
    ``plan[a:b]`` a plan of those steps; text and HTML as explain()'s."""

    def __init__(self, raw: dict, walk: dict, notes: list, seconds: float):
        self.steps = [FreeStep(i, s) for i, s in enumerate(raw["steps"])]
        self.cannot = [FreeStep(-1, dict(c, kind=CANNOT))
                       for c in raw["cannot"]]
        self.cached: int = raw["cached"]
        self.notes: list = list(raw["notes"]) + list(notes)
        self.walk = walk
        self.seconds = seconds

    @property
    def releasable(self) -> int:
        return sum(s.releasable for s in self.steps if s.kind == RUN)

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self):
        return iter(self.steps)

    def __getitem__(self, i: Union[int, slice]) -> Any:
        if isinstance(i, slice):
            p = FreePlan.__new__(FreePlan)
            p.steps, p.cannot = self.steps[i], self.cannot
            p.cached, p.notes, p.walk = self.cached, self.notes, self.walk
            p.seconds = self.seconds
            return p
        return self.steps[i]

    def to_dict(self) -> dict:
        return {"steps": [s.to_dict() for s in self.steps],
                "cannot": [s.to_dict() for s in self.cannot],
                "releasable": self.releasable, "cached": self.cached,
                "notes": list(self.notes), "walk": self.walk,
                "seconds": self.seconds}

    _COLUMNS = [("plan[i]", "text"), ("statement", "text"),
                ("releasable", "bytes"), ("frees", "bytes"),
                ("runs", "text")]

    def _view(self) -> tuple:
        b = H_format_bytes
        run = [s for s in self.steps if s.kind == RUN]
        blocks: list = [("h", f"{len(run)} step(s) would release "
                              f"{b(self.releasable)} to the driver")]
        rows = []
        for s in self.steps:
            rows.append([str(s.index), s.statement, s.releasable, s.bytes,
                         "yes" if s.kind == RUN else "if picked",
                         s.drops])
        for c in self.cannot:
            rows.append(["-", "(none)", None, c.bytes, "no", [c.why]])
        if rows:
            blocks.append(("table", None, self._COLUMNS, rows))
        else:
            blocks.append(("p", "no live arrays to free"))
        blocks.append(("p", "releasable: what the driver gets after the "
                            "steps above it (bytes two steps hold count "
                            "at the later one); gpureclaim.free(plan) "
                            "runs the steps marked yes, then releases "
                            "the caches"))
        if self.cached:
            blocks.append(("p", f"cached now: {b(self.cached)}, which "
                                f"free() returns first (not counted)"))
        blocks.append(("notes", self.notes))
        return ("gpureclaim.free_plan(): statements that free GPU memory",
                blocks)


def H_format_bytes(n: Optional[int]) -> str:
    return _c.format_bytes(n)


def _walk_plan(budget_s: float) -> tuple:
    """(raw plan with actions, the walk's figures, notes, seconds)."""
    from . import _parts

    t0 = time.perf_counter()
    out = _parts.explain(None, False, holders={
        "budget_s": float(budget_s), "max_objects": None,
        "planner": _planner})
    h = out["holders"] or {}
    raw = h.get("plan") or {"steps": [], "cannot": [], "notes": [],
                            "cached": 0}
    return raw, h.get("walk"), list(out["notes"]) + list(h.get("notes", ())), \
        time.perf_counter() - t0


def free_plan(*, budget: float = DEFAULT_BUDGET_S) -> FreePlan:
    """The statements that free this process's live GPU arrays, each with
    the bytes the driver gets back (docs/explain.md, "Free it for me")."""
    if not isinstance(budget, (int, float)) or isinstance(budget, bool) \
            or budget <= 0:
        raise ValueError("free_plan: budget must be a positive number of "
                         "seconds")
    raw, walk, notes, secs = _walk_plan(budget)
    for s in raw["steps"]:
        s.pop("action", None)  # a plan holds nothing of the program's
    return FreePlan(raw, walk, notes, secs)


class FreeReport(Rendered):
    """What :func:`free` did: ``steps`` run (statement, ``releasable``
    promised, ``bytes``, ``error`` or None), ``skipped`` (statement, why),
    ``releasable`` (the promise: the sum over the steps run),
    ``released`` (the drop of the driver's per-process figure over the
    steps and the release after them, summed over the GPUs; None where
    NVML gives no per-process figure), ``gpus`` ({gpu: {"before",
    "after", "released"}}), ``cached`` (what the release before the steps
    returned, not counted), ``notes``, ``seconds``."""

    def __init__(self, **kw: Any):
        self.steps: list = kw["steps"]
        self.skipped: list = kw["skipped"]
        self.releasable: int = kw["releasable"]
        self.released: Optional[int] = kw["released"]
        self.gpus: dict = kw["gpus"]
        self.cached: int = kw["cached"]
        self.notes: list = kw["notes"]
        self.seconds: float = kw["seconds"]

    def to_dict(self) -> dict:
        return {"steps": self.steps, "skipped": self.skipped,
                "releasable": self.releasable, "released": self.released,
                "gpus": {str(k): v for k, v in self.gpus.items()},
                "cached": self.cached, "notes": self.notes,
                "seconds": self.seconds}

    def _view(self) -> tuple:
        b = H_format_bytes
        rows = [[s["statement"], s["releasable"],
                 "ran" if s["error"] is None else "failed",
                 [s["error"]] if s["error"] else []] for s in self.steps]
        rows += [[s["statement"], None, "skipped", [s["why"]]]
                 for s in self.skipped]
        blocks: list = []
        if self.released is None:
            head = (f"promised {b(self.releasable)}; the driver's "
                    f"per-process figure is not known here")
        else:
            head = (f"released {b(self.released)} (the drop of the "
                    f"driver's per-process figure), promised "
                    f"{b(self.releasable)}")
        blocks.append(("h", head))
        if rows:
            blocks.append(("table", None, [("statement", "text"),
                                           ("promised", "bytes"),
                                           ("", "text")], rows))
        for g, x in sorted(self.gpus.items()):
            if x["released"] is not None:
                blocks.append(("p", f"GPU {g}: {b(x['before'])} before the "
                                    f"steps, {b(x['after'])} after: "
                                    f"released {b(x['released'])}"))
        if self.cached:
            blocks.append(("p", f"before the steps, release() released "
                                f"{b(self.cached)} already cached (not "
                                f"counted)"))
        blocks.append(("notes", self.notes))
        return ("gpureclaim.free(): what was released", blocks)


def _picked(what: Any) -> tuple:
    """(statements, whether each was picked by itself: a step or a
    statement named, not a whole plan)."""
    if what is None:
        return None, False
    if isinstance(what, FreePlan):
        return [s.statement for s in what.steps], False
    if isinstance(what, FreeStep):
        return [what.statement], True
    if isinstance(what, str):
        return [what], True
    if isinstance(what, Iterable):
        out = []
        for x in what:
            if isinstance(x, FreeStep):
                out.append(x.statement)
            elif isinstance(x, str):
                out.append(x)
            else:
                raise TypeError("free: pick steps (FreeStep) or "
                                "statements (str)")
        return out, True
    raise TypeError("free: takes a FreePlan, a FreeStep, statements, or "
                    "a list of them")


def _run(action: tuple) -> None:
    kind = action[0]
    if kind == "exec":
        exec(compile(action[2], "<gpureclaim.free>", "exec"), action[1])
    elif kind == "magic":
        action[1].run_line_magic(action[2], action[3])
    elif kind == "delattr":
        delattr(action[1], action[2])
    elif kind == "gc":
        gc.collect()


def _figures() -> dict:
    return _c.process_memory()


def _release(collect: Any) -> int:
    """The core's release (gpureclaim.release() without its report
    object): the bytes the driver got back."""
    return json.loads(_c.report_json(_c.release(devices=None,
                                                collect=collect)))["bytes"]


_MAGIC_USAGE = ("usage: %gpureclaim free [--yes] (the plan; --yes: run it), "
                "%gpureclaim explain (explain(holders=True)), "
                "%%gpureclaim [FILE] (the cell, traced)")


def magic(line: str) -> Any:
    """The line magic %gpureclaim (gpureclaim/_trace.py registers it)."""
    args = line.split()
    if args[:1] == ["free"] and set(args[1:]) <= {"--yes"}:
        return free() if "--yes" in args else free_plan()
    if args == ["explain"]:
        from . import _parts

        return Explanation(_parts.explain(None, False, holders={
            "budget_s": 1.0, "max_objects": None}))
    raise ValueError(_MAGIC_USAGE)


def free(plan: Any = None, *, budget: float = DEFAULT_BUDGET_S) -> FreeReport:
    """Runs the steps of ``plan`` (a FreePlan: its steps that run by
    default; a FreeStep, a statement, or a list of them: those, picked),
    as a plan made now has them, releases the caches, and reports the
    bytes the driver got back beside what was promised. None: the whole
    plan made now."""
    t0 = time.perf_counter()
    want, picked = _picked(plan)
    raw, _, notes, _ = _walk_plan(budget)
    by = {s["statement"]: s for s in raw["steps"]}
    run, skipped = [], []
    if want is None:
        run = [s for s in raw["steps"] if s["kind"] == RUN]
    else:
        for st in dict.fromkeys(want):
            s = by.get(st)
            if s is None:
                skipped.append({"statement": st, "why": "not in the plan "
                                "made now: it frees nothing now"})
            elif s["kind"] == NAMED and not picked:
                skipped.append({"statement": st, "why": "outside __main__ "
                                "and the notebook's namespace: pick it to "
                                "run it (free(plan[i]))"})
            else:
                run.append(s)
        order = {s["statement"]: k for k, s in enumerate(raw["steps"])}
        run.sort(key=lambda s: order[s["statement"]])
    raw = by = None
    # what is cached now goes back first, apart; no collection yet: the
    # garbage's bytes are a step's (gc.collect())
    cached = max(_release(False), 0)
    before = _figures()
    done = []
    for s in run:
        action = s.pop("action")
        err = None
        try:
            _run(action)
        except Exception as e:  # the statement's own error, reported
            err = f"{type(e).__name__}: {e}"
        action = None
        done.append({"statement": s["statement"],
                     "releasable": s["releasable"], "bytes": s["bytes"],
                     "error": err})
    run = None
    _release("auto")
    after = _figures()
    gpus, total = {}, 0
    for g, x in before.items():
        y = after.get(g)
        r = x - y if x is not None and y is not None else None
        gpus[g] = {"before": x, "after": y, "released": r}
        total = None if r is None or total is None else total + r
    if not gpus:
        total = 0
    return FreeReport(steps=done, skipped=skipped,
                      releasable=sum(s["releasable"] for s in done
                                     if s["error"] is None),
                      released=total, gpus=gpus, cached=cached, notes=notes,
                      seconds=time.perf_counter() - t0)
