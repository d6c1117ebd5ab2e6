"""What one worker sends back: its record of a release, an explanation or a
usage reading, and the one function per report kind that maps this
process's report onto that record.

Runs in the workers. Imports gpureclaim only: no engine, no framework.
Records are frozen dataclasses (they travel pickled through Dask, Ray and
torch.distributed); their field names are the keys of ``to_dict()``, so a
key is renamed here and nowhere else.
"""
from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, replace
from typing import Any, Optional

KINDS = ("release", "explain", "ps")
#: status of a worker's record; every status but "ok" carries a reason
STATUSES = ("ok", "error", "timeout", "dead")


@dataclass(frozen=True)
class WorkerPart:
    """One part of a GPU's figure for one process (see gpureclaim.Part)."""

    kind: str
    source: str
    bytes: int
    known: bool


@dataclass(frozen=True)
class WorkerGPU:
    """One GPU as one worker saw it after its call.

    ``uuid`` (NVML's) is the key that counts a GPU once when workers share
    it; None where NVML could not say (the GPU is then counted per worker).
    ``held`` is this worker's driver bytes there (NVML's per-process
    figure; None where the driver has none); ``used``/``total`` are the
    whole GPU's, all processes. Release: ``before`` and ``released``.
    Explain: ``parts`` (the last is the rest) and ``consistent``. ps:
    ``processes``, every process on the GPU as (pid, bytes or None).
    """

    uuid: Optional[str]
    name: Optional[str]
    device: Optional[int]
    nvml_index: Optional[int]
    held: Optional[int]
    used: Optional[int]
    total: Optional[int]
    before: Optional[int] = None
    released: Optional[int] = None
    parts: tuple = ()
    consistent: Optional[bool] = None
    processes: tuple = ()


@dataclass(frozen=True)
class Worker:
    """One worker's answer (or why there is none).

    ``id``: the engine's name for it (a Dask address, ``rank N``, a Ray
    actor id). ``status``: ``ok``, ``error`` (it raised), ``timeout`` (no
    answer in time) or ``dead`` (its process or connection went away);
    ``reason`` says why for every status but ``ok``. ``released``: the bytes
    its process handed back (release only). ``source``: whose figure
    (``driver``, ``allocators``, ``none``). ``seconds``: seconds
    of its own call; ``finished``: when it ended (``time.time()`` on its
    host), which tells the newest reading of a shared GPU.
    """

    kind: str
    id: str
    host: str
    pid: Optional[int]
    status: str
    reason: str
    released: Optional[int]
    source: Optional[str]
    seconds: float
    finished: float
    gpus: tuple
    notes: tuple

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _gpu(g: Optional[dict], device: Any, **fields) -> WorkerGPU:
    """One GPU: its identity from _c.gpus()'s entry `g` (None: no entry,
    e.g. Apple's "mps"), the figures in `fields` (used and total default
    to the entry's)."""
    g = g or {}
    fields.setdefault("used", g.get("used"))
    fields.setdefault("total", g.get("total"))
    return WorkerGPU(
        uuid=g.get("uuid"),
        name=g.get("name") or (device if isinstance(device, str) else None),
        device=device if isinstance(device, int) else None,
        nvml_index=g.get("nvml_index"), **fields)


def _worker(kind: str, t0: float, gpus: list, *, raw: list, released=None,
            source=None, notes=(), finished=None) -> Worker:
    """The record; `raw` (_c.gpus()'s entries) adds a note for each GPU
    that NVML could not name (counted per worker, not by UUID)."""
    notes = list(notes) + [
        f"GPU {'?' if g['device'] is None else g['device']}: no UUID "
        f"({g['error']}): counted for this worker alone"
        for g in raw if g.get("error")]
    return Worker(kind=kind, id="", host=socket.gethostname(),
                  pid=os.getpid(), status="ok", reason="", released=released,
                  source=source, seconds=time.perf_counter() - t0,
                  finished=time.time() if finished is None else finished,
                  gpus=tuple(gpus), notes=tuple(notes))


def release_record(rel, gpus: list[dict], t0: float,
                   finished: Optional[float] = None) -> Worker:
    """A gpureclaim.Release and this process's gpus() as a record;
    `finished`: when the release ended, the time of its GPUs' figures
    (default: now)."""
    by_dev = {g["device"]: g for g in gpus}
    out = [_gpu(by_dev.get(g.device), g.device,
                held=g.after if g.known else None,
                before=g.before if g.known else None, released=g.released,
                used=g.used, total=g.total)
           for g in rel.gpus]
    return _worker("release", t0, out, raw=gpus, released=rel.bytes,
                   finished=finished,
                   source=rel.source, notes=rel.notes)


def explain_record(exp, gpus: list[dict], t0: float) -> Worker:
    """A gpureclaim.Explanation and this process's gpus() as a record."""
    by_dev = {g["device"]: g for g in gpus}
    out = [_gpu(by_dev.get(g.device), g.device, held=g.driver,
                parts=tuple(WorkerPart(p.kind, p.source, p.bytes, p.known)
                            for p in g.parts),
                consistent=g.consistent)
           for g in exp.gpus]
    sources = sorted({g.source for g in exp.gpus})
    return _worker("explain", t0, out, raw=gpus,
                   source=",".join(sources) if sources else None,
                   notes=exp.notes)


def usage_record(gpus: list[dict], t0: float, notes=()) -> Worker:
    """gpus(host=True) as a record: every GPU of the host, this process's
    bytes on each and every process there."""
    out = [_gpu(g, g["device"], held=g["held"],
                processes=tuple(tuple(p) for p in g["processes"]))
           for g in gpus]
    return _worker("ps", t0, out, raw=gpus, source="driver", notes=notes)


def metrics_record(gpus: list[dict]) -> dict[str, Any]:
    """The Dask worker metrics: this process's own driver bytes, in all
    (a number the dashboard shows as a column) and per GPU by UUID."""
    per = {g["uuid"] or f"cuda:{g['device']}": g["held"] for g in gpus}
    return {
        "gpureclaim_gpu_bytes": sum(b for b in per.values() if b),
        "gpureclaim_gpus": per,
    }


def failure(kind: str, id: str, status: str, reason: str, host: str = "?",
            pid: Optional[int] = None, seconds: float = 0.0) -> Worker:
    """The record of a worker that gave no report, and why."""
    assert status in STATUSES and status != "ok"
    return Worker(kind=kind, id=id, host=host, pid=pid, status=status,
                  reason=reason, released=None, source=None, seconds=seconds,
                  finished=time.time(), gpus=(), notes=())


def check_timeout(timeout) -> None:
    """The engines' timeout= argument: seconds (> 0) or None."""
    if timeout is not None and (isinstance(timeout, bool) or
                                not isinstance(timeout, (int, float))
                                or not timeout > 0):
        raise ValueError(f"timeout must be a positive number of seconds "
                         f"or None, not {timeout!r}")


def with_id(rec: Worker, id: str) -> Worker:
    return replace(rec, id=id)


def run(kind: str, kwargs: Optional[dict] = None) -> Worker:
    """The worker's side of every engine: this process's report of `kind`
    as a record. Never raises: an error becomes a record of status
    "error" that names it."""
    import gpureclaim
    from gpureclaim import _gpureclaim as c

    t0 = time.perf_counter()
    kwargs = dict(kwargs or {})
    try:
        if kind == "release":
            rel = gpureclaim.release(**kwargs)
            # the GPUs' figures are the release's last reading: the newest
            # of a shared GPU is the release that ended last, not the
            # record made last (gpus() below takes its own time)
            done = time.time()
            return release_record(rel, c.gpus(), t0, done)
        if kind == "explain":
            exp = gpureclaim.explain(**kwargs)
            return explain_record(exp, c.gpus(), t0)
        if kind == "ps":
            try:
                gpus = c.gpus(host=True)
            except gpureclaim.Error as e:  # no NVIDIA driver on this host
                return usage_record([], t0, notes=(f"no GPU listed: {e}",))
            return usage_record(gpus, t0)
        raise ValueError(f"unknown report kind {kind!r}")
    except Exception as e:
        return failure(kind, "", "error", f"{type(e).__name__}: {e}",
                       host=socket.gethostname(), pid=os.getpid(),
                       seconds=time.perf_counter() - t0)
