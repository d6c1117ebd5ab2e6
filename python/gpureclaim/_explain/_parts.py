"""explain()'s orchestration: where this process's GPU memory goes, as the
plain dict :class:`gpureclaim.Explanation` is built from
(docs/explain.md, "The parts").

For each GPU on which the process holds a context (the GPUs release()
visits; nothing is opened), the explainers of the framework table
(gpureclaim/frameworks/) add the parts they can measure; a failing one
becomes a note. Then the driver's per-process figure is read and what the
frameworks' parts leave of it is split as far as evidence allows:

- traced (the tracer is in the process: its live table, read in C as
  plain rows): per library, what was allocated through the driver and not
  freed. Rows of a library whose framework already reports its bytes
  (Torch's libc10_cuda, CuPy, RMM, JAX) are not counted again; every other
  library's GPU rows become an "unreported" part under its name (NCCL,
  cuDNN, cuBLAS...); host rows (pinned memory, VMM memory on the host) are
  not on the GPU;
- the context: measured once per process and GPU, when asked to, in a
  probe process that opens a bare context on the same GPU and reads its
  own NVML figure (0.3-0.6 s, ~500 MB for that time): a lower bound of
  this process's context;
- the rest: the driver's figure minus every part, never clamped: a
  negative one is flagged as an inconsistency.

Where the driver has no per-process figure the total is the sum of the
parts (source "allocators"). On Apple silicon one more entry, "mps",
splits Metal's per-process total (the Metal frameworks' figure(), as a
release reads it) the same way.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Optional

from .. import _gpureclaim as _c
from ..frameworks import TABLE
from ..frameworks._base import Parts, describe, part

_CUDA = tuple(f for f in TABLE if f.kind == "cuda" and f.explain)
_METAL = tuple(f for f in TABLE if f.kind == "metal")


class Call:
    """One explain() call: its options, and what its explainers share
    (computed once per call, on first use: Torch's snapshot, the heap
    scan)."""

    __slots__ = ("measure_context", "_memo")

    def __init__(self, measure_context: bool):
        self.measure_context = measure_context
        self._memo: dict = {}

    def memo(self, key: str, fn: Callable[[], Any]) -> Any:
        """fn()'s result, computed once per call (its exception too)."""
        try:
            ok, v = self._memo[key]
        except KeyError:
            try:
                ok, v = True, fn()
            except Exception as e:
                ok, v = False, e
            self._memo[key] = (ok, v)
        if not ok:
            raise v
        return v

    def readings(self) -> list:
        """(key, value) of each reading memoized so far that succeeded
        (the holders' walk reads what the explainers left)."""
        return [(k, v) for k, (ok, v) in list(self._memo.items()) if ok]


# Library name fragments in the tracer's rows: the name shown, and the
# framework whose own figures already hold its allocations (None: none).
_LIBRARIES = (
    ("c10_cuda", "torch", "torch"), ("libtorch", "torch", "torch"),
    ("cupy", "CuPy", "cupy"), ("rmm", "RMM", "rmm"),
    ("jaxlib", "JAX", "jax"), ("xla", "JAX", "jax"),
    ("nccl", "NCCL", None), ("cudnn", "cuDNN", None),
    ("cublas", "cuBLAS", None), ("cufft", "cuFFT", None),
    ("nvinfer", "TensorRT", None), ("cusparse", "cuSPARSE", None),
    ("cusolver", "cuSOLVER", None), ("curand", "cuRAND", None),
    ("cutensor", "cuTENSOR", None), ("nvshmem", "NVSHMEM", None),
)
# the tracer's row kinds (include/gpureclaim_trace.h)
_HOST_PINNED = 1
_KIND_NAMES = ("device", "host pinned", "VMM physical", "async pool")


def _classify(library: str) -> tuple:
    low = library.lower()
    for needle, name, owner in _LIBRARIES:
        if needle in low:
            return name, owner
    return library, None


def _reported(g: Parts, owner: str) -> bool:
    """The framework's parts report bytes on this GPU."""
    return any(p["known"] and p["source"].startswith(owner)
               for p in g.parts)


def _trace_parts(g: Parts, owned: dict, host: dict) -> bool:
    """The unreported parts of g from the tracer; True when it answered.
    owned gets, per framework, the bytes its libraries hold per the trace
    (a cross-check), host the host memory per library."""
    rows = _c._trace_live()
    if rows is None:
        return False
    libs: dict = {}  # name -> [library, bytes, count, kinds]
    for device, kind, library, nbytes, count in rows:
        library = library if library is not None else "?"
        name, owner = _classify(library)
        if device < 0 or kind == _HOST_PINNED:
            host[name] = host.get(name, 0) + nbytes
            continue
        if device != g.device:
            continue
        if owner and _reported(g, owner):
            owned[owner] = owned.get(owner, 0) + nbytes
            continue
        s = libs.get(name)
        if s is None:
            s = libs[name] = [library, 0, 0, 0]
        s[1] += nbytes
        s[2] += count
        s[3] |= 1 << (kind & 3)
    for name, (library, nbytes, count, kinds) in libs.items():
        g.add("unreported", name, nbytes, evidence="trace",
              how=(f"{count} allocation(s) that {library} made through the "
                   f"driver and has not freed, which no framework reports "
                   f"(the tracer's live table; a lower bound if tracing "
                   f"started after them)"),
              detail={"library": library, "allocations": count,
                      "kinds": [k for i, k in enumerate(_KIND_NAMES)
                                if kinds >> i & 1]})
    return True


# ------------------------------------------------------------- the context

#: bare contexts measured in this process: (device, uuid) -> (bytes or
#: None, why)
contexts: dict = {}

# The probe process: this interpreter, the package's folder first on its
# path, only the GPU of that UUID visible, never traced.
_PROBE = ("import sys\n"
          "from gpureclaim import _gpureclaim as c\n"
          "print(c._context_probe(sys.argv[1]))\n")


def _run_probe(uuid: str) -> tuple:
    """The probe's figure and "", or None and why."""
    try:
        import subprocess

        pkg = sys.modules["gpureclaim"].__file__
        root = os.path.dirname(os.path.dirname(pkg))
        env = dict(os.environ)
        old = env.get("PYTHONPATH")
        env["PYTHONPATH"] = f"{root}:{old}" if old is not None else root
        env["CUDA_VISIBLE_DEVICES"] = uuid
        env.pop("CUDA_INJECTION64_PATH", None)
        out = subprocess.run([sys.executable, "-c", _PROBE, uuid], env=env,
                             capture_output=True, text=True, timeout=120)
    except Exception as e:
        return None, f"the probe process did not run: {describe(e)}"
    if out.returncode == 0:
        try:
            return int(out.stdout.split()[0]), ""
        except (ValueError, IndexError):
            pass
    lines = (out.stderr or "").rstrip("\n").split("\n")
    return None, (f"the probe process failed (exit {out.returncode}): "
                  f"{lines[-1]}")


def _context_part(call: Call, g: Parts) -> None:
    """The bare context of g's GPU: measured now if asked and not yet."""
    if not call.measure_context and not contexts:
        return  # nothing measured, nothing to measure: no NVML asked
    uuid = _c._gpu_uuid(g.device)
    if uuid is None:
        return  # no NVML: no per-process figure to measure with
    key = (g.device, uuid)
    got = contexts.get(key)
    if got is None and call.measure_context:
        got = contexts[key] = _run_probe(uuid)
    if got is None:
        return
    nbytes, why = got
    if nbytes is None:
        g.note(f"GPU {g.device}: context not measured: {why}")
        return
    g.add("context", "CUDA driver", nbytes, exact=False, evidence="probe",
          hint="process_exit",
          how=(f"a bare context of this driver on this GPU ({uuid}), "
               f"measured once in a probe process that opened one and read "
               f"its own NVML figure: a lower bound of this process's "
               f"context, to which modules loaded since, library handles "
               f"and larger stack or heap limits add"))


def _rest(call: Call, g: Parts, known: bool, driver: int) -> dict:
    owned: dict = {}
    host: dict = {}
    traced = _trace_parts(g, owned, host)
    if known:
        _context_part(call, g)
    if not known:
        how = "unknown: the driver has no per-process figure"
    elif traced:
        how = ("the driver's figure minus every part above: the context, "
               "loaded modules and what the driver allocates for itself (the "
               "trace attributes every allocation made through the driver "
               "API)")
    else:
        how = ("the driver's figure minus every part above: the context, "
               "loaded modules and allocations no framework reports (trace "
               "the process to split them by library)")
    return part("rest", "context, modules, driver-internal" if traced
                else "context, modules, unreported",
                driver - g.sum if known else 0, known=known, exact=known,
                evidence="residual", hint="process_exit", how=how,
                detail={"traced": traced, "framework_bytes_in_trace": owned,
                        "host_bytes_in_trace": host})


def _entry(g: Parts, label: str, known: bool, driver: int, source: str,
           rest_part: dict) -> dict:
    total = driver if known else g.sum
    rest = total - g.sum
    if known and rest < 0:
        g.note(f"GPU {label}: inconsistent: the parts add up to {g.sum} "
               f"bytes, {-rest} more than the driver's figure of {driver} "
               f"bytes (memory allocated or freed while explain() read the "
               f"allocators, or an allocator counting memory it does not "
               f"hold)")
    return {"device": g.device, "known": known, "driver": total,
            "source": source, "parts": g.parts, "sum": g.sum, "rest": rest,
            "consistent": rest >= 0, "rest_part": rest_part}


def _explain_parts(call: Call, g: Parts, frameworks: tuple,
                   label: str) -> None:
    for f in frameworks:
        try:
            f.explain(call, g)
        except Exception as e:
            g.note(f"{f.name}: GPU {label}: {describe(e)}")


def _explain_gpu(call: Call, device: int, notes: list) -> dict:
    g = Parts(device, notes)
    _explain_parts(call, g, _CUDA, str(device))
    driver, why = _c._process_figure(device)
    known = driver is not None
    if not known:
        g.note(f"GPU {device}: the driver has no per-process figure here "
               f"({why}): the total is the sum of the parts (source: "
               f"allocators); the context and unreported allocations cannot "
               f"be shown")
        driver = 0
    rest = _rest(call, g, known, driver)
    return _entry(g, str(device), known, driver,
                  "driver" if known else "allocators", rest)


def _metal_figure() -> Optional[int]:
    """Metal's per-process total: the first Metal framework's figure(), as
    a release reads it."""
    for f in _METAL:
        try:
            v = f.figure() if f.figure else None
        except Exception:
            continue
        if isinstance(v, int):
            return v
    return None


def _explain_metal(call: Call, notes: list) -> Optional[dict]:
    """The "mps" entry on Apple silicon: Metal's per-process total split;
    None when no Metal framework is in use."""
    g = Parts("mps", notes)
    present = any(f.probe()[0] is not None for f in _METAL)
    _explain_parts(call, g, _METAL, "mps")
    if not present:
        return None
    driver = _metal_figure()
    known = driver is not None
    driver = driver or 0
    # MLX alone: its counters are the figure, nothing is left over
    rest = part("rest", "context, modules, unreported",
                driver - g.sum if known else 0, known=known, exact=known,
                evidence="residual", hint="process_exit",
                how="Metal's per-process total minus every part above"
                if known else "unknown: no per-process figure")
    return _entry(g, "mps", known, driver, "driver" if known else
                  "allocators", rest)


def _cuda_count(bound: int) -> int:
    """The number of CUDA GPUs, given that ordinal ``bound`` is none of
    them (``_primary_active`` answers None past the last)."""
    lo, hi = 0, bound
    while lo < hi:
        mid = (lo + hi) // 2
        if _c._primary_active(mid) is None:
            hi = mid
        else:
            lo = mid + 1
    return lo


def explain(devices: Any = None, measure_context: bool = False,
            call: Optional[Call] = None, holders: Optional[dict] = None
            ) -> dict:
    """The raw explanation (the dict Explanation is built from). ``call``:
    the Call to run in, whose readings (Torch's snapshot) a caller uses
    after it (an out-of-memory post-mortem). ``holders``: None, or the
    arguments of the holders' walk (gpureclaim/_explain/_holders.py), run
    after the parts: its "holders" entry."""
    t0 = time.monotonic()
    want = _c._devices_arg(devices, "explain")
    have = _c._in_use("explain")
    if call is None:
        call = Call(measure_context)
    notes: list = []
    gpus: list = []
    if have is None:
        # a forked child, as with release(): an empty answer that says why
        notes.append("a forked child: the parent's CUDA state is off "
                     "limits; nothing is explained")
        have = []
    elif not have and not _c._cuda_loaded():
        notes.append("CUDA is not loaded in this process: it holds no CUDA "
                     "GPU memory")
    for d in want or ():
        if d in have:
            continue
        if _c._primary_active(d) is None:
            n = _cuda_count(d)
            notes.append(f"GPU {d}: no such CUDA device ({n} "
                         f"device{'' if n == 1 else 's'}), not visited")
        else:
            notes.append(f"GPU {d}: this process holds no context there; "
                         f"not visited")
    for d in have:
        if want is None or d in want:
            gpus.append(_explain_gpu(call, d, notes))
    if want is None:
        e = _explain_metal(call, notes)
        if e is not None:
            gpus.append(e)
    out = {"gpus": gpus, "notes": notes, "holders": None}
    if holders is not None:
        from . import _holders

        h = _holders.walk(call, **holders)
        if want is not None:
            h["blocks"] = [b for b in h["blocks"] if b["device"] in want]
        out["holders"] = h
    out["seconds"] = time.monotonic() - t0
    return out
