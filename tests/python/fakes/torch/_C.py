"""torch._C: tensors' base type, the host cache and cuBLAS workspaces. A
workspace is taken from the caching allocator, once per (device, cuBLAS
handle, stream) as in Torch, where the handle is per thread; its size
follows Torch: CUBLAS_WORKSPACE_CONFIG (":SIZE_KiB:COUNT" pairs), else
32 MiB on sm_90, else 8.125 MiB (":4096:2:16:8"). Like Torch's, a
workspace is no tensor: a block held in C++, recorded in the workspace
maps of the stand-in libtorch_cuda.so when one is loaded (torch/__init__)."""
import collections
import os
import re
import threading
import weakref

WORKSPACE = 32 << 20  # cuBLAS workspace on Hopper

_workspaces = {}  # (device, handle, lt) -> _Workspace
_wslib = None  # the stand-in libtorch_cuda.so (ctypes), or None
_handles = threading.local()
_next_handle = [0x5000]


class TensorBase:
    """torch._C.TensorBase: every tensor's C base type, with the calls
    explain(holders=True) makes on it (untyped_storage, is_cuda,
    get_device)."""

    def untyped_storage(self):
        return self._storage

    @property
    def is_cuda(self):
        return self._storage.device >= 0

    def get_device(self):
        return self._storage.device


class UntypedStorage:
    """A tensor's storage: views share it; its memory is freed with it."""

    def __init__(self, block, nbytes, device):
        self.block, self._nbytes, self.device = block, nbytes, device

    def data_ptr(self):
        return self.block.address if self.block is not None else 0

    def nbytes(self):
        return self._nbytes


#: storages kept "in C++" by _save_for_backward: no tensor refers to them
_saved = []


def _save_for_backward(tensor):
    """A stand-in for autograd's saved tensors: the storage stays held
    with no Python tensor naming it (a real SavedVariable holds the C++
    tensor)."""
    _saved.append(tensor.untyped_storage())


class OutOfMemoryError(RuntimeError):
    """torch._C.OutOfMemoryError (torch.OutOfMemoryError,
    torch.cuda.OutOfMemoryError): what the caching allocator raises. Torch
    makes it in C as "torch.OutOfMemoryError", the name tracebacks show."""


OutOfMemoryError.__module__ = "torch"


#: the observers _cuda_attach_out_of_memory_observer attached, called by
#: the caching allocator (cuda/_alloc.py) before it raises
oom_observers = []


def _cuda_attach_out_of_memory_observer(observer):
    """As Torch's (torch/csrc/cuda/Module.cpp): initialises CUDA
    (lazyInitDevice), then the allocator calls observer(device, alloc_size,
    device_total, device_free) on every out-of-memory, with its lock
    released and before it raises; there is no way to detach one."""
    from . import cuda

    cuda._lazy_init()
    oom_observers.append(observer)


def _handle():
    """The calling thread's cuBLAS handle (Torch keeps one per thread)."""
    if not hasattr(_handles, "h"):
        _next_handle[0] += 0x10
        _handles.h = _next_handle[0]
    return _handles.h


class _Workspace:
    """A caching-allocator block that no tensor wraps."""

    def __init__(self, pool, nbytes, frames):
        self.block = pool.malloc(nbytes, frames)
        self._fin = weakref.finalize(self, pool.free, self.block)


def _workspace(dev, lt, nbytes, frames):
    from . import cuda

    key = (dev, _handle(), lt)
    if key not in _workspaces:
        w = _Workspace(cuda._pool(dev), nbytes, frames)
        _workspaces[key] = w
        if _wslib is not None:
            _wslib.fake_ws_put(lt, key[1], 0, w.block.address, dev, nbytes)
    return _workspaces[key]
host_empty_calls = collections.deque(maxlen=1000)
clear_workspaces_calls = collections.deque(maxlen=1000)


def _workspace_size(device):
    cfg = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    pairs = re.findall(r":([0-9]+):([0-9]+)", cfg or "")
    if pairs:
        return sum(int(s) * 1024 * int(n) for s, n in pairs)
    from . import cuda

    if cuda.get_device_capability(device) == (9, 0):
        return WORKSPACE
    return 4096 * 1024 * 2 + 16 * 1024 * 8


def _host_emptyCache():
    host_empty_calls.append(1)


def _cuda_clearCublasWorkspaces():
    clear_workspaces_calls.append(1)
    if _wslib is not None:
        _wslib.fake_ws_clear()
    _workspaces.clear()


def _cuda_memoryStats(device):
    """Torch's C call beneath memory_stats(): the same figures, nested
    ("allocated_bytes" -> "all" -> "current"), as the releaser reads them."""
    from . import cuda

    nested = {}
    for key, value in cuda.memory_stats(device).items():
        parts = key.split(".")
        node = nested
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return nested
