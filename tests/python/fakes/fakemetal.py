"""A fake Metal driver: one per-process total, shared by torch.mps and mlx
(Metal's currentAllocatedSize counts every framework's buffers)."""


class Block:
    __slots__ = ("size",)

    def __init__(self, size):
        self.size = size


_total = 1_500_000  # what Metal holds before any tensor


def alloc(n):
    global _total
    _total += n
    return Block(n)


def free(b):
    global _total
    _total -= b.size


def total():
    return _total
