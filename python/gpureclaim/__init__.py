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
from dataclasses import dataclass as _dataclass
from typing import Any, Callable, Iterable, Optional, Union

from . import _gpureclaim as _c
from . import frameworks as _frameworks
from ._explain import Explanation, GPUExplanation, Part, _parts
from ._trace import Trace, TraceReport, trace

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


# The wings above this module (they use the API: docs/naming.md, "Layers")
# load on first use, so that `import gpureclaim` stays quick and imports no
# framework: the documented submodules (gpureclaim.agent, .cluster for Dask,
# torch.distributed and Ray, .metrics, .oom) and the names of theirs this
# module offers. name: (module, its attribute, or None for the module).
_LAZY = {
    "agent": (".agent", None),
    "cluster": (".cluster", None),
    "metrics": (".metrics", None),
    "oom": (".oom", None),
    "retry_on_oom": (".oom", "retry_on_oom"),
    "watch_oom": (".oom", "watch_oom"),
    "load_ipython_extension": ("._ipython", "load_ipython_extension"),
    "free_plan": ("._explain._free", "free_plan"),
    "free": ("._explain._free", "free"),
    "FreePlan": ("._explain._free", "FreePlan"),
    "FreeStep": ("._explain._free", "FreeStep"),
    "FreeReport": ("._explain._free", "FreeReport"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(
            f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module, attr = _LAZY[name]
    value = importlib.import_module(module, __name__)
    if attr is not None:
        value = getattr(value, attr)
        globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_LAZY))


def _start_from_environment() -> None:
    """The features the environment asks for (GPURECLAIM_OOM,
    GPURECLAIM_AGENT), from this import on, where no startup hook started
    them as the interpreter started: a build tree (PYTHONPATH=build/python),
    a package copied without its .pth. Where the hook ran, nothing (each
    starts once). Without such a variable set, nothing is imported."""
    import os

    if any(k.startswith("GPURECLAIM_") for k in os.environ):
        import importlib

        importlib.import_module("._startup", __name__).start()


__version__ = _c.version()

#: Raised when the library cannot do what was asked (driver errors).
Error = _c.Error

# explain()'s classes are the API's wherever their code lives: they are
# shown (help(), repr of the class) and pickled as gpureclaim's.
for _cls in (Explanation, GPUExplanation, Part):
    _cls.__module__ = __name__
del _cls

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
    gpu: int  # NVML's index (-1: not matched); nvml_index, its name before
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
        the total (:func:`release_cached_memory` adds the figure it
        returns, in units of 1e9 bytes, the one figure not in binary
        units; release() says only what it released)."""
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
                   f"({self.bytes} bytes)")
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
    r = release()
    if verbose:
        lines = r.verbose_lines()
        if r.gpus:  # its own figure, after what it released
            lines[-1] += (f"; release_cached_memory() returns {r.gb!r} "
                          f"(units of 1e9 bytes)")
        print("\n".join(lines))
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
    return Explanation(_parts.explain(devices, measure_context,
                                      holders=walk))


_start_from_environment()
