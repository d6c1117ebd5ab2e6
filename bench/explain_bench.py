"""gpureclaim.explain() on a process whose Torch allocator holds 1,000
segments (GPU machine; skips without a GPU or Torch).

1,000 tensors of 12 MiB (each request over 10 MiB gets a segment of its
own), all freed; 3,000 tensors of 4 MiB carved from those segments (three
blocks each); then every other block freed in the first 500 segments (free
blocks pinned by live ones: fragmentation). Times explain() (median of
RUNS, min-max) and, for comparison, torch.cuda.memory_snapshot() alone,
which explain() calls once. Target: explain() <= 20 ms.

Usage: python bench/explain_bench.py [RUNS]
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = os.environ.get("GPURECLAIM_PYTHONPATH", str(ROOT / "build/python"))
TARGET_MS = 20.0

CHILD = r"""
import json, statistics, sys, time
import torch, gpureclaim
MiB = 1 << 20
runs = int(sys.argv[1])
big = [torch.empty(12 * MiB, dtype=torch.uint8, device="cuda") for _ in range(1000)]
del big
blocks = [torch.empty(4 * MiB, dtype=torch.uint8, device="cuda") for _ in range(3000)]
for i in range(0, 1500, 2):
    blocks[i] = None
torch.cuda.synchronize()
snap = torch.cuda.memory_snapshot()
segs = sum(1 for s in snap if s["device"] == 0)

def timed(fn):
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out

gpureclaim.explain()  # warm
ex = timed(gpureclaim.explain)
sn = timed(torch.cuda.memory_snapshot)
e = gpureclaim.explain()
frag = [p for p in e.gpus[0].parts if p.kind == "fragmented"][0]
print(json.dumps(dict(segments=segs, explain=ex, snapshot=sn,
                      fragmented_segments=frag.detail["segments"],
                      fragmented=frag.bytes,
                      split=torch.cuda.memory_stats(0)["inactive_split_bytes.all.current"],
                      text=str(e))))
"""


def main(argv):
    runs = int(argv[0]) if argv else 50
    if not shutil.which("nvidia-smi") or subprocess.run(
            [sys.executable, "-c", "import torch; assert torch.cuda.is_available()"],
            capture_output=True).returncode:
        print("skipped: no GPU with Torch")
        return 0
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:False")
    env["PYTHONPATH"] = PKG + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    p = subprocess.run([sys.executable, "-c", CHILD, str(runs)], env=env,
                       capture_output=True, text=True)
    if p.returncode:
        sys.stderr.write(p.stdout + p.stderr)
        return 1
    r = json.loads(p.stdout.strip().splitlines()[-1])
    import statistics

    def cell(xs):
        return f"{statistics.median(xs):.2f} ms ({min(xs):.2f}-{max(xs):.2f})"

    print(r["text"])
    print()
    print(f"Torch segments on GPU 0: {r['segments']}; fragmented: "
          f"{r['fragmented_segments']} ({r['fragmented'] / (1 << 20):.0f} MiB, "
          f"inactive_split_bytes {r['split'] / (1 << 20):.0f} MiB)")
    print()
    print("| call | median (min-max), %d runs |" % runs)
    print("|---|---|")
    print(f"| `gpureclaim.explain()` | {cell(r['explain'])} |")
    print(f"| `torch.cuda.memory_snapshot()` alone | {cell(r['snapshot'])} |")
    med = statistics.median(r["explain"])
    ok = med <= TARGET_MS and r["segments"] >= 1000
    print(f"\ntarget explain() <= {TARGET_MS:.0f} ms with >= 1,000 segments: "
          f"{'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
