"""rmm.mr: memory resources. get_per_device_resource(d) inserts a default
CudaMemoryResource for a device that has none, as RMM's does
(_per_device_mrs is a defaultdict); get_log_filenames() does not.
inserted counts those insertions, for the tests."""
import ctypes
import dataclasses
from collections import defaultdict

import simcuda

from ._cuda import gpu as _gpu


class DeviceMemoryResource:
    def allocate(self, nbytes, stream=None):
        raise NotImplementedError

    def deallocate(self, ptr, nbytes, stream=None):
        raise NotImplementedError


class UpstreamResourceAdaptor(DeviceMemoryResource):
    def __init__(self, upstream_mr):
        self.upstream_mr = upstream_mr

    def get_upstream(self):
        return self.upstream_mr


class CudaMemoryResource(DeviceMemoryResource):
    def __init__(self):
        self.device = _gpu.getDevice()

    def allocate(self, nbytes, stream=None):
        return simcuda.alloc(self.device, nbytes)

    def deallocate(self, ptr, nbytes, stream=None):
        simcuda.free(ptr)


class _PoolProps(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("handle_types", ctypes.c_int),
                ("location_type", ctypes.c_int), ("location_id", ctypes.c_int),
                ("rest", ctypes.c_ubyte * 72)]


class CudaAsyncMemoryResource(DeviceMemoryResource):
    """A pool of its own (cudaMemPoolCreate) on the current device; keeps
    its memory across synchronisations unless release_threshold is given.
    Like RMM's, it does not expose the pool's handle."""

    def __init__(self, initial_pool_size=None, release_threshold=None):
        lib = simcuda.lib()
        self.device = _gpu.getDevice()
        simcuda.set_current(self.device)
        self._pool = ctypes.c_void_p()
        props = _PoolProps(1, 0, 1, self.device)
        assert lib.cuMemPoolCreate(ctypes.byref(self._pool), ctypes.byref(props)) == 0
        keep = ctypes.c_uint64(2**64 - 1 if release_threshold is None
                               else release_threshold)
        assert lib.cuMemPoolSetAttribute(self._pool, 4, ctypes.byref(keep)) == 0

    def allocate(self, nbytes, stream=None):
        simcuda.set_current(self.device)
        p = ctypes.c_ulonglong()
        rc = simcuda.lib().cuMemAllocFromPoolAsync(
            ctypes.byref(p), ctypes.c_size_t(nbytes), self._pool, None)
        if rc:
            raise MemoryError(f"cuMemAllocFromPoolAsync: {rc}")
        return p.value

    def deallocate(self, ptr, nbytes, stream=None):
        assert simcuda.lib().cuMemFreeAsync(ctypes.c_ulonglong(ptr), None) == 0


class PoolMemoryResource(UpstreamResourceAdaptor):
    """Takes memory from upstream in chunks and never gives it back."""

    def __init__(self, upstream_mr, initial_pool_size=None, maximum_pool_size=None):
        super().__init__(upstream_mr)
        self._chunks = []  # [ptr, size, used]
        if initial_pool_size:
            self._grow(initial_pool_size)

    def _grow(self, n):
        self._chunks.append([self.upstream_mr.allocate(n), n, 0])

    def pool_size(self):
        return sum(c[1] for c in self._chunks)

    def allocate(self, nbytes, stream=None):
        for c in self._chunks:
            if c[1] - c[2] >= nbytes:
                c[2] += nbytes
                return c[0] + c[2] - nbytes
        self._grow(max(nbytes, 2 << 20))
        return self.allocate(nbytes)

    def deallocate(self, ptr, nbytes, stream=None):
        for c in self._chunks:
            if c[0] <= ptr < c[0] + c[1]:
                c[2] -= nbytes


@dataclasses.dataclass
class Statistics:
    current_bytes: int = 0
    current_count: int = 0
    peak_bytes: int = 0
    peak_count: int = 0
    total_bytes: int = 0
    total_count: int = 0


class StatisticsResourceAdaptor(UpstreamResourceAdaptor):
    def __init__(self, upstream_mr):
        super().__init__(upstream_mr)
        self._s = Statistics()

    @property
    def allocation_counts(self):
        return dataclasses.replace(self._s)

    def allocate(self, nbytes, stream=None):
        p = self.upstream_mr.allocate(nbytes)
        s = self._s
        s.current_bytes += nbytes
        s.current_count += 1
        s.total_bytes += nbytes
        s.total_count += 1
        s.peak_bytes = max(s.peak_bytes, s.current_bytes)
        s.peak_count = max(s.peak_count, s.current_count)
        return p

    def deallocate(self, ptr, nbytes, stream=None):
        self.upstream_mr.deallocate(ptr, nbytes)
        self._s.current_bytes -= nbytes
        self._s.current_count -= 1


class TrackingResourceAdaptor(UpstreamResourceAdaptor):
    def __init__(self, upstream_mr, capture_stacks=False):
        super().__init__(upstream_mr)
        self._bytes = 0

    def get_allocated_bytes(self):
        return self._bytes

    def allocate(self, nbytes, stream=None):
        p = self.upstream_mr.allocate(nbytes)
        self._bytes += nbytes
        return p

    def deallocate(self, ptr, nbytes, stream=None):
        self.upstream_mr.deallocate(ptr, nbytes)
        self._bytes -= nbytes


class LoggingResourceAdaptor(UpstreamResourceAdaptor):
    def get_file_name(self):
        return "rmm.log"


inserted = [0]


class _Resources(defaultdict):
    def __missing__(self, key):
        inserted[0] += 1
        return super().__missing__(key)


_per_device_mrs = _Resources(CudaMemoryResource)


def get_per_device_resource(device):
    return _per_device_mrs[device]


def set_per_device_resource(device, mr):
    _per_device_mrs[device] = mr


def get_current_device_resource():
    return get_per_device_resource(_gpu.getDevice())


def set_current_device_resource(mr):
    set_per_device_resource(_gpu.getDevice(), mr)


def get_log_filenames():
    return {i: each.get_file_name() if isinstance(each, LoggingResourceAdaptor)
            else None for i, each in _per_device_mrs.items()}
