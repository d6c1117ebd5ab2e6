"""gpureclaim across a cluster: release, explain and ps in every worker of
a Dask cluster, every rank of a torch.distributed group or a set of Ray
actors, brought together into one report.

    import gpureclaim.cluster
    report = gpureclaim.cluster.dask.release(client)        # Client.run
    report = gpureclaim.cluster.torch.release()             # collective
    report = gpureclaim.cluster.ray.release(actors)         # actor handles

Each worker measures its own process (the drop of NVML's per-process
figure, exactly as gpureclaim.release does); the report adds those up per
worker, per GPU and per host. GPUs are keyed by UUID, so a GPU that
several workers share is counted once. A worker that raised, timed out or
died is listed with the reason in ``report.failed``; the others' figures
are whole.

No engine (dask, distributed, ray, torch) is imported here: each engine's
module imports its engine only when called, and the caller has it
imported already.
"""
from . import dask, ray, torch
from ._records import Worker, WorkerGPU, WorkerPart
from ._report import (ClusterExplanation, ClusterGPU, ClusterHost,
                      ClusterRelease, ClusterReport, ClusterUsage)

__all__ = [
    "ClusterExplanation",
    "ClusterGPU",
    "ClusterHost",
    "ClusterRelease",
    "ClusterReport",
    "ClusterUsage",
    "Worker",
    "WorkerGPU",
    "WorkerPart",
    "dask",
    "ray",
    "torch",
]
