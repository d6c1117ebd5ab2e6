"""A fake torch for gpureclaim's tests: tensors of N bytes whose device
memory comes from a caching allocator over the simulated driver (CUDA) or
from the fake Metal driver (MPS, when FAKE_MPS=1).

FAKE_TORCH_LAYOUT ("2.11" by default, "2.13", or "" for none) loads the
stand-in libtorch_cuda.so of that layout ($GPR_FAKES_BUILD/libtorch_cuda-
LAYOUT.so, soname libtorch_cuda.so) and names the version;
FAKE_TORCH_VERSION overrides the version alone."""
import ctypes
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


class Tensor(_C.TensorBase):
    def __init__(self, nbytes, device, _frames=None):
        self.nbytes = nbytes
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
        return self.nbytes

    def data_ptr(self):
        return self._block.address if self._block is not None else 0

    def view(self, *shape):
        """A view: another tensor on the same storage."""
        v = Tensor.__new__(Tensor)
        v.nbytes, v.device, v._storage = self.nbytes, self.device, self._storage
        return v

    def backward(self):
        """The autograd engine runs CUDA backward on its own thread, whose
        cuBLAS handle gets a second workspace."""
        t = threading.Thread(target=matmul, args=(self, self))
        t.start()
        t.join()


#: the one dtype: an element is a byte, so a size is a byte count (the
#: docs' examples, written for real Torch, run on the fake as they are)
uint8 = "uint8"


def empty(nbytes, dtype=uint8, device="cpu"):
    if dtype != uint8:
        raise TypeError("the fake torch has bytes (torch.uint8) only")
    return Tensor(nbytes, device)


ones = empty


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
    return Tensor(a.nbytes, a.device)


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
