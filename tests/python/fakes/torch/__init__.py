"""A fake torch for gpureclaim's tests: tensors whose device memory comes
from a caching allocator over the simulated driver (CUDA) or from the fake
Metal driver (MPS, when FAKE_MPS=1). Sizes are as real Torch's: a tensor
holds numel elements of its dtype (float32, 4 bytes, by default), so
`torch.empty(1 << 30, device="cuda")` is 4 GiB here as on a GPU, and
`dtype=torch.uint8` makes a size a byte count.

FAKE_TORCH_LAYOUT ("2.11" by default, "2.13", or "" for none) loads the
stand-in libtorch_cuda.so of that layout ($GPR_FAKES_BUILD/libtorch_cuda-
LAYOUT.so, soname libtorch_cuda.so) and names the version;
FAKE_TORCH_VERSION overrides the version alone."""
import ctypes
import operator
import os
import threading
import weakref

from . import _C, backends, cuda, fft, mps
from ._C import OutOfMemoryError  # noqa: F401  (torch.OutOfMemoryError)

_layout = os.environ.get("FAKE_TORCH_LAYOUT", "2.11")
__version__ = os.environ.get("FAKE_TORCH_VERSION",
                             f"{_layout}.0+fake" if _layout else "0.0-fake")
if _layout and os.environ.get("GPR_FAKES_BUILD"):
    _C._wslib = ctypes.CDLL(os.path.join(
        os.environ["GPR_FAKES_BUILD"], f"libtorch_cuda-{_layout}.so"))
    _C._wslib.fake_ws_put.argtypes = [
        ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t,
        ctypes.c_int, ctypes.c_size_t]
    _C._wslib.fake_ws_hold.argtypes = [ctypes.c_int]


class dtype:
    """torch.dtype: its name and the size of an element (itemsize)."""

    def __init__(self, name, itemsize, is_floating_point):
        self._name, self.itemsize = name, itemsize
        self.is_floating_point = is_floating_point

    def __repr__(self):
        return f"torch.{self._name}"


float32 = dtype("float32", 4, True)
float64 = dtype("float64", 8, True)
float16 = dtype("float16", 2, True)
bfloat16 = dtype("bfloat16", 2, True)
uint8 = dtype("uint8", 1, False)
int8 = dtype("int8", 1, False)
int16 = dtype("int16", 2, False)
int32 = dtype("int32", 4, False)
int64 = dtype("int64", 8, False)
_bool = dtype("bool", 1, False)
#: Torch's other names of these (torch.float, torch.int, torch.bool...),
#: answered by __getattr__ so that this module's own int() and float()
#: stay the builtins
_ALIASES = {"float": float32, "double": float64, "half": float16,
            "short": int16, "int": int32, "long": int64, "bool": _bool}
_default_dtype = float32


def __getattr__(name):
    if name in _ALIASES:
        return _ALIASES[name]
    raise AttributeError(f"module 'torch' has no attribute '{name}'")


def get_default_dtype():
    return _default_dtype


def set_default_dtype(d):
    global _default_dtype
    _default_dtype = d


class Tensor(_C.TensorBase):
    def __init__(self, nbytes, device, _frames=None, dtype=uint8):
        self.nbytes = nbytes
        self.dtype = dtype
        self.device = device
        if device.startswith("cuda"):
            idx = int(device.split(":")[1]) if ":" in device else cuda.current_device()
            self.device = f"cuda:{idx}"
            if _frames is None and cuda.memory._recording():
                _frames = [{"filename": "user.py", "name": "<module>",
                            "line": 1}]
            seg = cuda._pool(idx).malloc(nbytes, _frames)
            self._storage = _C.UntypedStorage(seg, nbytes, idx)
            self._storage._fin = weakref.finalize(
                self._storage, cuda._pool(idx).free, seg)
        elif device == "mps":
            block = mps._alloc(nbytes)
            self._storage = _C.UntypedStorage(None, nbytes, -1)
            self._storage._fin = weakref.finalize(self._storage, mps._free,
                                                  block)
        else:
            self._storage = _C.UntypedStorage(None, nbytes, -1)

    @property
    def _block(self):
        return self._storage.block

    def numel(self):
        return self.nbytes // self.dtype.itemsize

    def element_size(self):
        return self.dtype.itemsize

    def data_ptr(self):
        return self._block.address if self._block is not None else 0

    def view(self, *shape):
        """A view: another tensor on the same storage."""
        v = Tensor.__new__(Tensor)
        v.nbytes, v.device, v._storage = self.nbytes, self.device, self._storage
        v.dtype = self.dtype
        return v

    def backward(self):
        """The autograd engine runs CUDA backward on its own thread, whose
        cuBLAS handle gets a second workspace."""
        t = threading.Thread(target=matmul, args=(self, self))
        t.start()
        t.join()


def _numel(size):
    """The number of elements of a size given as torch.empty takes it:
    integers, or one tuple or list of them."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    n = 1
    for d in size:
        n *= operator.index(d)
    return n


def empty(*size, dtype=None, device="cpu"):
    dt = _default_dtype if dtype is None else dtype
    if not isinstance(dt, globals()["dtype"]):
        raise TypeError(f"empty(): argument 'dtype' must be torch.dtype, "
                        f"not {type(dt).__name__}")
    return Tensor(_numel(size) * dt.itemsize, device, dtype=dt)


ones = zeros = empty


def _frames(*names):
    """Allocator history frames: Python ones only with FAKE_STACKS=python
    (stacks="python"), else the C++ frames with these names too."""
    if not cuda.memory._recording():
        return None
    py = [{"filename": "user.py", "name": "<module>", "line": 1}]
    if os.environ.get("FAKE_STACKS") == "python":
        return py
    return [{"filename": "aten/src/ATen/cuda/CublasHandlePool.cpp",
             "name": n, "line": 0} for n in names] + py


def matmul(a, b):
    """Allocates the result and, once per device and thread (cuBLAS
    handle), a cuBLAS workspace that stays until
    torch._C._cuda_clearCublasWorkspaces()."""
    if a.device.startswith("cuda"):
        dev = int(a.device.split(":")[1])
        _C._workspace(dev, 0, _C._workspace_size(dev), _frames(
            "at::cuda::getNewWorkspace()",
            "at::cuda::getCurrentCUDABlasHandle()"))
    return Tensor(a.nbytes, a.device, dtype=a.dtype)


def addmm(bias, a, b):
    """Torch's cuBLASLt path (a matmul with a bias): its handle is the
    cuBLAS handle, so the cuBLAS workspace comes first, then a cuBLASLt
    workspace of CUBLASLT_WORKSPACE_SIZE KiB (1 MiB by default)."""
    out = matmul(a, b)
    dev = int(a.device.split(":")[1])
    kib = int(os.environ.get("CUBLASLT_WORKSPACE_SIZE", "1024"))
    _C._workspace(dev, 1, min(kib * 1024, _C._workspace_size(dev)), _frames(
        "getNewCUDABlasLtWorkspace", "at::cuda::getCUDABlasLtWorkspace()"))
    return out


# autograd, nn, optim (their own files): the graph and the ops over the
# tensors above, installed into this package by autograd._ops.install
from . import autograd, nn, optim, utils  # noqa: E402,F401

autograd._ops.install(globals())
