import collections

from . import memory, runtime  # noqa: F401
from .memory import (  # noqa: F401
    MemoryAsyncPool,
    MemoryPool,
    PinnedMemoryPool,
    get_allocator,
    malloc_async,
    set_allocator,
)

calls = collections.deque(maxlen=1000)  # ("enter", d), ("exit", prev)


class Device:
    """cupy.cuda.Device: as a context manager, makes the device current and
    restores the previous one on exit."""

    def __init__(self, device=None):
        self.id = runtime.getDevice() if device is None else int(device)
        self._prev = []

    def use(self):
        runtime.setDevice(self.id)

    def __enter__(self):
        prev = runtime.getDevice()
        self._prev.append(prev)
        calls.append(("enter", self.id))
        if prev != self.id:
            runtime.setDevice(self.id)
        return self

    def __exit__(self, *exc):
        prev = self._prev.pop()
        calls.append(("exit", prev))
        if runtime.getDevice() != prev:
            runtime.setDevice(prev)
