"""gpureclaim across the ranks of a torch.distributed process group.

Collective: every rank of ``group`` calls the same function in the same
order, as with any torch.distributed collective. Each rank runs its own
release (or explain, ps) and the records travel with the group's own
object collective: ``all_gather_object`` (every rank gets the report) or,
with ``dst``, ``gather_object`` (rank ``dst`` gets it, the others None).

A rank whose own call raises still takes part: its record says why. A
rank that hangs or dies breaks the collective for everyone (torch's rule):
then each rank that gets the report returns one with its own record and
the other ranks listed with the collective's error (status "error"), after
the process group's timeout at the latest.

With NCCL, torch moves the pickled records through the current GPU: set
it (``torch.cuda.set_device(local_rank)``) before the call, as torch asks
for every object collective; the figures are read before the gather.

Imports torch only when called (the caller has it imported).
"""
from __future__ import annotations

import time
from typing import Optional, Union

from . import _records, _report


def release(group=None, *, dst: Optional[int] = None, devices=None,
            collect: Union[str, bool] = "auto", workspaces: bool = False):
    """Collective :func:`gpureclaim.release` over the ranks of ``group``
    (None: the default group). Returns a
    :class:`gpureclaim.cluster.ClusterRelease` on every rank, or only on
    global rank ``dst`` (None on the others)."""
    return _collective("release", group, dst,
                       dict(devices=devices, collect=collect,
                            workspaces=workspaces))


def explain(group=None, *, dst: Optional[int] = None, devices=None):
    """Collective :func:`gpureclaim.explain`: a
    :class:`gpureclaim.cluster.ClusterExplanation` (see :func:`release`
    for ``group`` and ``dst``)."""
    return _collective("explain", group, dst, dict(devices=devices))


def ps(group=None, *, dst: Optional[int] = None):
    """Collective reading of every GPU of the ranks' hosts: a
    :class:`gpureclaim.cluster.ClusterUsage`."""
    return _collective("ps", group, dst, {})


def _collective(kind: str, group, dst: Optional[int], kwargs: dict):
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(
            f"gpureclaim.cluster.torch.{kind}() is a collective: call "
            "torch.distributed.init_process_group() first")
    if dst is not None and (isinstance(dst, bool) or
                            not isinstance(dst, int)):
        raise TypeError(f"dst must be a global rank (int) or None, not "
                        f"{dst!r}")
    ranks = dist.get_process_group_ranks(group or dist.group.WORLD)
    me = dist.get_rank()
    if dst is not None and dst not in ranks:
        raise ValueError(f"dst={dst} is not a rank of the group "
                         f"(ranks {ranks})")
    t0 = time.perf_counter()
    mine = _records.with_id(_records.run(kind, kwargs), f"rank {me}")
    try:
        if dst is None:
            got = [None] * len(ranks)
            dist.all_gather_object(got, mine, group=group)
        else:
            got = [None] * len(ranks) if me == dst else None
            dist.gather_object(mine, got, dst=dst, group=group)
            if me != dst:
                return None
    except Exception as e:
        if dst is not None and me != dst:
            return None
        why = (f"no report: the {'gather' if dst is not None else 'all-gather'}"
               f" failed: {type(e).__name__}: {e}")
        got = [mine if r == me else _records.failure(
            kind, f"rank {r}", "error", why) for r in ranks]
    return _report.build(kind, got, engine="torch.distributed",
                         seconds=time.perf_counter() - t0)
