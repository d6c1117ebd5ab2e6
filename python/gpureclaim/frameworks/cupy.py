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
returnable). The plan cache of this thread and GPU holds work areas taken
from the pool: its ``get_curr_memsize()`` is moved from "live" to a cuFFT
workspace part. The stream-ordered pool is read where CuPy allocates from
it.
"""
from __future__ import annotations

from operator import index as _index
from typing import Any, Optional

from ._base import ONCE, Framework, Parts, failed, imported, on_device, skipped


def probe() -> tuple:
    cupy = imported("cupy")
    return cupy, "cupy imported" if cupy is not None else "cupy not imported"


def _runtime(cupy: Any) -> Any:
    try:
        return cupy.cuda.runtime
    except AttributeError:
        raise AttributeError("cupy.cuda.runtime missing") from None


def _async_pool(cuda: Any) -> Any:
    """The MemoryAsyncPool CuPy allocates from, if any."""
    try:
        owner = cuda.get_allocator().__self__
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
        used = cuda.memory.malloc_async is cuda.get_allocator()
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


FRAMEWORK = Framework("cupy", "cuda", probe, held, release, explain)
