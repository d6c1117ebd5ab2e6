"""A fake cupy for gpureclaim's tests: arrays from a per-device memory pool
over the simulated driver, a per-device and per-thread cuFFT plan cache
whose plans hold work areas from the pool, a pinned pool. Sizes are as real
CuPy's: an array holds its shape's elements of its dtype (float64, 8
bytes, by default), so `cupy.empty(1 << 30)` is 8 GiB here as on a GPU,
and `dtype=cupy.uint8` makes a size a byte count."""
import builtins
import operator
import weakref

from . import cuda, fft  # noqa: F401  (cupy imports cupy.fft too)

__version__ = "0.0-fake"


class dtype:
    """A dtype (numpy's, in CuPy): its name and the size of an element."""

    def __init__(self, name, itemsize):
        self.name, self.itemsize = name, itemsize

    def __repr__(self):
        return f"dtype('{self.name}')"


float64 = dtype("float64", 8)
float32 = dtype("float32", 4)
float16 = dtype("float16", 2)
uint8 = dtype("uint8", 1)
int8 = dtype("int8", 1)
int32 = dtype("int32", 4)
int64 = dtype("int64", 8)
#: what numpy makes of Python's own types
_PYTHON = {builtins.float: float64, builtins.int: int64,
           builtins.bool: dtype("bool", 1)}


class ndarray:
    def __init__(self, nbytes, dtype=uint8):
        self.nbytes = nbytes
        self.dtype = dtype
        self.size = nbytes // dtype.itemsize
        self.device = cuda.Device()
        self.data = cuda.get_allocator()(nbytes)

    def view(self):
        """A view: another array on the same memory."""
        v = ndarray.__new__(ndarray)
        v.nbytes, v.device, v.data = self.nbytes, self.device, self.data
        v.dtype, v.size = self.dtype, self.size
        return v


def empty(shape, dtype=float):
    dt = _PYTHON.get(dtype, dtype)
    if not isinstance(dt, globals()["dtype"]):
        raise TypeError(f"the fake cupy has no dtype {dtype!r}")
    n = 1
    for d in (shape if isinstance(shape, (tuple, list)) else (shape,)):
        n *= operator.index(d)
    return ndarray(n * dt.itemsize, dt)


ones = zeros = empty


def get_default_memory_pool():
    return cuda.memory._default_pool


def get_default_pinned_memory_pool():
    return cuda.memory._pinned_pool
