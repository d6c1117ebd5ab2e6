"""CuPy: probe, releaser, explainer. Nothing runs unless the user imported
cupy.

Its pools and its cuFFT plan cache belong to the current device, so each
visited GPU is made current in turn through ``cupy.cuda.runtime`` and the
previous device restored (not with ``cupy.cuda.Device``: its ``__exit__``
calls cudaSetDevice on the previous device even where that opens a
context); a GPU is skipped, with a note, where restoring would open one.

Release, per GPU: the plan cache is cleared only when it holds plans
(``PlanCache.clear()`` costs ~78 ms even on an empty cache), then the
default pool is emptied, then the stream-ordered (async) pool is trimmed if
CuPy allocates from it. Once per call: the pinned host pool.

Explain: the default pool gives ``used_bytes()`` (live) and
``total_bytes()``; the difference is what release() returns (CuPy does
not expose how much of it split chunks pin, so it is all counted as
releasable). The plan cache of this thread and GPU holds work areas taken
from the pool: its ``get_curr_memsize()`` is moved from "live" to a cuFFT
workspace part. The stream-ordered pool is read where CuPy allocates from
it.
"""
from __future__ import annotations

import re
from operator import index as _index
from typing import Any, Optional

from .. import _gpureclaim as _c
from ._base import (ONCE, Framework, Holders, OOMHook, Parts, Request, failed,
                    imported, on_device, reader, skipped)


def probe() -> tuple:
    cupy = imported("cupy")
    return cupy, "cupy imported" if cupy is not None else "cupy not imported"


def _runtime(cupy: Any) -> Any:
    try:
        return cupy.cuda.runtime
    except AttributeError:
        raise AttributeError("cupy.cuda.runtime missing") from None


def allocator(cuda: Any) -> Any:
    """The allocator CuPy allocates through (``get_allocator()``), the one
    inside watch_oom's guard when the guard is set."""
    a = cuda.get_allocator()
    if getattr(a, "_gpureclaim_guard", None) is _GUARD:
        return a._gpureclaim_inner
    return a


def _async_pool(cuda: Any) -> Any:
    """The MemoryAsyncPool CuPy allocates from, if any."""
    try:
        owner = allocator(cuda).__self__
        if isinstance(owner, cuda.MemoryAsyncPool):
            return owner
    except Exception:
        pass
    return None


def held(device: int) -> Optional[tuple]:
    if device < 0:
        return None
    cupy = imported("cupy")
    if cupy is None:
        return None

    def read():
        pool = cupy.get_default_memory_pool()
        used, total = _index(pool.used_bytes()), _index(pool.total_bytes())
        return used, max(total - used, 0)

    out = on_device(_runtime(cupy), device, read)
    return None if skipped(out) is not None else out


def _clear_plans() -> None:
    """Clears the current device's (and thread's) plan cache if it has
    plans (cupy.fft.config is imported with cupy; absent: no plans)."""
    cfg = imported("cupy.fft.config")
    if cfg is None:
        return
    cache = cfg.get_plan_cache()
    if _index(cache.get_curr_size()) > 0:
        cache.clear()


def _trim_async(cuda: Any, device: int) -> None:
    pool = _async_pool(cuda)
    if pool is not None:
        pool.free_all_blocks()  # MemoryAsyncPool's trims the device's pool
        return
    try:
        used = cuda.memory.malloc_async is allocator(cuda)
    except Exception:
        used = False
    if not used:
        return
    rt = getattr(cuda, "runtime", None)
    if hasattr(rt, "memPoolTrimTo"):  # else too old a CuPy: nothing
        rt.memPoolTrimTo(rt.deviceGetDefaultMemPool(device), 0)


def _release_device(cupy: Any, device: int) -> Optional[str]:
    plans = []  # the plan cache's failure, if any: the first note

    def work():
        try:
            _clear_plans()
        except Exception as e:
            plans.append(failed("plan cache", e))
        cupy.get_default_memory_pool().free_all_blocks()
        _trim_async(cupy.cuda, device)

    try:
        out = on_device(_runtime(cupy), device, work)
    except Exception:
        if plans:
            raise plans[0] from None
        raise
    prev = skipped(out)
    if prev is not None:
        return (f"skipped: GPU {prev}, CuPy's current device in this "
                f"thread, has no context, and restoring it would open one")
    if plans:
        raise plans[0]
    return None


def _release_once(cupy: Any) -> None:
    try:
        cupy.get_default_pinned_memory_pool().free_all_blocks()
    except Exception as e:
        raise failed("pinned pool", e) from e


def release(device: int) -> Optional[str]:
    cupy = imported("cupy")
    if cupy is None:
        return None
    if device == ONCE:
        return _release_once(cupy)
    return _release_device(cupy, device)


def _pool_parts(g: Parts, pool: Any, source: str, plans: int) -> None:
    used, total = _index(pool.used_bytes()), _index(pool.total_bytes())
    g.add("live", source, used - plans, advice="free_arrays",
          how="used_bytes() minus the cuFFT plans' work areas" if plans
          else "used_bytes()")
    g.add("releasable", source, total - used, advice="release",
          how="total_bytes() - used_bytes(); CuPy does not say how much of "
              "it split chunks pin")


def _parts(g: Parts, cupy: Any) -> None:
    plans = nplans = 0
    cfg = imported("cupy.fft.config")
    if cfg is not None:
        cache = cfg.get_plan_cache()
        nplans = _index(cache.get_curr_size())
        if nplans > 0 and hasattr(cache, "get_curr_memsize"):
            plans = _index(cache.get_curr_memsize())
    _pool_parts(g, cupy.get_default_memory_pool(), "cupy", plans)
    try:
        cuda = cupy.cuda
    except AttributeError:
        cuda = None
    apool = _async_pool(cuda) if cuda is not None else None
    if apool is not None:
        _pool_parts(g, apool, "cupy (async pool)", 0)
    if nplans:
        g.add("workspace", "cuFFT plans (cupy)", plans, advice="release",
              how=f"{nplans} plan(s) in this thread's plan cache for this "
                  f"GPU: get_curr_memsize(), work areas from the pool",
              detail={"plans": nplans})


def explain(call: Any, g: Parts) -> None:
    cupy = imported("cupy")
    if cupy is None:
        return
    out = on_device(_runtime(cupy), g.device, lambda: _parts(g, cupy))
    prev = skipped(out)
    if prev is not None:
        g.note(f"cupy: GPU {g.device} not read: GPU {prev}, CuPy's current "
               f"device in this thread, has no context, and restoring it "
               f"would open one; its bytes are in the rest")


# ------------------------------------------------------------------- OOM

#: marks watch_oom's guard among the allocators a program may set
_GUARD = object()
_ALLOCATING = re.compile(r"Out of memory allocating ([0-9,]+) bytes")


def _oom_error(cupy: Any) -> Any:
    cls = getattr(getattr(getattr(cupy, "cuda", None), "memory", None),
                  "OutOfMemoryError", None)
    return cls if isinstance(cls, type) else None


def oom_attach(watch: Any) -> Optional[str]:
    """CuPy's allocator, wrapped: ``cupy.cuda.set_allocator(guard)`` where
    the guard calls the allocator the program had (the default pool's
    ``malloc``, or its own) and, on ``cupy.cuda.memory.OutOfMemoryError``
    (which the pool raises after it emptied itself, collected garbage and
    tried twice more), reports it; with ``watch.rescue`` it also returns
    the other frameworks' caches to the driver (``release()``, no garbage
    collection: CuPy's pool just ran one) and calls the allocator once
    more: an allocation that then succeeds is returned, and the program
    never sees the error. Otherwise the error is raised unchanged. Nothing
    here initialises CUDA. A program that sets its own allocator after
    this replaces the guard: watch_oom() again wraps the new one."""
    cupy = imported("cupy")
    cuda = getattr(cupy, "cuda", None)
    get = getattr(cuda, "get_allocator", None)
    put = getattr(cuda, "set_allocator", None)
    error = _oom_error(cupy)
    if get is None or put is None or error is None:
        return ("this CuPy has no cupy.cuda.get_allocator, set_allocator or "
                "cupy.cuda.memory.OutOfMemoryError")
    inner = get()
    if getattr(inner, "_gpureclaim_guard", None) is _GUARD:
        return None

    def gpureclaim_oom_guard(size):
        try:
            return inner(size)
        except error as e:
            got = _on_oom(watch, cupy, inner, size, e)
            if got is None:
                raise
            return got

    gpureclaim_oom_guard._gpureclaim_guard = _GUARD
    gpureclaim_oom_guard._gpureclaim_inner = inner
    put(gpureclaim_oom_guard)
    return None


def _on_oom(watch: Any, cupy: Any, inner: Any, size: int,
            e: BaseException) -> Any:
    """Reports one out-of-memory error of the allocator; the memory of a
    rescue that worked, else None. Never raises."""
    try:
        req = oom_request(e)
        try:
            device = _index(cupy.cuda.runtime.getDevice())
        except Exception:
            device = None
        nbytes = req.bytes if req and req.bytes else (size + 511) // 512 * 512
        pm = watch.capture("cupy", device, nbytes, requested=size, error=e)
        got = None
        if watch.rescue:
            got = watch.rescue_retry(pm, lambda: inner(size))
        watch.done(pm)
        return got
    except BaseException:
        return None


def oom_request(exc: BaseException) -> Optional[Request]:
    """CuPy's OutOfMemoryError and the bytes it names ("Out of memory
    allocating 74,778,738,688 bytes (allocated so far: ...)": the size
    rounded as the pool asked the driver for it). The message names no
    device: it is the current one's."""
    cls = _oom_error(imported("cupy"))
    if cls is None or not isinstance(exc, cls):
        return None
    try:
        m = _ALLOCATING.search(str(exc))
    except Exception:
        m = None
    return Request(int(m[1].replace(",", "")) if m else 0, None, bool(m))


def arrays(call: Any, objs: list) -> tuple:
    """CuPy's arrays among objs: ``a.data.mem`` is the allocation a view
    shares (its ``ptr`` and ``size``), read through ``cupy.ndarray``'s own
    descriptor. CuPy lists no live blocks."""
    cupy = imported("cupy")
    cls = getattr(cupy, "ndarray", None)
    if not isinstance(cls, type):
        return [], None, 0
    data = reader(cls, "data")
    out, odd = [], 0
    for a in _c._of_types(objs, (cls,)):
        try:
            mem = data(a).mem
            ptr, n = _index(mem.ptr), _index(mem.size)
            dev = _index(mem.device_id)
        except Exception:
            odd += 1
            continue
        if ptr:
            out.append((a, dev, ptr, n))
    return out, None, odd


def array_types() -> tuple:
    """The class of CuPy's arrays."""
    cls = getattr(imported("cupy"), "ndarray", None)
    return (cls,) if isinstance(cls, type) else ()


FRAMEWORK = Framework("cupy", "cuda", probe, held, release, explain,
                      oom=OOMHook("cupy", oom_attach, oom_request),
                      holders=Holders(
                          arrays, cpp="an extension", types=array_types,
                          cannot="CuPy keeps no autograd graph; what a "
                                 "library holds through CuPy (cuFFT plans, "
                                 "cuDNN workspaces) or an extension keeps "
                                 "in C is not followed",
                          release_note="cupy: free_plan() counts a freed "
                                       "array's bytes as released: CuPy's "
                                       "pool chunks (which free_all_blocks() "
                                       "returns whole) are not read"))
