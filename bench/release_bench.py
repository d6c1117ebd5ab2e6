"""gpureclaim.release_cached_memory() against the frameworks' own calls, on a
GPU with Torch and CuPy: both targets measured the same way.

Each scenario runs in one process: PAIRS interleaved pairs (ours, theirs;
the order alternates ABBA so that a drift in the process favours neither),
each call timed alone (time.perf_counter around the call), the memory set up
again, untimed, before every call. Printed per scenario: medians and
minimums in ms, the paired differences (ours - theirs, per pair: median,
min, max), which garbage collections ran inside each call (gc.callbacks),
the bytes returned, and the target.

Scenarios (the design record's, 1 GiB Torch tensor + 1 GiB CuPy array):
- cycle: the Torch tensor held by a reference cycle, all names deleted.
  Theirs: gc.collect(); torch.cuda.empty_cache(); free_all_blocks() (the
  gc-first pattern). Target: paired difference <= 0 ms (median).
- cycle, old: the same cycle promoted to the oldest generation (two full
  collections while it is still referenced) before it is dropped: the case
  where a young collection cannot free it. Same comparison; no target, shown
  so the seed scenario's figure is not read as the general one.
- nothing live: 2 GiB cached, no cycle. Theirs: torch.cuda.empty_cache();
  free_all_blocks() (the frameworks' own empty calls on the same memory).
  Target: median(ours) <= median(theirs) + 0.5 ms.
Then, warm, nothing to release: each call a release makes, timed alone.

Usage: python bench/release_bench.py [PAIRS]   (default 31; skips without
a GPU). $GPURECLAIM_PYTHONPATH: the built package (default build/python).
"""
import collections
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = os.environ.get("GPURECLAIM_PYTHONPATH", str(ROOT / "build/python"))

CHILD = r"""
import gc, json, sys, time
import torch, cupy, gpureclaim
GiB = 1 << 30
scenario, pairs = sys.argv[1], int(sys.argv[2])
pool = cupy.get_default_memory_pool()
dev = torch.cuda.current_device()

def clean():
    gc.collect(); torch.cuda.empty_cache(); pool.free_all_blocks()
    torch.cuda.synchronize()

def setup():
    t = torch.empty(GiB, dtype=torch.uint8, device="cuda")
    if scenario.startswith("cycle"):
        c = [t]; c.append(c)
        if scenario == "cycle-old":
            gc.collect(); gc.collect()  # survivors: the oldest generation
        del c
    a = cupy.empty(GiB, dtype=cupy.uint8)
    torch.cuda.synchronize()
    del t, a

gens = []  # the generations collected during the call timed
gc.callbacks.append(lambda phase, info: phase == "start" and gens.append(info["generation"]))

def ours():
    return gpureclaim.release_cached_memory()

gc_ms = []
def theirs():
    if scenario.startswith("cycle"):
        t0 = time.perf_counter()
        gc.collect()
        gc_ms.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.empty_cache()
    pool.free_all_blocks()

def timed(fn):
    setup()
    before = gpureclaim.process_memory()[dev]
    gens.clear()
    t0 = time.perf_counter()
    out = fn()
    ms = (time.perf_counter() - t0) * 1e3
    collected = "+".join(str(g) for g in gens) or "none"
    returned = before - gpureclaim.process_memory()[dev]
    clean()
    return ms, returned, out, collected

# Start both allocators (their contexts stay), open NVML, warm every path.
torch.zeros(1, device="cuda"); cupy.zeros(1); torch.cuda.synchronize()
clean()
for _ in range(3):
    timed(ours); timed(theirs)
rows = []
for i in range(pairs):
    order = (ours, theirs) if i % 4 in (0, 3) else (theirs, ours)
    got = {fn.__name__: timed(fn) for fn in order}
    rows.append(dict(ours=got["ours"][0], theirs=got["theirs"][0],
                     ours_bytes=got["ours"][1], theirs_bytes=got["theirs"][1],
                     ours_gb=got["ours"][2], ours_gc=got["ours"][3],
                     theirs_gc=got["theirs"][3]))
print(json.dumps(dict(rows=rows, gc_ms=gc_ms)))
"""

# Where a warm call's time goes, nothing to release: each call alone in one
# process (median of 50, ms).
PROFILE = r"""
import gc, json, statistics, time
import torch, cupy, gpureclaim
from gpureclaim import _gpureclaim as c
torch.zeros(1, device="cuda"); cupy.zeros(1); torch.cuda.synchronize()
gpureclaim.release()
def t(fn, n=50):
    xs = []
    for _ in range(n):
        t0 = time.perf_counter(); fn(); xs.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(xs)
pool, pinned = cupy.get_default_memory_pool(), cupy.get_default_pinned_memory_pool()
rows = {
    "gpureclaim.release_cached_memory()": gpureclaim.release_cached_memory,
    "_gpureclaim.release() (the C call, no Python report)": c.release,
    "_gpureclaim.release(collect=False)": lambda: c.release(collect=False),
    "gpureclaim.process_memory() (NVML scan + read)": gpureclaim.process_memory,
    "gpureclaim.devices_in_use()": gpureclaim.devices_in_use,
    "gpureclaim.releasers()": gpureclaim.releasers,
    "torch.cuda.empty_cache()": torch.cuda.empty_cache,
    "torch.cuda.ipc_collect()": torch.cuda.ipc_collect,
    "torch._C._cuda_memoryStats(0)": lambda: torch._C._cuda_memoryStats(0),
    "torch._C._host_emptyCache()": getattr(torch._C, "_host_emptyCache", lambda: None),
    "cupy pool.free_all_blocks()": pool.free_all_blocks,
    "cupy pinned.free_all_blocks()": pinned.free_all_blocks,
    "gc.collect(1)": lambda: gc.collect(1),
    "gc.collect()": gc.collect,
}
print(json.dumps({k: t(f, 10 if k == "gc.collect()" else 50) for k, f in rows.items()}))
"""

SCENARIOS = [
    ("cycle", "reference cycle (the seed scenario)",
     "gc.collect(); empty_cache(); free_all_blocks()"),
    ("cycle-old", "reference cycle in the oldest generation",
     "gc.collect(); empty_cache(); free_all_blocks()"),
    ("nothing-live", "nothing live, 2 GiB cached",
     "empty_cache(); free_all_blocks()"),
]


def has_gpu():
    if not shutil.which("nvidia-smi"):
        return False
    r = subprocess.run(["nvidia-smi", "-L"], capture_output=True)
    if r.returncode != 0:
        return False
    r = subprocess.run([sys.executable, "-c",
                        "import torch, cupy; assert torch.cuda.is_available()"],
                       capture_output=True)
    return r.returncode == 0


def verdict(scenario, ours, theirs, diff):
    if scenario == "cycle":
        med = statistics.median(diff)
        return f"{'met' if med <= 0 else 'MISSED'} (paired median {med:+.2f} <= 0)"
    if scenario == "nothing-live":
        gap = statistics.median(ours) - statistics.median(theirs)
        return f"{'met' if gap <= 0.5 else 'MISSED'} (median gap {gap:+.2f} <= +0.5)"
    return "(no target)"


def child(env, code, *args):
    p = subprocess.run([sys.executable, "-c", code, *args], env=env,
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 31
    if pairs < 21:
        print("at least 21 pairs", file=sys.stderr)
        return 2
    if not has_gpu():
        print("skipped: needs an NVIDIA GPU with torch (CUDA) and cupy")
        return 0
    env = dict(os.environ, PYTHONPATH=PKG + os.pathsep + os.environ.get("PYTHONPATH", ""))
    print(f"{pairs} interleaved pairs per scenario, one process each; ms")
    print("| scenario | theirs | ours median (min) | theirs median (min) "
          "| paired ours - theirs: median (min, max) | gc in theirs, median "
          "| collections in ours / theirs (generations: calls) "
          "| returned: ours / theirs | target |")
    print("|---|---|---|---|---|---|---|---|---|")
    summary = {}
    for key, label, theirs_name in SCENARIOS:
        got = child(env, CHILD, key, str(pairs))
        if got is None:
            return 1
        rows = got["rows"]
        ours = [r["ours"] for r in rows]
        theirs = [r["theirs"] for r in rows]
        diff = [r["ours"] - r["theirs"] for r in rows]
        gcm = f"{statistics.median(got['gc_ms']):.2f}" if got["gc_ms"] else "-"
        ret = (f"{sorted({r['ours_bytes'] for r in rows})} / "
               f"{sorted({r['theirs_bytes'] for r in rows})}")
        gcs = " / ".join(
            ", ".join(f"{g}: {n}" for g, n in sorted(
                collections.Counter(r[k] for r in rows).items()))
            for k in ("ours_gc", "theirs_gc"))
        print(f"| {label} | `{theirs_name}` | {statistics.median(ours):.2f} "
              f"({min(ours):.2f}) | {statistics.median(theirs):.2f} "
              f"({min(theirs):.2f}) | {statistics.median(diff):+.2f} "
              f"({min(diff):+.2f}, {max(diff):+.2f}) | {gcm} | {gcs} | {ret} | "
              f"{verdict(key, ours, theirs, diff)} |")
        summary[key] = dict(ours=ours, theirs=theirs, gc_ms=got["gc_ms"],
                            gb=sorted({r["ours_gb"] for r in rows}))
    prof = child(env, PROFILE)
    if prof is None:
        return 1
    print("\n| one call, warm, nothing to release | median ms (50 calls) |")
    print("|---|---|")
    for k, v in prof.items():
        print(f"| `{k}` | {v:.3f} |")
    print("\nJSON " + json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
