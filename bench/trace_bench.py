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

Loops (bench/trace_loops.py, bench/trace_churn.c), with the variants each
runs unless --variants says otherwise:

  torch  torch.empty + del of 1 MiB, PYTORCH_NO_CUDA_MEMORY_CACHING=1,
         N pairs (default 10,000): untraced interposed cupti history
  c      cuMemAlloc_v2 + cuMemFree_v2 of 1 MiB through libcuda, N pairs
         (default 20,000): untraced interposed cupti
  mlp    MLP_STEPS steps of the MLP (default 250), caching on (no driver
         call per step): untraced interposed cupti
  torch-async
         the torch loop with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync:
         Torch caches nothing itself and makes a cuMemAllocAsync +
         cuMemFreeAsync pair per tensor, from the driver's pool, which stays
         a few us on machines where cuMemAlloc_v2 + cuMemFree_v2 take ~80 us
         (the torch loop's figure then drowns the tracer's cost): untraced
         interposed cupti
  c-async
         the C loop with cuMemAllocAsync + cuMemFreeAsync on the legacy
         stream: untraced interposed cupti

A process of the torch or MLP loop spends ~6 s importing torch and starting
CUDA, far more than its loop: the defaults keep `--loops torch,c` (the
gpu-check stage bench-trace) under 6 minutes on the H200 machines. Every
process sees only GPU 0 (CUDA_VISIBLE_DEVICES=0 unless set), which starts
CUDA faster; the loops use GPU 0 only.

As soon as a loop is done it prints: the median and lowest microseconds per
iteration and each one's change against untraced; then, from one more
traced run of each backend with GPURECLAIM_TRACE_SELFTIME=1 (torch and c:
the loops that call the driver), the tracer's own time per call (median,
p90) and whether the log holds every call the loop made (2 per pair: a
blind interposer would record none); its verdicts against the targets
(torch interposed median <= +25%, the interposer's own median <= 300 ns);
the wall time it took; and a JSON line with every run. Where the torch
loop's untraced pair costs far more than the 5.4 us of the issue's
machine, it says that the +25% target cannot be judged there and gives the
cost expected on a 5.4 us loop from the self time (an estimate).

A loop is skipped, and says so, when the processes it needs would not fit
in what is left of --budget seconds (estimated from the processes of the
same loop, or of the other torch loop, already run); the first loop, and a
loop nothing tells about (c after torch), always run.

Usage: python3 bench/trace_bench.py [BUILD_DIR] [--rounds 7]
           [--loops torch,c,mlp,torch-async,c-async|all]
           [--variants a,b,...] [--n N]
           [--mlp-steps S] [--budget SECONDS]
       (defaults build, 7, torch,c, per loop as above, 330). Skips (exit 0)
       without a GPU; DRY_RUN=1 runs anyway, on whatever libcuda.so.1 the
       loops find (the simulated one: LD_LIBRARY_PATH=build/sim
       GPURECLAIM_SIM=gpus=1 DRY_RUN=1 ... --loops c), to try the script:
       its figures then say nothing about a GPU.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
LOOPS_PY = str(ROOT / "bench/trace_loops.py")
TMP = "/tmp/gpr-trace-bench.trace"
TARGET_TORCH_PCT = 25
TARGET_SELF_NS = 300
ISSUE_PAIR_US = 5.4  # the torch loop untraced on the issue's H200 machine
VARIANTS = {
    "torch": ["untraced", "interposed", "cupti", "history"],
    "c": ["untraced", "interposed", "cupti"],
    "mlp": ["untraced", "interposed", "cupti"],
    "torch-async": ["untraced", "interposed", "cupti"],
    "c-async": ["untraced", "interposed", "cupti"],
}
N_DEFAULT = {"torch": 10000, "c": 20000, "torch-async": 20000,
             "c-async": 100000}
# the driver calls each loop makes, one of each per pair (mlp: none)
PAIR_OPS = {"torch": ("cuMemAlloc_v2", "cuMemFree_v2"),
            "c": ("cuMemAlloc_v2", "cuMemFree_v2"),
            "torch-async": ("cuMemAllocAsync", "cuMemFreeAsync"),
            "c-async": ("cuMemAllocAsync", "cuMemFreeAsync")}
# the loops the +25% target is judged on: Torch making a driver pair
# per tensor
TORCH_LOOPS = ("torch", "torch-async")


def has_gpu():
    if not shutil.which("nvidia-smi"):
        return False
    r = subprocess.run(["nvidia-smi", "-L"], capture_output=True)
    return r.returncode == 0 and b"GPU" in r.stdout


class Bench:
    def __init__(self, a):
        self.a = a
        self.bin = str(pathlib.Path(a.build) / "cli/gpureclaim")
        self.walls = {}  # loop -> seconds per process run so far
        self.loop = None

    def n(self, loop):
        return self.a.n or N_DEFAULT[loop]

    def loop_cmd(self, loop):
        py = sys.executable
        if loop == "torch":
            return [py, LOOPS_PY, "torch", str(self.n(loop))], \
                {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
        if loop == "torch-async":
            return [py, LOOPS_PY, "torch", str(self.n(loop))], \
                {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}
        if loop in ("c", "c-async"):
            mode = "cuda-async" if loop == "c-async" else "cuda"
            return [str(pathlib.Path(self.a.build) / "bench/trace_churn"),
                    mode, str(self.n(loop)), str(1 << 20)], {}
        return [py, LOOPS_PY, "mlp", str(self.a.mlp_steps)], {}

    def variant_cmd(self, variant, cmd):
        trace = [self.bin, "trace", "-q"]
        if variant == "interposed":
            return trace + ["--backend", "interpose", "-o", TMP, "--"] + cmd
        if variant == "cupti":
            return trace + ["--backend", "cupti", "-o", TMP, "--"] + cmd
        if variant == "dormant":
            return trace + ["--dormant", "--"] + cmd
        if variant == "history":
            return cmd + ["history"]
        return cmd

    def run(self, cmd, env):
        e = dict(os.environ, **env)
        e.setdefault("CUDA_VISIBLE_DEVICES", "0")
        if os.path.exists(TMP):
            os.unlink(TMP)
        t0 = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True, env=e,
                           timeout=600)
        self.walls.setdefault(self.loop, []).append(time.monotonic() - t0)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: {r.stderr[-3000:]}")
        m = re.search(r"([0-9.]+) us/pair", r.stdout)
        if not m:
            raise RuntimeError(f"{' '.join(cmd)}: no figure in {r.stdout!r}")
        return float(m.group(1)), r.stderr

    def records(self, path):
        r = subprocess.run([self.bin, "report", path, "--json"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return None
        d = json.loads(r.stdout)
        return {o["op"]: o["calls"] for o in d["operations"]}

    def estimate(self, loop, procs):
        """Seconds `procs` processes of loop take, from those run so far
        (the torch and MLP loops both start torch; the MLP's also load
        cuBLAS); None when nothing tells."""
        w = self.walls
        if w.get(loop):
            return procs * statistics.mean(w[loop])
        torch_runs = [x for k in TORCH_LOOPS for x in w.get(k, [])]
        if loop == "mlp" and torch_runs:
            return procs * statistics.mean(torch_runs) * 1.3
        if loop in TORCH_LOOPS and (torch_runs or w.get("mlp")):
            return procs * statistics.mean(torch_runs or w["mlp"])
        return None

    def compare(self, loop, variants):
        self.loop = loop
        cmd, env = self.loop_cmd(loop)
        rounds = self.a.rounds
        res = {v: [] for v in variants}
        for r in range(rounds):
            k = r % len(variants)
            for v in variants[k:] + variants[:k]:
                us, _ = self.run(self.variant_cmd(v, cmd), env)
                res[v].append(us)
                print(f"  round {r} {v:<11} {us:9.3f} us", flush=True)
        med = {v: statistics.median(x) for v, x in res.items()}
        low = {v: min(x) for v, x in res.items()}
        size = f"N={self.n(loop)}" if loop != "mlp" else \
            f"{self.a.mlp_steps} steps"
        print(f"\n{loop} loop, {size}, {rounds} rounds: us per iteration, "
              "median (change) / lowest (change)")
        for v in variants:
            print(f"  {v:<11} {med[v]:9.3f} "
                  f"({100 * (med[v] / med['untraced'] - 1):+6.1f}%)"
                  f"  {low[v]:9.3f} "
                  f"({100 * (low[v] / low['untraced'] - 1):+6.1f}%)")
        out = {"loop": loop, "n": self.n(loop) if loop != "mlp"
               else self.a.mlp_steps, "rounds": rounds, "runs_us": res,
               "median_us": med, "lowest_us": low}
        if loop == "mlp":  # no driver call per step: nothing to time
            return out
        # the tracer's own time per call, and whether every call was seen
        for backend in ("interposed", "cupti"):
            if backend not in variants:
                continue
            _, err = self.run(self.variant_cmd(backend, cmd),
                              dict(env, GPURECLAIM_TRACE_SELFTIME="1"))
            st = selftime(err)
            out[f"selftime_{backend}"] = st
            ops = self.records(TMP)
            out[f"records_{backend}"] = ops
            if st:
                print(f"  {backend} self time: median {st['median']} ns, "
                      f"p90 {st['p90']} ns, mean {st['mean']} ns over "
                      f"{st['calls']} calls")
            if ops is not None:
                an, fn = PAIR_OPS[loop]
                a, f = ops.get(an, 0), ops.get(fn, 0)
                seen = min(a, f) >= self.n(loop)
                out[f"every_call_{backend}"] = seen
                print(f"  {backend} log: {a} {an}, {f} {fn} for "
                      f"{self.n(loop)} pairs timed: "
                      f"{'every call seen' if seen else 'CALLS MISSING'}")
        return out


def selftime(stderr):
    m = re.search(r"self time: (\d+) calls, median (\d+) ns, p90 (\d+) ns, "
                  r"mean (\d+) ns", stderr)
    return None if not m else dict(calls=int(m.group(1)),
                                   median=int(m.group(2)),
                                   p90=int(m.group(3)), mean=int(m.group(4)))


def verdicts(r):
    """The loop's verdicts against the targets, and what they rest on."""
    lines = []
    med = r["median_us"]
    torch = r["loop"] in TORCH_LOOPS
    slow = torch and med["untraced"] > 3 * ISSUE_PAIR_US
    if "interposed" in med:
        pct = 100 * (med["interposed"] / med["untraced"] - 1)
        if torch:
            word = "NOT JUDGED (a slow loop: below)" if slow else \
                "PASS" if pct <= TARGET_TORCH_PCT else "FAIL"
            lines.append(f"{r['loop']} interposed {pct:+.1f}% (target <= "
                         f"+{TARGET_TORCH_PCT}%): {word}")
        else:
            lines.append(f"{r['loop']} interposed {pct:+.1f}% (reported, "
                         "no target)")
    st = r.get("selftime_interposed")
    if st:
        lines.append(f"{r['loop']} interposer self time median "
                     f"{st['median']} ns (target <= {TARGET_SELF_NS}): "
                     f"{'PASS' if st['median'] <= TARGET_SELF_NS else 'FAIL'}")
    if slow:
        lines.append(
            f"note: the untraced pair costs {med['untraced']:.1f} us here, "
            f"not the ~{ISSUE_PAIR_US} us of the issue's machine: the "
            f"+{TARGET_TORCH_PCT}% target is meant for that fast loop and "
            "cannot be judged on this one (--loops torch-async times Torch "
            "with the driver's fast stream-ordered pair instead)")
        if st:
            lo, hi = 2 * st["median"] / 1000, 2 * st["mean"] / 1000
            lines.append(
                f"estimate for a {ISSUE_PAIR_US} us pair: 2 recorded calls x "
                f"our own time ({st['median']} ns median, {st['mean']} ns "
                f"mean) = {lo:.2f}-{hi:.2f} us, "
                f"+{100 * lo / ISSUE_PAIR_US:.1f}% to "
                f"+{100 * hi / ISSUE_PAIR_US:.1f}% (an estimate from the "
                "self time, not a measurement)")
    return lines


def main():
    p = argparse.ArgumentParser(
        description="The tracer's cost, process against process.")
    p.add_argument("build", nargs="?", default=str(ROOT / "build"))
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--loops", default="torch,c",
                   help="torch,c,mlp,torch-async,c-async or all (default "
                        "torch,c)")
    p.add_argument("--variants", default="",
                   help="for every loop, instead of its defaults "
                        "(untraced is always run)")
    p.add_argument("--n", type=int, default=0,
                   help="pairs of the torch and c loops (default 10000 "
                        "and 20000)")
    p.add_argument("--mlp-steps", type=int, default=250)
    p.add_argument("--budget", type=float, default=330,
                   help="seconds; a loop that would not fit is skipped")
    a = p.parse_args()
    loops = list(VARIANTS) if a.loops == "all" else \
        [x for x in a.loops.split(",") if x]
    bad = [x for x in loops if x not in VARIANTS]
    if bad or a.rounds < 1:
        p.error(f"unknown loop {bad[0]}" if bad else "--rounds must be >= 1")
    if not has_gpu() and not os.environ.get("DRY_RUN"):
        print("skipped: no GPU")
        return 0
    b = Bench(a)
    t_start = time.monotonic()
    for i, loop in enumerate(loops):
        variants = a.variants.split(",") if a.variants else VARIANTS[loop]
        variants = ["untraced"] + [v for v in variants if v != "untraced"
                                   and (v != "history" or loop not in ("c", "c-async"))]
        procs = a.rounds * len(variants) + (0 if loop == "mlp" else sum(
            v in variants for v in ("interposed", "cupti")))
        left = a.budget - (time.monotonic() - t_start)
        need = b.estimate(loop, procs)
        if i > 0 and need is not None and need > left:
            print(f"\n== {loop}: skipped, it needs about {need:.0f} s "
                  f"({procs} processes) and {max(left, 0):.0f} s are "
                  f"left of --budget {a.budget:.0f} (run it alone: "
                  f"--loops {loop})", flush=True)
            continue
        print(f"\n== {loop}", flush=True)
        t0 = time.monotonic()
        r = b.compare(loop, variants)
        took = time.monotonic() - t0
        n = len(b.walls[loop])
        print("\n" + "\n".join(verdicts(r)))
        print(f"{loop} loop took {took:.0f} s: {n} processes, "
              f"{took / max(n, 1):.1f} s each")
        print("JSON: " + json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
