"""explain()'s result and how it shows (docs/explain.md): the parts of a
GPU's figure (:class:`Part`), each GPU's (:class:`GPUExplanation`) and the
whole (:class:`Explanation`), with the one table of what a part kind is
called and coloured, and of the advice and hints in words. The view is
data, a field list the C library lays out as text or HTML
(``_gpureclaim.render``, docs/naming.md "One voice"). The package's
``__init__`` re-exports the classes; ``explain()`` there builds them from
_parts.py's plain dict.
"""
from __future__ import annotations

from dataclasses import asdict as _asdict
from dataclasses import dataclass as _dataclass
from typing import Any, Iterable, Optional, Union

from .. import _gpureclaim as _c
from .._gpureclaim import format_bytes


# The one table of what explain() shows: each part kind's label and its
# colour in the bars (the views' palette, one colour a kind); each advice
# key's text (the explainers give a key only for advice that, followed, makes
# the part go), each hint key's text (configuration for the next start,
# which cannot be checked in this process). A kind an explainer sends that
# is not here (a newer one) is shown by its name, in a palette colour.
_KINDS = {
    "live": ("live", "#4e79a7"),
    "releasable": ("cached, releasable", "#59a14f"),
    "not_releasable": ("cached, not releasable", "#e15759"),
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


# A kind held by several frameworks at once (live Torch, CuPy and JAX
# arrays side by side): a shade of the kind's colour each, the first
# framework the kind's own colour, so that the bar tells them apart (issue
# 33: they were one blue).
_FRAMEWORKS = ("torch", "cupy", "jax", "numba", "mlx", "rmm")
_SHADES = {
    "live": ("#4e79a7", "#a0cbe8", "#2b5a8a", "#7fa7cf", "#1d3f61",
             "#c6dcf0"),
    "releasable": ("#59a14f", "#a6d99a", "#356d2e", "#7fc072", "#1f4a1a",
                   "#cbeac2"),
    "not_releasable": ("#e15759", "#f4a6a7", "#a83436", "#ec7d7f",
                       "#741f21", "#f9cfd0"),
}

# The retired name of a kind (docs/naming.md, "Words"), still answered by
# GPUExplanation.part() for one release.
_RETIRED = {"fragmented": "not_releasable"}


def _kind(kind: str) -> tuple:
    """(label, colour or None) of a part kind."""
    return _KINDS.get(kind, (kind.replace("_", " "), None))


def _colour(kind: str, source: str) -> Optional[str]:
    """A part's colour: its kind's, a workspace's by its library, a
    framework's shade of its kind's."""
    if kind == "workspace":
        return _WORKSPACE_COLOURS.get(source, "#f1ce63")
    shades = _SHADES.get(kind)
    if shades:
        for i, name in enumerate(_FRAMEWORKS):
            if source == name or source.startswith(name + " "):
                return shades[i % len(shades)]
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
    "release": "gpureclaim.release() releases it",
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
    "process_exit": "freed when the process exits",
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

    ``kind``: ``live``, ``releasable`` (cached: a release gives it back),
    ``not_releasable`` (cached inside segments that still hold live
    blocks: no release can give it back), ``workspace`` (library workspaces and plan
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
        """Bytes of the parts of that kind (and source); ``fragmented``,
        the retired name of ``not_releasable``, still answers."""
        kind = _RETIRED.get(kind, kind)
        return sum(p.bytes for p in self.parts if p.kind == kind
                   and (source is None or p.source == source))


class Rendered:
    """A result the C library renders from its view's field list
    (``_view()``): text for ``str()`` and ``repr()``, HTML for a
    notebook."""

    __slots__ = ()

    def _view(self) -> tuple:
        raise NotImplementedError

    def __str__(self) -> str:
        return _c.render(self._view(), "text")

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return _c.render(self._view(), "html")


class Explanation(Rendered):
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
        if p.kind not in ("live", "releasable", "not_releasable") or \
                not p.known:
            out.append(p.how)
        if p.hint:
            out.append(p.hint)
        d = p.detail or {}
        if p.kind == "not_releasable" and d.get("segments"):
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
