"""Overhead of `gpureclaim trace`, side by side, on the GPU machine.

1. 20,000 cuMemAlloc_v2/cuMemFree_v2 pairs of 1 MiB from C (bench/trace_churn):
   untraced vs traced.
2. 20,000 torch allocations and frees with the caching allocator off
   (PYTORCH_NO_CUDA_MEMORY_CACHING=1): untraced, traced, and with
   torch.cuda.memory._record_memory_history instead.
3. A small MLP's training loop with caching on: the same three.
Each variant runs in its own process, REPS times, alternating; the median is
reported. Skips (exit 0) without a GPU. Targets: <= 5% (1, 2), <= 1% (3).
Processes of the same loop differ by more than 5% on their own (70-105 us per
torch pair), so the targets are judged by bench/trace_ab.py, which compares
traced and paused blocks inside one process; this script remains for the
comparison with _record_memory_history.

Usage: python3 bench/trace_bench.py [BUILD_DIR] (default build)
"""
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build")
BIN = BUILD / "cli/gpureclaim"
CHURN = BUILD / "bench/trace_churn"
REPS = int(os.environ.get("REPS", "5"))

LOOPS = str(ROOT / "bench/trace_loops.py")  # the torch and MLP loops


def has_gpu():
    if not shutil.which("nvidia-smi"):
        return False
    r = subprocess.run(["nvidia-smi", "-L"], capture_output=True)
    return r.returncode == 0 and b"GPU" in r.stdout


def run(cmd, env=None, traced=False, tmp="/tmp/gpr-trace-bench.trace"):
    if traced:
        cmd = [str(BIN), "trace", "-q", "-o", tmp, "--"] + cmd
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run(cmd, capture_output=True, text=True, env=e,
                       timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"{cmd}: {r.stderr[-2000:]}")
    line = r.stdout.strip().splitlines()[-1]
    return float(line.split()[0])


def compare(name, variants, target):
    res = {k: [] for k in variants}
    for _ in range(REPS):
        for k, fn in variants.items():
            res[k].append(fn())
    med = {k: statistics.median(v) for k, v in res.items()}
    base = med["untraced"]
    print(f"\n{name} (median of {REPS}, microseconds per iteration)")
    for k, v in med.items():
        over = 100 * (v - base) / base
        print(f"  {k:<22} {v:10.2f}   {over:+6.2f}%")
    print(f"  target: traced <= +{target}%")
    return {"bench": name, "median_us": med, "runs_us": res,
            "target_pct": target}


def main():
    if not has_gpu():
        print("skipped: no GPU")
        return 0
    out = []
    if CHURN.exists():
        c = [str(CHURN), "cuda", "20000", str(1 << 20)]
        out.append(compare("C churn: 20k cuMemAlloc/cuMemFree 1 MiB", {
            "untraced": lambda: run(c),
            "traced": lambda: run(c, traced=True),
        }, 5))
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch not installed: torch benches skipped")
    else:
        env = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
        py = sys.executable
        out.append(compare("torch churn, caching off: 20k alloc/free", {
            "untraced": lambda: run([py, LOOPS, "torch", "20000"], env),
            "traced": lambda: run([py, LOOPS, "torch", "20000"], env,
                                  traced=True),
            "record_memory_history": lambda: run(
                [py, LOOPS, "torch", "20000", "history"], env),
        }, 5))
        out.append(compare("MLP training step, caching on", {
            "untraced": lambda: run([py, LOOPS, "mlp", "500"]),
            "traced": lambda: run([py, LOOPS, "mlp", "500"], traced=True),
            "record_memory_history": lambda: run(
                [py, LOOPS, "mlp", "500", "history"]),
        }, 1))
    print("\nJSON: " + json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
