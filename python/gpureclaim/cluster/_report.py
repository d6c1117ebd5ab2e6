"""The cluster reports: the workers' records brought together per GPU
(keyed by UUID, so a GPU shared by workers is counted once), per host and
per worker, with the workers that gave no report listed with the reason.

Text and HTML come from one field list per report (``_view()``), rendered
by the C library like every other view (binary units, GiB/MiB);
``to_dict()`` gives exact bytes. The part kinds of an explanation are
taken from the workers' data, labelled by gpureclaim's one kinds table.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable, Optional

from .. import _c, format_bytes
from .._explain._views import _kind, _kind_order
from ._records import Worker, WorkerGPU

#: this many bars are drawn at most (the tables list every GPU)
MAX_BARS = 16


def _short_uuid(uuid: Optional[str]) -> Optional[str]:
    """"GPU-5111a000…0001" for "GPU-5111a000-0000-4000-8000-000000000001"
    (its first and last groups' ends), None for no UUID."""
    if not uuid or len(uuid) < 24:
        return None
    return f"{uuid[:12]}\u2026{uuid[-4:]}"


def _sum(values: Iterable[Optional[int]]) -> Optional[int]:
    """The sum, or None if one value is unknown."""
    total = 0
    for v in values:
        if v is None:
            return None
        total += v
    return total


@dataclass(frozen=True)
class ClusterGPU:
    """One GPU of the cluster, counted once however many workers use it.

    ``key``: its UUID, or ``host/pid N/cuda:D`` where NVML gave none (then
    it cannot be matched with other workers). ``workers``: the ids of the
    workers holding memory there. ``held``: their driver bytes there after
    the call, summed once per process (None if one is unknown); ``used``
    and ``total``: the whole GPU, all processes (the newest reading).
    Release: ``before`` and ``released`` (``before - held``). Explain:
    ``parts``, ``{kind: bytes}`` over the workers. ps: ``others``, the
    processes there that are no worker of the report, as (pid, bytes).
    """

    key: str
    uuid: Optional[str]
    host: str
    name: Optional[str]
    workers: tuple
    held: Optional[int]
    used: Optional[int]
    total: Optional[int]
    before: Optional[int] = None
    released: Optional[int] = None
    parts: Optional[dict] = None
    others: tuple = ()


@dataclass(frozen=True)
class ClusterHost:
    """One host: its answering workers, its GPUs (keys) and their sums
    (each GPU once)."""

    host: str
    workers: tuple
    gpus: tuple
    held: Optional[int]
    used: Optional[int]
    total: Optional[int]
    released: Optional[int] = None


def _known_parts(parts: Iterable) -> dict:
    """{kind: bytes} of the parts (explain's) whose bytes are known."""
    out: dict = {}
    for p in parts:
        if p.known:
            out[p.kind] = out.get(p.kind, 0) + p.bytes
    return out


def _gpu_key(w: Worker, g: WorkerGPU) -> str:
    return g.uuid or f"{w.host}/pid {w.pid}/cuda:{g.device}"


def _merge_gpu(key: str, seen: list, kind: str, worker_pids: dict):
    """One ClusterGPU from the (worker, WorkerGPU) pairs of one GPU."""
    seen = sorted(seen, key=lambda wg: wg[0].finished)
    newest_w, newest = seen[-1]
    # One process may serve several workers (Dask's processes=False): its
    # figures count once: the first call's before, the last call's after.
    procs: dict = {}
    for w, g in seen:
        procs.setdefault((w.host, w.pid), []).append(g)
    held = _sum(gs[-1].held for gs in procs.values())
    before = released = parts = None
    if kind == "release":
        before = _sum(gs[0].before for gs in procs.values())
        released = sum(g.released or 0 for _, g in seen)
    if kind == "explain":
        parts = _known_parts(p for gs in procs.values() for p in gs[-1].parts)
    mine = worker_pids.get(newest_w.host, set())
    others = tuple((pid, b) for pid, b in newest.processes
                   if pid not in mine)
    return ClusterGPU(
        key=key, uuid=newest.uuid, host=newest_w.host, name=newest.name,
        workers=tuple(sorted({w.id for w, g in seen if g.held != 0})),
        held=held, used=newest.used, total=newest.total, before=before,
        released=released, parts=parts, others=others)


class ClusterReport:
    """What the cluster reports share: ``workers`` (every worker asked,
    :class:`~gpureclaim.cluster.Worker`, failed ones included), ``gpus``
    (:class:`ClusterGPU`), ``hosts`` (:class:`ClusterHost`), ``failed``
    (the workers without a report), ``notes``, ``engine``, ``seconds``
    (seconds the cluster call took)."""

    kind = ""

    def __init__(self, workers: Iterable[Worker], *, engine: str,
                 seconds: float, notes: Iterable[str] = ()):
        self.engine = engine
        self.seconds = seconds
        self.workers: list[Worker] = sorted(
            workers, key=lambda w: (w.status != "ok", w.host, w.id))
        ok = self.ok_workers
        pids: dict = {}
        for w in ok:
            pids.setdefault(w.host, set()).add(w.pid)
        seen: dict = {}
        for w in ok:
            for g in w.gpus:
                seen.setdefault(_gpu_key(w, g), []).append((w, g))
        self.gpus: list[ClusterGPU] = sorted(
            (_merge_gpu(k, v, self.kind, pids) for k, v in seen.items()),
            key=lambda g: (g.host, g.key))
        self.hosts: list[ClusterHost] = self._hosts(ok)
        self.notes: list[str] = list(notes)
        by_proc: dict = {}
        for w in ok:
            by_proc.setdefault((w.host, w.pid), []).append(w.id)
        for (host, pid), ids in sorted(by_proc.items()):
            if len(ids) > 1:
                self.notes.append(
                    f"{', '.join(ids)} share one process (pid {pid} on "
                    f"{host}): its figures are counted once")
        for w in ok:
            self.notes += [f"{w.id}: {n}" for n in w.notes]

    def _hosts(self, ok: list) -> list:
        out = []
        for host in sorted({w.host for w in ok}):
            gs = [g for g in self.gpus if g.host == host]
            out.append(ClusterHost(
                host=host,
                workers=tuple(w.id for w in ok if w.host == host),
                gpus=tuple(g.key for g in gs),
                held=_sum(g.held for g in gs),
                used=_sum(g.used for g in gs),
                total=_sum(g.total for g in gs),
                released=(sum(g.released or 0 for g in gs)
                          if self.kind == "release" else None)))
        return out

    @property
    def ok_workers(self) -> list[Worker]:
        """The workers that answered."""
        return [w for w in self.workers if w.ok]

    @property
    def failed(self) -> list[Worker]:
        """The workers without a report (status error, timeout or dead),
        each with its ``reason``."""
        return [w for w in self.workers if not w.ok]

    def worker(self, id: str) -> Worker:
        """The record of the worker of that id; KeyError if none."""
        for w in self.workers:
            if w.id == id:
                return w
        raise KeyError(id)

    def gpu(self, uuid: str) -> ClusterGPU:
        """The GPU of that UUID (or key); KeyError if none."""
        for g in self.gpus:
            if uuid in (g.uuid, g.key):
                return g
        raise KeyError(uuid)

    @property
    def held(self) -> Optional[int]:
        """Driver bytes the answering workers hold, each GPU once."""
        return _sum(g.held for g in self.gpus)

    @property
    def used(self) -> Optional[int]:
        """Bytes in use on the cluster's GPUs, all processes, each once."""
        return _sum(g.used for g in self.gpus)

    @property
    def total(self) -> Optional[int]:
        """Memory of the cluster's GPUs, each counted once."""
        return _sum(g.total for g in self.gpus)

    def to_dict(self) -> dict[str, Any]:
        """The report as plain values, bytes exact (JSON-serialisable)."""
        return {
            "kind": self.kind,
            "engine": self.engine,
            "seconds": self.seconds,
            "totals": self._totals(),
            "hosts": [asdict(h) for h in self.hosts],
            "gpus": [asdict(g) for g in self.gpus],
            "workers": [asdict(w) for w in self.workers],
            "failed": [w.id for w in self.failed],
            "notes": list(self.notes),
        }

    def _totals(self) -> dict[str, Any]:
        return {"workers": len(self.workers),
                "answered": len(self.ok_workers),
                "hosts": len(self.hosts), "gpus": len(self.gpus),
                "held": self.held, "used": self.used, "total": self.total}

    # ---- text and HTML: one field list, rendered by the C library

    def _headline(self) -> str:
        raise NotImplementedError

    def _summary(self) -> str:
        return self._headline() + (f"; {len(self.failed)} without a report"
                                    if self.failed else "")

    def _tables(self) -> list:
        """[(title, columns, rows)] of the report: columns (head, kind)
        as gpureclaim._gpureclaim.render takes them, rows of raw values
        (bytes as ints, None unknown)."""
        raise NotImplementedError

    def _bars(self) -> list:
        """[(caption, [(label, bytes, colour)])]: a bar per GPU."""
        return []

    _FAILED_COLS = [("worker", "text"), ("host", "text"), ("pid", "num"),
                    ("status", "text"), ("reason", "prose")]

    def _view(self) -> tuple:
        blocks: list = [("p", self._summary())]
        bars = self._bars()
        for caption, parts in bars[:MAX_BARS]:
            blocks.append(("bar", caption, parts))
        if len(bars) > MAX_BARS:
            blocks.append(("p", f"{MAX_BARS} of {len(bars)} bars drawn; "
                                "the tables list every GPU"))
        tables = self._tables()
        if self.failed:
            tables.append(("workers without a report", self._FAILED_COLS,
                           [[w.id, w.host, w.pid, w.status, w.reason]
                            for w in self.failed]))
        for title, cols, rows in tables:
            blocks.append(("table", title, cols, rows))
        blocks.append(("notes", self.notes))
        return (f"{type(self).__name__} ({self.engine})", blocks)

    def __repr__(self) -> str:
        title, blocks = self._view()
        rest = _c.render(("", blocks[1:]), "text")  # [0]: the summary
        return f"<{title}: {self._summary()}>" + ("\n" + rest if rest
                                                    else "")

    __str__ = __repr__

    def _repr_html_(self) -> str:
        return _c.render(self._view(), "html")

    _GPU_COLS = [("GPU", "text"), ("host", "text"), ("name", "text"),
                 ("workers", "num")]

    def _gpu_ident(self, g: ClusterGPU) -> list:
        return [self._label(g), g.host, g.name, len(g.workers)]

    def _label(self, g: ClusterGPU) -> str:
        """The GPU's name in the views: a short form of its UUID (the
        start and the end: "GPU-5111a000…0001") when that names no other
        GPU of the report, else its whole key; to_dict() has the whole."""
        short = _short_uuid(g.uuid)
        if short and sum(_short_uuid(x.uuid) == short
                         for x in self.gpus) == 1:
            return short
        return g.key

    def _gpu_rows(self, rows: list) -> list:
        """The per-GPU table's rows, each with the GPU's whole UUID on a
        line under it where the row names it by a short form."""
        out = []
        for g, row in zip(self.gpus, rows):
            if self._label(g) != g.key:
                row = row + [[g.key]]
            out.append(row)
        return out

    _WORKER_COLS = [("worker", "text"), ("host", "text"), ("pid", "num")]

    def _worker_ident(self, w: Worker) -> list:
        return [w.id, w.host, w.pid]

    _HOST_COLS = [("host", "text"), ("workers", "num"), ("GPUs", "num")]

    def _host_rows(self, extra=lambda h: []) -> list:
        return [[h.host, len(h.workers), len(h.gpus)] + extra(h)
                + [h.held, h.used, h.total] for h in self.hosts]

    def _gpu_caption(self, g: ClusterGPU) -> str:
        """The caption of a bar that spans the whole GPU."""
        total = f", of {format_bytes(g.total)}" if g.total else ""
        return f"{self._label(g)} ({g.host}){total}:"

    @staticmethod
    def _free_part(g: ClusterGPU) -> list:
        """The GPU's free memory now (total - in use, as the tables have
        them), the last part of a bar that spans the GPU."""
        if g.total is None or g.used is None:
            return []
        return [("free", max(g.total - g.used, 0), "@free")]


class ClusterRelease(ClusterReport):
    """The report of a release across a cluster.

    ``bytes``: what the answering workers' processes handed back to the
    driver, summed (each worker's own exact figure: the drop of the
    driver's per-process figure). ``gpus``/``hosts``/``workers`` break it
    down; ``failed`` lists the workers without a report and why.
    """

    kind = "release"

    @property
    def bytes(self) -> int:
        """Bytes handed back by the answering workers, summed."""
        return sum(w.released or 0 for w in self.ok_workers)

    @property
    def gib(self) -> float:
        return self.bytes / (1 << 30)

    def _totals(self):
        return dict(super()._totals(), released=self.bytes)

    def _headline(self) -> str:
        return (f"{format_bytes(self.bytes)} released by "
                f"{len(self.ok_workers)} of {len(self.workers)} workers on "
                f"{len(self.gpus)} GPU(s) in {_c.format_seconds(self.seconds)}")

    def _bars(self):
        """Per GPU: the workers' memory there at its own scale (still held,
        released), visible however small a share of the GPU; then the
        GPU after the call at the GPU's scale (the tables' figures)."""
        out = []
        for g in self.gpus:
            held = g.held or 0
            if g.before:
                out.append((
                    f"{self._label(g)} ({g.host}), the workers: "
                    f"{format_bytes(g.before)} before, "
                    f"{format_bytes(held)} after:",
                    [("still held", held, "@mine"),
                     ("released", max(g.released or 0, 0), "@returned")]))
            others = max((g.used or 0) - held, 0)
            out.append((self._gpu_caption(g), [
                ("workers hold", held, "@mine"),
                ("other processes", others, "@others")]
                + self._free_part(g)))
        return out

    def _tables(self):
        gpus = self._gpu_rows([self._gpu_ident(g) + [
            g.released, g.before, g.held, g.used, g.total]
            for g in self.gpus])
        workers = [self._worker_ident(w) + [
            w.released, _sum(g.before for g in w.gpus),
            _sum(g.held for g in w.gpus), len(w.gpus), w.source,
            w.seconds] for w in self.ok_workers]
        hosts = self._host_rows(lambda h: [h.released])
        b = "bytes"
        return [
            ("per GPU", self._GPU_COLS + [
                ("released", b), ("before", b), ("after", b),
                ("in use", b), ("total", b)], gpus),
            ("per worker", self._WORKER_COLS + [
                ("released", b), ("before", b), ("after", b),
                ("GPUs", "num"), ("source", "text"), ("time", "secs")],
             workers),
            ("per host", self._HOST_COLS + [
                ("released", b), ("held", b), ("in use", b), ("total", b)],
             hosts),
        ]


def _kinds_of(parts_dicts: Iterable[dict]) -> list:
    """The part kinds present, in the kinds table's order (then others)."""
    seen: list = []
    for d in parts_dicts:
        for k in d:
            if k not in seen:
                seen.append(k)
    return _kind_order(seen)


class ClusterExplanation(ClusterReport):
    """Where the cluster's GPU memory goes: per GPU, per worker and per
    host, each worker's driver figure split into the parts of
    gpureclaim.explain (live, cached releasable or not, workspaces, pools,
    ..., the rest), the kinds as the workers reported them."""

    kind = "explain"

    @property
    def parts(self) -> dict[str, int]:
        """{kind: bytes} over the cluster (each process once)."""
        out: dict = {}
        for g in self.gpus:
            for k, b in (g.parts or {}).items():
                out[k] = out.get(k, 0) + b
        return {k: out[k] for k in _kinds_of([out])}

    def _totals(self):
        return dict(super()._totals(), parts=self.parts)

    def _headline(self) -> str:
        return (f"{len(self.ok_workers)} of {len(self.workers)} workers hold "
                f"{format_bytes(self.held)} on {len(self.gpus)} GPU(s)")

    def _bars(self):
        """Per GPU, the workers' memory there by part: the bar spans what
        they hold, not the GPU, and its caption says so."""
        out = []
        for g in self.gpus:
            total = f" (the GPU has {format_bytes(g.total)})" if g.total \
                else ""
            out.append((f"{self._label(g)} ({g.host}): where the workers' "
                        f"{format_bytes(g.held)} go{total}:",
                        [(_kind(k)[0], b, _kind(k)[1])
                         for k, b in (g.parts or {}).items()]))
        return out

    def _tables(self):
        per_worker = {w.id: _known_parts(p for g in w.gpus for p in g.parts)
                      for w in self.ok_workers}
        kinds = _kinds_of([g.parts or {} for g in self.gpus]
                          + list(per_worker.values()))
        heads = [(_kind(k)[0], "bytes") for k in kinds]
        gpus = self._gpu_rows([self._gpu_ident(g) + [g.held]
                               + [(g.parts or {}).get(k, 0) for k in kinds]
                               + [g.used, g.total] for g in self.gpus])
        workers = [self._worker_ident(w) + [_sum(g.held for g in w.gpus)]
                   + [per_worker[w.id].get(k, 0) for k in kinds]
                   for w in self.ok_workers]
        b = "bytes"
        return [
            ("per GPU", self._GPU_COLS + [("held", b)] + heads
             + [("in use", b), ("total", b)], gpus),
            ("per worker", self._WORKER_COLS + [("held", b)] + heads,
             workers),
            ("per host", self._HOST_COLS + [("held", b), ("in use", b),
                                            ("total", b)], self._host_rows()),
        ]


class ClusterUsage(ClusterReport):
    """Who holds what on the cluster's GPUs (``ps``): every GPU of the
    workers' hosts once, each worker's own driver bytes there, and the
    processes that are no worker of the cluster (``ClusterGPU.others``)."""

    kind = "ps"

    def _headline(self) -> str:
        return (f"{len(self.ok_workers)} of {len(self.workers)} workers hold "
                f"{format_bytes(self.held)}; {len(self.gpus)} GPU(s) on "
                f"{len(self.hosts)} host(s), {format_bytes(self.used)} of "
                f"{format_bytes(self.total)} in use")

    def _bars(self):
        out = []
        for g in self.gpus:
            held = g.held or 0
            others = sum(b or 0 for _, b in g.others)
            unlisted = max((g.used or 0) - held - others, 0)
            out.append((self._gpu_caption(g), [
                ("workers hold", held, "@mine"),
                ("other processes", others, "@others"),
                ("in use, no process listed", unlisted, "@unlisted")]
                + self._free_part(g)))
        return out

    def _tables(self):
        gpus = self._gpu_rows([self._gpu_ident(g) + [
            g.held, _sum(b for _, b in g.others), g.used, g.total]
            for g in self.gpus])
        labels = {g.key: self._label(g) for g in self.gpus}
        workers = [self._worker_ident(w) + [
            _sum(g.held for g in w.gpus),
            " ".join(labels.get(g.uuid, g.uuid) if g.uuid
                     else f"cuda:{g.device}" for g in w.gpus
                     if g.held != 0) or "-"] for w in self.ok_workers]
        others = [[pid, g.host, self._label(g), b]
                  for g in self.gpus for pid, b in g.others]
        b = "bytes"
        return [
            ("per GPU", self._GPU_COLS + [
                ("workers hold", b), ("others hold", b), ("in use", b),
                ("total", b)], gpus),
            ("per worker", self._WORKER_COLS + [
                ("holds", b), ("on GPUs", "prose")], workers),
            ("other processes", [("pid", "num"), ("host", "text"),
                                 ("GPU", "text"), ("holds", b)], others),
            ("per host", self._HOST_COLS + [
                ("held", b), ("in use", b), ("total", b)],
             self._host_rows()),
        ]


REPORTS = {c.kind: c for c in (ClusterRelease, ClusterExplanation,
                               ClusterUsage)}


def build(kind: str, workers: Iterable[Worker], *, engine: str,
          seconds: float, notes: Iterable[str] = ()) -> ClusterReport:
    """The report of `kind` from the workers' records."""
    return REPORTS[kind](workers, engine=engine, seconds=seconds,
                         notes=notes)
