"""The cluster reports: the workers' records brought together per GPU
(keyed by UUID, so a GPU shared by workers is counted once), per host and
per worker, with the workers that gave no report listed with the reason.

Human text is in binary units (GiB, MiB); ``to_dict()`` gives exact bytes.
"""
from __future__ import annotations

import html as _html
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Optional

from ._records import Worker, WorkerGPU

from .. import _KINDS

#: the kinds of an explanation's parts and their labels: gpureclaim's one
#: table of them
PART_KINDS = tuple(_KINDS)
_PART_HEAD = {k: label for k, (label, _colour) in _KINDS.items()}


def human_bytes(n: Optional[int]) -> str:
    """Binary units: 1.50 GiB, 512.0 MiB, 4.0 KiB, 12 B; "?" for None."""
    if n is None:
        return "?"
    a = abs(n)
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if a >= 1 << shift:
            return f"{n / (1 << shift):.{2 if shift == 30 else 1}f} {unit}"
    return f"{n} B"


def _ms(s: float) -> str:
    return f"{s * 1e3:.1f} ms"


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
        parts = {k: 0 for k in PART_KINDS}
        for gs in procs.values():
            for p in gs[-1].parts:
                if p.known:
                    parts[p.kind] = parts.get(p.kind, 0) + p.bytes
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
    (the workers without a report), ``notes``, ``engine``, ``elapsed``
    (seconds the cluster call took)."""

    kind = ""

    def __init__(self, workers: Iterable[Worker], *, engine: str,
                 elapsed: float, notes: Iterable[str] = ()):
        self.engine = engine
        self.elapsed = elapsed
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
            "elapsed": self.elapsed,
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

    # ---- text and HTML

    def _headline(self) -> str:
        raise NotImplementedError

    def _summary(self) -> str:
        return self._headline() + (f"; {len(self.failed)} without a report"
                                    if self.failed else "")

    def _tables(self) -> list:
        """[(title, head, rows)] of the report."""
        raise NotImplementedError

    def _failed_rows(self) -> list:
        return [[w.id, w.host, "-" if w.pid is None else str(w.pid),
                 w.status, w.reason] for w in self.failed]

    _FAILED_HEAD = ["worker", "host", "pid", "status", "reason"]

    def _all_tables(self) -> list:
        t = self._tables()
        if self.failed:
            t.append(("workers without a report", self._FAILED_HEAD,
                      self._failed_rows()))
        return t

    def __repr__(self) -> str:
        lines = [f"<{type(self).__name__} ({self.engine}): "
                 f"{self._summary()}>"]
        for title, head, rows in self._all_tables():
            if not rows:
                continue
            lines.append(f"  {title}:")
            widths = [max(len(str(r[i])) for r in [head] + rows)
                      for i in range(len(head))]
            right = [all(_numeric(r[i]) for r in rows)
                     for i in range(len(head))]
            for r in [head] + rows:
                cells = [str(c).rjust(w) if ri else str(c).ljust(w)
                         for c, w, ri in zip(r, widths, right)]
                lines.append(("    " + "  ".join(cells)).rstrip())
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    __str__ = __repr__

    def _repr_html_(self) -> str:
        e = _html.escape
        out = [f"<div><b>{e(type(self).__name__)}</b> ({e(self.engine)}): "
               f"{e(self._summary())}"]
        for title, head, rows in self._all_tables():
            if not rows:
                continue
            th = "".join(f"<th>{e(str(h))}</th>" for h in head)
            body = "".join(
                "<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r)
                + "</tr>" for r in rows)
            out.append(f"<p>{e(title)}</p><table><thead><tr>{th}</tr>"
                       f"</thead><tbody>{body}</tbody></table>")
        if self.notes:
            out.append("<ul>" + "".join(f"<li>{e(n)}</li>"
                                        for n in self.notes) + "</ul>")
        out.append("</div>")
        return "".join(out)

    def _gpu_ident(self, g: ClusterGPU) -> list:
        return [g.key, g.host, g.name or "?", str(len(g.workers))]

    _GPU_IDENT = ["GPU", "host", "name", "workers"]

    def _worker_ident(self, w: Worker) -> list:
        return [w.id, w.host, "-" if w.pid is None else str(w.pid)]

    _WORKER_IDENT = ["worker", "host", "pid"]

    def _host_rows(self, extra=lambda h: []) -> list:
        return [[h.host, str(len(h.workers)), str(len(h.gpus))] + extra(h)
                + [human_bytes(h.held), human_bytes(h.used),
                   human_bytes(h.total)] for h in self.hosts]


def _numeric(c: Any) -> bool:
    """A figure (right-aligned in tables): digits, "-" or "?"."""
    s = str(c)
    return bool(s) and (s[0].isdigit() or s in ("-", "?")
                        or s[0] == "-" and s[1:2].isdigit())


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
        return (f"{human_bytes(self.bytes)} returned by "
                f"{len(self.ok_workers)} of {len(self.workers)} workers on "
                f"{len(self.gpus)} GPU(s) in {_ms(self.elapsed)}")

    def _tables(self):
        gpus = [self._gpu_ident(g) + [
            human_bytes(g.released), human_bytes(g.before),
            human_bytes(g.held), human_bytes(g.used), human_bytes(g.total)]
            for g in self.gpus]
        workers = [self._worker_ident(w) + [
            human_bytes(w.released), human_bytes(
                _sum(g.before for g in w.gpus)),
            human_bytes(_sum(g.held for g in w.gpus)), str(len(w.gpus)),
            w.source or "-", _ms(w.elapsed)] for w in self.ok_workers]
        hosts = self._host_rows(lambda h: [human_bytes(h.released)])
        return [
            ("per GPU", self._GPU_IDENT + ["returned", "before", "after",
                                           "in use", "total"], gpus),
            ("per worker", self._WORKER_IDENT + [
                "returned", "before", "after", "GPUs", "source", "time"],
             workers),
            ("per host", ["host", "workers", "GPUs", "returned", "held",
                          "in use", "total"], hosts),
        ]


class ClusterExplanation(ClusterReport):
    """Where the cluster's GPU memory goes: per GPU, per worker and per
    host, each worker's driver figure split into live, cached (returnable
    or not), workspaces, pools and the rest (see gpureclaim.explain)."""

    kind = "explain"

    @property
    def parts(self) -> dict[str, int]:
        """{kind: bytes} over the cluster (each process once)."""
        out = {k: 0 for k in PART_KINDS}
        for g in self.gpus:
            for k, b in (g.parts or {}).items():
                out[k] = out.get(k, 0) + b
        return out

    def _totals(self):
        return dict(super()._totals(), parts=self.parts)

    def _headline(self) -> str:
        return (f"{len(self.ok_workers)} of {len(self.workers)} workers hold "
                f"{human_bytes(self.held)} on {len(self.gpus)} GPU(s)")

    def _tables(self):
        heads = [_PART_HEAD[k] for k in PART_KINDS]
        gpus = [self._gpu_ident(g) + [human_bytes(g.held)] + [
            human_bytes((g.parts or {}).get(k, 0)) for k in PART_KINDS]
            + [human_bytes(g.used), human_bytes(g.total)] for g in self.gpus]
        workers = []
        for w in self.ok_workers:
            per = {k: 0 for k in PART_KINDS}
            for g in w.gpus:
                for p in g.parts:
                    if p.known:
                        per[p.kind] = per.get(p.kind, 0) + p.bytes
            workers.append(self._worker_ident(w) + [
                human_bytes(_sum(g.held for g in w.gpus))]
                + [human_bytes(per[k]) for k in PART_KINDS])
        return [
            ("per GPU", self._GPU_IDENT + ["held"] + heads + ["in use",
                                                            "total"], gpus),
            ("per worker", self._WORKER_IDENT + ["held"] + heads, workers),
            ("per host", ["host", "workers", "GPUs", "held", "in use",
                          "total"], self._host_rows()),
        ]


class ClusterUsage(ClusterReport):
    """Who holds what on the cluster's GPUs (``ps``): every GPU of the
    workers' hosts once, each worker's own driver bytes there, and the
    processes that are no worker of the cluster (``ClusterGPU.others``)."""

    kind = "ps"

    def _headline(self) -> str:
        return (f"{len(self.ok_workers)} of {len(self.workers)} workers hold "
                f"{human_bytes(self.held)}; {len(self.gpus)} GPU(s) on "
                f"{len(self.hosts)} host(s), {human_bytes(self.used)} of "
                f"{human_bytes(self.total)} in use")

    def _tables(self):
        gpus = [self._gpu_ident(g) + [
            human_bytes(g.held), human_bytes(_sum(b for _, b in g.others)),
            human_bytes(g.used), human_bytes(g.total)] for g in self.gpus]
        workers = [self._worker_ident(w) + [
            human_bytes(_sum(g.held for g in w.gpus)),
            " ".join(g.uuid or f"cuda:{g.device}" for g in w.gpus
                     if g.held != 0) or "-"] for w in self.ok_workers]
        others = [[str(pid), g.host, g.key, human_bytes(b)]
                  for g in self.gpus for pid, b in g.others]
        return [
            ("per GPU", self._GPU_IDENT + ["workers hold", "others hold",
                                           "in use", "total"], gpus),
            ("per worker", self._WORKER_IDENT + ["holds", "on GPUs"],
             workers),
            ("other processes", ["pid", "host", "GPU", "holds"], others),
            ("per host", ["host", "workers", "GPUs", "held", "in use",
                          "total"], self._host_rows()),
        ]


REPORTS = {c.kind: c for c in (ClusterRelease, ClusterExplanation,
                               ClusterUsage)}


def build(kind: str, workers: Iterable[Worker], *, engine: str,
          elapsed: float, notes: Iterable[str] = ()) -> ClusterReport:
    """The report of `kind` from the workers' records."""
    return REPORTS[kind](workers, engine=engine, elapsed=elapsed,
                         notes=notes)
