"""The simulated driver as the fake frameworks see it: ctypes calls into the
sim's libcuda (cuInit, primary contexts, cuMemAlloc_v2/cuMemFree_v2), so the
driver's per-process figure moves as it would on hardware.

The current device is per thread, as with the CUDA runtime, and shared by
the fake torch and the fake cupy (both sit on the same driver context).
"""
import ctypes
import os
import threading

_lib = None
_ctx = {}
_lock = threading.RLock()
_tls = threading.local()


#: CUDA_ERROR_OUT_OF_MEMORY, what the sim's cuMemAlloc_v2 returns when the
#: GPU's memory (its `memory=`) would be exceeded
OUT_OF_MEMORY = 2


class CudaError(RuntimeError):
    def __init__(self, msg, code=None):
        super().__init__(msg)
        self.code = code


def _check(rc, what):
    if rc != 0:
        raise CudaError(f"{what} failed: CUresult {rc}", rc)


def lib():
    """The sim's libcuda, loaded and initialised (cuInit) on first use."""
    global _lib
    with _lock:
        if _lib is None:
            path = os.environ["GPURECLAIM_CUDA_LIBRARY"]
            lb = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            _check(lb.cuInit(0), "cuInit")
            _lib = lb
        return _lib


def initialized():
    return _lib is not None


def device_count():
    n = ctypes.c_int()
    _check(lib().cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
    return n.value


def _context(dev):
    """Retains the primary context of `dev` (creates it the first time)."""
    with _lock:
        if dev not in _ctx:
            d = ctypes.c_int()
            _check(lib().cuDeviceGet(ctypes.byref(d), dev), "cuDeviceGet")
            c = ctypes.c_void_p()
            _check(lib().cuDevicePrimaryCtxRetain(ctypes.byref(c), d),
                   f"cuDevicePrimaryCtxRetain({dev})")
            _ctx[dev] = c
        return _ctx[dev]


def current():
    return getattr(_tls, "device", 0)


def has_context(dev):
    return dev in _ctx


def set_target(dev):
    """Makes `dev` the thread's device without touching the driver (what
    Torch's MaybeSetDevice does for a device without a context)."""
    _tls.device = dev


def set_current(dev):
    if dev < 0 or dev >= device_count():
        raise CudaError(f"invalid device ordinal {dev}")
    with _lock:
        _check(lib().cuCtxSetCurrent(_context(dev)), "cuCtxSetCurrent")
    _tls.device = dev


def alloc(dev, nbytes):
    """cuMemAlloc_v2 of nbytes on dev; the device pointer."""
    with _lock:
        _check(lib().cuCtxSetCurrent(_context(dev)), "cuCtxSetCurrent")
        p = ctypes.c_ulonglong()
        rc = lib().cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(nbytes))
        if has_context(current()):
            _check(lib().cuCtxSetCurrent(_ctx[current()]), "cuCtxSetCurrent")
        _check(rc, f"cuMemAlloc_v2({nbytes})")
        return p.value


def free(ptr):
    with _lock:
        _check(lib().cuMemFree_v2(ctypes.c_ulonglong(ptr)), "cuMemFree_v2")


def mem_get_info(dev):
    """cuMemGetInfo_v2 on dev: (free, total), all processes counted, as
    cudaMemGetInfo gives them to Torch and CuPy."""
    with _lock:
        _check(lib().cuCtxSetCurrent(_context(dev)), "cuCtxSetCurrent")
        free_b, total = ctypes.c_size_t(), ctypes.c_size_t()
        _check(lib().cuMemGetInfo_v2(ctypes.byref(free_b),
                                     ctypes.byref(total)), "cuMemGetInfo_v2")
        if has_context(current()):
            _check(lib().cuCtxSetCurrent(_ctx[current()]), "cuCtxSetCurrent")
        return free_b.value, total.value


class Segment:
    __slots__ = ("device", "ptr", "size", "in_use")

    def __init__(self, device, ptr, size):
        self.device, self.ptr, self.size, self.in_use = device, ptr, size, 0


class CachingPool:
    """A caching allocator over the sim: freed blocks stay reserved until
    free_cached() returns them to the driver. Whole segments only (no
    splitting), which is what large (>= 1 MiB) allocations do in Torch and
    CuPy."""

    ROUND = 2 << 20

    def __init__(self, device):
        self.device = device
        self.segments = []
        self.lock = threading.Lock()

    def malloc(self, nbytes):
        size = max(self.ROUND, -(-nbytes // self.ROUND) * self.ROUND)
        with self.lock:
            for s in self.segments:
                if not s.in_use and s.size == size:
                    s.in_use = size
                    return s
            s = Segment(self.device, alloc(self.device, size), size)
            s.in_use = size
            self.segments.append(s)
            return s

    def free(self, seg):
        with self.lock:
            seg.in_use = 0

    def free_cached(self):
        with self.lock:
            keep = []
            for s in self.segments:
                if s.in_use:
                    keep.append(s)
                else:
                    free(s.ptr)
            self.segments = keep

    def allocated(self):
        return sum(s.in_use for s in self.segments)

    def reserved(self):
        return sum(s.size for s in self.segments)
