"""gpureclaim: give a GPU process its cached memory back, and say what the
driver got.

One call empties every caching allocator the program uses (PyTorch, CuPy,
Numba, Torch MPS, MLX, and pools registered with :func:`register`) on every
GPU this process has opened, and no other, and reports the bytes the driver
got back::

    import gpureclaim
    gpureclaim.release_cached_memory()          # 2.147483648 (units of 1e9 B)
    report = gpureclaim.release(verbose=True)   # the full report
    # GPU 0: released 2.0 GiB, 32.0 GiB in use, 69.9 GiB free

Accounting: the number is the drop, over the call, of the driver's figure for
this process (NVML's per-process ``usedGpuMemory``, what ``nvidia-smi``
lists), summed over the visited GPUs. It never counts other processes. Where
the driver has no per-process figure (MIG, a pid namespace, no NVML) the
allocators' own counters are used instead and ``Release.source`` says so.
On Apple silicon the figure is Metal's per-process total
(``torch.mps.driver_allocated_memory()``).

gpureclaim never imports a framework the program has not imported, never
initialises CUDA and never opens a context.

When memory runs out, a post-mortem of that moment (who holds what, and
whether the request would fit after a release), and the rescue::

    gpureclaim.watch_oom()            # or GPURECLAIM_OOM=1 in the environment

    @gpureclaim.retry_on_oom          # release(), then call it again
    def step(batch): ...

Free the live arrays the program no longer needs, by the statements a
user would type, with the bytes each gives back::

    plan = gpureclaim.free_plan()   # del total (the autograd graph of total)...
    gpureclaim.free(plan)           # runs them; what the driver got back

Where the driver's allocations come from, from inside the program::

    with gpureclaim.trace("cell.trace") as t:
        step()
    t.report()   # the tables of `gpureclaim report` (and a plot in Jupyter)
"""
from __future__ import annotations

import json as _json
import warnings as _warnings
from dataclasses import asdict as _asdict
from dataclasses import dataclass as _dataclass
from typing import Any, Callable, Iterable, Optional, Union

from . import _explain
from . import _gpureclaim as _c
from . import frameworks as _frameworks
from ._free import FreePlan, FreeReport, FreeStep, free, free_plan
from ._trace import Trace, TraceReport, load_ipython_extension, trace
from .oom import retry_on_oom, watch_oom

__all__ = [
    "Error",
    "Explanation",
    "FreePlan",
    "FreeReport",
    "FreeStep",
    "GPU",
    "GPUExplanation",
    "Held",
    "NothingMeasuredWarning",
    "Part",
    "Release",
    "ReleaserRow",
    "ReleaserStatus",
    "Trace",
    "TraceReport",
    "devices_in_use",
    "explain",
    "format_bytes",
    "free",
    "free_plan",
    "process_memory",
    "register",
    "release",
    "release_cached_memory",
    "releasers",
    "retry_on_oom",
    "trace",
    "unregister",
    "watch_oom",
]


def __getattr__(name: str) -> Any:
    # gpureclaim.cluster (Dask, torch.distributed, Ray) loads on first use.
    if name == "cluster":
        import importlib

        return importlib.import_module(".cluster", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__version__ = _c.version()

#: Raised when the library cannot do what was asked (driver errors).
Error = _c.Error

# Every framework takes part in releases as a user's pool does (register()
# below, the one trampoline of the C layer), first, in the table's order.
# Where the library could not open (no usable driver), import still works
# and each call says why it cannot run.
try:
    _frameworks.register_all()
except Error:
    pass


def format_bytes(n: Optional[int]) -> str:
    """Bytes for people, by the one rule of every figure gpureclaim
    shows: binary units with one decimal ("512 B", "1.5 KiB", "80.0 GiB");
    ``"-"`` for None. Exact counts are in ``to_dict()`` and JSON."""
    return _c.format_bytes(n)


@_dataclass(frozen=True)
class GPU:
    """One visited GPU (``device`` is its CUDA ordinal, or ``"mps"``).

    ``released`` is ``before - after`` of this process's driver figure
    (or the allocators' drop where ``known`` is False; ``before`` and
    ``after`` are then None); ``used``, ``free`` and ``total`` are the
    whole GPU's figures after the call, all processes (None where NVML
    cannot say, as on the ``"mps"`` GPU).
    """

    device: Union[int, str]
    nvml_index: int
    known: bool
    released: int
    before: Optional[int]
    after: Optional[int]
    used: Optional[int]
    free: Optional[int]
    total: Optional[int]


@_dataclass(frozen=True)
class Held:
    """What a framework says it holds: ``live`` bytes in live
    allocations, ``cached`` bytes held but free for reuse."""

    live: int
    cached: int


@_dataclass(frozen=True)
class ReleaserRow:
    """One releaser on one GPU (``device`` -1: its once-per-call step).

    ``before`` and ``after`` are what the framework reported (:class:`Held`),
    None where it could not tell; ``known`` is True when both are known.
    ``status`` is 0 or the negative code of a failure (the notes say what
    failed).
    """

    name: str
    device: int
    known: bool
    before: Optional[Held]
    after: Optional[Held]
    status: int

    @property
    def released(self) -> Optional[int]:
        """The framework's own drop (live + cached, before - after), or
        None when it is not known."""
        if not (self.before and self.after):
            return None
        return (self.before.live + self.before.cached) - (
            self.after.live + self.after.cached)


@_dataclass(frozen=True)
class ReleaserStatus:
    """Whether a releaser takes part in releases in this process, and why."""

    name: str
    kind: str  # "cuda", "metal" or "user"
    active: bool
    why: str


class Release:
    """The report of one :func:`release` call, as the C library made it:
    its attributes and ``to_dict()`` carry the keys of ``gpr_report_json``
    (the table of fields is in docs/c-api.md), ``repr()`` is
    ``gpr_report_text`` and the notebook view ``gpr_report_html``.

    Attributes:
        bytes: bytes this process handed back to the driver (may be
            negative if the program allocated during the call).
        gb: ``bytes / 1e9`` (what :func:`release_cached_memory` returns).
        source: ``"driver"`` (the driver's per-process figure: NVML's, or
            Metal's per-process total on Apple silicon), ``"allocators"``
            (the frameworks' own counters, where the driver has no
            per-process figure) or ``"none"`` (nothing was measured: no
            GPU in use, CUDA not loaded, a forked child; the notes say
            why).
        seconds: seconds the call took.
        collected: whether the garbage collector ran.
        collect_seconds: seconds it took.
        gpus: the visited GPUs (:class:`GPU`).
        releasers: per releaser and GPU, before and after
            (:class:`ReleaserRow`).
        notes: everything skipped or failed, one sentence each.
    """

    __slots__ = ("_handle", "_rendered", "_dict", "bytes", "source",
                 "seconds", "collected", "collect_seconds", "gpus",
                 "releasers", "notes")

    def __init__(self, handle: Any):
        self._handle = handle
        self._rendered: Optional[tuple] = None
        self._load(_json.loads(_c.report_json(handle)))

    def _load(self, d: dict) -> None:
        self._dict = d
        self.bytes: int = d["bytes"]
        self.source: str = d["source"]
        self.seconds: float = d["seconds"]
        self.collected: bool = d["collected"]
        self.collect_seconds: float = d["collect_seconds"]
        self.gpus: list[GPU] = [GPU(**g) for g in d["gpus"]]
        self.releasers: list[ReleaserRow] = [
            ReleaserRow(**dict(r, before=r["before"] and Held(**r["before"]),
                               after=r["after"] and Held(**r["after"])))
            for r in d["releasers"]]
        self.notes: list[str] = list(d["notes"])

    @property
    def gb(self) -> float:
        """The bytes handed back, in units of 1e9 bytes."""
        return self.bytes / 1e9

    def __float__(self) -> float:
        return self.gb

    def to_dict(self) -> dict[str, Any]:
        """The report as plain values, exact bytes (JSON-serialisable):
        ``gpr_report_json``'s document."""
        return _json.loads(_json.dumps(self._dict))

    def _views(self) -> tuple:
        if self._rendered is None:
            self._rendered = (_c.report_text(self._handle).rstrip("\n"),
                              _c.report_html(self._handle))
        return self._rendered

    def __repr__(self) -> str:
        return self._views()[0]

    def _repr_html_(self) -> str:
        return self._views()[1]

    def __reduce__(self):
        text, html = self._views()
        return (_restore_release, (_json.dumps(self._dict), text, html))

    def verbose_lines(self) -> list[str]:
        """The lines ``verbose=True`` prints: one per visited GPU, then
        the total, with the figure :func:`release_cached_memory` returns
        (units of 1e9 bytes, the one figure not in binary units)."""
        out = []
        for g in self.gpus:
            line = f"GPU {g.device}: released {format_bytes(g.released)}"
            if g.total:
                line += (f", {format_bytes(g.used)} in use, "
                         f"{format_bytes(g.free)} free")
            elif g.after is not None:
                line += f", {format_bytes(g.after)} held by this process"
            out.append(line)
        if not out:
            why = self.notes[0] if self.notes else "no GPU in use"
            return [f"gpureclaim: released nothing: {why}"]
        out.append(f"released {format_bytes(self.bytes)} "
                   f"({self.bytes} bytes); release_cached_memory() returns "
                   f"{self.gb!r} (units of 1e9 bytes)")
        return out


def _restore_release(doc: str, text: str, html: str) -> Release:
    """A Release from its pickled form (the C report is not pickled: its
    views are)."""
    r = Release.__new__(Release)
    r._handle = None
    r._rendered = (text, html)
    r._load(_json.loads(doc))
    return r


class NothingMeasuredWarning(UserWarning):
    """:func:`release_cached_memory` returned 0.0 because there was
    nothing to measure (no GPU in use by this process, CUDA not loaded, a
    forked child). Issued once per process; silence it with
    ``warnings.filterwarnings("ignore", category=gpureclaim.NothingMeasuredWarning)``."""


_warned_nothing = False


def _check_bool(fn: str, name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{fn}(): {name} must be True or False, not "
                        f"{value!r}")


def release(
    *,
    devices: Optional[Iterable[int]] = None,
    collect: Union[str, bool] = "auto",
    workspaces: bool = False,
    verbose: bool = False,
) -> Release:
    """Return cached GPU memory to the driver; report what it got back.

    Visits the GPUs on which this process holds a context (``devices``
    narrows them; a listed GPU without a context is skipped with a note),
    makes each current in turn in every framework (restoring the previous
    one), and empties: Torch's CUDA caching allocator, CuPy's pool, CuPy's
    cuFFT plan cache when it holds plans, CuPy's async pool where used,
    user pools; once per call: CuPy's pinned pool, Torch's host cache,
    Numba's pending deallocations, Torch MPS and MLX caches.

    Args:
        devices: CUDA ordinals to visit, or None for all in use.
        collect: ``"auto"`` runs the garbage collector only when a
            framework reports live bytes (an object in a reference cycle,
            or a live array), before the caches are emptied: the young
            generations first (``gc.collect(1)``), a full ``gc.collect()``
            only if live bytes remain; ``True`` a full one always,
            ``False`` never.
        workspaces: also free Torch's cuBLAS/cuBLASLt workspaces (they are
            re-created, at a cost, by the next matmul).
        verbose: print one line per GPU, e.g.
            ``GPU 0: released 2.0 GiB, 32.0 GiB in use, 69.9 GiB free``,
            then the total (:meth:`Release.verbose_lines`).

    Raises:
        TypeError, ValueError: bad arguments.
        gpureclaim.Error: the library could not run (e.g. a bad driver).
    """
    _check_bool("release", "verbose", verbose)
    _check_bool("release", "workspaces", workspaces)
    opts = _frameworks.options
    saved, opts.workspaces = opts.workspaces, workspaces
    try:
        handle = _c.release(devices=devices, collect=collect)
    finally:
        opts.workspaces = saved
    r = Release(handle)
    if verbose:
        for line in r.verbose_lines():
            print(line)
    return r


def release_cached_memory(verbose: bool = False) -> float:
    """Return cached GPU memory to the driver; the bytes it got back / 1e9.

    The drop-in form of :func:`release` (``collect="auto"``), in units of
    1e9 bytes (GB), as the function it stands in for returned them. When
    there was nothing to measure (no GPU in use by this process, CUDA not
    loaded) it returns 0.0 and, once per process, issues a :class:`NothingMeasuredWarning` that says
    why (``verbose=True`` prints it instead).
    """
    global _warned_nothing
    _check_bool("release_cached_memory", "verbose", verbose)
    r = release(verbose=verbose)
    if r.source == "none" and not verbose and not _warned_nothing:
        _warned_nothing = True
        why = "; ".join(r.notes) or "no GPU in use by this process"
        _warnings.warn(f"gpureclaim.release_cached_memory() measured "
                       f"nothing and returns 0.0: {why}",
                       NothingMeasuredWarning, stacklevel=2)
    return r.gb


def devices_in_use() -> list[int]:
    """CUDA ordinals of the GPUs on which this process holds a context.

    Opens none and never initialises the driver: ``[]`` when CUDA is not
    loaded or not initialised in this process.
    """
    return _c.devices_in_use()


def process_memory() -> dict[int, Optional[int]]:
    """The driver bytes this process holds on each GPU it has opened.

    ``None`` for a GPU where the driver has no per-process figure (MIG, a
    pid namespace without the host pid, no NVML).
    """
    return _c.process_memory()


def register(
    name: str,
    release: Callable[[int], Any],
    held: Optional[Callable[[int], int]] = None,
    live: Optional[Callable[[int], int]] = None,
) -> None:
    """Make a pool of your own take part in every release.

    ``release(device)`` is called once per visited GPU with its CUDA
    ordinal (the GPU is not made current for you); ``held(device)`` returns
    the bytes the pool holds there, live and cached; ``live(device)`` the
    bytes in live allocations (with ``collect="auto"`` live bytes make the
    garbage collector run before the pools are emptied). An exception in a
    callback becomes a note of the report; the other releasers still run.
    Callbacks must not call :func:`release`, :func:`register` or
    :func:`unregister` (they raise :class:`Error`).

    Raises ValueError if ``name`` is taken (the built-in names too).
    """
    for what, fn in (("held", held), ("live", live)):
        if fn is not None and not callable(fn):
            raise TypeError(f"register(): {what} must be callable or None")
    _c.register(name, _user_release(release) if callable(release)
                else release, _user_held(held, live))


def _user_release(release: Callable[[int], Any]) -> Callable[[int], None]:
    """A user's release(device), its return value dropped (a framework's
    str is a note; a user's result is no note)."""

    def call(device: int) -> None:
        release(device)

    return call


def _bytes(v: Any) -> int:
    n = v.__index__()
    if n < 0:
        raise ValueError(f"returned {n} bytes")
    return n


def _user_held(held: Optional[Callable[[int], int]],
               live: Optional[Callable[[int], int]]) -> Optional[Callable]:
    """A user's held(device) and live(device) as the trampoline's
    held(device) -> (live, cached); None when neither is given."""
    if held is None and live is None:
        return None

    def call(device: int) -> Optional[tuple]:
        if device < 0:
            return None
        total = _bytes(held(device)) if held is not None else 0
        n = _bytes(live(device)) if live is not None else 0
        return n, max(total - n, 0)

    return call


def unregister(name: str) -> None:
    """Remove a pool added with :func:`register`; KeyError if none."""
    if isinstance(name, str) and name in _frameworks.NAMES:
        # the frameworks' releasers are not the user's to remove
        raise KeyError(f"unregister(): no releaser named {name!r} was "
                       f"registered with register()")
    _c.unregister(name)


def releasers() -> list[ReleaserStatus]:
    """Every releaser, whether it is active in this process, and why."""
    out = []
    for f in _frameworks.TABLE:
        handle, why = f.probe()
        out.append(ReleaserStatus(f.name, f.kind, handle is not None, why))
    for name in _c.releaser_names():
        if name not in _frameworks.NAMES:
            out.append(ReleaserStatus(name, "user", True,
                                      "registered with register()"))
    return out


# ---------------------------------------------------------------- explain

# The one table of what explain() shows: each part kind's label and its
# colour in the bars (the views' palette, one colour a kind); each advice
# key's text (the explainers give a key only for advice that, followed, makes
# the part go), each hint key's text (configuration for the next start,
# which cannot be checked in this process). A kind an explainer sends that
# is not here (a newer one) is shown by its name, in a palette colour.
_KINDS = {
    "live": ("live", "#4e79a7"),
    "releasable": ("cached, returnable", "#59a14f"),
    "fragmented": ("cached, not returnable", "#e15759"),
    "workspace": ("library workspace", "#f28e2b"),
    "unattributed": ("unattributed live block", "#9c755f"),
    "graph_pool": ("CUDA graph / private pool", "#76b7b2"),
    "pool": ("pool, never shrinks", "#b07aa1"),
    "unreported": ("allocated, unreported", "#ff9da7"),
    "context": ("context (bare, measured)", "#79706e"),
    "rest": ("rest", "#bab0ac"),
}


# Workspaces of different libraries side by side in one bar: a colour each
# (the orange family of the palette), the kind's orange for any other.
_WORKSPACE_COLOURS = {
    "cuBLAS": "#f28e2b",
    "cuBLASLt": "#ffbe7d",
    "cuFFT plans (cupy)": "#b6992d",
    "cuFFT plans (torch)": "#b6992d",
}


def _kind(kind: str) -> tuple:
    """(label, colour or None) of a part kind."""
    return _KINDS.get(kind, (kind.replace("_", " "), None))


def _colour(kind: str, source: str) -> Optional[str]:
    """A part's colour: its kind's, a workspace's by its library."""
    if kind == "workspace":
        return _WORKSPACE_COLOURS.get(source, "#f1ce63")
    return _kind(kind)[1]


def _kind_rank(kind: str) -> int:
    """A kind's place in the table; those it lacks come after every one."""
    order = list(_KINDS)
    return order.index(kind) if kind in order else len(order)


def _kind_order(kinds: Iterable[str]) -> list:
    """The kinds in the table's order, those it lacks after them."""
    return sorted(kinds, key=_kind_rank)


_ADVICE = {
    "free_arrays": "delete the arrays/tensors that hold it (del; "
                   "gc.collect() for reference cycles)",
    "release": "gpureclaim.release() returns it",
    "release_workspaces": "gpureclaim.release(workspaces=True) frees it "
                          "(the next matmul re-creates it)",
    "release_workspaces_pins": "gpureclaim.release(workspaces=True): only "
                               "cuBLAS/cuBLASLt workspaces pin these "
                               "segments",
    "free_pinning_blocks": "free the live blocks that pin these segments",
    "clear_torch_plans": "torch.backends.cuda.cufft_plan_cache[i].clear()",
    "delete_graphs": "delete or reset the CUDA graphs using these pools, "
                     "then gpureclaim.release()",
}
_HINTS = {
    "expandable_segments": "next start: "
                           "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
    "xla_preallocate": "set XLA_PYTHON_CLIENT_PREALLOCATE=false (or a "
                       "smaller XLA_PYTHON_CLIENT_MEM_FRACTION) before JAX "
                       "starts; XLA returns its pool only at exit",
    "rmm_pool": "RMM pools never shrink: give PoolMemoryResource a "
                "maximum_pool_size, or use CudaAsyncMemoryResource with a "
                "release_threshold",
    "process_exit": "returned when the process exits",
}


# What each kind of evidence is, in words (Explanation.exactness), in the
# order the sentence names them.
_EVIDENCE = {
    "counter": "the frameworks' counters",
    "snapshot": "Torch's memory snapshot",
    "workspace_map": "Torch's workspace map",
    "history": "Torch's allocator history",
    "driver_pool": "the driver's pool figures",
    "trace": "the trace",
    "residual": "the driver's figure",
    "tensor_scan": "a scan of the Python heap",
    "size": "its size alone",
    "probe": "a probe process",
}


def _and(words: list) -> str:
    """"a", "a and b", "a, b and c"."""
    return words[0] if len(words) == 1 else \
        ", ".join(words[:-1]) + " and " + words[-1]


def _text(key: Optional[str], table: dict) -> str:
    return table.get(key, "") if key else ""


@_dataclass(frozen=True)
class Part:
    """One part of a GPU's figure for this process.

    ``kind``: ``live``, ``releasable`` (cached, release() returns it),
    ``fragmented`` (cached inside segments that still hold live blocks:
    no release can return it), ``workspace`` (library workspaces and plan
    caches, known from more than their size), ``unattributed`` (live Torch
    blocks of a workspace's size that nothing else identifies),
    ``graph_pool`` (private pools of CUDA graphs and MemPools),
    ``pool`` (a pool that never shrinks), ``unreported`` (driver
    allocations of a library no framework reports, from a trace),
    ``context`` (a bare context's size, measured) or ``rest`` (the
    driver's figure minus every other part). ``source``: the framework or
    library. ``known`` is False where the bytes are not reported (they are
    then in the rest). ``exact``: the bytes and their attribution are
    measured, not inferred; ``evidence`` says by what (``counter``,
    ``snapshot``, ``workspace_map``, ``history``, ``tensor_scan``,
    ``size``, ``driver_pool``, ``trace``, ``probe``, ``residual``).
    ``how`` says how the bytes were measured or inferred; ``advice`` what
    to do (empty where nothing done in this process would make the part
    go), ``hint`` what to configure at the next start; ``detail`` holds
    extra data (the blocks, the segments pinned by live blocks, the pools,
    the heap scan's cost).
    """

    kind: str
    source: str
    bytes: int
    known: bool
    how: str
    advice: str
    detail: Optional[dict] = None
    exact: bool = False
    evidence: str = ""
    advice_key: Optional[str] = None
    hint: str = ""
    hint_key: Optional[str] = None


@_dataclass(frozen=True)
class GPUExplanation:
    """One GPU: ``driver`` is this process's figure there (``source``
    "driver": NVML's per-process figure; "allocators": the driver has no
    per-process figure, so it is the sum of the parts), split exactly into
    ``parts`` (the last is the rest). ``consistent`` is False when the
    parts exceed the driver's figure (a negative rest, never clamped)."""

    device: Union[int, str]
    driver: int
    source: str
    parts: list
    rest: int
    consistent: bool

    def part(self, kind: str, source: Optional[str] = None) -> int:
        """Bytes of the parts of that kind (and source)."""
        return sum(p.bytes for p in self.parts if p.kind == kind
                   and (source is None or p.source == source))


class Explanation(_explain.Rendered):
    """The result of :func:`explain`: ``gpus`` (:class:`GPUExplanation`),
    ``notes``, ``seconds`` (the time it took). Prints as text tables,
    renders in a notebook as a labelled bar and a table per GPU (both
    from one field list, by the C library's renderer); ``to_dict()``
    gives plain values, exact bytes."""

    __slots__ = ("gpus", "notes", "seconds", "holders")

    def __init__(self, raw: dict):
        self.gpus: list[GPUExplanation] = []
        for g in raw["gpus"]:
            parts = [Part(advice=_text(p["advice_key"], _ADVICE),
                          hint=_text(p["hint_key"], _HINTS), **p)
                     for p in g["parts"]]
            rest = g["rest_part"]
            parts.append(Part(advice="", hint=_text(rest["hint_key"], _HINTS),
                              **rest))
            self.gpus.append(GPUExplanation(
                g["device"], g["driver"], g["source"], parts, g["rest"],
                g["consistent"]))
        self.notes: list[str] = list(raw["notes"])
        self.seconds: float = raw["seconds"]
        #: explain(holders=True)'s answer (None when not asked): "blocks",
        #: the largest allocations per framework and GPU, each with its
        #: "chains" of names, "state" and "advice"; "walk", what the heap
        #: walk covered; "notes" (docs/explain.md, "Who holds it")
        self.holders: Optional[dict] = raw.get("holders")

    def to_dict(self) -> dict[str, Any]:
        """Plain values (JSON-serialisable)."""
        return {
            "gpus": [dict(_asdict(g), parts=[_asdict(p) for p in g.parts])
                     for g in self.gpus],
            "notes": list(self.notes),
            "seconds": self.seconds,
            "holders": self.holders,
        }

    @staticmethod
    def exactness(g: GPUExplanation) -> str:
        """One sentence: which of g's figures are measured and which
        inferred, and from what, in words."""
        shown = [p for p in g.parts if p.known and p.bytes]
        exact = [p for p in shown if p.exact]
        guessed = [p for p in shown if not p.exact]
        found = {p.evidence for p in exact}
        words = [w for e, w in _EVIDENCE.items() if e in found]
        words += sorted(e for e in found if e not in _EVIDENCE)
        head = ("every part" if not guessed else
                f"{len(exact)} of {len(shown)} parts")
        out = f"measured: {head}"
        if words:
            out += f" (from {_and(words)})"
        out += "; inferred: " + ("; ".join(
            f"{p.source} {_kind(p.kind)[0]} {format_bytes(p.bytes)} "
            f"(from {_EVIDENCE.get(p.evidence, p.evidence)})"
            for p in guessed) or "none")
        return out

    @staticmethod
    def _shown(g: GPUExplanation) -> list:
        return [p for p in g.parts
                if p.bytes != 0 or not p.known or p.kind == "rest"]

    @staticmethod
    def _extra(p: Part) -> list[str]:
        """Lines under a part: how it was inferred, what pins it."""
        out = []
        if p.kind not in ("live", "releasable", "fragmented") or not p.known:
            out.append(p.how)
        if p.hint:
            out.append(p.hint)
        d = p.detail or {}
        if p.kind == "fragmented" and d.get("segments"):
            b = format_bytes
            out.append(f"{d['segments']} segment(s) hold live and free "
                       f"blocks ({b(d['free_in_segments'])} free); "
                       "the largest pinned:")
            for s in d["pinned"]:
                out.append(
                    f"  segment {s['segment']:#x} of "
                    f"{b(s['segment_size'])}: {b(s['free'])} free, pinned "
                    f"by {s['live_blocks']} live block(s) "
                    f"({s['workspace_blocks']} workspace), the largest "
                    f"{b(s['largest_live'])} at "
                    f"{s['largest_live_address']:#x}")
        return out

    _COLUMNS = [("part", "text"), ("source", "text"), ("bytes", "bytes"),
                ("share", "share"), ("what to do", "prose")]

    def _view(self) -> tuple:
        """The view's field list, rendered as text and as HTML by the C
        library (gpureclaim._gpureclaim.render)."""
        blocks: list = []
        for g in self.gpus:
            src = ("Metal's per-process total"
                   if g.source == "driver" and g.device == "mps" else
                   "the driver's per-process figure" if g.source == "driver"
                   else "the sum of the allocators' figures")
            blocks.append(("h", f"GPU {g.device}: {format_bytes(g.driver)} "
                                f"held by this process ({src})"))
            # the kinds in the table's order: one colour, one run
            shown = sorted(self._shown(g), key=lambda p: _kind_rank(p.kind))
            blocks.append(("bar", None, [
                (f"{_kind(p.kind)[0]} ({p.source})", p.bytes,
                 _colour(p.kind, p.source))
                for p in shown if p.known and p.bytes > 0]))
            rows = []
            for p in shown:
                label, colour = _kind(p.kind)[0], _colour(p.kind, p.source)
                share = (p.bytes / g.driver if g.driver and p.known
                         else None)
                rows.append([(label, colour), p.source,
                             p.bytes if p.known else None, share, p.advice,
                             self._extra(p)])
            rows.append(["total", "", g.driver, "", ""])
            blocks.append(("table", None, self._COLUMNS, rows))
            if not g.consistent:
                blocks.append(("warn", f"inconsistent: the parts exceed "
                                       f"the driver's figure by "
                                       f"{-g.rest} bytes"))
            blocks.append(("p", self.exactness(g)))
        if not self.gpus:
            blocks.append(("p", "no GPU memory held by this process"))
        if self.holders is not None:
            blocks += _holders_view(self.holders)
        blocks.append(("notes", self.notes))
        return ("gpureclaim.explain(): where this process's GPU memory "
                "goes", blocks)


def _holders_view(h: dict) -> list:
    """The view's blocks for explain(holders=True): a table of the largest
    allocations, each with the chains of names that hold it."""
    w = h["walk"]
    out: list = [("h", "Who holds the largest live allocations")]
    rows = []
    for b in h["blocks"]:
        shown = [c["path"] for c in b["chains"] if not c["covered"]]
        lines = shown or [b["why"]]
        more = len(b["chains"]) - len(shown)
        if more:
            lines.append(f"and {more} more through what those statements "
                         f"empty (to_dict() lists them)")
        views = (f", {b['arrays']} arrays share it" if b["arrays"] > 1
                 else "")
        rows.append([f"{b['framework']} GPU {b['device']}", b["bytes"],
                     f"{b['address']:#x}{views}", b["advice"], lines])
    if rows:
        out.append(("table", None, [("framework", "text"),
                                    ("bytes", "bytes"),
                                    ("allocation", "text"),
                                    ("what to do", "prose")], rows))
    else:
        out.append(("p", "no live arrays found"))
    graphs = h.get("graphs") or []
    if graphs:
        out.append(("h", "Autograd graphs that hold saved activations"))
        out.append(("table", None, [("tensor", "text"), ("saved", "text"),
                                    ("bytes", "bytes"),
                                    ("what to do", "prose")],
                    [[g["tensor"], str(g["saved"]), g["bytes"],
                      g["advice"], [g["path"]]] for g in graphs]))
    cut = ""
    if w["stopped"]:
        cut = (f"; stopped by its {'time' if w['stopped'] == 'time' else 'object'}"
               f" budget after {w['examined']} of {w['objects']} objects: "
               f"the chains shown may not be the shortest")
    out.append(("p", f"the heap walk read {w['examined']} of "
                     f"{w['objects']} objects in {w['ms']:.0f} ms"
                     f"{cut}"))
    for n in h["notes"]:
        out.append(("p", n))
    return out


def explain(devices: Optional[Iterable[int]] = None, *,
            measure_context: bool = False, holders: bool = False,
            holders_budget: float = 1.0,
            holders_max_objects: Optional[int] = None) -> Explanation:
    """Where this process's GPU memory goes, per GPU it has opened.

    Splits the driver's per-process figure (NVML's, what ``nvidia-smi``
    lists) exactly into: live bytes per framework; cached bytes
    :func:`release` would return; cached bytes it cannot return (free
    space inside Torch segments that still hold live blocks, with the
    blocks pinning them); library workspaces (cuBLAS known from Torch's
    own workspace map or allocator history, cuFFT plan caches); live
    Torch blocks of a workspace's size that nothing identifies
    ("unattributed", no advice); CUDA graph and MemPool private pools;
    pools that never shrink (JAX/XLA, RMM); when the process is traced,
    driver allocations per library no framework reports (NCCL, cuDNN...);
    the context, once measured; and the rest. Each part says how it was
    measured or inferred, whether that is exact, and what to do about it.
    Reads only; opens no context, imports no framework. ``devices``
    narrows the GPUs (CUDA ordinals).

    ``measure_context=True`` measures the size of a bare context on each
    GPU not measured yet in this process, in a probe process that opens
    one there (0.3-0.6 s and about 500 MB of that GPU while it runs);
    later calls show the figure without measuring again.

    ``holders=True`` also names who keeps the largest live allocations
    alive (the ten largest per framework and GPU: Torch tensors, CuPy
    and JAX arrays, views of one allocation counted once): the shortest
    chain of names from each root that reaches it, as you would type it
    (``model.layers[3].mlp.up_proj.weight``, ``Out[7]``,
    ``sys.last_traceback: frame train() local 'batch'``), or that only a
    reference cycle or C++ holds it, with what to do. The heap walk runs
    no user code and stops after ``holders_budget`` seconds or
    ``holders_max_objects`` objects (None: all), saying where.
    """
    _check_bool("explain", "measure_context", measure_context)
    _check_bool("explain", "holders", holders)
    if not isinstance(holders_budget, (int, float)) or \
            isinstance(holders_budget, bool) or holders_budget <= 0:
        raise ValueError("explain: holders_budget must be a positive "
                         "number of seconds")
    if holders_max_objects is not None and (
            not isinstance(holders_max_objects, int)
            or isinstance(holders_max_objects, bool)
            or holders_max_objects < 0):
        raise ValueError("explain: holders_max_objects must be None or a "
                         "non-negative int")
    walk = ({"budget_s": float(holders_budget),
             "max_objects": holders_max_objects} if holders else None)
    return Explanation(_explain.explain(devices, measure_context,
                                        holders=walk))
