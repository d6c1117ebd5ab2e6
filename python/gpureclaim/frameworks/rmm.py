"""RMM (``rmm.mr``, once the user imported rmm): probe, releaser,
explainer.

The resource RMM's Python layer set for a GPU is walked down its
``upstream_mr`` links: the adaptors that count (statistics, tracking), the
first PoolMemoryResource, and the leaf. It is found through
``rmm.mr.get_log_filenames()``, never ``get_per_device_resource()`` of a
GPU without one (that inserts a default resource); nothing is done on a
GPU the program set no resource for. Types are told apart with
``issubclass`` of the object's type against rmm.mr's classes.

- A CudaAsyncMemoryResource keeps its own pool of the driver's
  stream-ordered allocator, whose handle Python does not expose: the first
  release finds it from one 256-byte allocation (the driver's
  MEMPOOL_HANDLE attribute, through ``_gpureclaim._pool_of``) and keeps
  it; each release trims the pool to its live bytes (``_pool_trim``
  synchronizes first: frees in flight count as used until observed), with
  the GPU current in RMM and the previous one restored. explain() shows
  the pool's reserve and bytes in use once a release found it (it
  allocates nothing itself); the reserve above what is used is what
  release() trims, unless it is what the last trim left (chunks holding
  live allocations).
- A PoolMemoryResource is reported, never released: RMM has no public
  shrink, and ``rmm.reinitialize()`` behind the program's back would
  invalidate every buffer it allocated. explain() shows its
  ``pool_size()``, live bytes where an adaptor counts them, and the rest
  as a pool that never shrinks, with a hint for the next start.
- Any other resource: the counting adaptors' live bytes, if any. RMM's
  default resource (nothing set from Python) keeps no cache.
"""
from __future__ import annotations

from operator import index as _index
from typing import Any, Optional

from .. import _gpureclaim as _c
from ._base import Framework, Parts, imported, on_device, skipped

ADAPTOR_LIVE = "the statistics/tracking adaptor's live bytes"


def probe() -> tuple:
    """rmm.mr, once the user imported rmm (which imports rmm.mr)."""
    if imported("rmm") is None:
        return None, "rmm not imported"
    mr = imported("rmm.mr")
    return mr, "rmm imported" if mr is not None else "rmm imported, no rmm.mr"


class _Chain:
    """A GPU's resource chain: top, leaf, the first pool, the counting
    adaptors, the class names from the top down."""

    __slots__ = ("top", "leaf", "pool", "stats", "tracking", "names",
                 "async_")

    def __init__(self, top):
        self.top, self.leaf = top, None
        self.pool = self.stats = self.tracking = None
        self.names: list = []
        self.async_ = False


def _is_a(mr: Any, o: Any, name: str) -> bool:
    cls = getattr(mr, name, None)
    return isinstance(cls, type) and issubclass(type(o), cls)


def chain(mr: Any, device: int) -> Optional[_Chain]:
    """The resource the program set for ``device``, walked; None when it
    set none (raises when RMM fails to give the one it has)."""
    try:
        names = mr.get_log_filenames()
        has = isinstance(names, dict) and device in names
    except Exception:
        has = False
    if not has:
        return None
    c = _Chain(mr.get_per_device_resource(device))
    r = c.top
    for _ in range(32):
        c.names.append(type(r).__name__)
        if c.stats is None and _is_a(mr, r, "StatisticsResourceAdaptor"):
            c.stats = r
        if c.tracking is None and _is_a(mr, r, "TrackingResourceAdaptor"):
            c.tracking = r
        if c.pool is None and _is_a(mr, r, "PoolMemoryResource"):
            c.pool = r
        try:
            up = getattr(r, "upstream_mr", None)
        except Exception:
            up = None
        if up is None:
            c.leaf = r
            break
        r = up
    c.async_ = c.leaf is not None and _is_a(mr, c.leaf,
                                            "CudaAsyncMemoryResource")
    return c


def live_of(c: _Chain) -> Optional[int]:
    """The live bytes the counting adaptors give, or None."""
    if c.stats is not None:
        try:
            return _index(c.stats.allocation_counts.current_bytes)
        except Exception:
            pass
    if c.tracking is not None:
        try:
            return _index(c.tracking.get_allocated_bytes())
        except Exception:
            pass
    return None


class _AsyncPool:
    """An async resource's pool, found by a release."""

    __slots__ = ("owner", "pool", "trimmed_to")

    def __init__(self, owner: int, pool: int):
        self.owner, self.pool, self.trimmed_to = owner, pool, 2**64 - 1


#: the pools release() found, per GPU: one for the resource set there
#: (a pool found for a resource since replaced is not read)
pools: dict = {}


def pool_of(device: int, leaf: Any) -> Optional[_AsyncPool]:
    p = pools.get(device)
    return p if p is not None and p.owner == id(leaf) else None


def _chain_of(device: int) -> Optional[_Chain]:
    """The chain of a CUDA ordinal when rmm is in use and the program set
    a resource there."""
    mr = probe()[0] if device >= 0 else None
    return chain(mr, device) if mr is not None else None


def held(device: int) -> Optional[tuple]:
    c = _chain_of(device)
    if c is None:
        return None
    if c.pool is not None:
        live = live_of(c)
        if live is not None:
            try:
                size = _index(c.pool.pool_size())
                return live, max(size - live, 0)
            except Exception:
                pass
    p = pool_of(device, c.leaf) if c.async_ else None
    if p is not None:
        try:
            reserved, used = _c._pool_bytes(p.pool)
            return used, max(reserved - used, 0)
        except Exception:
            pass
    return None


def _find_pool(leaf: Any, device: int) -> _AsyncPool:
    """The pool of the async resource ``leaf``: found once, kept."""
    p = pool_of(device, leaf)
    if p is not None:
        return p
    addr = _index(leaf.allocate(256))
    try:
        pool, err = _c._pool_of(device, addr), None
    except Exception as e:
        pool, err = 0, e
    leaf.deallocate(addr, 256)
    if err is not None or not pool:
        raise RuntimeError(f"the pool of RMM's CUDA async resource not found "
                           f"({err if err is not None else 'not a pool allocation'})")
    p = pools[device] = _AsyncPool(id(leaf), pool)
    return p


def _trim(leaf: Any, device: int) -> Optional[str]:
    """Trims the async pool with ``device`` current in RMM."""
    gpu = imported("rmm._cuda.gpu")
    if gpu is None:
        raise RuntimeError("rmm._cuda.gpu missing")

    def work():
        p = _find_pool(leaf, device)
        try:
            _c._pool_trim(device, p.pool, 0)
            reserved, _ = _c._pool_bytes(p.pool)
        except Exception as e:
            raise RuntimeError(f"trimming RMM's CUDA async pool: {e}") from e
        p.trimmed_to = reserved

    prev = skipped(on_device(gpu, device, work))
    if prev is not None:
        return (f"not trimmed: GPU {prev}, RMM's current device, has no "
                f"context, and restoring it would open one")
    return None


def release(device: int) -> Optional[str]:
    c = _chain_of(device)
    if c is None:
        return None
    if c.pool is not None:
        try:
            size = _index(c.pool.pool_size())
        except Exception:
            size = 0
        return (f"a PoolMemoryResource of {size} bytes: RMM pools never "
                f"shrink, not released (gpureclaim.explain() says what to "
                f"configure)")
    if c.async_:
        return _trim(c.leaf, device)
    return None


def _live_part(g: Parts, live: int, known: bool, how: str,
               detail: dict) -> None:
    g.add("live", "rmm", live, known=known, advice="free_arrays", how=how,
          detail=detail)


def _async_parts(g: Parts, leaf: Any, live: Optional[int],
                 detail: dict) -> None:
    p = pool_of(g.device, leaf)
    try:
        reserved, used = _c._pool_bytes(p.pool) if p is not None else (0, 0)
    except Exception:
        p = None
    if p is None:
        _live_part(g, live or 0, live is not None, ADAPTOR_LIVE, detail)
        g.add("releasable", "rmm (CUDA async pool)", known=False,
              exact=False, advice="release",
              how="the reserve of RMM's CUDA async pool: read once a "
                  "release() has found the pool (Python does not expose its "
                  "handle); in the rest until then")
        return
    trimmed = reserved <= p.trimmed_to
    g.add("live", "rmm", used, evidence="driver_pool", advice="free_arrays",
          how="USED_MEM_CURRENT of RMM's CUDA async pool", detail=detail)
    g.add("not_releasable" if trimmed else "releasable",
          "rmm (CUDA async pool)",
          reserved - used, evidence="driver_pool",
          advice=None if trimmed else "release",
          how="the pool's reserve above its bytes in use, as release()'s "
              "trim left it: chunks that hold live allocations "
              "(cuMemPoolGetAttribute)" if trimmed else
              "the pool's reserve above its bytes in use "
              "(cuMemPoolGetAttribute RESERVED - USED): release() trims it")


def _pool_parts(g: Parts, size: int, live: Optional[int],
                detail: dict) -> None:
    """A PoolMemoryResource of ``size`` bytes (its pool_size())."""
    if live is not None:
        _live_part(g, live, True, ADAPTOR_LIVE, detail)
        how = ("PoolMemoryResource.pool_size() minus the live bytes: RMM's "
               "pool never returns memory (no public shrink; "
               "rmm.reinitialize() would invalidate every live buffer)")
    else:
        how = ("PoolMemoryResource.pool_size(), live bytes included (add a "
               "StatisticsResourceAdaptor to count them): RMM's pool never "
               "returns memory")
    g.add("pool", "rmm", size - live if live is not None else size,
          hint="rmm_pool", how=how, detail=None if live is not None
          else detail)


def explain(call: Any, g: Parts) -> None:
    c = _chain_of(g.device)
    if c is None:
        return
    live = live_of(c)
    # a pool whose size cannot be read is an error (raised)
    size = _index(c.pool.pool_size()) if c.pool is not None else -1
    detail = {"chain": c.names, "pool_size": size,
              "current_bytes": live if live is not None else -1}
    if c.pool is not None:
        _pool_parts(g, size, live, detail)
    elif c.async_:
        _async_parts(g, c.leaf, live, detail)
    else:
        _live_part(g, live or 0, live is not None,
                   ADAPTOR_LIVE if live is not None else
                   "RMM's resource keeps no figure (add a "
                   "StatisticsResourceAdaptor): in the rest", detail)


FRAMEWORK = Framework("rmm", "cuda", probe, held, release, explain)
