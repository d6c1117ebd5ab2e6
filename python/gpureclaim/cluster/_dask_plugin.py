"""The Dask worker plugin: this worker process's own driver bytes per GPU
in its metrics (imports distributed: load it through
``gpureclaim.cluster.dask.GPUMetricsPlugin``)."""
from __future__ import annotations

from distributed.diagnostics.plugin import WorkerPlugin

from . import _records


def _reading() -> dict:
    from gpureclaim import _gpureclaim as c

    try:
        return _records.metrics_record(c.gpus())
    except Exception:  # no driver, a forked child: nothing to show
        return _records.metrics_record([])


class GPUMetricsPlugin(WorkerPlugin):
    """Adds to each worker's metrics (``client.scheduler_info()["workers"]
    [addr]["metrics"]``, sent with every heartbeat):

    - ``gpureclaim_gpu_bytes``: the driver bytes this worker's process
      holds, summed over its GPUs (the dashboard's worker table shows it as
      a column, and its Total row is right: no GPU is counted twice);
    - ``gpureclaim_gpus``: ``{GPU UUID: bytes}`` for this process.

    Both are NVML's per-process figure, never the device-wide one that
    distributed's own ``gpu`` metric reports for every worker of a GPU.
    Register with ``client.register_plugin(GPUMetricsPlugin())``.
    """

    idempotent = True
    name = "gpureclaim-gpu-metrics"

    def setup(self, worker) -> None:
        keys = _records.metrics_record([])
        for key in keys:
            worker.metrics[key] = _Metric(key)
        self._keys = tuple(keys)

    def teardown(self, worker) -> None:
        for key in getattr(self, "_keys", ()):
            worker.metrics.pop(key, None)


class _Metric:
    """One metric key, read afresh at each heartbeat (a few NVML queries,
    well under a millisecond)."""

    def __init__(self, key: str):
        self.key = key

    def __call__(self, worker) -> object:
        return _reading()[self.key]
