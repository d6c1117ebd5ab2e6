"""A fake cupy for gpureclaim's tests: arrays of N bytes from a per-device
memory pool over the simulated driver, a per-device and per-thread cuFFT
plan cache whose plans hold work areas from the pool, a pinned pool."""
import weakref

from . import cuda, fft  # noqa: F401  (cupy imports cupy.fft too)

__version__ = "0.0-fake"


class ndarray:
    def __init__(self, nbytes):
        self.nbytes = nbytes
        self.device = cuda.Device()
        self.data = cuda.get_allocator()(nbytes)

    def view(self):
        """A view: another array on the same memory."""
        v = ndarray.__new__(ndarray)
        v.nbytes, v.device, v.data = self.nbytes, self.device, self.data
        return v


#: the one dtype: a byte (see the fake torch's uint8)
uint8 = "uint8"


def empty(nbytes, dtype=uint8):
    if dtype != uint8:
        raise TypeError("the fake cupy has bytes (cupy.uint8) only")
    return ndarray(nbytes)


ones = empty


def get_default_memory_pool():
    return cuda.memory._default_pool


def get_default_pinned_memory_pool():
    return cuda.memory._pinned_pool
