"""Torch's CUDA caching allocator in miniature, over the simulated driver.

Like the real one it splits segments: a request is served from the best
fitting free block of an existing segment of its pool (small: <= 1 MiB, in
2 MiB segments; large: the rest, segments rounded up to 2 MiB), and the
remainder stays free inside the segment. A segment goes back to the driver
(empty_cache) only when every block in it is free, so small live tensors
left in large freed segments pin them: inactive_split_bytes.

Private pools, as Torch's CUDA graphs and MemPools have them: while a
capture is under way (capturing(pool)) allocations come from that pool's
own segments; empty_cache() frees a private pool's free segments only once
no graph uses the pool (uses[pool] == 0). The snapshot gives each
segment's segment_pool_id.
"""
import threading

import simcuda

MiB = 1 << 20
SMALL = 1 * MiB
SEGMENT_ROUND = 2 * MiB


def _round(n, unit):
    return max(unit, -(-n // unit) * unit)


def format_size(size):
    """Torch's format_size (c10/cuda/CUDACachingAllocator.cpp), as its
    out-of-memory message shows sizes: two decimals, binary units."""
    if size <= 1024:
        return f"{size} bytes"
    if size <= 1 << 20:
        return f"{size / 1024:.2f} KiB"
    if size <= 1 << 30:
        return f"{size / (1 << 20):.2f} MiB"
    return f"{size / (1 << 30):.2f} GiB"


class Block:
    __slots__ = ("seg", "offset", "size", "requested", "allocated", "frames")

    def __init__(self, seg, offset, size):
        self.seg, self.offset, self.size = seg, offset, size
        self.requested = 0
        self.allocated = False
        self.frames = None

    @property
    def address(self):
        return self.seg.ptr + self.offset


DEFAULT = (0, 0)
uses = {}  # private pool id -> graphs (or MemPools) using it
_capture = threading.local()


def capturing():
    """The private pool allocations go to now (DEFAULT outside a capture)."""
    return getattr(_capture, "pool", DEFAULT)


def set_capture(pool):
    _capture.pool = pool


class Segment:
    def __init__(self, device, ptr, size, small, pool=DEFAULT):
        self.device, self.ptr, self.size, self.small = device, ptr, size, small
        self.pool = pool
        self.blocks = [Block(self, 0, size)]


class TorchPool:
    def __init__(self, device):
        self.device = device
        self.segments = []
        self.lock = threading.Lock()

    def malloc(self, nbytes, frames=None):
        size = _round(nbytes, 512)
        small = size <= SMALL
        pool = capturing()
        with self.lock:
            best = None
            for s in self.segments:
                if s.small != small or s.pool != pool:
                    continue
                for b in s.blocks:
                    if not b.allocated and b.size >= size and (
                            best is None or b.size < best.size):
                        best = b
            if best is None:
                seg_size = SEGMENT_ROUND if small else _round(size, SEGMENT_ROUND)
                ptr = self._alloc_segment(seg_size)
                if ptr is None:
                    oom = self._oom_facts(seg_size)
                else:
                    oom = None
                    s = Segment(self.device, ptr, seg_size, small, pool)
                    self.segments.append(s)
                    best = s.blocks[0]
            if best is not None:
                rest = best.size - size
                if rest >= 512 if small else rest > SMALL:
                    s = best.seg
                    tail = Block(s, best.offset + size, rest)
                    s.blocks.insert(s.blocks.index(best) + 1, tail)
                    best.size = size
                best.allocated = True
                best.requested = nbytes
                best.frames = frames
                return best
        self._out_of_memory(*oom)  # outside the lock, as Torch calls them

    def _alloc_segment(self, seg_size):
        """cudaMalloc of a segment, as Torch's alloc_block and its retries:
        on an out-of-memory error the cached segments of this device are
        returned to the driver (release_cached_blocks) and the call tried
        once more; None when that fails too."""
        for attempt in range(2):
            try:
                return simcuda.alloc(self.device, seg_size)
            except simcuda.CudaError as e:
                if e.code != simcuda.OUT_OF_MEMORY:
                    raise
            if attempt == 0:
                self._release_cached()
        return None

    def _oom_facts(self, alloc_size):
        """What Torch's out-of-memory path reads with the lock held: the
        GPU's free and total memory (cudaMemGetInfo), what it allocated and
        reserved, its observers."""
        from .. import _C

        free, total = simcuda.mem_get_info(self.device)
        allocated = sum(b.size for s in self.segments for b in s.blocks
                        if b.allocated)
        reserved = sum(s.size for s in self.segments)
        return (alloc_size, free, total, allocated, reserved,
                list(_C.oom_observers))

    def _out_of_memory(self, alloc_size, free, total, allocated, reserved,
                       observers):
        """Torch's out-of-memory path once its lock is released: every
        observer called (device, alloc_size, device_total, device_free),
        then torch.OutOfMemoryError raised with Torch's message."""
        from .. import _C

        for obs in observers:
            obs(self.device, alloc_size, total, free)
        raise _C.OutOfMemoryError(
            f"CUDA out of memory. Tried to allocate {format_size(alloc_size)}. "
            f"GPU {self.device} has a total capacity of {format_size(total)} "
            f"of which {format_size(free)} is free. Of the allocated memory "
            f"{format_size(allocated)} is allocated by PyTorch, and "
            f"{format_size(reserved - allocated)} is reserved by PyTorch but "
            f"unallocated. If reserved but unallocated memory is large try "
            f"setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to "
            f"avoid fragmentation.  See documentation for Memory Management  "
            f"(https://pytorch.org/docs/stable/notes/cuda.html#environment-"
            f"variables)")

    def _release_cached(self):
        """Frees the segments with nothing allocated (lock held)."""
        keep = []
        for s in self.segments:
            if (len(s.blocks) == 1 and not s.blocks[0].allocated
                    and uses.get(s.pool, 0) == 0):
                simcuda.free(s.ptr)
            else:
                keep.append(s)
        self.segments = keep

    def free(self, block):
        with self.lock:
            block.allocated = False
            block.frames = None
            blocks = block.seg.blocks
            i = blocks.index(block)
            if i + 1 < len(blocks) and not blocks[i + 1].allocated:
                block.size += blocks.pop(i + 1).size
            if i > 0 and not blocks[i - 1].allocated:
                prev = blocks[i - 1]
                prev.size += blocks.pop(i).size

    def free_cached(self):
        with self.lock:
            self._release_cached()

    def allocated(self):
        with self.lock:
            return sum(b.size for s in self.segments for b in s.blocks
                       if b.allocated)

    def reserved(self):
        with self.lock:
            return sum(s.size for s in self.segments)

    def inactive_split(self):
        with self.lock:
            return sum(b.size for s in self.segments if len(s.blocks) > 1
                       for b in s.blocks if not b.allocated)

    def snapshot(self):
        with self.lock:
            out = []
            for s in self.segments:
                blocks = [{
                    "address": b.address,
                    "size": b.size,
                    "requested_size": b.requested if b.allocated else 0,
                    "state": "active_allocated" if b.allocated else "inactive",
                    "frames": list(b.frames or []),
                } for b in s.blocks]
                alloc = sum(b["size"] for b in blocks
                            if b["state"] == "active_allocated")
                out.append({
                    "device": self.device,
                    "address": s.ptr,
                    "total_size": s.size,
                    "allocated_size": alloc,
                    "active_size": alloc,
                    "requested_size": sum(b["requested_size"] for b in blocks),
                    "stream": 0,
                    "segment_type": "small" if s.small else "large",
                    "segment_pool_id": s.pool,
                    "is_expandable": False,
                    "frames": [],
                    "blocks": blocks,
                })
            return out
