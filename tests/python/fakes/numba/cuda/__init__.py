"""A fake numba.cuda: device arrays from the sim; a dropped array joins the
context's pending deallocations until they are flushed (clear())."""
import weakref

import simcuda

from .cudadrv import driver as _drv


class _Pending:
    def __init__(self):
        self.items = []
        self.clear_calls = 0

    def add(self, ptr):
        self.items.append(ptr)

    def clear(self):
        self.clear_calls += 1
        while self.items:
            simcuda.free(self.items.pop())


class Context:
    def __init__(self, device):
        self.device = device
        self.deallocations = _Pending()


_contexts = {}


def current_context(devnum=None):
    _drv.driver._init()
    d = simcuda.current() if devnum is None else devnum
    if d not in _contexts:
        simcuda.set_current(d)
        _contexts[d] = Context(d)
    return _contexts[d]


class DeviceNDArray:
    def __init__(self, nbytes):
        ctx = current_context()
        self.nbytes = nbytes
        ptr = simcuda.alloc(ctx.device, nbytes)
        weakref.finalize(self, ctx.deallocations.add, ptr)


def device_array(nbytes):
    return DeviceNDArray(nbytes)
