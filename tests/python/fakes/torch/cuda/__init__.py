"""torch.cuda: lazy initialisation (cuInit on first use), the current
device per thread (shared with cupy, as on the real driver), a caching
allocator per device that splits segments (_alloc.py). empty_cache()
empties every device, as Torch does. memory_stats() and memory_snapshot()
give the figures and the segment/block layout Torch gives."""
import collections
import os
import threading

import simcuda

from . import memory  # noqa: F401
from ._alloc import TorchPool

_initialized = False
_pools = {}
_lock = threading.Lock()
# the last calls, for tests: ("set_device", d), ("enter", d), ("exit", d), ...
calls = collections.deque(maxlen=1000)


def is_initialized():
    return _initialized


def _lazy_init():
    global _initialized
    if not _initialized:
        simcuda.lib()
        _initialized = True


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


def memory_snapshot():
    calls.append(("memory_snapshot",))
    if not _initialized:
        return []
    out = []
    for d in sorted(_pools):
        out.extend(_pools[d].snapshot())
    return out
