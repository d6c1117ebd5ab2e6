"""cupy.cuda.runtime over the sim: the current device (shared with torch),
and the stream-ordered memory pool of each device (cudaMallocAsync), whose
freed blocks stay with the driver's pool until memPoolTrimTo."""
import collections
import threading

import simcuda

trims = collections.deque(maxlen=1000)  # (device, min_bytes)
calls = collections.deque(maxlen=1000)  # ("setDevice", d)
_async = {}  # device -> simcuda.CachingPool


def getDevice():
    simcuda.lib()
    return simcuda.current()


def setDevice(device):
    calls.append(("setDevice", int(device)))
    simcuda.set_current(int(device))


def getDeviceCount():
    return simcuda.device_count()


_lock = threading.Lock()


def _async_pool(device):
    with _lock:
        if device not in _async:
            _async[device] = simcuda.CachingPool(device)
        return _async[device]


def deviceGetDefaultMemPool(device):
    return ("mempool", int(device))


def memPoolTrimTo(pool, min_bytes):
    _, device = pool
    trims.append((device, min_bytes))
    if min_bytes == 0 and device in _async:
        _async[device].free_cached()
