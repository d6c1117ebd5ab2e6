"""torch.mps over the fake Metal driver: tensors count as allocated while
alive; dropped, their blocks stay in Torch's MPS cache until empty_cache()."""
import collections

import fakemetal

_live = 0
_cached = []
calls = collections.deque(maxlen=1000)


def _alloc(nbytes):
    global _live
    for b in _cached:
        if b.size == nbytes:
            _cached.remove(b)
            break
    else:
        b = fakemetal.alloc(nbytes)
    _live += nbytes
    return b


def _free(block):
    global _live
    _live -= block.size
    _cached.append(block)


def empty_cache():
    calls.append("empty_cache")
    while _cached:
        fakemetal.free(_cached.pop())


def current_allocated_memory():
    return _live


def driver_allocated_memory():
    return fakemetal.total()
