"""gpureclaim.release_cached_memory() against the frameworks' own calls, on a
GPU with Torch and CuPy: both targets measured the same way; and, with
--baseline, this build against an older one, interleaved.

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
  gc-first pattern). Target: paired difference <= 0 ms (median), and
  ours <= 2 ms (median).
- cycle, old: the same cycle promoted to the oldest generation (two full
  collections while it is still referenced) before it is dropped: the case
  where a young collection cannot free it. Same comparison; no target, shown
  so the seed scenario's figure is not read as the general one.
- nothing live: 2 GiB cached, no cycle. Theirs: torch.cuda.empty_cache();
  free_all_blocks() (the frameworks' own empty calls on the same memory).
  Target: median(ours) <= median(theirs) + 0.5 ms.
Then, warm, nothing to release: each call a release makes, timed alone.

--baseline PATH (the PYTHONPATH of another build's package, e.g.
build/gpu-base/python: scripts/gpu-check.sh's bench-release stage builds
the base commit there): each scenario runs ROUNDS times (default 7) in a
process of each build, the builds alternating ABBA round by round, PAIRS
pairs per process; per build the medians and minimums of all rounds, in
us, beside new/old ratios; the warm per-call profile of both builds, in
us, the same way.

--fakes (the default without a GPU): the simulated driver and the test
suite's fake Torch and CuPy (build first: make), which measures gpureclaim's
own CPU work, not the frameworks'.

Usage: python bench/release_bench.py [PAIRS] [--baseline PATH]
       [--rounds N] [--fakes]
(default 31 pairs; 9 per round with --baseline). $GPURECLAIM_PYTHONPATH:
the built package (default build/python).
"""
import argparse
import collections
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys

from benchenv import child_env, remove_states

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = os.environ.get("GPURECLAIM_PYTHONPATH", str(ROOT / "build/python"))

CHILD = r"""
import gc, json, sys, time
import torch, cupy, gpureclaim
GiB = 1 << 30
scenario, pairs, fake = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
pool = cupy.get_default_memory_pool()
sync = getattr(torch.cuda, "synchronize", lambda: None)
dev = torch.cuda.current_device()

def clean():
    gc.collect(); torch.cuda.empty_cache(); pool.free_all_blocks()
    sync()

def setup():
    t = torch.empty(GiB, dtype=torch.uint8, device="cuda")
    if scenario.startswith("cycle"):
        c = [t]; c.append(c)
        if scenario == "cycle-old":
            gc.collect(); gc.collect()  # survivors: the oldest generation
        del c
    a = cupy.empty(GiB, dtype=cupy.uint8)
    sync()
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
torch.empty(1, dtype=torch.uint8, device="cuda"); cupy.empty(1); sync()
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
# process (median and minimum of 50, ms).
PROFILE = r"""
import gc, json, statistics, sys, time
import torch, cupy, gpureclaim
from gpureclaim import _gpureclaim as c
fake = sys.argv[1] == "1"
torch.empty(1, dtype=torch.uint8, device="cuda"); cupy.empty(1)
getattr(torch.cuda, "synchronize", lambda: None)()
gpureclaim.release()
def t(fn, n=50):
    xs = []
    for _ in range(n):
        t0 = time.perf_counter(); fn(); xs.append((time.perf_counter() - t0) * 1e3)
    return [statistics.median(xs), min(xs)]
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
CYCLE_MS = 2.0  # the seed scenario's target, ours alone
LIVE_GAP_MS = 0.5  # nothing live: ours <= theirs + this


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


def child(env, code, *args):
    p = subprocess.run([sys.executable, "-c", code, *args], env=env,
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def verdict(scenario, ours, theirs, diff, fake=False):
    """The target's verdict; on the simulator the frameworks' own calls
    are a fake's, so the targets are the GPU's and only shown."""
    v = _verdict(scenario, ours, theirs, diff)
    if not fake or v.startswith("("):
        return v
    return f"{v}; fakes: the target is for a GPU"


def _verdict(scenario, ours, theirs, diff):
    if scenario == "cycle":
        med, own = statistics.median(diff), statistics.median(ours)
        ok = med <= 0 and own <= CYCLE_MS
        return (f"{'met' if ok else 'MISSED'} (paired median {med:+.2f} <= 0, "
                f"ours {own:.2f} <= {CYCLE_MS:.1f})")
    if scenario == "nothing-live":
        gap = statistics.median(ours) - statistics.median(theirs)
        return (f"{'met' if gap <= LIVE_GAP_MS else 'MISSED'} (median gap "
                f"{gap:+.2f} <= +{LIVE_GAP_MS})")
    return "(no target)"


def table(envs, pairs, fake):
    """The one-build table (and its summary)."""
    env = envs["new"]
    print(f"{pairs} interleaved pairs per scenario, one process each; ms")
    print("| scenario | theirs | ours median (min) | theirs median (min) "
          "| paired ours - theirs: median (min, max) | gc in theirs, median "
          "| collections in ours / theirs (generations: calls) "
          "| returned: ours / theirs | target |")
    print("|---|---|---|---|---|---|---|---|---|")
    summary = {}
    for key, label, theirs_name in SCENARIOS:
        got = child(env, CHILD, key, str(pairs), "1" if fake else "0")
        if got is None:
            return None
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
              f"{verdict(key, ours, theirs, diff, fake)} |")
        summary[key] = dict(ours=ours, theirs=theirs, gc_ms=got["gc_ms"],
                            gb=sorted({r["ours_gb"] for r in rows}))
    prof = child(env, PROFILE, "1" if fake else "0")
    if prof is None:
        return None
    print("\n| one call, warm, nothing to release | median ms (50 calls) |")
    print("|---|---|")
    for k, (med, _) in prof.items():
        print(f"| `{k}` | {med:.3f} |")
    return summary


def us(xs):
    return f"{statistics.median(xs) * 1e3:.0f} ({min(xs) * 1e3:.0f})"


def ratio(new, old):
    m_new, m_old = statistics.median(new), statistics.median(old)
    r = f"{m_new / m_old:.2f}" if m_old > 0 else "-"
    mn = f"{min(new) / min(old):.2f}" if min(old) > 0 else "-"
    return f"{r} ({mn})"


def against(envs, pairs, rounds, fake):
    """This build against the baseline, interleaved: ROUNDS processes of
    each per scenario, ABBA by round."""
    print(f"this build (new) against --baseline (old): {rounds} rounds per "
          f"scenario, a process of each build per round (order ABBA), "
          f"{pairs} pairs per process; us, median (min) of all pairs; "
          f"ratios new/old of the medians (of the minimums)")
    print("| scenario | ours new | ours old | new/old | theirs new | "
          "theirs old | paired ours - theirs, new | paired, old | "
          "target (new) |")
    print("|---|---|---|---|---|---|---|---|---|")
    summary = {}
    for key, label, _ in SCENARIOS:
        got = {"new": [], "old": []}
        for i in range(rounds):
            order = ("new", "old") if i % 4 in (0, 3) else ("old", "new")
            for b in order:
                r = child(envs[b], CHILD, key, str(pairs), "1" if fake else "0")
                if r is None:
                    return None
                got[b] += r["rows"]
        cols = {}
        for b in ("new", "old"):
            rows = got[b]
            cols[b] = dict(ours=[r["ours"] for r in rows],
                           theirs=[r["theirs"] for r in rows],
                           diff=[r["ours"] - r["theirs"] for r in rows])
        n, o = cols["new"], cols["old"]
        print(f"| {label} | {us(n['ours'])} | {us(o['ours'])} | "
              f"{ratio(n['ours'], o['ours'])} | {us(n['theirs'])} | "
              f"{us(o['theirs'])} | {statistics.median(n['diff']) * 1e3:+.0f} | "
              f"{statistics.median(o['diff']) * 1e3:+.0f} | "
              f"{verdict(key, n['ours'], n['theirs'], n['diff'], fake)} |")
        summary[key] = {b: cols[b]["ours"] for b in cols}
    profs = {"new": [], "old": []}
    for i in range(rounds):
        for b in (("new", "old") if i % 4 in (0, 3) else ("old", "new")):
            p = child(envs[b], PROFILE, "1" if fake else "0")
            if p is None:
                return None
            profs[b].append(p)
    print("\n| one call, warm, nothing to release | new: us, median of the "
          "rounds' medians (min) | old | new/old |")
    print("|---|---|---|---|")
    for k in profs["new"][0]:
        n = [p[k][0] for p in profs["new"]]
        o = [p[k][0] for p in profs["old"] if k in p]
        if not o:
            continue
        nm = min(p[k][1] for p in profs["new"])
        om = min(p[k][1] for p in profs["old"])
        print(f"| `{k}` | {statistics.median(n) * 1e3:.1f} ({nm * 1e3:.1f}) | "
              f"{statistics.median(o) * 1e3:.1f} ({om * 1e3:.1f}) | "
              f"{statistics.median(n) / statistics.median(o):.2f} |")
    return summary


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", nargs="?", type=int)
    ap.add_argument("--baseline", metavar="PYTHONPATH",
                    help="another build's package folder, interleaved")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--fakes", action="store_true",
                    help="the simulated driver and the fake frameworks")
    a = ap.parse_args(argv)
    pairs = a.pairs or (9 if a.baseline else 31)
    if not a.baseline and pairs < 21:
        print("at least 21 pairs", file=sys.stderr)
        return 2
    if a.baseline and (a.rounds < 7 or pairs < 5):
        print("--baseline: at least 7 rounds of 5 pairs", file=sys.stderr)
        return 2
    fake = a.fakes
    if not fake and not has_gpu():
        print("no GPU with torch (CUDA) and cupy: running on the simulated "
              "driver (--fakes)")
        fake = True
    envs = {"new": child_env(PKG, fake, f"release-bench-{os.getpid()}")}
    if a.baseline:
        envs["old"] = child_env(a.baseline, fake,
                                f"release-bench-{os.getpid()}-old")
    try:
        summary = (against(envs, pairs, a.rounds, fake) if a.baseline
                   else table(envs, pairs, fake))
    finally:
        remove_states(envs.values())
    if summary is None:
        return 1
    print(f"\n{'fake frameworks on the simulated driver' if fake else 'real Torch and CuPy'}")
    print("JSON " + json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
