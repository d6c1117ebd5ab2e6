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


def empty(nbytes):
    return ndarray(nbytes)


ones = empty


def get_default_memory_pool():
    return cuda.memory._default_pool


def get_default_pinned_memory_pool():
    return cuda.memory._pinned_pool
