"""PyTorch's CUDA caching allocator: probe, releaser, explainer.

Nothing runs unless the user imported torch and ``torch.cuda`` is
initialised: any other call could initialise CUDA.

Release, per visited GPU where Torch reserved bytes, with that device
current in Torch (``torch.cuda.device(d)``, Torch's guard: on exit it
restores the previous device without creating a context there, which
``torch.cuda.set_device`` would): ``empty_cache()`` and ``ipc_collect()``.
With ``workspaces=True`` the cuBLAS/cuBLASLt workspaces are dropped first,
so that ``empty_cache()`` returns them too, and what the drop did is kept
for explain(): the bytes it freed and the blocks of a workspace's size that
survived it, which are therefore no workspaces. Once per call: the host
(pinned) cache.

Explain: from ``memory_stats(device)``,
``reserved = allocated + inactive_split + the rest``, where the rest is
cached in segments with nothing live (what release() returns) and
inactive_split is free space inside segments that still hold a live block
(no ``empty_cache()`` can return it). ``memory_snapshot()`` splits them
further:

- private pools (a segment's ``segment_pool_id`` is not (0, 0)): CUDA graph
  pools and MemPools, which ``empty_cache()`` leaves alone while a graph or
  the MemPool holds them: their bytes, live and free, come out of the parts
  above into graph_pool parts, so that "releasable" is only what a release
  returns;
- cuBLAS/cuBLASLt workspaces among the live blocks, by evidence other than
  size (docs/explain.md, "How workspaces are found"): Torch's workspace
  maps (read in C: python/src/torch_wsmap.c), validated against the
  snapshot, else allocator history whose C++ frames name the workspace
  functions. A block of a workspace's size that nothing else identifies is
  checked against the tensors on the Python heap (the scan is C:
  python/src/tensor_scan.c): one a tensor points into is live; the others
  are "unattributed", with no advice.

Torch's cuFFT plans hold memory cuFFT takes from the driver itself: Torch
gives their number, not their bytes; they stay in the rest.
"""
from __future__ import annotations

import gc
import heapq
import os
import re
import sys
import time
from bisect import bisect_left
from operator import attrgetter
from operator import index as _index
from typing import Any, Callable, Optional

from .. import _gpureclaim as _c
from ._base import (GUARD, ONCE, Framework, Holders, OOMHook, Overlay,
                    Parts, Request, failed, imported, item, lookup, options)

ROUND = 512  # the allocator's rounding
TOP = 5  # pinned segments named
MAX_SHOWN = 16  # blocks listed in a part's detail

LIVE, WS, LT, UNATTR = range(4)


# ------------------------------------------------------------------ probe

def probe() -> tuple:
    """``torch.cuda`` once initialised, and why."""
    torch = imported("torch")
    if torch is None:
        return None, "torch not imported"
    cuda = getattr(torch, "cuda", None)
    if cuda is None:
        return None, "torch has no torch.cuda"
    try:
        init = bool(cuda.is_initialized())
    except Exception:
        init = False
    if not init:
        return None, "torch imported, CUDA not initialised"
    return cuda, "torch.cuda initialised"


# ------------------------------------------------------------ the counters

def _memory(cuda: Any, device: int) -> tuple:
    """Torch's allocated and reserved bytes on ``device``.
    ``memory_allocated()`` and ``memory_reserved()`` each rebuild and
    flatten the whole statistics dict (~60 us each);
    ``torch._C._cuda_memoryStats``, the C call beneath them, gives both in
    one nested dict. The public pair is the fallback where that private
    call is missing or changed shape."""
    c = getattr(imported("torch"), "_C", None)
    stats_fn = getattr(c, "_cuda_memoryStats", None)
    if stats_fn is not None:
        try:
            stats = stats_fn(device)
            a = item(item_all(stats, "allocated_bytes"), "current")
            r = item(item_all(stats, "reserved_bytes"), "current")
            if a >= 0 and r >= 0:
                return a, r
        except Exception:
            pass
    return (_index(cuda.memory_allocated(device)),
            _index(cuda.memory_reserved(device)))


def item_all(stats: Any, key: str) -> Any:
    """``stats[key]["all"]`` of a nested stats dict, or None."""
    k = stats.get(key) if isinstance(stats, dict) else None
    return k.get("all") if isinstance(k, dict) else None


def held(device: int) -> Optional[tuple]:
    if device < 0:
        return None
    cuda = probe()[0]
    if cuda is None:
        return None
    alloc, reserved = _memory(cuda, device)
    return alloc, max(reserved - alloc, 0)


# ------------------------------------------------------- workspace sizes

_CONFIG = re.compile(r":([0-9]+):([0-9]+)")
_LEADING_INT = re.compile(r"\s*([+-]?[0-9]+)")


def ws_sizes(cuda: Any, device: int) -> tuple:
    """Torch's cuBLAS and cuBLASLt workspace sizes on ``device``, as Torch
    computes them (CUBLAS_WORKSPACE_CONFIG, else 32 MiB on sm_90, else
    8.125 MiB; CUBLASLT_WORKSPACE_SIZE KiB, 1 MiB by default, at most the
    cuBLAS size), and where the first came from: (ws, lt, from); 0 sizes
    when unknown."""
    ws, frm = 0, ""
    cfg = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    if cfg:
        # ":SIZE_KiB:COUNT" pairs, summed, as Torch parses them
        ws = sum(int(s) * 1024 * int(n) for s, n in _CONFIG.findall(cfg))
        if ws > 0:
            frm = f"CUBLAS_WORKSPACE_CONFIG={cfg}"
    if ws <= 0:
        try:
            cap = cuda.get_device_capability(device)
            major, minor = _index(cap[0]), _index(cap[1])
            if type(cap) is not tuple or len(cap) != 2:
                raise TypeError
        except Exception:
            return 0, 0, frm
        frm = f"Torch's default for sm_{major}{minor}"
        ws = 32 << 20 if (major, minor) == (9, 0) else \
            4096 * 1024 * 2 + 16 * 1024 * 8
    v = os.environ.get("CUBLASLT_WORKSPACE_SIZE")
    m = _LEADING_INT.match(v) if v else None
    kib = int(m[1]) if m else 1024
    lt = (kib if kib > 0 else 1024) * 1024
    return ws, min(lt, ws), frm


def fits(size: int, requested: int, want: int) -> bool:
    """The block is what an allocation of ``want`` bytes gives."""
    if want <= 0:
        return False
    if requested > 0:
        return requested == want
    return size == (want + ROUND - 1) // ROUND * ROUND


def snapshot(cuda: Any) -> Any:
    """``memory_snapshot()`` without traces (with history on they can be
    100k entries)."""
    try:
        return cuda.memory_snapshot(include_traces=False)
    except TypeError:  # an older Torch
        return cuda.memory_snapshot()


# ------------------------------------------------------------- releaser

#: What release(workspaces=True) did per GPU, read by explain() so that
#: advice once followed is not given again: device -> (time.time(), bytes
#: it freed, {(address, size)} of the workspace-sized blocks that
#: survived it).
released_workspaces: dict = {}


def _sized_blocks(cuda: Any, device: int,
                  before: Optional[set] = None) -> set:
    """The live blocks of ``device`` with a workspace's size, as (address,
    size); only those of ``before`` when given."""
    ws, lt, _ = ws_sizes(cuda, device)
    out = set()
    snap = snapshot(cuda)
    for seg in snap if isinstance(snap, list) else ():
        blocks = seg.get("blocks") if isinstance(seg, dict) else None
        if not isinstance(blocks, list) or item(seg, "device") != device:
            continue
        for b in blocks:
            if not isinstance(b, dict) or b.get("state") != "active_allocated":
                continue
            size, req = item(b, "size"), item(b, "requested_size")
            if not (fits(size, req, ws) or fits(size, req, lt)):
                continue
            key = (item(b, "address"), size)
            if before is None or key in before:
                out.add(key)
    return out


def _clear_workspaces() -> Optional[str]:
    torch_c = getattr(imported("torch"), "_C", None)
    fn = getattr(torch_c, "_cuda_clearCublasWorkspaces", None)
    if fn is None:
        return ("this Torch cannot free cuBLAS workspaces "
                "(no torch._C._cuda_clearCublasWorkspaces)")
    try:
        fn()
    except Exception as e:
        raise failed("cuBLAS workspaces", e) from e
    return None


def _release_device(cuda: Any, device: int) -> Optional[str]:
    workspaces = options.workspaces
    alloc, reserved = _memory(cuda, device)
    if reserved == 0 and not workspaces:
        return None  # nothing reserved there: leave Torch's device alone
    guard = cuda.device(device)
    guard.__enter__()
    note, error = None, None
    try:
        before = None
        if workspaces:
            try:
                before = _sized_blocks(cuda, device)
            except Exception:
                before = None
            note = _clear_workspaces()
            if before is not None:
                try:
                    alloc_after = _memory(cuda, device)[0]
                    after = _sized_blocks(cuda, device, before)
                except Exception:
                    pass
                else:
                    released_workspaces[device] = (time.time(),
                                                   alloc - alloc_after, after)
                    note = (f"cuBLAS/cuBLASLt workspaces: "
                            f"{alloc - alloc_after} bytes freed on GPU "
                            f"{device}")
        cuda.empty_cache()
        cuda.ipc_collect()
    except Exception as e:
        error = e
    try:  # restore even after a failure; keep the first error
        guard.__exit__(None, None, None)
    except Exception as e:
        if error is None:
            raise failed("restoring the device", e) from e
    if error is not None:
        raise error
    return note


def _release_once() -> None:
    """Torch's pinned host cache (older Torch: no such call)."""
    torch_c = getattr(imported("torch"), "_C", None)
    fn = getattr(torch_c, "_host_emptyCache", None)
    if fn is None:
        return
    try:
        fn()
    except Exception as e:
        raise failed("host cache", e) from e


def release(device: int) -> Optional[str]:
    cuda = probe()[0]
    if cuda is None:
        return None
    if device == ONCE:
        return _release_once()
    return _release_device(cuda, device)


# ------------------------------------------------------------ explainer

class _Block:
    __slots__ = ("addr", "size", "requested", "stream", "pool", "frames",
                 "label", "cand", "handle")

    def __init__(self, addr, size, requested, stream, pool, frames):
        self.addr, self.size, self.requested = addr, size, requested
        self.stream, self.pool, self.frames = stream, pool, frames
        self.label, self.cand, self.handle = LIVE, False, 0


_by_address = attrgetter("addr")


class _Pool:
    """A private pool (a CUDA graph's or a MemPool's)."""

    __slots__ = ("id", "reserved", "live", "split", "segments", "graphs")

    def __init__(self, pid):
        self.id = pid
        self.reserved = self.live = self.split = 0
        self.segments = self.graphs = 0


class _Pinned:
    """A default-pool segment holding live and free blocks."""

    __slots__ = ("segment", "size", "free", "live", "largest", "largest_at",
                 "nlive", "nws")

    def __init__(self, segment, size):
        self.segment, self.size = segment, size
        self.free = self.live = self.largest = self.largest_at = 0
        self.nlive = self.nws = 0


class _Scan:
    """The heap scan's result (or why it did not run)."""

    __slots__ = ("ok", "ptrs", "graphs", "objects", "tensors", "odd",
                 "frozen", "ms", "why")

    def __init__(self):
        self.ok, self.ptrs, self.graphs = False, [], []
        self.objects = self.tensors = self.odd = self.frozen = 0
        self.ms, self.why = 0.0, ""

    def holds(self, address: int, size: int) -> bool:
        """A scanned tensor's data pointer lies in [address, +size)."""
        i = bisect_left(self.ptrs, address)
        return i < len(self.ptrs) and self.ptrs[i] < address + size

    def detail(self) -> dict:
        if not self.ok:
            return {"skipped": self.why}
        return {"objects": self.objects, "tensors": self.tensors,
                "odd": self.odd, "frozen": self.frozen, "ms": self.ms}


def _scan_heap() -> _Scan:
    """One pass over ``gc.get_objects()`` (objects of ``gc.freeze()`` are
    not in it): the data pointers of every tensor (``PyType_IsSubtype`` on
    ``torch._C.TensorBase``, never isinstance, which could run user code)
    and the private pool of every CUDA graph with a completed capture."""
    s = _Scan()
    t0 = time.perf_counter()
    torch = imported("torch")
    tensor = getattr(getattr(torch, "_C", None), "TensorBase", None)
    graph = getattr(getattr(torch, "cuda", None), "CUDAGraph", None)
    if not isinstance(tensor, type):
        s.why = "torch._C.TensorBase not found"
    else:
        try:
            objs = gc.get_objects()
            try:
                s.frozen = gc.get_freeze_count()
            except Exception:
                pass
            s.objects = len(objs)
            s.ptrs, s.graphs, s.tensors, s.odd = _c._heap_scan(
                objs, tensor, graph if isinstance(graph, type) else None)
            del objs
            s.ok = True
        except MemoryError:
            s.why = "out of memory"
        except Exception:
            s.why = "gc.get_objects() failed"
    s.ms = (time.perf_counter() - t0) * 1e3
    return s


def _frames_say(block: dict) -> int:
    """Allocator history: 2 a cuBLASLt workspace, 1 a cuBLAS one, 0 not a
    workspace (C++ frames, none of the workspace functions), -1 no evidence
    (no frames, or Python frames only: stacks="python" shows the user's
    matmul line for a workspace too). Exact names, whichever way Torch
    symbolizes (addr2line names the local functions; dladdr names the
    nearest exported one, getCUDABlasLtWorkspaceSize, for all three), and
    never a substring such as "cublas", which user file names contain."""
    frames = block.get("frames")
    if not isinstance(frames, list) or not frames:
        return -1
    cxx = blas = lt = False
    for f in frames[:64]:
        if not isinstance(f, dict):
            continue
        file, name = f.get("filename"), f.get("name")
        if not isinstance(file, str) or not isinstance(name, str):
            continue
        if file.startswith("<") or file.endswith(".py"):
            continue  # a Python frame
        cxx = True
        if ("getNewWorkspace" in name or "setWorkspaceForHandle" in name
                or "at::cuda::getCurrentCUDABlasHandle()" in name):
            blas = True
        if ("getNewCUDABlasLtWorkspace" in name
                or name == "at::cuda::getCUDABlasLtWorkspace()"):
            lt = True
    return 1 if blas else 2 if lt else 0 if cxx else -1


def _pool_id(seg: dict) -> Optional[tuple]:
    """A segment's private pool id, or None for the default pools."""
    pid = seg.get("segment_pool_id")
    if type(pid) is not tuple or len(pid) != 2:
        return None
    try:
        a, b = _index(pid[0]), _index(pid[1])
    except Exception:
        return None
    return None if a == 0 and b == 0 else (a, b)


class _Torch:
    """Torch's share of one GPU, as the snapshot and the maps tell it."""

    def __init__(self, call: Any, cuda: Any, device: int):
        self.call, self.cuda, self.device = call, cuda, device
        self.blocks: list = []  # active_allocated blocks, by address
        self.addrs: list = []
        self.pools: dict = {}  # id -> _Pool
        self.ws_size, self.lt_size, self.frm = ws_sizes(cuda, device)
        self.evidence = "size"
        self.map_why = ""  # why the map was not used, "" if it was
        self.bytes = [0, 0, 0, 0]  # per label
        self.count = [0, 0, 0, 0]
        self.survived = 0
        self.segments = 0  # default-pool segments holding live and free
        self.seg_free = 0
        self.top: list = []  # of _Pinned

    def find(self, addr: int) -> Optional[_Block]:
        i = bisect_left(self.addrs, addr)
        if i < len(self.addrs) and self.addrs[i] == addr:
            return self.blocks[i]
        return None

    def pool(self, seg: dict) -> Optional[_Pool]:
        pid = _pool_id(seg)
        if pid is None:
            return None
        p = self.pools.get(pid)
        if p is None:
            p = self.pools[pid] = _Pool(pid)
        return p

    def walk(self, snap: list) -> list:
        """The device's segments, in one pass over their blocks: the live
        blocks, each private pool's figures; and for each default-pool
        segment holding live and free blocks, what pins it: a _Pinned and
        the addresses of its blocks that are not free, whose workspaces are
        counted once they are labelled. (The loop is inlined: the snapshot
        of a large model holds thousands of blocks.)"""
        device, pinned = self.device, []
        add = self.blocks.append
        for seg in snap:
            if not isinstance(seg, dict):
                continue
            d = seg.get("device")
            if d != device or not isinstance(d, int):
                continue
            blocks = seg.get("blocks")
            if not isinstance(blocks, list):
                continue
            pid = seg.get("segment_pool_id")
            pool = self.pool(seg) if pid is not None and pid != (0, 0) \
                else None
            stream = seg.get("stream")
            if not isinstance(stream, int):
                stream = -1
            live = free = active = largest = largest_at = 0
            addrs = []
            for b in blocks:
                try:
                    state, size = b["state"], b["size"]
                except (TypeError, KeyError, IndexError):
                    continue
                if (type(state) is not str and not isinstance(state, str)) \
                        or (type(size) is not int
                            and not isinstance(size, int)) or size < 0:
                    continue
                if state == "inactive":
                    free += size
                    continue
                at = b.get("address")
                if type(at) is not int and not isinstance(at, int):
                    at = -1
                active += 1
                addrs.append(at)
                if size > largest:
                    largest, largest_at = size, at
                if state != "active_allocated":
                    continue  # pending free: freed, not yet reusable
                live += size
                req = b.get("requested_size")
                add(_Block(at, size,
                           req if isinstance(req, int) else -1, stream, pool,
                           _frames_say(b) if b.get("frames") else -1))
            if pool is not None:
                pool.segments += 1
                pool.reserved += item(seg, "total_size")
                pool.live += live
                pool.split += free if active else 0
            elif free > 0 and active:
                p = _Pinned(item(seg, "address"), item(seg, "total_size"))
                p.free, p.nlive = free, active
                p.largest, p.largest_at = largest, largest_at
                pinned.append((p, addrs))
        return pinned

    def from_map(self) -> bool:
        """Labels the blocks Torch's workspace maps name; False (map_why
        says why) where the maps cannot be read or do not match."""
        try:
            version = str(imported("torch").__version__)
        except Exception:
            self.map_why = "torch.__version__ unreadable"
            return False
        rows, why = _c._torch_wsmap(version)
        if rows is None:
            self.map_why = why
            return False
        for dev, lt, ptr, handle, _stream, size in rows:
            if dev != self.device or not ptr:
                continue
            b = self.find(ptr)
            want = size or (self.lt_size if lt else self.ws_size)
            if b is None or not fits(b.size, b.requested, want):
                self.map_why = (
                    f"Torch's workspace map could not be read: its entry "
                    f"at {ptr:#x} is no live block of {want} bytes in the "
                    f"snapshot (discarded)")
                for k in self.blocks:
                    k.label = LIVE
                return False
            b.label = LT if lt else WS
            b.handle = handle
        self.evidence = "workspace_map"
        return True

    def label(self) -> None:
        if self.from_map():
            return
        cands = []
        ws, lt = self.ws_size, self.lt_size
        for b in self.blocks:
            if b.frames in (1, 2):
                b.label = WS if b.frames == 1 else LT
                self.evidence = "history"
            elif b.frames == -1 and (fits(b.size, b.requested, ws)
                                     or fits(b.size, b.requested, lt)):
                b.cand = True
                cands.append(b)
        if not cands:
            return
        scan = self.call.memo("torch.scan", _scan_heap)
        r = released_workspaces.get(self.device)
        survivors = r[2] if r else ()
        for b in cands:
            if scan.ok and scan.holds(b.addr, b.size):
                continue
            b.label = UNATTR
            if (b.addr, b.size) in survivors:
                self.survived += 1

    def keep_top(self, p: _Pinned) -> None:
        top = self.top
        if len(top) < TOP:
            top.append(p)
            i = len(top) - 1
        elif p.free <= top[-1].free:
            return
        else:
            i = TOP - 1
            top[i] = p
        while i > 0 and top[i].free > top[i - 1].free:
            top[i], top[i - 1] = top[i - 1], top[i]
            i -= 1

    def read_snapshot(self) -> None:
        snap = self.call.memo("torch.snapshot", lambda: snapshot(self.cuda))
        if not isinstance(snap, list):
            return
        pinned = self.walk(snap)
        self.blocks.sort(key=_by_address)
        self.addrs = [b.addr for b in self.blocks]
        self.label()
        nbytes, count = self.bytes, self.count
        for b in self.blocks:
            nbytes[b.label] += b.size
            count[b.label] += 1
        ws = {b.addr for b in self.blocks if b.label in (WS, LT)}
        for p, addrs in pinned:
            if ws and not ws.isdisjoint(addrs):
                p.nws = sum(map(ws.__contains__, addrs))
            self.segments += 1
            self.seg_free += p.free
            self.keep_top(p)

    def pinned_detail(self) -> tuple:
        only_ws = bool(self.top) and self.segments == len(self.top)
        pinned = []
        for p in self.top:
            only_ws = only_ws and p.nws == p.nlive
            pinned.append({"segment": p.segment, "segment_size": p.size,
                           "free": p.free, "live_blocks": p.nlive,
                           "workspace_blocks": p.nws,
                           "largest_live": p.largest,
                           "largest_live_address": p.largest_at})
        return {"segments": self.segments, "free_in_segments": self.seg_free,
                "pinned": pinned}, only_ws

    def blocks_of(self, label: int) -> list:
        out = []
        for b in self.blocks:
            if b.label == label:
                out.append({"address": b.addr, "size": b.size,
                            "stream": b.stream, "handle": b.handle})
                if len(out) == MAX_SHOWN:
                    break
        return out


def _counters(cuda: Any, device: int) -> tuple:
    """allocated, reserved, inactive_split (-1: absent)."""
    alloc = reserved = split = -1
    try:
        stats = cuda.memory_stats(device)
    except Exception:
        stats = None
    if stats is not None:
        alloc = item(stats, "allocated_bytes.all.current")
        reserved = item(stats, "reserved_bytes.all.current")
        split = item(stats, "inactive_split_bytes.all.current")
    # an allocator with no stats yet (or an old Torch): the plain calls
    if alloc < 0:
        alloc = _index(cuda.memory_allocated(device))
    if reserved < 0:
        reserved = _index(cuda.memory_reserved(device))
    return alloc, reserved, split


def _workspace_part(g: Parts, x: _Torch, label: int) -> None:
    if not x.count[label]:
        return
    name = "cuBLAS" if label == WS else "cuBLASLt"
    if x.evidence == "workspace_map":
        how = (f"{x.count[label]} live Torch block(s) in Torch's {name} "
               f"workspace map (one per cuBLAS handle and stream), checked "
               f"against memory_snapshot()")
    else:
        how = (f"{x.count[label]} live Torch block(s) whose allocation "
               f"frames (allocator history) name Torch's {name} workspace "
               f"functions")
    g.add("workspace", name, x.bytes[label], evidence=x.evidence,
          advice="release_workspaces", how=how,
          detail={"blocks": x.blocks_of(label),
                  "map": "cublas" if label == WS else "cublaslt"})


def _unattributed_part(call: Any, g: Parts, x: _Torch) -> None:
    if not x.count[UNATTR]:
        return
    s = call.memo("torch.scan", _scan_heap)
    r = released_workspaces.get(g.device)
    frozen = (f" (gc.freeze() froze {s.frozen} objects, which the scan "
              f"cannot see)" if s.ok and s.frozen > 0 else "")
    survived = (f"; {x.survived} of them survived release(workspaces=True): "
                f"not workspaces" if x.survived and r else "")
    checked = ("that no Python tensor points into" if s.ok
               else "not checked against the Python heap")
    why = x.map_why or "Torch's workspace map not read"
    how = (f"unattributed live block(s) of {x.ws_size} / {x.lt_size} bytes, "
           f"the size of a cuBLAS / cuBLASLt workspace ({x.frm}), "
           f"{checked}{frozen}: a workspace, an autograd saved tensor or any "
           f"tensor held in C++ ({why}). To know, record allocator history "
           f'with stacks="all"{survived}')
    g.add("unattributed", "torch", x.bytes[UNATTR], exact=False,
          evidence="tensor_scan" if s.ok else "size", how=how,
          detail={"blocks": x.blocks_of(UNATTR), "scan": s.detail(),
                  "map": x.map_why,
                  "survived_release_at": r[0] if r and x.survived else None})


_GRAPH_SOURCES = ("torch CUDA graphs", "torch CUDA graphs, none live",
                  "torch MemPool or graph pool handle")


def _graph_parts(call: Any, g: Parts, x: _Torch) -> None:
    """The private pools, in three parts: pools of live CUDA graphs
    (deleting or resetting them lets release() return the free bytes),
    graph pools with no live graph found, MemPools and shared graph pool
    handles."""
    if not x.pools:
        return
    scan = call.memo("torch.scan", _scan_heap)
    found = scan.graphs if scan.ok else ()
    for p in x.pools.values():
        p.graphs = sum(1 for gid in found if tuple(gid) == p.id)
    for kind in range(3):
        pools = [p for p in x.pools.values()
                 if (0 if p.graphs else 1 if p.id[0] else 2) == kind]
        if not pools:
            continue
        graphs = sum(p.graphs for p in pools)
        nbytes = sum(p.reserved for p in pools)
        live = sum(p.live for p in pools)
        n = len(pools)
        if kind == 0:
            how = (f"{n} private pool(s) of {graphs} live CUDA graph(s) "
                   f"(memory_snapshot: segment_pool_id; graphs found on the "
                   f"Python heap): empty_cache() cannot return a graph's "
                   f"pool until the graph is deleted or reset; {live} bytes "
                   f"of it are live (the graphs' output tensors), the rest "
                   f"is what release() returns after that")
        elif kind == 1:
            how = (f"{n} private pool(s) made by CUDA graph capture with no "
                   f"live graph found: held by tensors allocated during "
                   f"capture, by graphs made in C++ (not seen), or for the "
                   f"life of the process by a failed capture "
                   f"(pytorch#190348); {live} bytes live")
        else:
            how = (f"{n} private pool(s) of a torch.cuda.MemPool or a "
                   f"graph_pool_handle() with no live graph found: returned "
                   f"when the MemPool and the graphs sharing it are gone; "
                   f"{live} bytes live")
        g.add("graph_pool", _GRAPH_SOURCES[kind], nbytes, evidence="snapshot",
              advice="delete_graphs" if kind == 0 else None, how=how,
              detail={"pools": [
                  {"id": p.id, "made_by": "graph" if p.id[0]
                   else "mempool_or_handle", "segments": p.segments,
                   "reserved": p.reserved, "live": p.live,
                   "free": p.reserved - p.live, "graphs": p.graphs}
                  for p in pools], "scan": scan.detail()})


def _plans(g: Parts) -> None:
    """Torch's cuFFT plans on the device: a count only."""
    try:
        cache = imported("torch.backends.cuda").cufft_plan_cache
        n = _index(cache[g.device].size)
    except Exception:
        return
    if n <= 0:
        return
    g.add("workspace", "cuFFT plans (torch)", known=False, exact=False,
          advice="clear_torch_plans",
          how=(f"{n} plan(s) in torch.backends.cuda.cufft_plan_cache"
               f"[{g.device}]; Torch does not report their memory (cuFFT "
               f"takes it from the driver): it is counted in the rest"),
          detail={"plans": n})


def explain(call: Any, g: Parts) -> None:
    cuda = probe()[0]
    if cuda is None:
        return
    x = _Torch(call, cuda, g.device)
    alloc, reserved, split = _counters(cuda, g.device)
    if alloc > 0 or reserved > 0:
        x.read_snapshot()
    call.memo(("torch.explained", g.device), lambda: x)  # for holders
    if split < 0:
        split = x.seg_free  # no stats: the snapshot's figure
    p_res = sum(p.reserved for p in x.pools.values())
    p_live = sum(p.live for p in x.pools.values())
    p_split = sum(p.split for p in x.pools.values())
    frag, only_ws = x.pinned_detail()
    _workspace_part(g, x, WS)
    _workspace_part(g, x, LT)
    _unattributed_part(call, g, x)
    g.add("live", "torch",
          alloc - p_live - x.bytes[WS] - x.bytes[LT] - x.bytes[UNATTR],
          advice="free_arrays",
          how="torch.cuda.memory_stats: allocated_bytes.all.current minus "
              "the parts of Torch listed apart")
    g.add("releasable", "torch",
          reserved - alloc - split - (p_res - p_live - p_split),
          advice="release",
          how="reserved_bytes - allocated_bytes - inactive_split_bytes, "
              "private pools excepted: segments with no live block")
    g.add("not_releasable", "torch", split - p_split,
          advice="release_workspaces_pins" if only_ws
          else "free_pinning_blocks",
          hint=None if only_ws else "expandable_segments",
          how="inactive_split_bytes, private pools excepted: free blocks "
              "inside segments that still hold live blocks "
              "(memory_snapshot)",
          detail=frag)
    _graph_parts(call, g, x)
    _plans(g)


# ------------------------------------------------------------------- OOM

#: the observer, once attached or queued: Torch cannot detach one, so it is
#: attached once per process (it does nothing while watching is off)
_observer: list = []
_UNITS = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
_TRIED = re.compile(r"Tried to allocate ([0-9]+(?:\.[0-9]+)?) "
                    r"(bytes|KiB|MiB|GiB)")
_ON_GPU = re.compile(r"\bGPU ([0-9]+) has a total capacity")


def oom_attach(watch: Any) -> Optional[str]:
    """Torch's out-of-memory observer: ``torch._C.
    _cuda_attach_out_of_memory_observer(cb)`` calls ``cb(device,
    alloc_size, device_total, device_free)`` with the allocator's lock
    released, after Torch returned its own cached blocks and tried again,
    and before it raises (it does not retry after). Attaching initialises
    CUDA, so while torch.cuda is not initialised it is queued with
    ``torch.cuda._lazy_call`` (run by Torch's own lazy initialisation,
    as its manual_seed is): a program that never uses CUDA never starts
    it."""
    if _observer:
        return None
    torch = imported("torch")
    cuda = getattr(torch, "cuda", None)
    attach = getattr(getattr(torch, "_C", None),
                     "_cuda_attach_out_of_memory_observer", None)
    if cuda is None or attach is None:
        return ("this Torch has no out-of-memory observer "
                "(torch._C._cuda_attach_out_of_memory_observer)")

    def observer(device, alloc_size, device_total, device_free):
        # whatever this raises, Torch would raise instead of its own error
        try:
            watch.report("torch", _index(device), _index(alloc_size),
                         facts={"device_total": _index(device_total),
                                "device_free": _index(device_free)})
        except BaseException:
            pass

    def attach_now():
        try:
            attach(observer)
        except Exception as e:  # never into Torch's initialisation
            watch.note("torch", f"the observer could not be attached: "
                                f"{type(e).__name__}: {e}")

    try:
        init = bool(cuda.is_initialized())
    except Exception:
        init = False
    if init:
        attach_now()
    else:
        lazy = getattr(cuda, "_lazy_call", None)
        if lazy is None:
            return ("this Torch has no torch.cuda._lazy_call: call "
                    "watch_oom() again once CUDA is initialised")
        lazy(attach_now)
    _observer.append(observer)
    return None


def oom_request(exc: BaseException) -> Optional[Request]:
    """Torch's OutOfMemoryError, and the request its message names
    ("Tried to allocate 69.65 GiB. GPU 0 has a total capacity of ...":
    two decimals, so exact only in bytes)."""
    torch = imported("torch")
    cls = getattr(torch, "OutOfMemoryError", None)
    if not isinstance(cls, type):
        cls = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
    if not isinstance(cls, type) or not isinstance(exc, cls):
        return None
    try:
        msg = str(exc)
    except Exception:
        msg = ""
    m, d = _TRIED.search(msg), _ON_GPU.search(msg)
    nbytes = round(float(m[1]) * _UNITS[m[2]]) if m else 0
    return Request(nbytes, int(d[1]) if d else None,
                   bool(m) and m[2] == "bytes")


def largest_blocks(call: Any, device: int, n: int) -> list:
    """The ``n`` largest live blocks of ``device`` in Torch's snapshot (the
    call's, shared with explain), with the frames of their allocation when
    the allocator's history is recorded
    (``torch.cuda.memory._record_memory_history()``)."""
    cuda = probe()[0]
    if cuda is None:
        return []
    snap = call.memo("torch.snapshot", lambda: snapshot(cuda))
    found = []
    for seg in snap if isinstance(snap, list) else ():
        if not isinstance(seg, dict) or seg.get("device") != device:
            continue
        for b in seg.get("blocks") or ():
            if (isinstance(b, dict) and b.get("state") == "active_allocated"
                    and item(b, "size") > 0):
                found.append(b)
    out = []
    for b in heapq.nlargest(n, found, key=lambda b: b["size"]):
        frames = []
        for f in (b.get("frames") or ())[:MAX_SHOWN]:
            if isinstance(f, dict):
                frames.append({"filename": str(f.get("filename", "?")),
                               "line": item(f, "line"),
                               "name": str(f.get("name", "?"))})
        out.append({"address": item(b, "address"), "size": b["size"],
                    "requested": item(b, "requested_size"),
                    "frames": frames})
    return out


# ------------------------------------------------------------- holders

def _storage(base: type) -> Callable[[Any], Optional[tuple]]:
    """(device, storage address, its bytes) of a CUDA tensor, None for
    another, read through torch._C.TensorBase (no subclass's override)."""
    storage_of, get_device = base.untyped_storage, base.get_device
    is_cuda = getattr(base, "is_cuda")

    def read(t: Any) -> Optional[tuple]:
        if not is_cuda.__get__(t, base):
            return None
        st = storage_of(t)
        ptr = _index(st.data_ptr())
        return (_index(get_device(t)), ptr, _index(st.nbytes())) if ptr \
            else None
    return read


def _tensor_base() -> Optional[type]:
    base = getattr(getattr(imported("torch"), "_C", None), "TensorBase", None)
    return base if isinstance(base, type) else None


def arrays(call: Any, objs: list) -> tuple:
    """Torch's CUDA tensors among objs, each with its storage (views of
    one storage share it: ``untyped_storage()``'s data pointer and size),
    and the live blocks explain() read from the snapshot on each GPU (not
    the workspaces), read through ``torch._C.TensorBase`` so that no
    subclass's override runs."""
    base = _tensor_base()
    if base is None:
        return [], None, 0
    read = _storage(base)
    out, odd = [], 0
    for t in _c._of_types(objs, (base,)):
        try:
            at = read(t)
        except Exception:
            odd += 1
            continue
        if at is not None:
            out.append((t, *at))
    blocks = []
    for key, x in call.readings():
        if type(key) is tuple and key[0] == "torch.explained":
            blocks += [(key[1], b.addr, b.size) for b in x.blocks
                       if b.label == LIVE]
    return out, blocks, odd


def array_types() -> tuple:
    """The class of Torch's tensors (every subclass's base)."""
    base = _tensor_base()
    return (base,) if base is not None else ()


# The autograd graph (docs/explain.md, "Who holds it"): a tensor's grad_fn,
# each node's next_functions, what each node saved (the generated nodes'
# _saved_<x>: those with a _raw_saved_<x> are SavedVariables, the others
# sizes and scalars; AccumulateGrad's variable; a custom Function's
# saved_tensors), a leaf's .grad. All C getters, read by _gpureclaim._follow
# under its guard: a saved-tensor hook's unpack (activation checkpointing
# recomputes there) or a subclass's __torch_function__ never runs. A
# node's .metadata is not read (its getter makes one dict per node and
# keeps it), nor the hooks a node keeps for a tensor whose Python object
# is gone (no getter shows them).

#: node types described so far: {id(type): (type, next, (saved
#: descriptors))} (_follow's kinds; the type kept, so its id stays its
#: own) and the names of those descriptors {id(type): names}
_KINDS: dict = {}
_NAMES: dict = {}
MAX_NODES = 1_000_000
_get_mro = type.__dict__["__mro__"].__get__
_get_qualname = type.__dict__["__qualname__"].__get__
_MODIFIED = "modified by an inplace operation"


def _function_base() -> Optional[type]:
    fb = (_c._instance_dict(getattr(imported("torch"), "_C", None))
          or {}).get("_FunctionBase")
    return fb if isinstance(fb, type) else None


def _describe(t: type, fb: Optional[type]) -> None:
    nxt = lookup(t, "next_functions")
    names: list = []
    mro = _get_mro(t)
    if nxt is not None:
        for k in mro:
            d = _c._instance_dict(k) or {}
            for name in d:
                if type(name) is str and name.startswith("_saved_") and \
                        "_raw" + name in d and name not in names:
                    names.append(name)
        if _get_qualname(t) == "AccumulateGrad":
            names.append("variable")
        if fb is not None and fb in mro:
            names.append("saved_tensors")
    _KINDS[id(t)] = (t, nxt, tuple(lookup(t, n) for n in names))
    _NAMES[id(t)] = tuple(names)


def graph(call: Any, objs: list, budget_s: float) -> Optional[Overlay]:
    """The autograd graph below the tensors objs (each tensor's grad_fn,
    or a leaf's .grad), as an Overlay of _base.py."""
    torch = imported("torch")
    base = _tensor_base()
    first = lookup(base, "grad_fn") if base is not None else None
    if first is None:
        return None
    if sys.getprofile() is not None:
        return Overlay([], [], {}, [
            "torch: the autograd graph was not read: a profiler is set "
            "(sys.setprofile), and reading the graph needs this thread's "
            "profile function to keep user code from running"], {})
    fb = _function_base()
    bases = ((fb, lookup(fb, "next_functions"),
              (lookup(fb, "saved_tensors"),)),) if fb is not None else ()
    state: tuple = ([], {}, [], [], [])
    nodes, _, links, saved, failed = state
    t0 = time.perf_counter()
    heads, pending, stopped = _c._follow(
        objs, first, lookup(base, "grad"), _KINDS, bases, GUARD,
        max(budget_s, 0.0), MAX_NODES, state, [])
    while pending and not stopped:
        for q in pending:
            t = type(nodes[q])
            k = _KINDS.get(id(t))
            if k is None or k[0] is not t:
                _describe(t, fb)
        _, pending, stopped = _c._follow(
            [], None, None, _KINDS, bases, GUARD,
            max(budget_s - (time.perf_counter() - t0), 0.0), MAX_NODES,
            state, pending)
    read = _storage(base)
    edges, found, labels = [], {}, {}
    notes: list = []
    unread = {"user code": 0, "modified": 0}

    def tensor(v: Any) -> None:
        if id(v) not in found:
            try:
                found[id(v)] = (v, *at) if (at := read(v)) else None
            except Exception:
                found[id(v)] = None
    for i, q, g in heads:
        s = objs[i]
        if q >= 0:
            edges.append((s, nodes[q], ".grad_fn", "grad_fn"))
        if g is not None:
            edges.append((s, g, ".grad", "grad"))
            tensor(g)
    for q, lk in enumerate(links):
        for pos, r in enumerate(lk or ()):
            if r >= 0:
                edges.append((nodes[q], nodes[r],
                              f".next_functions[{pos}][0]", "next"))
    names = {}
    for q, k, j, v in saved:
        n = nodes[q]
        t = type(n)
        nm = names.get(id(t))
        if nm is None:
            nm = names[id(t)] = _NAMES.get(id(t)) or ("saved_tensors",)
        edges.append((n, v, f".{nm[k]}" + (f"[{j}]" if j >= 0 else ""),
                      "saved"))
        if base in _get_mro(type(v)):
            tensor(v)
    for q, k, why in failed:
        if why == "user code":
            unread["user code"] += 1
        elif _MODIFIED in why:
            unread["modified"] += 1
    for n in nodes:
        labels[id(n)] = _get_qualname(type(n))
    if stopped:
        notes.append(f"torch: the autograd graph was read in part "
                     f"({len(nodes)} nodes): its "
                     f"{'time budget' if stopped == 'time' else 'node cap'}"
                     f" ran out")
    return Overlay(edges, [a for a in found.values() if a], labels, notes,
                   {k: v for k, v in unread.items() if v})


_HOOKS = ("_backward_hooks", "_post_accumulate_grad_hooks")


def edge_names(parent: Any, child: Any) -> Optional[list]:
    """A tensor's hook dicts, which its own traverse shows (read for
    Tensor and Parameter only: a subclass's __torch_function__ would run
    on another)."""
    torch = imported("torch")
    t = type(parent)
    if t is not getattr(torch, "Tensor", None) and t is not getattr(
            getattr(torch, "nn", None), "Parameter", None):
        return None
    base = _tensor_base()
    for name in _HOOKS:
        desc = lookup(base, name) if base is not None else None
        try:
            if desc is not None and desc.__get__(parent, t) is child:
                return ["." + name]
        except Exception:
            pass
    return None


def segments(call: Any) -> Optional[list]:
    """The caching allocator's segments from the snapshot explain() read:
    (device, address, bytes, [live block addresses]) (private pools'
    too: a graph's pool goes back only once the graph is gone)."""
    snap = None
    for key, x in call.readings():
        if key == "torch.snapshot":
            snap = x
    if not isinstance(snap, list):
        return None
    out = []
    for seg in snap:
        if not isinstance(seg, dict) or item(seg, "address") < 0:
            continue
        live = [item(b, "address") for b in seg.get("blocks") or ()
                if isinstance(b, dict) and b.get("state") in
                ("active_allocated", "active_pending_free")]
        out.append((item(seg, "device"), item(seg, "address"),
                    item(seg, "total_size"), live))
    return out


# opt.param_groups[0]['params'][3]: a parameter an optimizer holds
_IN_OPTIMIZER = re.compile(
    r"([A-Za-z_][\w.]*)\.param_groups\[\d+\]\['params'\]\[\d+\]\Z")


def clear(paths: list) -> Optional[str]:
    """The optimizer's zero_grad(set_to_none=True) where one holds the
    parameter: what a training loop calls anyway."""
    for p in sorted(paths, key=len):
        m = _IN_OPTIMIZER.match(p)
        if m:
            return f"{m[1]}.zero_grad(set_to_none=True)"
    return None


def graph_advice(name: str, head: str, nexts: list) -> str:
    """total = total + loss, kept across a loop, keeps every iteration's
    graph (PyTorch's FAQ, "Don't accumulate history across your training
    loop"): a number keeps none."""
    if head == "AddBackward0" and "AddBackward0" in nexts:
        return f"`{name} += loss.item()`, or `.detach()`: a number keeps " \
            "no graph"
    return f"call `{name}.backward()`, or keep `{name}.detach()`"


def marks(graph: dict, overlay: dict) -> dict:
    """The parameters an optimizer holds that nothing else on the heap
    holds (no model: only the optimizer's param_groups and state, and
    autograd graphs), and their state dicts: {id: words}. Read from the
    optimizer's own dicts (no property, no tensor's __hash__)."""
    optim = imported("torch.optim")
    base = (_c._instance_dict(optim) or {}).get("Optimizer") if optim \
        else None
    if not isinstance(base, type):
        return {}
    out: dict = {}
    seen: set = set()
    for _, parents in list(graph.values()):
        for o in parents:
            if id(o) in seen:
                continue
            seen.add(id(o))
            if base not in _get_mro(type(o)):
                continue
            d = _c._instance_dict(o) or {}
            state, groups = d.get("state"), d.get("param_groups")
            if not isinstance(state, dict) or type(groups) is not list:
                continue
            inside = {id(d), id(state), id(groups)}
            params = []
            for g in groups:
                ps = dict.get(g, "params") if type(g) is dict else None
                if type(ps) is list:
                    inside.update((id(g), id(ps)))
                    params += ps
            for p in params:
                e = graph.get(id(p))
                if e is None:
                    continue
                graphs = {id(x) for x, *_ in (overlay.get(id(p)) or
                                               [None])[1:]}
                if any(id(q) not in inside and id(q) not in graphs
                       for q in e[1]):
                    continue
                out[id(p)] = " (a parameter no model holds any more)"
                for k, v in dict.items(state):
                    if k is p:
                        out[id(v)] = (" (the state of a parameter no model "
                                      "holds any more)")
    return out


HOLDERS = Holders(arrays, attr_dicts=("_parameters", "_buffers", "_modules"),
                  cpp="a tensor's .grad, the autograd graph, a saved "
                      "tensor, an extension", types=array_types,
                  graph=graph, edge_names=edge_names,
                  cannot="what a saved-tensor hook packed (activation "
                         "checkpointing, save_on_cpu: its unpack would "
                         "run), what a node's .metadata or a hook "
                         "registered on a tensor since deleted keeps, "
                         "and tensors an extension holds in C++ are not "
                         "followed",
                  segments=segments, clear=clear, graph_advice=graph_advice,
                  marks=marks)

FRAMEWORK = Framework("torch", "cuda", probe, held, release, explain,
                      oom=OOMHook("torch", oom_attach, oom_request),
                      holders=HOLDERS)
