"""A fake torch for gpureclaim's tests: tensors of N bytes whose device
memory comes from a caching allocator over the simulated driver (CUDA) or
from the fake Metal driver (MPS, when FAKE_MPS=1)."""
import weakref

from . import _C, backends, cuda, fft, mps

__version__ = "0.0-fake"


class Tensor:
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
            self._fin = weakref.finalize(self, cuda._pool(idx).free, seg)
        elif device == "mps":
            block = mps._alloc(nbytes)
            self._fin = weakref.finalize(self, mps._free, block)
        else:
            self._fin = None

    def numel(self):
        return self.nbytes


#: the one dtype: an element is a byte, so a size is a byte count (the
#: docs' examples, written for real Torch, run on the fake as they are)
uint8 = "uint8"


def empty(nbytes, dtype=uint8, device="cpu"):
    if dtype != uint8:
        raise TypeError("the fake torch has bytes (torch.uint8) only")
    return Tensor(nbytes, device)


ones = empty


def matmul(a, b):
    """Allocates the result and, once per device, a cuBLAS workspace that
    stays until torch._C._cuda_clearCublasWorkspaces()."""
    if a.device.startswith("cuda"):
        dev = int(a.device.split(":")[1])
        if dev not in _C._workspaces:
            frames = None
            if cuda.memory._recording():
                frames = [{"filename": "aten/src/ATen/cuda/CublasHandlePool.cpp",
                           "name": "at::cuda::getNewWorkspace()", "line": 0}]
            _C._workspaces[dev] = Tensor(_C._workspace_size(dev), a.device,
                                         frames)
    return Tensor(a.nbytes, a.device)


def addmm(bias, a, b):
    """Torch's cuBLASLt path (a matmul with a bias): its handle is the
    cuBLAS handle, so the cuBLAS workspace comes first, then a cuBLASLt
    workspace of CUBLASLT_WORKSPACE_SIZE KiB (1 MiB by default)."""
    out = matmul(a, b)
    dev = int(a.device.split(":")[1])
    if dev not in _C._lt_workspaces:
        import os

        kib = int(os.environ.get("CUBLASLT_WORKSPACE_SIZE", "1024"))
        _C._lt_workspaces[dev] = Tensor(kib * 1024, a.device)
    return out
