"""The exporter's cost on a big host: 16 GPUs x 64 processes on the
simulated driver. Target: a scrape <= 20 ms.

64 real processes (`sleep`, so /proc has their user, command line and
cgroup) are each listed on all 16 simulated GPUs (the sim's `extra`
processes: 1,024 process rows). Timed, RUNS times after WARM runs:

- scrape: a GET of /metrics from `gpureclaim exporter`, over loopback,
  gzip accepted as Prometheus asks (and, below it, without gzip): what a
  scrape costs the server and the host; the target is for it;
- reading: HostCollector.read() in a child on that simulated host
  (NVML's figures and process lists of the 16 GPUs through the C library,
  /proc of each process, the agent look-up: none of these processes runs
  one), exposition: prometheus_client's encoding of it, gzip: the
  compressed copy; the exporter does these three once per --interval,
  off the scrape's path (their sum is the "per reading" row).

Medians and p90 in ms. No agents: their cost is the agents' own explain()
(bench/explain_bench.py), asked in parallel and bounded by --agent-timeout.

Usage: python bench/metrics_bench.py [RUNS] (build first: make)
"""
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

from benchenv import ROOT, remove_states

GPUS, PROCS = 16, 64
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 200
WARM = 5

CHILD = r"""
import gzip, json, statistics, sys, time
from gpureclaim import metrics
runs, warm = int(sys.argv[1]), int(sys.argv[2])
c = metrics.HostCollector()
t = {"reading": [], "exposition": [], "gzip": [], "per reading": []}
for i in range(warm + runs):
    t0 = time.perf_counter()
    r = c.read()
    t1 = time.perf_counter()
    text = metrics.exposition(c)
    t2 = time.perf_counter()
    gzip.compress(text, compresslevel=1)
    t3 = time.perf_counter()
    if i >= warm:
        t["reading"].append(t1 - t0)
        t["exposition"].append(t2 - t1)
        t["gzip"].append(t3 - t2)
        t["per reading"].append(t3 - t0)
print(json.dumps({"t": t, "rows": len(r.processes), "gpus": len(r.gpus),
                  "bytes": len(text)}))
"""


def stats(xs):
    xs = sorted(x * 1e3 for x in xs)
    return statistics.median(xs), xs[int(len(xs) * 0.9) - 1]


def main():
    sleepers = [subprocess.Popen(["sleep", "600"]) for _ in range(PROCS)]
    state = f"metrics-bench-{os.getpid()}"
    extra = ",".join(f"{g}:{p.pid}:{64 + i}MiB" for g in range(GPUS)
                     for i, p in enumerate(sleepers))
    sim = ROOT / "build/sim"
    env = dict(os.environ,
               GPURECLAIM_SIM=f"gpus={GPUS};memory=200GiB;state={state};"
                              f"extra={extra}",
               GPURECLAIM_CUDA_LIBRARY=str(sim / "libcuda.so.1"),
               GPURECLAIM_NVML_LIBRARY=str(sim / "libnvidia-ml.so.1"),
               PYTHONPATH=str(ROOT / "build/python"))
    try:
        p = subprocess.run([sys.executable, "-c", CHILD, str(RUNS), str(WARM)],
                           env=env, capture_output=True, text=True)
        if p.returncode:
            sys.exit(f"metrics_bench: the child failed: {p.stderr.strip()}")
        d = json.loads(p.stdout)
        http = http_times(env)
    finally:
        for s in sleepers:
            s.kill()
            s.wait()
        remove_states([env])
    print(f"{d['gpus']} GPUs, {d['rows']} process rows, exposition "
          f"{d['bytes']} bytes; {RUNS} runs after {WARM}; ms")
    print("| step | median | p90 |\n| --- | --- | --- |")
    rows = [("scrape (GET /metrics, gzip)", http[True]),
            ("GET /metrics, no gzip", http[False]), *d["t"].items()]
    for k, xs in rows:
        med, p90 = stats(xs)
        print(f"| {k} | {med:.2f} | {p90:.2f} |")
    med, _ = stats(http[True])
    print(f"target: a scrape <= 20 ms: {'met' if med <= 20 else 'MISSED'} "
          f"({med:.2f} ms, median)")


def http_times(env):
    """{gzip accepted: [seconds per GET]}, the two kinds interleaved."""
    exe = str(ROOT / "build/cli/gpureclaim")
    e = subprocess.Popen([exe, "exporter", "--listen", "127.0.0.1:0",
                          "--interval", "3600"], env=env,
                         stdout=subprocess.PIPE, text=True)
    try:
        line = e.stdout.readline()
        url = line.split("serving ", 1)[1].split()[0]
        out = {True: [], False: []}
        for i in range(WARM + RUNS):
            for gz in (True, False):
                req = urllib.request.Request(
                    url, headers={"Accept-Encoding": "gzip"} if gz else {})
                t0 = time.perf_counter()
                with urllib.request.urlopen(req, timeout=30) as r:
                    body = r.read()
                    if gz:
                        body = gzip.decompress(body)
                if i >= WARM:
                    out[gz].append(time.perf_counter() - t0)
        assert body.startswith(b"# HELP gpureclaim_"), body[:80]
        return out
    finally:
        e.terminate()
        e.wait()


if __name__ == "__main__":
    main()
