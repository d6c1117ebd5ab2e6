"""A fake torch for gpureclaim's tests: tensors of N bytes whose device
memory comes from a caching allocator over the simulated driver (CUDA) or
from the fake Metal driver (MPS, when FAKE_MPS=1)."""
import weakref

from . import _C, backends, cuda, mps

__version__ = "0.0-fake"


class Tensor:
    def __init__(self, nbytes, device):
        self.nbytes = nbytes
        self.device = device
        if device.startswith("cuda"):
            idx = int(device.split(":")[1]) if ":" in device else cuda.current_device()
            self.device = f"cuda:{idx}"
            seg = cuda._pool(idx).malloc(nbytes)
            self._fin = weakref.finalize(self, cuda._pool(idx).free, seg)
        elif device == "mps":
            block = mps._alloc(nbytes)
            self._fin = weakref.finalize(self, mps._free, block)
        else:
            self._fin = None

    def numel(self):
        return self.nbytes


def empty(nbytes, device="cpu"):
    return Tensor(nbytes, device)


ones = empty


def matmul(a, b):
    """Allocates the result and, once per device, a cuBLAS workspace that
    stays until torch._C._cuda_clearCublasWorkspaces()."""
    if a.device.startswith("cuda"):
        dev = int(a.device.split(":")[1])
        if dev not in _C._workspaces:
            _C._workspaces[dev] = Tensor(_C.WORKSPACE, a.device)
    return Tensor(a.nbytes, a.device)
