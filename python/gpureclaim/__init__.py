"""gpureclaim: give a GPU process its cached memory back, and say what the
driver got.

One call empties every caching allocator the program uses (PyTorch, CuPy,
Numba, Torch MPS, MLX, and pools registered with :func:`register`) on every
GPU this process has opened, and no other, and reports the bytes the driver
got back::

    import gpureclaim
    gpureclaim.release_cached_memory()          # 2.147483648 (units of 1e9 B)
    report = gpureclaim.release(verbose=True)   # the full report
    # GPU 0: released 2.1 GB, 32.0 GB in use, 69.9 GB free

Accounting: the number is the drop, over the call, of the driver's figure for
this process (NVML's per-process ``usedGpuMemory``, what ``nvidia-smi``
lists), summed over the visited GPUs. It never counts other processes. Where
the driver has no per-process figure (MIG, a pid namespace, no NVML) the
allocators' own counters are used instead and ``Release.source`` says so.
On Apple silicon the figure is Metal's per-process total
(``torch.mps.driver_allocated_memory()``).

gpureclaim never imports a framework the program has not imported, never
initialises CUDA and never opens a context.
"""
from __future__ import annotations

import html as _html
from dataclasses import asdict as _asdict
from dataclasses import dataclass as _dataclass
from typing import Any, Callable, Iterable, Optional, Union

from . import _gpureclaim as _c

__all__ = [
    "Error",
    "Explanation",
    "GPU",
    "GPUExplanation",
    "Part",
    "Release",
    "ReleaserRow",
    "ReleaserStatus",
    "devices_in_use",
    "explain",
    "process_memory",
    "register",
    "release",
    "release_cached_memory",
    "releasers",
    "unregister",
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


def _gb(n: Optional[int]) -> str:
    return "-" if n is None else f"{n / 1e9:.3f} GB"


@_dataclass(frozen=True)
class GPU:
    """One visited GPU (``device`` is its CUDA ordinal, or ``"mps"``).

    ``released`` is ``before - after`` of this process's driver figure
    (or the allocators' drop where ``known`` is False); ``used``, ``free``
    and ``total`` are the whole GPU's figures after the call, all processes.
    """

    device: Union[int, str]
    nvml_index: Optional[int]
    known: bool
    released: int
    before: int
    after: int
    used: Optional[int]
    free: Optional[int]
    total: Optional[int]


@_dataclass(frozen=True)
class ReleaserRow:
    """One releaser on one GPU (``device`` -1: its once-per-call step).

    ``*_live`` are bytes in live allocations, ``*_cached`` bytes held but
    free for reuse, as the framework reports them; ``known`` is False where
    it cannot tell. ``status`` is 0 or the negative code of a failure (the
    notes say what failed).
    """

    name: str
    device: int
    known: bool
    before_live: int
    before_cached: int
    after_live: int
    after_cached: int
    status: int

    @property
    def released(self) -> int:
        """The framework's own drop (live + cached, before - after)."""
        return (self.before_live + self.before_cached) - (
            self.after_live + self.after_cached
        )


@_dataclass(frozen=True)
class ReleaserStatus:
    """Whether a releaser takes part in releases in this process, and why."""

    name: str
    kind: str  # "cuda", "metal" or "user"
    active: bool
    why: str


class Release:
    """The report of one :func:`release` call.

    Attributes:
        bytes: bytes this process handed back to the driver (may be
            negative if the program allocated during the call).
        gb: ``bytes / 1e9``.
        source: ``"driver"`` (NVML's per-process figure), ``"metal"``
            (Metal's per-process total), ``"allocators"`` (the frameworks'
            own counters, where the driver has no per-process figure) or
            ``"none"`` (nothing could be measured, e.g. in a forked child).
        gpus: the visited GPUs (:class:`GPU`).
        releasers: per releaser and GPU, before and after
            (:class:`ReleaserRow`).
        elapsed: seconds the call took.
        collected: whether the garbage collector ran.
        collect_seconds: seconds it took.
        notes: everything skipped or failed, one sentence each.
    """

    __slots__ = (
        "bytes",
        "source",
        "gpus",
        "releasers",
        "elapsed",
        "collected",
        "collect_seconds",
        "notes",
    )

    def __init__(self, raw: dict):
        self.bytes: int = raw["bytes"]
        self.source: str = raw["source"]
        self.gpus: list[GPU] = [GPU(**g) for g in raw["gpus"]]
        self.releasers: list[ReleaserRow] = [
            ReleaserRow(**r) for r in raw["releasers"]
        ]
        self.elapsed: float = raw["elapsed"]
        self.collected: bool = raw["collected"]
        self.collect_seconds: float = raw["collect_seconds"]
        self.notes: list[str] = list(raw["notes"])

    @property
    def gb(self) -> float:
        """The bytes handed back, in units of 1e9 bytes."""
        return self.bytes / 1e9

    def __float__(self) -> float:
        return self.gb

    def to_dict(self) -> dict[str, Any]:
        """The report as plain values (JSON-serialisable)."""
        return {
            "bytes": self.bytes,
            "gb": self.gb,
            "source": self.source,
            "elapsed": self.elapsed,
            "collected": self.collected,
            "collect_seconds": self.collect_seconds,
            "gpus": [_asdict(g) for g in self.gpus],
            "releasers": [
                dict(_asdict(r), released=r.released) for r in self.releasers
            ],
            "notes": list(self.notes),
        }

    def _summary(self) -> str:
        gc = (
            f", gc {self.collect_seconds * 1e3:.1f} ms"
            if self.collected
            else ", no gc"
        )
        return (
            f"released {self.bytes} bytes ({self.gb:.3f} GB, source: "
            f"{self.source}) in {self.elapsed * 1e3:.1f} ms{gc}"
        )

    def _gpu_rows(self) -> list[list[str]]:
        return [
            [
                str(g.device),
                _gb(g.released),
                _gb(g.before) if g.known else "?",
                _gb(g.after) if g.known else "?",
                _gb(g.used),
                _gb(g.free),
                _gb(g.total),
            ]
            for g in self.gpus
        ]

    def _releaser_rows(self) -> list[list[str]]:
        rows = []
        for r in self.releasers:
            if not r.known and r.status == 0:
                continue
            rows.append(
                [
                    r.name,
                    "once" if r.device < 0 else str(r.device),
                    _gb(r.before_live + r.before_cached) if r.known else "?",
                    _gb(r.after_live + r.after_cached) if r.known else "?",
                    _gb(r.after_live) if r.known else "?",
                    "ok" if r.status == 0 else f"failed ({r.status})",
                ]
            )
        return rows

    _GPU_HEAD = ["GPU", "released", "before", "after", "in use", "free",
                 "total"]
    _REL_HEAD = ["releaser", "GPU", "held before", "held after",
                 "live after", "status"]

    def __repr__(self) -> str:
        lines = [f"<Release: {self._summary()}>"]
        for head, rows in (
            (self._GPU_HEAD, self._gpu_rows()),
            (self._REL_HEAD, self._releaser_rows()),
        ):
            if not rows:
                continue
            widths = [
                max(len(head[i]), *(len(r[i]) for r in rows))
                for i in range(len(head))
            ]
            for r in [head] + rows:
                lines.append(
                    "  "
                    + "  ".join(
                        c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(r, widths))
                    ).rstrip()
                )
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        def table(head, rows):
            if not rows:
                return ""
            th = "".join(f"<th>{_html.escape(h)}</th>" for h in head)
            body = "".join(
                "<tr>" + "".join(f"<td>{_html.escape(c)}</td>" for c in r)
                + "</tr>"
                for r in rows
            )
            return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"

        notes = "".join(f"<li>{_html.escape(n)}</li>" for n in self.notes)
        return (
            f"<div><b>gpureclaim</b>: {_html.escape(self._summary())}"
            + table(self._GPU_HEAD, self._gpu_rows())
            + table(self._REL_HEAD, self._releaser_rows())
            + (f"<ul>{notes}</ul>" if notes else "")
            + "</div>"
        )

    def verbose_lines(self) -> list[str]:
        """The lines ``verbose=True`` prints: one per visited GPU."""
        out = []
        for g in self.gpus:
            if g.device == "mps":
                out.append(
                    f"MPS: released {g.released / 1e9:.1f} GB, "
                    f"{(g.used or 0) / 1e9:.1f} GB in use"
                )
                continue
            line = f"GPU {g.device}: released {g.released / 1e9:.1f} GB"
            if g.total:
                line += (
                    f", {(g.used or 0) / 1e9:.1f} GB in use, "
                    f"{(g.free or 0) / 1e9:.1f} GB free"
                )
            out.append(line)
        if not out:
            why = self.notes[0] if self.notes else "no GPU in use"
            out.append(f"gpureclaim: released 0.0 GB ({why})")
        return out


def _check_bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, not {value!r}")


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
            ``GPU 0: released 2.1 GB, 32.0 GB in use, 69.9 GB free``.

    Raises:
        TypeError, ValueError: bad arguments.
        gpureclaim.Error: the library could not run (e.g. a bad driver).
    """
    _check_bool("verbose", verbose)
    r = Release(_c.release(devices=devices, collect=collect,
                           workspaces=workspaces))
    if verbose:
        for line in r.verbose_lines():
            print(line)
    return r


def release_cached_memory(verbose: bool = False) -> float:
    """Return cached GPU memory to the driver; the bytes it got back / 1e9.

    The drop-in form of :func:`release` (``collect="auto"``).
    """
    _check_bool("verbose", verbose)
    return release(verbose=verbose).gb


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
    _c.register(name, release, held, live)


def unregister(name: str) -> None:
    """Remove a pool added with :func:`register`; KeyError if none."""
    _c.unregister(name)


def releasers() -> list[ReleaserStatus]:
    """Every releaser, whether it is active in this process, and why."""
    return [ReleaserStatus(**d) for d in _c.releasers()]


# ---------------------------------------------------------------- explain

# The one table of what explain() shows: each part kind's label and colour,
# each advice key's text (the C layer gives a key only for advice that,
# followed, makes the part go), each hint key's text (configuration for the
# next start, which cannot be checked in this process).
_KINDS = {
    "live": ("live", "#4c78a8"),
    "releasable": ("cached, returnable", "#72b7b2"),
    "fragmented": ("cached, not returnable", "#e45756"),
    "workspace": ("library workspace", "#f58518"),
    "unattributed": ("unattributed live block", "#9d755d"),
    "graph_pool": ("CUDA graph / private pool", "#54a24b"),
    "pool": ("pool, never shrinks", "#b279a2"),
    "unreported": ("allocated, unreported", "#ff9da6"),
    "context": ("context (bare, measured)", "#79706e"),
    "rest": ("rest", "#bab0ac"),
}
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


def _text(key: Optional[str], table: dict) -> str:
    return table.get(key, "") if key else ""


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f}"


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


class Explanation:
    """The result of :func:`explain`: ``gpus`` (:class:`GPUExplanation`),
    ``notes``, ``elapsed`` (seconds). Prints as a text table, renders as
    HTML in a notebook (a table and a stacked bar per GPU), ``to_dict()``
    gives plain values."""

    __slots__ = ("gpus", "notes", "elapsed")

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
        self.elapsed: float = raw["elapsed"]

    def to_dict(self) -> dict[str, Any]:
        """Plain values (JSON-serialisable)."""
        return {
            "gpus": [dict(_asdict(g), parts=[_asdict(p) for p in g.parts])
                     for g in self.gpus],
            "notes": list(self.notes),
            "elapsed": self.elapsed,
        }

    @staticmethod
    def exactness(g: GPUExplanation) -> str:
        """One sentence: which of g's figures are exact and which
        inferred, and by what."""
        exact = sorted({p.evidence for p in g.parts
                        if p.known and p.exact and p.bytes})
        guessed = [f"{p.source} {p.kind} {_mib(p.bytes)} MiB "
                   f"({p.evidence})"
                   for p in g.parts if p.known and not p.exact and p.bytes]
        out = "exact: " + (", ".join(exact) if exact else "nothing")
        if guessed:
            out += "; inferred: " + "; ".join(guessed)
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
            out.append(f"{d['segments']} segment(s) hold live and free "
                       f"blocks ({_mib(d['free_in_segments'])} MiB free); "
                       "the largest pinned:")
            for s in d["pinned"]:
                out.append(
                    f"  segment {s['segment']:#x} of "
                    f"{_mib(s['segment_size'])} MiB: {_mib(s['free'])} MiB "
                    f"free, pinned by {s['live_blocks']} live block(s) "
                    f"({s['workspace_blocks']} workspace), the largest "
                    f"{_mib(s['largest_live'])} MiB at "
                    f"{s['largest_live_address']:#x}")
        return out

    def __str__(self) -> str:
        lines = ["gpureclaim.explain(): where this process's GPU memory goes"]
        for g in self.gpus:
            src = ("NVML per-process figure" if g.source == "driver" else
                   "Metal's per-process total" if g.source == "metal" else
                   "sum of the allocators' figures")
            lines.append(f"GPU {g.device}: {_mib(g.driver)} MiB held by this "
                         f"process ({src})")
            rows = [["part", "source", "MiB", "share", "what to do"]]
            for p in self._shown(g):
                share = (f"{100 * p.bytes / g.driver:.1f}%"
                         if g.driver and p.known else "")
                rows.append([_KINDS[p.kind][0], p.source,
                             _mib(p.bytes) if p.known else "?", share,
                             p.advice])
            rows.append(["total", "", _mib(g.driver), "", ""])
            w = [max(len(r[i]) for r in rows) for i in range(4)]
            extra = {i + 1: self._extra(p)
                     for i, p in enumerate(self._shown(g))}
            for i, r in enumerate(rows):
                lines.append(("  " + "  ".join(
                    [r[0].ljust(w[0]), r[1].ljust(w[1]), r[2].rjust(w[2]),
                     r[3].rjust(w[3]), r[4]])).rstrip())
                lines += ["      " + x for x in extra.get(i, [])]
            if not g.consistent:
                lines.append(f"  INCONSISTENT: the parts exceed the "
                             f"driver's figure by {-g.rest} bytes")
            lines.append("  " + self.exactness(g))
        if not self.gpus:
            lines.append("no GPU memory held by this process")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        e = _html.escape
        out = ["<div><b>gpureclaim.explain()</b>"]
        for g in self.gpus:
            shown = self._shown(g)
            pos = sum(p.bytes for p in shown if p.known and p.bytes > 0)
            bar = "".join(
                f'<div title="{e(_KINDS[p.kind][0])} ({e(p.source)}): '
                f'{_mib(p.bytes)} MiB" style="width:{100 * p.bytes / pos:.3f}%;'
                f'background:{_KINDS[p.kind][1]}"></div>'
                for p in shown if p.known and p.bytes > 0 and pos)
            out.append(
                f"<p>GPU {e(str(g.device))}: {_mib(g.driver)} MiB "
                f"(source: {e(g.source)})"
                + ("" if g.consistent else
                   ' <b style="color:#c00">inconsistent: the parts exceed '
                   "the driver's figure</b>") + "</p>"
                f'<div class="gpr-bar" style="display:flex;width:100%;'
                f'height:18px;border:1px solid #888">{bar}</div>')
            body = "".join(
                f'<tr><td><span style="color:{_KINDS[p.kind][1]}">'
                f"&#9632;</span> {e(_KINDS[p.kind][0])}</td>"
                f"<td>{e(p.source)}</td>"
                f"<td>{_mib(p.bytes) if p.known else '?'}</td>"
                f"<td>{e(p.advice)}</td>"
                f"<td>{'<br>'.join(e(x) for x in self._extra(p))}</td></tr>"
                for p in shown)
            out.append("<table><thead><tr><th>part</th><th>source</th>"
                       "<th>MiB</th><th>what to do</th><th>how</th></tr>"
                       f"</thead><tbody>{body}</tbody></table>"
                       f"<p>{e(self.exactness(g))}</p>")
        if self.notes:
            out.append("<ul>" + "".join(f"<li>{e(n)}</li>"
                                        for n in self.notes) + "</ul>")
        out.append("</div>")
        return "".join(out)


def explain(devices: Optional[Iterable[int]] = None, *,
            measure_context: bool = False) -> Explanation:
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
    """
    _check_bool("measure_context", measure_context)
    return Explanation(_c.explain(devices, measure_context))
