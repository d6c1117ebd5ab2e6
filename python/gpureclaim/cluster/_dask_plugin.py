"""The Dask worker plugin: this worker process's own driver bytes per GPU
in its metrics, and gpureclaim's Prometheus metrics of the process on the
worker's own /metrics (imports distributed: load it through
``gpureclaim.cluster.dask.GPUMetricsPlugin``)."""
from __future__ import annotations

import importlib.util
import time

from distributed.diagnostics.plugin import WorkerPlugin

from . import _records


def _reading() -> dict:
    from gpureclaim import _gpureclaim as c

    try:
        return _records.metrics_record(c.gpus())
    except Exception:  # no driver, a forked child: nothing to show
        return _records.metrics_record([])


class _Reading:
    """One reading shared by the metrics of one heartbeat (the worker asks
    for them one after the other), taken afresh at the next."""

    def __init__(self):
        self.at, self.value = -1.0, {}

    def get(self, key: str) -> object:
        now = time.monotonic()
        if now - self.at > 0.1:
            self.value, self.at = _reading(), now
        return self.value[key]


class GPUMetricsPlugin(WorkerPlugin):
    """Adds to each worker's metrics (``client.scheduler_info()["workers"]
    [addr]["metrics"]``, sent with every heartbeat):

    - ``gpureclaim_gpu_bytes``: the driver bytes this worker's process
      holds, summed over its GPUs (the dashboard's worker table shows it as
      a column, and its Total row is right: no GPU is counted twice);
    - ``gpureclaim_gpus``: ``{GPU UUID: bytes}`` for this process.

    Both are NVML's per-process figure, never the device-wide one that
    distributed's own ``gpu`` metric reports for every worker of a GPU.
    Where prometheus_client is installed (distributed's own Prometheus
    route needs it), the worker's ``/metrics`` also serves
    ``gpureclaim_process_memory_bytes`` and
    ``gpureclaim_process_part_bytes``, the names ``gpureclaim exporter``
    reports (gpureclaim.metrics.register(), docs/metrics.md).
    Register with ``client.register_plugin(GPUMetricsPlugin())``.
    """

    idempotent = True
    name = "gpureclaim-gpu-metrics"

    def setup(self, worker) -> None:
        reading = _Reading()
        self._keys = tuple(_records.metrics_record([]))
        for key in self._keys:
            worker.metrics[key] = lambda w, key=key: reading.get(key)
        self._prometheus = importlib.util.find_spec(
            "prometheus_client") is not None
        if self._prometheus:
            from gpureclaim import metrics

            metrics.register()

    def teardown(self, worker) -> None:
        for key in getattr(self, "_keys", ()):
            worker.metrics.pop(key, None)
        if getattr(self, "_prometheus", False):
            from gpureclaim import metrics

            metrics.unregister()
