"""CuPy's pools: MemoryPool (one caching pool per device; every call acts on
the current device), MemoryAsyncPool (the driver's stream-ordered pool),
PinnedMemoryPool (host memory)."""
import gc
import threading
import weakref

import simcuda

from . import runtime


class OutOfMemoryError(MemoryError):
    """cupy.cuda.memory.OutOfMemoryError, with CuPy's message: size is the
    rounded size the pool asked the driver for, total what the pool held
    before it."""

    def __init__(self, size, total, limit=0):
        if limit == 0:
            msg = (f"Out of memory allocating {size:,} bytes "
                   f"(allocated so far: {total:,} bytes).")
        else:
            msg = (f"Out of memory allocating {size:,} bytes "
                   f"(allocated so far: {total:,} bytes, "
                   f"limit set to: {limit:,} bytes).")
        super().__init__(msg)


def _round_size(size):
    """CuPy rounds every pool request up to 512 bytes (cudaMalloc's
    alignment)."""
    return max(1, -(-size // 512)) * 512


class Memory:
    """The allocation a MemoryPointer points into (CuPy's PooledMemory):
    views share it."""

    def __init__(self, pool, seg):
        self.seg, self.ptr, self.size = seg, seg.ptr, seg.in_use
        self.device_id = seg.device
        weakref.finalize(self, pool.free, seg)


class MemoryPointer:
    def __init__(self, pool, seg, mem=None):
        self.seg = seg
        self.size = seg.in_use
        self.mem = mem if mem is not None else Memory(pool, seg)
        self.ptr = self.mem.ptr
        self.device_id = self.mem.device_id


class MemoryPool:
    def __init__(self):
        self._pools = {}
        self._lock = threading.Lock()

    def _pool(self, device=None):
        d = runtime.getDevice() if device is None else device
        with self._lock:
            if d not in self._pools:
                self._pools[d] = simcuda.CachingPool(d)
            return self._pools[d]

    def malloc(self, nbytes):
        """As CuPy's SingleDeviceMemoryPool: the size rounded to 512 bytes;
        when the driver is out of memory, free_all_blocks() and a retry,
        then gc.collect(), free_all_blocks() and a last retry, then
        OutOfMemoryError(rounded size, bytes held before)."""
        p = self._pool()
        size = _round_size(nbytes)
        before = p.reserved()
        for attempt in range(3):
            try:
                return MemoryPointer(p, p.malloc(size))
            except simcuda.CudaError as e:
                if e.code != simcuda.OUT_OF_MEMORY:
                    raise
            if attempt == 2:
                break
            if attempt == 1:
                gc.collect()
            p.free_cached()
        raise OutOfMemoryError(size, before)

    def used_bytes(self):
        return self._pool().allocated()

    def total_bytes(self):
        return self._pool().reserved()

    def free_bytes(self):
        return self.total_bytes() - self.used_bytes()

    def free_all_blocks(self, stream=None):
        self._pool().free_cached()


class MemoryAsyncPool:
    def malloc(self, nbytes):
        p = runtime._async_pool(runtime.getDevice())
        return MemoryPointer(p, p.malloc(nbytes))

    def used_bytes(self):
        return runtime._async_pool(runtime.getDevice()).allocated()

    def total_bytes(self):
        return runtime._async_pool(runtime.getDevice()).reserved()

    def free_all_blocks(self, stream=None):
        d = runtime.getDevice()
        runtime.memPoolTrimTo(runtime.deviceGetDefaultMemPool(d), 0)


def malloc_async(nbytes):
    p = runtime._async_pool(runtime.getDevice())
    return MemoryPointer(p, p.malloc(nbytes))


class PinnedMemoryPool:
    def __init__(self):
        self.free_calls = 0

    def free_all_blocks(self):
        self.free_calls += 1


_default_pool = MemoryPool()
_pinned_pool = PinnedMemoryPool()
_allocator = _default_pool.malloc


def get_allocator():
    return _allocator


def set_allocator(allocator=None):
    global _allocator
    _allocator = allocator if allocator is not None else _default_pool.malloc
