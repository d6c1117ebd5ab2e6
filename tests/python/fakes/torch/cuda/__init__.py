"""torch.cuda: lazy initialisation (cuInit on first use), the current
device per thread (shared with cupy, as on the real driver), a caching
allocator per device that splits segments (_alloc.py). empty_cache()
empties every device, as Torch does. memory_stats() and memory_snapshot()
give the figures and the segment/block layout Torch gives."""
import collections
import os
import threading

import simcuda

from . import _alloc, memory  # noqa: F401
from ._alloc import TorchPool

from .._C import OutOfMemoryError  # noqa: F401  (torch.cuda.OutOfMemoryError)

_initialized = False
_pools = {}
_lock = threading.Lock()
_tls = threading.local()
# callables to run when CUDA is initialised (torch.cuda._lazy_call)
_queued_calls = []
# the last calls, for tests: ("set_device", d), ("enter", d), ("exit", d), ...
calls = collections.deque(maxlen=1000)


def is_initialized():
    return _initialized


def _lazy_init():
    """As Torch's: initialises CUDA once, then runs the queued calls
    (with _tls.is_initializing set, so a call that asks for CUDA again
    returns at once), then marks CUDA initialised."""
    global _initialized
    if _initialized or hasattr(_tls, "is_initializing"):
        return
    simcuda.lib()
    _tls.is_initializing = True
    try:
        for queued in _queued_calls:
            queued()
    finally:
        del _tls.is_initializing
    _initialized = True


def _lazy_call(callable, **kwargs):
    """Torch's: runs callable now if CUDA is initialised, else queues it
    for the initialisation (Torch's manual_seed goes this way)."""
    if is_initialized():
        callable()
    else:
        _queued_calls.append(callable)


def _pool(dev):
    _lazy_init()
    with _lock:
        if dev not in _pools:
            if dev >= simcuda.device_count():
                raise RuntimeError(f"invalid device ordinal {dev}")
            _pools[dev] = TorchPool(dev)
        return _pools[dev]


def device_count():
    return simcuda.device_count() if _initialized else 0


def is_available():
    return True


def current_device():
    _lazy_init()
    return simcuda.current()


def set_device(device):
    _lazy_init()
    calls.append(("set_device", int(device)))
    simcuda.set_current(int(device))


class device:
    """torch.cuda.device(i): a device guard. On exit it restores the
    previous device only if that device has a context (Torch's
    MaybeExchangeDevice); otherwise it only records it as current."""

    def __init__(self, device):
        self.idx = int(device)
        self.prev_idx = -1

    def __enter__(self):
        _lazy_init()
        self.prev_idx = simcuda.current()
        calls.append(("enter", self.idx))
        if self.prev_idx != self.idx:
            simcuda.set_current(self.idx)

    def __exit__(self, *exc):
        calls.append(("exit", self.prev_idx))
        if self.prev_idx != simcuda.current():
            if simcuda.has_context(self.prev_idx):
                simcuda.set_current(self.prev_idx)
            else:
                simcuda.set_target(self.prev_idx)
        return False


def empty_cache():
    calls.append(("empty_cache",))
    if not _initialized:
        return
    for p in _pools.values():
        p.free_cached()


def ipc_collect():
    _lazy_init()
    calls.append(("ipc_collect",))


def memory_allocated(device=None):
    if not _initialized:
        return 0
    d = simcuda.current() if device is None else int(device)
    return _pools[d].allocated() if d in _pools else 0


def memory_reserved(device=None):
    if not _initialized:
        return 0
    d = simcuda.current() if device is None else int(device)
    return _pools[d].reserved() if d in _pools else 0


def get_device_capability(device=None):
    """FAKE_SM (e.g. "8.0") picks the architecture; Hopper by default."""
    major, minor = os.environ.get("FAKE_SM", "9.0").split(".")
    return int(major), int(minor)


def memory_stats(device=None):
    if not _initialized:
        return {}
    d = simcuda.current() if device is None else int(device)
    p = _pools.get(d)
    alloc = p.allocated() if p else 0
    return {
        "allocated_bytes.all.current": alloc,
        "active_bytes.all.current": alloc,
        "reserved_bytes.all.current": p.reserved() if p else 0,
        "inactive_split_bytes.all.current": p.inactive_split() if p else 0,
        "num_alloc_retries": 0,
    }


def memory_snapshot(mempool_id=None, include_traces=True):
    calls.append(("memory_snapshot",))
    if not _initialized:
        return []
    out = []
    for d in sorted(_pools):
        out.extend(_pools[d].snapshot())
    return out


class _CUDAGraph:
    """torch._C._CUDAGraph: the pybind base of CUDAGraph."""


_next_graph_pool = [0]
_next_handle_pool = [0]


def graph_pool_handle():
    """A pool id of the kind graphs share: (0, N)."""
    _next_handle_pool[0] += 1
    return (0, _next_handle_pool[0])


class CUDAGraph(_CUDAGraph):
    """A captured graph: capture_begin(pool) takes a private pool, (N, 0)
    of its own unless one is shared; reset() or deletion gives it up."""

    def __init__(self):
        self._pool = None
        self._captured = False

    def capture_begin(self, pool=None):
        if pool is None:
            _next_graph_pool[0] += 1
            pool = (_next_graph_pool[0], 0)
        self._pool = tuple(pool)
        _alloc.uses[self._pool] = _alloc.uses.get(self._pool, 0) + 1
        _alloc.set_capture(self._pool)

    def capture_end(self):
        _alloc.set_capture(_alloc.DEFAULT)
        self._captured = True

    def pool(self):
        if not self._captured:
            raise RuntimeError("no completed capture")
        return self._pool

    def reset(self):
        if self._pool is not None:
            _alloc.uses[self._pool] -= 1
            self._pool = None
            self._captured = False

    def __del__(self):
        self.reset()


class graph:
    """with torch.cuda.graph(g, pool=None): ... captures into g."""

    def __init__(self, cuda_graph, pool=None):
        self.g, self.pool = cuda_graph, pool

    def __enter__(self):
        self.g.capture_begin(self.pool)

    def __exit__(self, *exc):
        self.g.capture_end()
        return False
