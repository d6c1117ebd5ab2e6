"""A fake jax: the GPU backend starts on first use and takes a pool from the
sim (FAKE_JAX_POOL bytes, default 1 GiB) that it never gives back; an
allocation beyond the pool raises jax.errors.JaxRuntimeError with XLA's
RESOURCE_EXHAUSTED message, as the real BFC allocator does. With
XLA_PYTHON_CLIENT_PREALLOCATE=false, as real JAX, nothing is taken at
start: the pool grows by each allocation from the driver (up to
FAKE_JAX_POOL, its limit), and an allocation the driver refuses raises
the same error."""
import os

from . import errors
from ._src import xla_bridge


def _oom(n):
    return errors.JaxRuntimeError(
        f"RESOURCE_EXHAUSTED: Out of memory while trying to allocate {n} "
        f"bytes.")


class Device:
    platform = "gpu"

    def __init__(self, i):
        import simcuda

        self.id = i
        self.local_hardware_id = i
        self.limit = int(os.environ.get("FAKE_JAX_POOL", 1 << 30))
        self.preallocate = os.environ.get(
            "XLA_PYTHON_CLIENT_PREALLOCATE", "").lower() != "false"
        simcuda.lib()
        simcuda.set_current(i)
        self.ptrs = []
        self.pool = 0
        if self.preallocate:
            self.ptrs.append(simcuda.alloc(i, self.limit))
            self.pool = self.limit
        self.in_use = 0

    def allocate(self, n):
        import simcuda

        if self.in_use + n > self.limit:
            raise _oom(n)
        if self.in_use + n > self.pool:
            grow = self.in_use + n - self.pool
            try:
                self.ptrs.append(simcuda.alloc(self.id, grow))
            except simcuda.CudaError as e:
                if e.code != simcuda.OUT_OF_MEMORY:
                    raise
                raise _oom(n) from None
            self.pool += grow
        self.in_use += n

    def memory_stats(self):
        return {"bytes_limit": self.limit, "pool_bytes": self.pool,
                "bytes_in_use": self.in_use}

    def free(self, n):
        self.in_use -= n


class Backend:
    def __init__(self):
        self._devices = [Device(0)]

    def local_devices(self):
        return list(self._devices)


def devices():
    if "cuda" not in xla_bridge._backends:
        xla_bridge._backends["cuda"] = Backend()
    return xla_bridge._backends["cuda"].local_devices()


def numpy_ones(n):
    devices()[0].allocate(n)


def device_array(n):
    """An array of n bytes on GPU 0 (jax._src.array.ArrayImpl), freed with
    it (numpy_ones' bytes stay in use)."""
    from ._src import array

    d = devices()[0]
    d.allocate(n)
    return array.ArrayImpl(d, n)
