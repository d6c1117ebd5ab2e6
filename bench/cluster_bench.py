"""The fan-out cost of gpureclaim.cluster.dask.release, on a real
distributed.LocalCluster of 8 worker processes on the simulated driver
(no GPU needed), with the test suite's fake torch.

Each round, every worker first allocates and drops 64 MiB with Torch (so
there is something to give back), then one of the contenders runs:
- gpureclaim: gpureclaim.cluster.dask.release(client): one Client.run per
  worker, each with its timeout, the records gathered into the report;
- hand-written: client.run(torch.cuda.empty_cache), the usual pattern
  (one broadcast, no figures, no failure handling).
Rounds alternate the two. Per gpureclaim call: the call's wall time, the
slowest worker's own release time (Worker.seconds) and their difference,
the fan-out overhead. Target: overhead <= 20 ms (median).
Also: the cost of the worker metrics plugin's reading (in a worker).

Usage: python3 bench/cluster_bench.py [ROUNDS] [BUILD]   (defaults 30, build)
"""
import json
import logging
import os
import platform
import statistics
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 30
BUILD = os.path.join(ROOT, sys.argv[2] if len(sys.argv) > 2 else "build")
WORKERS = 8
MiB = 1 << 20

# The workers inherit this environment and (multiprocessing's spawn) this
# sys.path: the built package first, then the fake frameworks.
STATE = "bench-" + uuid.uuid4().hex[:8]
os.environ.update(
    GPURECLAIM_SIM=f"gpus=2;state={STATE}",
    GPURECLAIM_CUDA_LIBRARY=os.path.join(BUILD, "sim", "libcuda.so.1"),
    GPURECLAIM_NVML_LIBRARY=os.path.join(BUILD, "sim", "libnvidia-ml.so.1"))
for p in (os.path.join(ROOT, "tests", "python", "fakes"),
          os.path.join(BUILD, "python")):
    sys.path.insert(0, p)

import distributed  # noqa: E402
import torch  # noqa: E402  (the fake: imports nothing of CUDA)

import gpureclaim.cluster as gcl  # noqa: E402


def churn(device, nbytes):
    """Allocates and drops nbytes on `device`: Torch caches them."""
    import torch

    x = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{device}")
    del x


def metric_cost(n=2000):
    """Seconds per reading of the metrics plugin, in this worker."""
    from gpureclaim.cluster._dask_plugin import _reading

    _reading()
    t0 = time.perf_counter()
    for _ in range(n):
        _reading()
    return (time.perf_counter() - t0) / n


def ms(xs):
    xs = sorted(xs)
    return (f"{statistics.median(xs) * 1e3:.2f} "
            f"({xs[len(xs) // 10] * 1e3:.2f}-{xs[-1 - len(xs) // 10] * 1e3:.2f})")


def main():
    with distributed.LocalCluster(
            n_workers=WORKERS, threads_per_worker=1, processes=True,
            dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            distributed.Client(cluster) as client:
        addrs = sorted(client.nthreads())
        for i, a in enumerate(addrs):  # half the workers on each GPU
            client.run(churn, i % 2, MiB, workers=[a])
        gcl.dask.release(client)  # warm: NVML opened in every worker
        client.run(torch.cuda.empty_cache)
        total, slowest, overhead, hand = [], [], [], []
        returned = set()
        for r in range(ROUNDS):
            for i, a in enumerate(addrs):
                client.run(churn, i % 2, 64 * MiB, workers=[a])
            if r % 2 == 0:
                t0 = time.perf_counter()
                rep = gcl.dask.release(client)
                t = time.perf_counter() - t0
                assert not rep.failed, rep
                returned.add(rep.bytes)
                s = max(w.seconds for w in rep.workers)
                total.append(t)
                slowest.append(s)
                overhead.append(t - s)
            else:
                t0 = time.perf_counter()
                client.run(torch.cuda.empty_cache)
                hand.append(time.perf_counter() - t0)
        metric = statistics.median(client.run(metric_cost).values())
    print(f"gpureclaim cluster bench: {WORKERS} LocalCluster workers (processes,"
          f" 1 thread each) on the simulated driver (2 GPUs), fake torch; "
          f"{ROUNDS} rounds alternating; Python {platform.python_version()}, "
          f"distributed {distributed.__version__}, {os.cpu_count()} CPUs, "
          f"{platform.node()}, {time.strftime('%Y-%m-%d')}")
    print()
    print("| call | ms: median (p10-p90) |")
    print("|---|---|")
    print(f"| `gpureclaim.cluster.dask.release(client)`, whole call | {ms(total)} |")
    print(f"| its slowest worker's own release (`max(Worker.seconds)`) | {ms(slowest)} |")
    print(f"| fan-out overhead (call minus slowest worker) | **{ms(overhead)}** |")
    print(f"| `client.run(torch.cuda.empty_cache)` | {ms(hand)} |")
    print(f"| metrics plugin reading, per heartbeat, in a worker | {metric * 1e3:.3f} |")
    print()
    med = statistics.median(overhead) * 1e3
    print(f"bytes returned per call: {sorted(returned)} "
          f"(expected {WORKERS * 64 * MiB})")
    print(f"target overhead <= 20 ms: {'met' if med <= 20 else 'MISSED'} "
          f"({med:.2f} ms)")
    print(json.dumps({"overhead_ms": med,
                      "hand_ms": statistics.median(hand) * 1e3}))


if __name__ == "__main__":
    main()
