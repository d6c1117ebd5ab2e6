"""GPU memory as Prometheus metrics: per GPU, per process, and the parts
of the processes that run an agent, cached bytes a release would give back
included (docs/metrics.md lists every metric).

Two collectors of ``prometheus_client`` (the optional extra
``gpureclaim[prometheus]``), both built on the same names:

- :class:`HostCollector`, behind ``gpureclaim exporter``: every GPU NVML
  sees, every process on it (its driver bytes, user, command, container),
  and for each process with an agent (gpureclaim.agent) its parts as that
  process's own ``explain()`` splits them, asked over the agent's socket;
- :func:`register`: the same part and process metrics of this process
  only, for a server that already exposes ``/metrics`` (and the Dask
  plugin, gpureclaim/cluster/_dask_plugin.py).

The C library gives the facts (``_gpureclaim.gpus(host=True)``: NVML's
figures and process lists, the same as ``gpureclaim ps``); this module
names them. ``prometheus_client`` is imported when a collector is made,
never by ``import gpureclaim``.
"""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Optional

from ._proc import ProcCache, label_value

INSTALL_HINT = "pip install 'gpureclaim[prometheus]'"

# name -> (help, labels); every name in docs/metrics.md
GPU_LABELS = ("gpu", "uuid", "name")
PROCESS_LABELS = ("gpu", "uuid", "pid", "user", "command", "container",
                  "pod_uid")
PART_LABELS = ("gpu", "uuid", "pid", "kind", "source")
#: a process gpureclaim suspended (docs/suspend.md): the driver's state
SUSPENDED_LABELS = PROCESS_LABELS + ("state",)
HOST_LABELS = ("pid", "user", "command", "container", "pod_uid", "state")
#: the part kinds of explain(), each a value of the `kind` label
PART_KINDS = ("live", "releasable", "not_releasable", "workspace",
              "unattributed", "graph_pool", "pool", "unreported", "context",
              "rest")
#: why an agent gave no parts (gpureclaim.agent.AgentError's kinds, and
#: "unmapped": its GPUs could not be matched to NVML's)
AGENT_FAILURES = ("no_agent", "refused", "timeout", "died", "bad_answer",
                  "error", "unmapped")


def _prometheus():
    """prometheus_client, or ImportError whose message says what to
    install (the exporter prints it as its one line)."""
    try:
        import prometheus_client
        from prometheus_client import core
    except ImportError:
        raise ImportError(f"gpureclaim's metrics need prometheus_client: "
                          f"{INSTALL_HINT}") from None
    return prometheus_client, core


@dataclass
class Reading:
    """One look at the host: what a scrape reports. Plain values (the
    exporter's ``--once --json`` writes them)."""

    at: float = 0.0            # unix time the reading began
    seconds: float = 0.0       # how long it took
    gpus: list = field(default_factory=list)       # GPU_LABELS + figures
    processes: list = field(default_factory=list)  # PROCESS_LABELS + bytes
    parts: list = field(default_factory=list)      # PART_LABELS + bytes
    #: processes gpureclaim suspended: SUSPENDED_LABELS + bytes per GPU
    suspended: list = field(default_factory=list)
    #: ... and each one's host bytes: HOST_LABELS + bytes
    host: list = field(default_factory=list)
    agents_answered: int = 0
    agents_failed: dict = field(default_factory=dict)  # kind -> count
    nvml_error: Optional[str] = None

    def to_dict(self) -> dict:
        """Plain values, in the JSON words of every output (docs/naming.md,
        "Words"): a GPU's index, ``gpu``, an integer (a label's text in the
        metrics); the reading's time as ``time`` (UTC, ISO 8601, as `ps
        --json`) and ``unix_time``; ``at``, the key of the release before,
        still beside them."""
        import datetime
        from dataclasses import asdict

        d = asdict(self)
        for key in ("gpus", "processes", "parts"):
            for row in d[key]:
                g = row.get("gpu")
                row["gpu"] = int(g) if isinstance(g, str) and g.isdigit() \
                    else None
        at = d.pop("at")
        when = datetime.datetime.fromtimestamp(at, datetime.timezone.utc)
        return {"time": when.strftime("%Y-%m-%dT%H:%M:%S.") +
                f"{when.microsecond // 1000:03d}Z", "unix_time": at, **d,
                "at": at}


def _nvml_gpus(gpus: list) -> tuple[list, list, dict]:
    """(GPU rows, process rows without /proc facts, pid -> [(index,
    uuid)]) from _gpureclaim.gpus(host=True)."""
    rows, procs, where = [], [], {}
    for g in gpus:
        idx = g.get("nvml_index")
        gpu, uuid = ("" if idx is None else str(idx)), g.get("uuid") or ""
        rows.append({"gpu": gpu, "uuid": uuid, "name": g.get("name") or "",
                     "total": g.get("total"), "used": g.get("used"),
                     "free": g.get("free"), "error": g.get("error")})
        for pid, nbytes in g.get("processes") or ():
            procs.append({"gpu": gpu, "uuid": uuid, "pid": pid,
                          "bytes": nbytes})
            where.setdefault(pid, []).append((gpu, uuid))
    return rows, procs, where


def visible_devices(pid: int) -> Optional[list]:
    """CUDA_VISIBLE_DEVICES of process pid, from /proc/PID/environ (its
    owner or root may read it), as a list; None where it is not set or
    cannot be read. The environment at the process's start: what CUDA
    numbered its GPUs by."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read(1 << 20)
    except OSError:
        return None
    for item in env.split(b"\0"):
        if item.startswith(b"CUDA_VISIBLE_DEVICES="):
            text = item.split(b"=", 1)[1].decode("ascii", "replace")
            return [t.strip() for t in text.split(",") if t.strip()]
    return None


def _by_visible(token: str, listed: list) -> Optional[tuple]:
    """The (gpu, uuid) among `listed` that a CUDA_VISIBLE_DEVICES entry
    names: an NVML index, or a UUID or its prefix (GPU-...)."""
    for gpu, uuid in listed:
        if token.isdigit() and token == gpu:
            return gpu, uuid
        if token.startswith("GPU-") and uuid.startswith(token):
            return gpu, uuid
    return None


#: at most this many (kind, source) series per process and GPU: an agent
#: speaks only for its own process, but that process may be hostile
MAX_PARTS = 64


def part_sums(g: dict) -> dict:
    """{(kind, source): bytes} of one GPU entry of explain()'s dict, known
    parts only, the rest included once (to_dict() lists it among the
    parts, the raw form as `rest_part`). The labels are made printable
    and cut (kind to 32 characters, source to 64) and the series capped
    at MAX_PARTS; bytes that are not an int are left out."""
    parts = g.get("parts")
    parts = list(parts) if isinstance(parts, list) else []
    rest = g.get("rest_part")
    if isinstance(rest, dict) and not any(
            isinstance(p, dict) and p.get("kind") == "rest" for p in parts):
        parts.append(rest)
    sums: dict = {}
    for p in parts:
        if not isinstance(p, dict) or p.get("known", True) is not True:
            continue
        b = p.get("bytes")
        if not isinstance(b, int) or isinstance(b, bool):
            continue
        key = (label_value(str(p.get("kind", "")), 32),
               label_value(str(p.get("source", "")), 64))
        if key not in sums and len(sums) >= MAX_PARTS:
            continue
        sums[key] = sums.get(key, 0) + b
    return sums


def parts_rows(explained: dict, pid: int, gpus_of_pid: list,
               uuids: dict, visible: Optional[list] = None) -> Optional[list]:
    """The part rows of one process from its explain() as a dict (the
    agent's answer: Explanation.to_dict(), or the raw form with
    `rest_part`): per GPU, bytes summed by (kind, source), known parts
    only. A GPU is matched by the UUID its entry carries; else by its CUDA
    ordinal: the ordinal-th entry of the process's CUDA_VISIBLE_DEVICES
    (`visible`) when that names one of the GPUs NVML lists the process
    on, else the ordinal's place among the GPUs NVML lists it on (CUDA
    numbers the GPUs it sees in NVML's order on a host of one model).
    None: a GPU could not be matched. `uuids`: uuid -> NVML index label;
    `gpus_of_pid`: [(gpu, uuid)] where NVML lists the process."""
    entries = [g for g in explained.get("gpus") or () if isinstance(g, dict)]
    ordinals = sorted(g.get("device") for g in entries
                      if isinstance(g.get("device"), int)
                      and not g.get("uuid"))
    listed = sorted(gpus_of_pid, key=lambda x: int(x[0]) if x[0] else -1)
    rows, seen = [], set()
    for g in entries:
        uuid, dev = g.get("uuid"), g.get("device")
        hit = None
        if isinstance(uuid, str) and uuid in uuids:
            hit = uuids[uuid], uuid
        elif isinstance(dev, int) and visible and 0 <= dev < len(visible):
            hit = _by_visible(visible[dev], listed)
        if hit is None and dev in ordinals and len(ordinals) == len(listed):
            hit = listed[ordinals.index(dev)]
        if hit is None:
            return None
        if hit[0] in seen:  # one entry per GPU: a series twice would
            return None     # make Prometheus refuse the whole scrape
        seen.add(hit[0])
        gpu, uuid = hit
        for (kind, source), b in part_sums(g).items():
            rows.append({"gpu": gpu, "uuid": uuid, "pid": pid,
                         "kind": kind, "source": source, "bytes": b})
    return rows


class BadAnswer(ValueError):
    """An agent's explain() answer that is not explain()'s shape, or a
    figure out of range: that agent's bad_answer."""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_explained(res: Any) -> None:
    """Every field of an agent's explain() answer that the exporter reads
    has explain()'s type (another user's process wrote it): raises
    BadAnswer saying the first that has not. The bytes' range is checked
    once the GPU is known (check_rows)."""
    if not isinstance(res, dict):
        raise BadAnswer("not an object")
    gpus = res.get("gpus", [])
    if not isinstance(gpus, list):
        raise BadAnswer("gpus is not a list")
    for g in gpus:
        if not isinstance(g, dict):
            raise BadAnswer("a GPU is not an object")
        if g.get("device") is not None and not _is_int(g["device"]):
            raise BadAnswer("a device is not an integer")
        if g.get("uuid") is not None and not isinstance(g["uuid"], str):
            raise BadAnswer("a uuid is not a string")
        parts = g.get("parts", [])
        if not isinstance(parts, list):
            raise BadAnswer("parts is not a list")
        rest = g.get("rest_part")
        for p in parts + ([rest] if rest is not None else []):
            if not isinstance(p, dict):
                raise BadAnswer("a part is not an object")
            if not isinstance(p.get("known", True), bool):
                raise BadAnswer("a part's known is not true or false")
            if p.get("bytes") is not None and not _is_int(p["bytes"]):
                raise BadAnswer("a part's bytes is not an integer")
            for k in ("kind", "source"):
                if p.get(k) is not None and not isinstance(p[k], str):
                    raise BadAnswer(f"a part's {k} is not a string")


def check_rows(rows: list, totals: dict) -> None:
    """0 <= each part row's bytes <= its GPU's total (totals: gpu label ->
    bytes, None where NVML gave none: then only >= 0); BadAnswer else."""
    for r in rows:
        cap = totals.get(r["gpu"])
        if r["bytes"] < 0 or (cap is not None and r["bytes"] > cap):
            raise BadAnswer(f"{r['bytes']} bytes on GPU {r['gpu']}")


def _agent_module():
    try:
        from .. import agent
    except ImportError:
        return None
    return agent


class HostCollector:
    """The exporter's collector: :meth:`read` looks at the host (NVML, then
    the agents, in parallel, each bounded by `agent_timeout`); a scrape
    (:meth:`collect`) reports the latest reading, reading first when
    there is none. ``agents=False`` asks no agent."""

    def __init__(self, *, agent_timeout: float = 2.0, agents: bool = True,
                 max_agents_at_once: int = 8) -> None:
        self.agent_timeout = agent_timeout
        self.agents = agents
        self._pool = ThreadPoolExecutor(max_workers=max_agents_at_once,
                                        thread_name_prefix="gpureclaim-agent")
        self._procs = ProcCache()
        self._lock = threading.Lock()
        self.last: Optional[Reading] = None
        # counters over the collector's life
        self.readings = 0
        self.nvml_errors = 0
        self.agent_failures: dict = {k: 0 for k in AGENT_FAILURES}

    def _ask_all(self, where: dict, uuids: dict, r: Reading,
                 totals: dict) -> None:
        agent = _agent_module()
        if agent is None:
            return
        try:
            pids = [pid for pid, _ in agent.discover(list(where))]
        except Exception:
            return

        def one(pid: int):
            try:
                res = agent.ask(pid, "explain", timeout=self.agent_timeout)
            except agent.AgentError as e:
                return pid, getattr(e, "kind", "error"), None
            except Exception:
                return pid, "error", None
            # the answer is another user's process's word: checked, and
            # whatever it holds ends as its bad_answer, never the reading
            try:
                check_explained(res)
                rows = parts_rows(res, pid, where[pid], uuids,
                                  visible_devices(pid))
                if rows is not None:
                    check_rows(rows, totals)
            except Exception:
                return pid, "bad_answer", None
            return pid, ("unmapped" if rows is None else None), rows

        for pid, failed, rows in self._pool.map(one, sorted(pids)):
            if failed:
                kind = failed if failed in self.agent_failures else "error"
                r.agents_failed[kind] = r.agents_failed.get(kind, 0) + 1
                self.agent_failures[kind] += 1
            else:
                r.agents_answered += 1
                r.parts.extend(rows)

    def _suspended(self, r: Reading) -> set:
        """The processes gpureclaim suspended (NVML lists them no more):
        from its records, with the driver's state read now; the driver is
        loaded only when there are records (_gpureclaim._suspended). Their
        pids."""
        from .. import _gpureclaim as _c

        try:
            found = _c._suspended()
        except Exception:
            return set()
        for s in found:
            pid = s["pid"]
            f = self._procs.facts(pid)
            who = {"pid": pid, "user": f.user, "command": f.command,
                   "container": f.container, "pod_uid": f.pod_uid,
                   "state": s["state"]}
            if s["host_bytes"] is not None:
                r.host.append(dict(who, bytes=s["host_bytes"]))
            for index, uuid, nbytes in s["gpus"]:
                r.suspended.append(dict(who, gpu=str(index), uuid=uuid,
                                        bytes=nbytes))
        return {s["pid"] for s in found}

    def read(self) -> Reading:
        """A new reading (also kept as :attr:`last`)."""
        from .. import _gpureclaim as _c

        t0 = time.perf_counter()
        r = Reading(at=time.time())
        with self._lock:
            self.readings += 1
            try:
                raw = _c.gpus(host=True)
            except Exception as e:  # no driver, NVML failed
                raw = []
                r.nvml_error = f"{type(e).__name__}: {e}"
            r.gpus, procs, where = _nvml_gpus(raw)
            errors = (r.nvml_error is not None) + sum(
                1 for g in r.gpus if g["error"])
            self.nvml_errors += errors
            facts = {pid: self._procs.facts(pid) for pid in where}
            for p in procs:
                f = facts[p["pid"]]
                p.update(user=f.user, command=f.command,
                         container=f.container, pod_uid=f.pod_uid)
            r.processes = procs
            # the facts of both kept; a suspended process's agent is never
            # asked (its CUDA calls would wait until it is resumed)
            self._procs.keep(set(where) | self._suspended(r))
            if self.agents and where:
                uuids = {g["uuid"]: g["gpu"] for g in r.gpus if g["uuid"]}
                totals = {g["gpu"]: g["total"] for g in r.gpus}
                self._ask_all(where, uuids, r, totals)
            r.seconds = time.perf_counter() - t0
            self.last = r
        return r

    def describe(self) -> Iterator[Any]:
        """The metric families without samples (a registry asks at
        registration: no reading is taken for it)."""
        return iter(_families(None, self))

    def collect(self) -> Iterator[Any]:
        r = self.last or self.read()
        return iter(_families(r, self))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _families(r: Optional[Reading], health: Optional[HostCollector],
              own: bool = False) -> list:
    """The metric families of a reading (r None: empty ones, for
    describe()). health: the exporter's counters (None in a process's own
    collector, which has no exporter)."""
    _, core = _prometheus()
    G, C = core.GaugeMetricFamily, core.CounterMetricFamily
    out = []
    if not own:
        tot = G("gpureclaim_gpu_memory_total_bytes",
                "GPU memory in all, as NVML reports it", labels=GPU_LABELS)
        used = G("gpureclaim_gpu_memory_used_bytes",
                 "GPU memory in use by every process and the driver (NVML)",
                 labels=GPU_LABELS)
        free = G("gpureclaim_gpu_memory_free_bytes",
                 "GPU memory free (NVML; not total - used: the driver "
                 "reserves some)", labels=GPU_LABELS)
        for g in (r.gpus if r else ()):
            lv = [g["gpu"], g["uuid"], g["name"]]
            for fam, key in ((tot, "total"), (used, "used"), (free, "free")):
                if g[key] is not None:
                    fam.add_metric(lv, g[key])
        out += [tot, used, free]
    proc = G("gpureclaim_process_memory_bytes",
             "GPU memory a process holds, the driver's per-process figure "
             "(what nvidia-smi lists)", labels=PROCESS_LABELS)
    for p in (r.processes if r else ()):
        if p["bytes"] is not None:
            proc.add_metric([p[k] if k != "pid" else str(p["pid"])
                             for k in PROCESS_LABELS], p["bytes"])
    part = G("gpureclaim_process_part_bytes",
             "A process's GPU memory by kind and source, as its own "
             "explain() splits it; kind=\"releasable\" is what release() "
             "would give back", labels=PART_LABELS)
    for p in (r.parts if r else ()):
        part.add_metric([p["gpu"], p["uuid"], str(p["pid"]), p["kind"],
                         p["source"]], p["bytes"])
    out += [proc, part]
    if health is None:
        return out
    for name, what, labels, rows in (
            ("gpureclaim_process_suspended_bytes",
             "GPU memory a process gpureclaim suspended gave back on that "
             "GPU, what its resume takes again", SUSPENDED_LABELS,
             r.suspended if r else ()),
            ("gpureclaim_process_host_bytes",
             "Host memory holding a suspended process's GPU memory (the "
             "growth of its resident memory)", HOST_LABELS,
             r.host if r else ())):
        fam = G(name, what + "; state: the driver's", labels=labels)
        for p in rows:
            fam.add_metric([str(p[k]) for k in labels], p["bytes"])
        out.append(fam)
    secs = G("gpureclaim_exporter_reading_seconds",
             "How long the latest reading of the GPUs and agents took")
    at = G("gpureclaim_exporter_reading_timestamp_seconds",
           "When the latest reading began (unix time)")
    if r:
        secs.add_metric([], r.seconds)
        at.add_metric([], r.at)
    n = C("gpureclaim_exporter_readings", "Readings taken")
    n.add_metric([], health.readings)
    nv = C("gpureclaim_exporter_nvml_errors",
           "Readings in which NVML failed, for the host or for one GPU "
           "(one per GPU that failed)")
    nv.add_metric([], health.nvml_errors)
    answered = G("gpureclaim_exporter_agents",
                 "Agents asked in the latest reading, by whether they "
                 "answered", labels=("state",))
    fail = C("gpureclaim_exporter_agent_failures",
             "Agents that gave no parts, by why", labels=("reason",))
    if r:
        answered.add_metric(["answered"], r.agents_answered)
        answered.add_metric(["failed"], sum(r.agents_failed.values()))
    for k, v in health.agent_failures.items():
        fail.add_metric([k], v)
    return out + [secs, at, n, nv, answered, fail]


class ProcessCollector:
    """This process's own part and process metrics (:func:`register`):
    each scrape runs explain() here (it reads only and imports no
    framework) and reads NVML's figure of this process."""

    def __init__(self) -> None:
        self._procs = ProcCache()

    def reading(self) -> Reading:
        import gpureclaim
        from .. import _gpureclaim as _c

        t0 = time.perf_counter()
        r = Reading(at=time.time())
        pid = os.getpid()
        try:
            gpus = _c.gpus()
        except Exception as e:
            gpus, r.nvml_error = [], f"{type(e).__name__}: {e}"
        by_dev = {}
        f = self._procs.facts(pid)
        for g in gpus:
            idx = g.get("nvml_index")
            gpu = "" if idx is None else str(idx)
            by_dev[g.get("device")] = (gpu, g.get("uuid") or "")
            if g.get("held") is not None:
                r.processes.append({
                    "gpu": gpu, "uuid": g.get("uuid") or "", "pid": pid,
                    "bytes": g["held"], "user": f.user, "command": f.command,
                    "container": f.container, "pod_uid": f.pod_uid})
        try:
            exp = gpureclaim.explain().to_dict()
        except Exception:
            exp = {"gpus": []}
        for g in exp["gpus"]:
            gpu, uuid = by_dev.get(g["device"], (str(g["device"]), ""))
            for (kind, source), b in part_sums(g).items():
                r.parts.append({"gpu": gpu, "uuid": uuid, "pid": pid,
                                "kind": kind, "source": source, "bytes": b})
        r.seconds = time.perf_counter() - t0
        return r

    def describe(self) -> Iterator[Any]:
        return iter(_families(None, None, own=True))

    def collect(self) -> Iterator[Any]:
        return iter(_families(self.reading(), None, own=True))


_registered: dict = {}
_reg_lock = threading.Lock()


def register(registry: Any = None) -> ProcessCollector:
    """Adds this process's own GPU memory metrics to a prometheus_client
    registry (None: prometheus_client's default REGISTRY, the one its
    ``start_http_server`` and most frameworks' ``/metrics`` serve):
    ``gpureclaim_process_memory_bytes`` (the driver's figure of this
    process on each GPU) and ``gpureclaim_process_part_bytes`` (its parts
    by kind and source, as explain() splits them). The same names as
    ``gpureclaim exporter``'s, so one dashboard reads both. Registering
    twice in one registry returns the first collector. Raises ImportError
    naming the extra to install when prometheus_client is missing."""
    prometheus_client, _ = _prometheus()
    if registry is None:
        registry = prometheus_client.REGISTRY
    with _reg_lock:
        c = _registered.get(id(registry))
        if c is None:
            c = ProcessCollector()
            registry.register(c)
            _registered[id(registry)] = c
    return c


def unregister(registry: Any = None) -> None:
    """Takes :func:`register`'s collector out of the registry again."""
    prometheus_client, _ = _prometheus()
    if registry is None:
        registry = prometheus_client.REGISTRY
    with _reg_lock:
        c = _registered.pop(id(registry), None)
        if c is not None:
            registry.unregister(c)


def exposition(collector: Any) -> bytes:
    """The text exposition of one collector (what a scrape returns)."""
    prometheus_client, _ = _prometheus()
    reg = prometheus_client.CollectorRegistry(auto_describe=False)
    reg.register(collector)
    return prometheus_client.generate_latest(reg)


def families_names(collectors: Iterable[Any]) -> list[str]:
    """The metric names the collectors report (docs and tests)."""
    return sorted({f.name for c in collectors for f in c.describe()})
