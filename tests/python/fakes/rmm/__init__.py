"""A fake rmm (RAPIDS Memory Manager, the rmm-cu13 26.10 API that
gpureclaim reads) over the simulated driver: per-device resources,
CudaMemoryResource, CudaAsyncMemoryResource (a pool of the driver's
stream-ordered allocator that Python does not expose), PoolMemoryResource
(never shrinks), the statistics and tracking adaptors."""
from . import _cuda, mr  # noqa: F401
from .mr import get_log_filenames  # noqa: F401

__version__ = "26.10.0-fake"


class DeviceBuffer:
    """Device memory from the current device's resource."""

    def __init__(self, size):
        self.size = size
        self.mr = mr.get_current_device_resource()
        self.ptr = self.mr.allocate(size)

    def __del__(self):
        if getattr(self, "ptr", None):
            self.mr.deallocate(self.ptr, self.size)
            self.ptr = None
