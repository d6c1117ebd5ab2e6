"""What tracing costs, process against process, on the GPU machine.

Every variant runs each loop in a process of its own, interleaved over
ROUNDS rounds (the order rotates each round, so no variant always runs
first or after the same neighbour):

  untraced     the loop alone
  interposed   gpureclaim trace --backend interpose (the default's path)
  cupti        gpureclaim trace --backend cupti
  dormant      gpureclaim trace --dormant (the tracer preloaded, recording
               nothing: what a notebook started that way pays)
  history      torch.cuda.memory._record_memory_history instead (torch and
               mlp only), for comparison

Loops (bench/trace_loops.py, bench/trace_churn.c):
  torch  torch.empty + del of 1 MiB, PYTORCH_NO_CUDA_MEMORY_CACHING=1, N pairs
  c      cuMemAlloc_v2 + cuMemFree_v2 of 1 MiB through libcuda, N pairs
  mlp    N/40 steps of the MLP, caching on (no driver call per step)

Prints per loop: median and lowest microseconds per iteration and each
one's change against untraced; then, from one more traced run of each
backend with GPURECLAIM_TRACE_SELFTIME=1, the tracer's own time per call
(median, p90); whether the interposed log holds every call the loop made
(2 per pair: a blind interposer would record none); and the verdicts
against the targets: torch interposed median <= +25%, the interposer's
own median <= 300 ns. A JSON line at the end holds every run.

Usage: python3 bench/trace_bench.py [BUILD_DIR] [ROUNDS] [N]
       (defaults build, 7, 20000; LOOPS="torch c mlp" picks loops;
       VARIANTS="untraced interposed ..." picks variants). Skips (exit 0)
       without a GPU; DRY_RUN=1 runs anyway, on whatever libcuda.so.1 the
       loops find (the simulated one: LD_LIBRARY_PATH=build/sim
       GPURECLAIM_SIM=gpus=1 DRY_RUN=1 LOOPS=c ...), to try the script: its
       figures then say nothing about a GPU.
"""
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build")
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 7
N = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
BIN = str(BUILD / "gpureclaim")
LOOPS_PY = str(ROOT / "bench/trace_loops.py")
TMP = "/tmp/gpr-trace-bench.trace"
TARGET_TORCH_PCT = 25
TARGET_SELF_NS = 300


def has_gpu():
    if not shutil.which("nvidia-smi"):
        return False
    r = subprocess.run(["nvidia-smi", "-L"], capture_output=True)
    return r.returncode == 0 and b"GPU" in r.stdout


def loop_cmd(loop):
    py = sys.executable
    if loop == "torch":
        return [py, LOOPS_PY, "torch", str(N)], \
            {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
    if loop == "c":
        return [str(BUILD / "bench/trace_churn"), "cuda", str(N),
                str(1 << 20)], {}
    return [py, LOOPS_PY, "mlp", str(max(N // 40, 10))], {}


def variant_cmd(variant, cmd):
    trace = [BIN, "trace", "-q"]
    if variant == "interposed":
        return trace + ["--backend", "interpose", "-o", TMP, "--"] + cmd
    if variant == "cupti":
        return trace + ["--backend", "cupti", "-o", TMP, "--"] + cmd
    if variant == "dormant":
        return trace + ["--dormant", "--"] + cmd
    if variant == "history":
        return cmd + ["history"]
    return cmd


def run(cmd, env):
    e = dict(os.environ, **env)
    if os.path.exists(TMP):
        os.unlink(TMP)
    r = subprocess.run(cmd, capture_output=True, text=True, env=e,
                       timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr[-3000:]}")
    m = re.search(r"([0-9.]+) us/pair", r.stdout)
    if not m:
        raise RuntimeError(f"{' '.join(cmd)}: no figure in {r.stdout!r}")
    return float(m.group(1)), r.stderr


def selftime(stderr):
    m = re.search(r"self time: (\d+) calls, median (\d+) ns, p90 (\d+) ns, "
                  r"mean (\d+) ns", stderr)
    return None if not m else dict(calls=int(m.group(1)),
                                   median=int(m.group(2)),
                                   p90=int(m.group(3)), mean=int(m.group(4)))


def records(path):
    r = subprocess.run([BIN, "report", path, "--json"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        return None
    d = json.loads(r.stdout)
    return {o["op"]: o["calls"] for o in d["operations"]}


def compare(loop, variants):
    cmd, env = loop_cmd(loop)
    res = {v: [] for v in variants}
    for r in range(ROUNDS):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        for v in order:
            us, _ = run(variant_cmd(v, cmd), env)
            res[v].append(us)
            print(f"  round {r} {v:<11} {us:9.3f} us", flush=True)
    med = {v: statistics.median(x) for v, x in res.items()}
    low = {v: min(x) for v, x in res.items()}
    print(f"\n{loop} loop, N={N}, {ROUNDS} rounds: us per iteration, "
          "median (change) / lowest (change)")
    for v in variants:
        print(f"  {v:<11} {med[v]:9.3f} ({100 * (med[v] / med['untraced'] - 1):+6.1f}%)"
              f"  {low[v]:9.3f} ({100 * (low[v] / low['untraced'] - 1):+6.1f}%)")
    out = {"loop": loop, "n": N, "rounds": ROUNDS, "runs_us": res,
           "median_us": med, "lowest_us": low}
    # the tracer's own time per call, and whether every call was seen
    for backend in ("interposed", "cupti"):
        if backend not in variants:
            continue
        _, err = run(variant_cmd(backend, cmd),
                     dict(env, GPURECLAIM_TRACE_SELFTIME="1"))
        st = selftime(err)
        out[f"selftime_{backend}"] = st
        ops = records(TMP)
        out[f"records_{backend}"] = ops
        if st:
            print(f"  {backend} self time: median {st['median']} ns, p90 "
                  f"{st['p90']} ns, mean {st['mean']} ns over {st['calls']} "
                  "calls")
        if ops is not None and loop in ("torch", "c"):
            pairs = min(ops.get("cuMemAlloc_v2", 0),
                        ops.get("cuMemFree_v2", 0))
            print(f"  {backend} log: {ops.get('cuMemAlloc_v2', 0)} "
                  f"cuMemAlloc_v2, {ops.get('cuMemFree_v2', 0)} cuMemFree_v2 "
                  f"for {N} pairs timed: {'every call seen' if pairs >= N else 'CALLS MISSING'}")
    return out


def main():
    if not has_gpu() and not os.environ.get("DRY_RUN"):
        print("skipped: no GPU")
        return 0
    loops = os.environ.get("LOOPS", "torch c mlp").split()
    base = os.environ.get("VARIANTS",
                          "untraced interposed cupti dormant history").split()
    if "untraced" not in base:
        base.insert(0, "untraced")
    results = []
    for loop in loops:
        variants = [v for v in base if v != "history" or loop != "c"]
        print(f"\n== {loop}", flush=True)
        results.append(compare(loop, variants))
    verdicts = []
    for r in results:
        if r["loop"] == "torch" and "interposed" in r["median_us"]:
            pct = 100 * (r["median_us"]["interposed"] /
                         r["median_us"]["untraced"] - 1)
            verdicts.append(f"torch interposed {pct:+.1f}% (target <= "
                            f"+{TARGET_TORCH_PCT}%): "
                            f"{'PASS' if pct <= TARGET_TORCH_PCT else 'FAIL'}")
        st = r.get("selftime_interposed")
        if st:
            verdicts.append(f"{r['loop']} interposer self time median "
                            f"{st['median']} ns (target <= {TARGET_SELF_NS}): "
                            f"{'PASS' if st['median'] <= TARGET_SELF_NS else 'FAIL'}")
    print("\n" + "\n".join(verdicts))
    print("\nJSON: " + json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
