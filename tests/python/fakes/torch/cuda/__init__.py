"""torch.cuda: lazy initialisation (cuInit on first use), the current
device per thread (shared with cupy, as on the real driver), a caching
allocator per device. empty_cache() empties every device, as Torch does."""
import collections
import threading

import simcuda

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
            _pools[dev] = simcuda.CachingPool(dev)
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
