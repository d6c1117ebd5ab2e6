"""What the framework modules share: the record each one registers, the
look-up that never imports, the device switch that never opens a
context, the notes a failure becomes, and the parts an explainer adds.

Nothing here imports a framework: a framework is active only once the
user's program has put it in ``sys.modules``.
"""
from __future__ import annotations

import sys
import threading
from operator import index as _index
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .. import _gpureclaim as _c

_modules = sys.modules

#: Raised by a releaser to give its failure's whole note (the step it was
#: on, then the cause): the trampoline (python/src/releaser.c) writes its
#: message alone, where any other exception reads "<Type>: <message>".
Failed = _c.ReleaseFailed

#: The device value of a releaser's once-per-call step.
ONCE = _c.DEVICE_ONCE


@dataclass(frozen=True)
class Framework:
    """One framework, as the table in ``frameworks/__init__.py`` lists it
    and as it is registered through ``_gpureclaim.register`` (the
    trampoline a user's pool goes through too).

    - ``probe() -> (handle, why)``: the framework's handle when it is
      active in this process, else None; ``why`` says which. It reads
      ``sys.modules`` and what the framework already set up, never
      imports or initialises anything.
    - ``held(device) -> (live, cached) | None`` and ``release(device) ->
      note | None`` (raise :data:`Failed` or anything else on failure): the
      releaser, called for each visited GPU and with :data:`ONCE`.
    - ``explain(call, gpu)``: adds the framework's parts of ``gpu`` (a
      :class:`Parts`); None where the framework has nothing to explain.
    - ``device``: the name of a GPU CUDA does not see ("mps"), with
      ``figure() -> None | int | str`` (not in use / the driver's figure /
      why there is none).
    - ``oom``: how :func:`gpureclaim.watch_oom` sees this framework run out
      of memory (an :class:`OOMHook`), None where it cannot.
    - ``holders``: what ``explain(holders=True)`` needs of it (a
      :class:`Holders`), None where it has no arrays to name.
    """

    name: str
    kind: str  # "cuda" or "metal"
    probe: Callable[[], tuple]
    held: Optional[Callable[[int], Optional[tuple]]]
    release: Callable[[int], Optional[str]]
    explain: Optional[Callable[[Any, "Parts"], None]] = None
    device: Optional[str] = None
    figure: Optional[Callable[[], Any]] = None
    oom: Optional["OOMHook"] = None
    holders: Optional["Holders"] = None


@dataclass(frozen=True)
class Holders:
    """A framework's part of ``explain(holders=True)``
    (gpureclaim/_explain/_holders.py walks the heap; this says what an
    array is).

    - ``arrays(call, objects) -> (arrays, blocks, odd)``: ``arrays`` the
      framework's GPU arrays among ``objects`` (``gc.get_objects()``) as
      ``(array, device, storage, bytes)``, ``storage`` the address of the
      memory it views (views of one allocation share it) and ``bytes`` that
      allocation's size; ``blocks`` the allocator's live blocks as
      ``(device, address, bytes)`` where it lists them (a block no array
      points into is held in C++), else None; ``odd`` the arrays skipped
      because asking them raised. Types are matched with
      ``_gpureclaim._of_types`` and attributes read from the framework's
      own base class, so no subclass's code runs.
    - ``attr_dicts``: names of instance attributes holding dicts that the
      class shows as attributes (Torch's ``_modules``: ``model._modules
      ['layers']._modules['3']`` is written ``model.layers[3]``).
    - ``cpp``: what holds a block from C++ in this framework, in words.
    - ``types() -> (class, ...)``, optional: the classes its arrays are
      (subclasses included). Given, ``arrays`` is passed only the objects
      of those classes, which the heap walk's own pass picks out, instead
      of every object (one read of the heap instead of two).
    - ``graph(call, objects, budget_s) -> Overlay``, optional: the edges
      the framework keeps outside Python's heap among and below
      ``objects`` (those of its ``types``): Torch's autograd graph, a leaf
      tensor's ``.grad``. Read without running user code (``GUARD``).
    - ``edge_names(parent, child) -> [name] | None``, optional: the names
      of an edge the framework's own C traverse shows (a tensor's
      ``_backward_hooks``), where the generic namer would not find one.
    - ``cannot``: what the walk cannot follow in this framework, in words
      (said where a block of it is held in C++).
    - ``release_note``: what bytes a freed array gives back to the driver
      in this framework, where its allocator's segments are not read
      (``segments``), in words; "" where they are.
    - ``segments(call) -> [(device, address, bytes, [live block
      addresses])] | None``, optional: the allocator's segments, which go
      back to the driver whole once every live block in them is freed
      (what free_plan() promises).
    - ``clear(paths) -> statement | None``, optional: the statement that
      drops the ``.grad`` of the leaf the paths name (Torch: the
      optimizer's ``zero_grad(set_to_none=True)`` where one holds it);
      None: ``<the shortest path>.grad = None``.
    - ``marks(graph, overlay) -> {id(object): words}``, optional: objects
      a chain through which says more (Torch: an optimizer's parameter
      that no model holds any more, and its state).
    - ``graph_advice(name, head, nexts) -> str``, optional: what to do
      about the graph a tensor ``name`` starts, given its first node's
      label and those of the nodes it came from.
    """

    arrays: Callable[[Any, list], tuple]
    attr_dicts: tuple = ()
    cpp: str = "an extension"
    types: Optional[Callable[[], tuple]] = None
    graph: Optional[Callable[[Any, list, float], "Overlay"]] = None
    edge_names: Optional[Callable[[Any, Any], Optional[list]]] = None
    cannot: str = ""
    release_note: str = ""
    segments: Optional[Callable[[Any], Optional[list]]] = None
    clear: Optional[Callable[[list], Optional[str]]] = None
    graph_advice: Optional[Callable[[str, str, list], str]] = None
    marks: Optional[Callable[[dict, dict], dict]] = None


@dataclass
class Overlay:
    """What ``Holders.graph`` read: ``edges`` (parent, child, name, kind),
    each a reference the framework holds outside the heap, named as a user
    reads it, kind "grad_fn" (a tensor to its graph), "next" (a node to
    the node it came from), "saved" (a node to what it saved), "grad" (a
    leaf to its .grad); ``arrays`` (array, device, storage, bytes) of the
    GPU arrays among their children; ``labels`` {id(node): its name}
    (AddBackward0); ``notes``; ``unread`` the saved values not read, by
    reason ("user code": a saved-tensor hook would have run)."""

    edges: list
    arrays: list
    labels: dict
    notes: list
    unread: dict


class UserCode(Exception):
    """Raised by GUARD in a Python function the walk's reads would have
    run: the function never starts."""


def _forbid(frame: Any, event: str, arg: Any) -> None:
    if event == "call":
        raise UserCode(frame.f_code.co_name)


#: (profile function, its exception): _gpureclaim._follow's guard
GUARD = (_forbid, UserCode)


@dataclass(frozen=True)
class OOMHook:
    """A framework's out-of-memory hook (gpureclaim/oom/ runs it).

    - ``module``: the module whose import attaches it ("torch"); the
      startup hook waits for the user to import it and never imports it.
    - ``attach(watch) -> None | why``: attaches the hook to the framework
      already imported (idempotent; a second call re-attaches what the
      program replaced since), or says why it cannot (yet). It must not
      initialise CUDA. The hook reports an out-of-memory error with
      ``watch.capture(...)`` and ``watch.done(post_mortem)``
      (gpureclaim/oom/, ``_Watch``).
    - ``request(exc) -> None | Request``: the request that failed, when
      ``exc`` is this framework's out-of-memory error (what
      ``@retry_on_oom`` catches, and what reaches the top).
    """

    module: str
    attach: Callable[[Any], Optional[str]]
    request: Callable[[BaseException], Optional["Request"]]


@dataclass(frozen=True)
class Request:
    """What an out-of-memory error says was asked for: ``bytes`` (exact
    where ``exact``; Torch's message gives two decimals of a unit),
    ``device`` (a CUDA ordinal, None where it does not say)."""

    bytes: int
    device: Optional[int]
    exact: bool


class _Options(threading.local):
    """The options of the release running on this thread, set by
    ``gpureclaim.release()`` around the core's release: the core calls the
    releasers back on the thread that called it."""

    workspaces = False


options = _Options()


def imported(name: str) -> Any:
    """``sys.modules[name]`` if the program imported it, else None (a
    None entry, which blocks an import, counts as not imported)."""
    return _modules.get(name)


def lookup(cls: type, name: str, default: Any = None) -> Any:
    """The attribute ``name`` as ``cls`` defines it: the object in the
    first of its MRO's own dicts that has it (a descriptor, unbound), or
    default. Reads dicts only: no metaclass ``__getattr__`` runs."""
    for k in type.__dict__["__mro__"].__get__(cls):
        d = _c._instance_dict(k)
        if d is not None and name in d:
            return d[name]
    return default


_MISSING = object()


def reader(cls: type, name: str) -> Callable[[Any], Any]:
    """A reader of attribute ``name`` as ``cls`` defines it (the descriptor
    in its own MRO, from each class's own dict), or from an instance's own
    ``__dict__`` where cls defines none: no subclass's property or
    ``__getattr__`` runs."""
    desc = lookup(cls, name, _MISSING)
    if desc is not _MISSING:
        get = getattr(type(desc), "__get__", None)
        if get is not None:
            return lambda o: get(desc, o, cls)
        return lambda o: desc

    def own(o: Any) -> Any:
        d = _c._instance_dict(o)
        if d is None or name not in d:
            raise AttributeError(name)
        return d[name]
    return own


def describe(e: BaseException) -> str:
    """An exception as a note reads it: "<Type>: <message>"."""
    try:
        msg = str(e)
    except Exception:
        msg = "?"
    name = type(e).__qualname__
    return f"{name}: {msg}" if msg else name


def failed(step: str, e: BaseException) -> Failed:
    """The failure of one named step: "<step>: <Type>: <message>"."""
    return Failed(f"{step}: {describe(e)}")


def item(d: Any, key: str) -> int:
    """``d[key]`` when d is a dict and the value an int, else -1."""
    if isinstance(d, dict):
        v = d.get(key)
        if isinstance(v, int):
            return v
    return -1


#: what :func:`on_device` returns where it left the GPU alone
SKIPPED = object()


def on_device(switch: Any, device: int, work: Callable[[], Any]) -> Any:
    """``work()`` with ``device`` current in a framework that switches
    through ``getDevice()`` and ``setDevice(i)`` (CuPy's
    ``cupy.cuda.runtime``, RMM's ``rmm._cuda.gpu``), the previous device
    restored after it, even when work raised (its exception is the one
    kept). Returns work's result, or ``(SKIPPED, prev)`` without calling
    it when the thread's current device has no context: setDevice could
    not restore it without opening one there (~500 MiB).
    """
    prev = _index(switch.getDevice())
    if prev == device:
        return work()
    if not _c._primary_active(prev):
        return SKIPPED, prev
    switch.setDevice(device)
    try:
        out = work()
    except BaseException:
        try:
            switch.setDevice(prev)
        except Exception:
            pass  # the work's error is the one to see
        raise
    switch.setDevice(prev)
    return out


def skipped(out: Any) -> Optional[int]:
    """The previous device when :func:`on_device` left the GPU alone."""
    if type(out) is tuple and len(out) == 2 and out[0] is SKIPPED:
        return out[1]
    return None


class Parts:
    """One GPU being explained: the parts its explainers add (each a dict,
    the shape of ``docs/explain.md``'s parts), their known sum, and the
    call's notes (shared by every GPU)."""

    __slots__ = ("device", "parts", "notes", "sum")

    def __init__(self, device: Any, notes: list):
        self.device = device
        self.parts: list = []
        self.notes = notes
        self.sum = 0

    def add(self, kind: str, source: str, bytes: int = 0, *,
            known: bool = True, exact: bool = True,
            evidence: Optional[str] = None, advice: Optional[str] = None,
            hint: Optional[str] = None, how: str = "",
            detail: Any = None) -> None:
        """Appends a part. ``known`` False: the bytes are not reported
        (they stay in the rest). ``exact``: bytes and attribution are
        measured (a counter, the snapshot, Torch's workspace map, a driver
        pool, a trace), not inferred; ``evidence`` says by what (default
        "counter"). ``advice``: a key of the advice table (only advice that,
        followed, makes the part go); ``hint``: a key of the hint table,
        for the next start."""
        self.parts.append(part(kind, source, bytes, known=known, exact=exact,
                               evidence=evidence, advice=advice, hint=hint,
                               how=how, detail=detail))
        if known:
            self.sum += bytes

    def note(self, text: str) -> None:
        self.notes.append(text)


def part(kind: str, source: str, bytes: int = 0, *, known: bool = True,
         exact: bool = True, evidence: Optional[str] = None,
         advice: Optional[str] = None, hint: Optional[str] = None,
         how: str = "", detail: Any = None) -> dict:
    """A part as a dict (see :meth:`Parts.add`)."""
    return {"kind": kind, "source": source, "bytes": bytes, "known": known,
            "exact": bool(exact and known), "evidence": evidence or "counter",
            "advice_key": advice, "hint_key": hint, "how": how,
            "detail": detail}
