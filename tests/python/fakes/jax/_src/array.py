"""jax._src.array.ArrayImpl, as explain(holders=True) reads it: one buffer
on one GPU (unsafe_buffer_pointer(), nbytes, devices(), is_deleted()),
its bytes back in the pool when it is deleted or collected."""
import weakref

_next = [0x20000000000]


class ArrayImpl:
    def __init__(self, device, nbytes):
        self._device, self._nbytes = device, nbytes
        self._ptr = _next[0]
        _next[0] += max(nbytes, 1)
        self._deleted = False
        self._fin = weakref.finalize(self, device.free, nbytes)

    @property
    def nbytes(self):
        return self._nbytes

    def devices(self):
        return {self._device}

    def unsafe_buffer_pointer(self):
        return self._ptr

    def is_deleted(self):
        return self._deleted

    def delete(self):
        self._deleted = True
        self._fin()
