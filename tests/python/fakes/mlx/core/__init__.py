"""A fake mlx.core: arrays on the fake Metal driver; dropped arrays stay in
MLX's cache until clear_cache()."""
import collections
import weakref

import fakemetal

_active = 0
_cache = []
calls = collections.deque(maxlen=1000)


def _free(block):
    global _active
    _active -= block.size
    _cache.append(block)


class array:
    def __init__(self, nbytes):
        global _active
        for b in _cache:
            if b.size == nbytes:
                _cache.remove(b)
                break
        else:
            b = fakemetal.alloc(nbytes)
        _active += nbytes
        self.nbytes = nbytes
        weakref.finalize(self, _free, b)


def ones(nbytes):
    return array(nbytes)


def clear_cache():
    calls.append("clear_cache")
    while _cache:
        fakemetal.free(_cache.pop())


def get_active_memory():
    return _active


def get_cache_memory():
    return sum(b.size for b in _cache)
