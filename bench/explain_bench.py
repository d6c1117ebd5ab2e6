"""gpureclaim.explain() on a process whose Torch allocator holds 1,000
segments and whose Python heap holds 200,000 objects, and on a process with
a model loaded and 442,573 objects on the heap; with --baseline, this build
against an older one, interleaved.

"plain" and "scan": 1,000 tensors of 12 MiB (each request over 10 MiB gets
a segment of its own), all freed; 3,000 tensors of 4 MiB carved from those
segments (three blocks each); then every other block freed in the first 500
segments (free blocks pinned by live ones: fragmentation); a matmul (cuBLAS
workspaces); 200,000 small Python objects.
- "plain": explain() reads counters, one memory_snapshot(), Torch's
  workspace map and NVML; no heap scan is needed;
- "scan": a captured CUDA graph holds a private pool, so explain() also
  walks the Python heap (gc.get_objects()) to count the graphs holding it.
Target: explain() <= 30 ms in both.

"model": the issue-22 case: transformers with the Qwen2-0.5B architecture
(random bf16 weights from its config: no download), one forward pass, the
heap topped up to 442,573 gc objects (what transformers and that model
held on 2026-12-01). Without transformers, a Torch stand-in of the same
shapes (24 blocks of q/k/v/o/gate/up/down linears, the embedding); on the
simulated driver, the fake Torch's tensors of those sizes. Target:
explain() <= 5 ms.

"holders": the model case, timed with explain(holders=True) (its budget
set out of the way, 10 s); the target is for the holders' walk alone
(the roots, gc.get_objects(), the C walk, the naming: its "ms"), <= 100 ms,
every walk complete and some allocation named.

"autograd": the model case with its autograd graph alive (a forward pass
with grad on, its loss kept: transformers computes it from labels; on the
fakes, 24 blocks of q/k/v/o/gate/up/down linears over 32 tokens, fp32),
the heap topped up to the same 442,573 objects: explain(holders=True)'s
walk, the graph read and merged (its "autograd" phase), <= 100 ms, the
loss's graph summed; and free_plan(): its walk, the plan included (its
"plan" phase), against explain(holders=True)'s walk (medians): <= 20 ms
more. The calls' totals are printed too; they also hold the collections
that land in them.

Times explain() (median of RUNS, min-max) and, for comparison,
torch.cuda.memory_snapshot() alone.

On the GPU machine (the default when Torch sees a GPU) it runs real Torch;
with --fakes, or without a GPU, it runs on the simulated driver and the
test suite's fake Torch (build first: make), which measures gpureclaim's
own work on this CPU, not Torch's (the fake builds its snapshot in
Python: there the targets are for explain() minus the snapshot).

--baseline PYTHONPATH (another build's package folder, e.g.
build/gpu-base/python: scripts/gpu-check.sh's bench-explain stage builds
the base commit there): each mode runs ROUNDS times (default 7) in a
process of each build, the builds alternating ABBA round by round; per
build the medians and minimums of all runs, in us, beside new/old ratios.

Usage: python bench/explain_bench.py [--fakes] [--baseline PATH]
       [--rounds N] [--modes plain,scan,model,holders,autograd] [RUNS]
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys

from benchenv import child_env, remove_states

ROOT = pathlib.Path(__file__).resolve().parents[1]
PKG = os.environ.get("GPURECLAIM_PYTHONPATH", str(ROOT / "build/python"))
TARGET_MS = {"plain": 30.0, "scan": 30.0, "model": 5.0, "holders": 100.0,
             "autograd": 100.0}
PLAN_TARGET_MS = 20.0  # what free_plan() adds to explain(holders=True)
MODEL_OBJECTS = 442_573

CHILD = r"""
import gc, json, statistics, sys, time
import torch, gpureclaim
MiB = 1 << 20
runs, mode, fake = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
def empty(n):
    return torch.empty(n, dtype=torch.uint8, device="cuda")
keep = []
def qwen2(transformers, H, I, L, V):
    # Qwen2-0.5B's architecture from its config, random bf16 weights
    cfg = transformers.Qwen2Config(
        hidden_size=H, intermediate_size=I, num_hidden_layers=L,
        num_attention_heads=14, num_key_value_heads=2, vocab_size=V,
        max_position_embeddings=32768, tie_word_embeddings=True)
    with torch.device("cuda"):
        return transformers.Qwen2ForCausalLM(cfg).to(torch.bfloat16)
if mode in ("plain", "scan"):
    big = [empty(12 * MiB) for _ in range(1000)]
    del big
    blocks = [empty(4 * MiB) for _ in range(3000)]
    for i in range(0, 1500, 2):
        blocks[i] = None
    if fake:
        a = empty(4 * MiB); torch.matmul(a, a)
    else:
        a = torch.randn(1024, 1024, device="cuda"); b = a @ a
    if mode == "scan":
        g = torch.cuda.CUDAGraph()
        if fake:
            with torch.cuda.graph(g):
                out = empty(2 * MiB)
        else:
            s = torch.cuda.Stream()
            x = torch.ones(1024, device="cuda")
            with torch.cuda.stream(s):
                x * 2                                   # warm up off the capture
            torch.cuda.current_stream().wait_stream(s)
            with torch.cuda.graph(g):
                out = x * 2
    heap = [[i] for i in range(200_000)]  # lists: always gc-tracked
elif mode == "autograd":  # the model, its graph alive
    H, I, L, V, KV = 896, 4864, 24, 151936, 128  # Qwen2-0.5B's shapes
    if fake:
        built = "fake Torch: 24 blocks of Qwen2-0.5B's linears, fp32"
        def lin(a, b):
            return torch.nn.Linear(b, a, bias=False, device="cuda")
        blocks = [[lin(H, H), lin(KV, H), lin(KV, H), lin(H, H), lin(I, H),
                   lin(I, H), lin(H, I)] for _ in range(L)]
        h = torch.randn(32, H, device="cuda")
        acc = 0
        for q, k, v, o, gate, up, down in blocks:
            acc = acc + k(h).sum() + v(h).sum()
            a = o(torch.relu(q(h)) * torch.relu(q(h))) + h
            h = down(torch.relu(gate(a)) * up(a)) + a
        loss = h.pow(2).sum() + acc
    else:
        import transformers
        model = qwen2(transformers, H, I, L, V)
        ids = torch.randint(0, V, (1, 32), device="cuda")
        loss = model(ids, labels=ids).loss  # its graph stays
        built = f"transformers {transformers.__version__} Qwen2ForCausalLM"
    heap = [[i] for i in range(max(0, {MODEL_OBJECTS} - len(gc.get_objects())))]
else:  # model
    H, I, L, V, KV = 896, 4864, 24, 151936, 128  # Qwen2-0.5B's shapes
    shapes = [(V, H)] + [s for _ in range(L) for s in (
        (H, H), (KV, H), (KV, H), (H, H), (I, H), (I, H), (H, I))]
    built = "fake Torch tensors of Qwen2-0.5B's shapes"
    if fake:
        keep = [empty(2 * a * b) for a, b in shapes]    # bf16
        a = empty(4 * MiB); torch.addmm(None, a, a)
    else:
        try:
            import transformers
            model = qwen2(transformers, H, I, L, V)
            with torch.no_grad():
                model(torch.randint(0, V, (1, 32), device="cuda"))
            built = f"transformers {transformers.__version__} Qwen2ForCausalLM"
        except ImportError:
            with torch.device("cuda"):
                keep = [torch.nn.Linear(b, a, bias=False, dtype=torch.bfloat16)
                        for a, b in shapes]
            with torch.no_grad():
                x = torch.randn(32, H, device="cuda", dtype=torch.bfloat16)
                keep[1](x)
            built = "torch.nn.Linear layers of Qwen2-0.5B's shapes"
    heap = [[i] for i in range(max(0, {MODEL_OBJECTS} - len(gc.get_objects())))]
if not fake:
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

holders = None
if mode in ("holders", "autograd"):  # the walk's own cost, its budget out of the way
    walks = []
    def with_holders():
        walks.append(gpureclaim.explain(holders=True, holders_budget=10.0))
    with_holders()  # warm
    walks.clear()
    ex = timed(with_holders)
    w = [x.holders["walk"] for x in walks]
    b = walks[-1].holders["blocks"]
    graphs = walks[-1].holders["graphs"]
    holders = dict(ms=[x["ms"] for x in w], stopped=[x["stopped"] for x in w],
                   phases={k: [x["phases_ms"][k] for x in w]
                           for k in w[-1]["phases_ms"]},
                   reached=w[-1]["reached"], roots=w[-1]["roots"],
                   held=sum(x["state"] == "held" for x in b), blocks=len(b),
                   first=[c["path"] for x in b[:3] for c in x["chains"][:1]],
                   graphs=[(g["tensor"], g["saved"], g["bytes"], g["path"])
                           for g in graphs])
    del walks
    if mode == "autograd":  # free_plan(): its cost beside explain()'s
        plans = []
        def plan():
            plans.append(gpureclaim.free_plan(budget=10.0))
        plan()  # warm
        plans.clear()
        holders["free_plan"] = timed(plan)
        holders["plan_phase"] = [p.walk["phases_ms"]["plan"] for p in plans]
        holders["plan_walk"] = [p.walk["ms"] for p in plans]
        holders["steps"] = [(s.statement, s.releasable) for s in plans[-1]][:4]
        holders["explain"] = ex
        del plans
else:
    gpureclaim.explain()  # warm
    ex = timed(gpureclaim.explain)
sn = timed(torch.cuda.memory_snapshot)
e = gpureclaim.explain()
frag = next((p for p in e.gpus[0].parts if p.kind == "not_releasable"), None)
scans = [p.detail["scan"] for p in e.gpus[0].parts
         if p.kind in ("graph_pool", "unattributed") and p.detail.get("scan")]
print(json.dumps(dict(segments=segs, explain=ex, snapshot=sn, objects=len(gc.get_objects()),
                      scan=scans[0] if scans else None,
                      fragmented_segments=frag.detail["segments"] if frag else 0,
                      built=built if mode in ("model", "holders", "autograd") else None,
                      holders=holders,
                      kinds=sorted({p.kind + ":" + p.source for p in e.gpus[0].parts}),
                      text=str(e))))
""".replace("{MODEL_OBJECTS}", str(MODEL_OBJECTS))


def have_gpu():
    return subprocess.run(
        [sys.executable, "-c", "import torch; assert torch.cuda.is_available()"],
        capture_output=True).returncode == 0


def run_child(env, runs, mode, fake):
    p = subprocess.run([sys.executable, "-c", CHILD, str(runs), mode,
                        "1" if fake else "0"], env=env,
                       capture_output=True, text=True)
    if p.returncode:
        sys.stderr.write(p.stdout + p.stderr)
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def cell(xs):
    return f"{statistics.median(xs):.2f} ms ({min(xs):.2f}-{max(xs):.2f})"


def plan_added(h):
    """What free_plan()'s walk (its plan included) takes beyond
    explain(holders=True)'s: medians, ms. (The calls' totals also hold
    the collections that land in them: the garbage of the walks before.)"""
    return statistics.median(h["plan_walk"]) - statistics.median(h["ms"])


def own(r):
    """explain() minus the snapshot (medians): gpureclaim's own work."""
    return statistics.median(r["explain"]) - statistics.median(r["snapshot"])


def met(mode, r, fake):
    """The target of `mode`: the fake Torch builds its snapshot in Python,
    so there it holds for explain() minus the snapshot."""
    if mode in ("holders", "autograd"):  # the walk's own time, every walk complete
        h = r["holders"]
        ok = (statistics.median(h["ms"]) <= TARGET_MS[mode]
              and r["objects"] >= MODEL_OBJECTS and not any(h["stopped"])
              and h["held"] > 0)
        if mode == "autograd":  # the graph read, free_plan()'s cost
            ok &= bool(h["graphs"]) and plan_added(h) <= PLAN_TARGET_MS
        return ok
    t = own(r) if fake else statistics.median(r["explain"])
    shape = ((r["segments"] >= 1000 and (r["scan"] is not None) == (mode == "scan"))
             if mode != "model" else r["objects"] >= MODEL_OBJECTS)
    return t <= TARGET_MS[mode] and shape


def one_build(envs, modes, runs, fake):
    ok = True
    print("| run | segments | Python objects | `explain()` | heap scan inside it | "
          "`memory_snapshot()` alone | `explain()` minus the snapshot | target |")
    print("|---|---|---|---|---|---|---|---|")
    for mode in modes:
        r = run_child(envs["new"], runs, mode, fake)
        if r is None:
            return False
        scan = r["scan"]
        scan_cell = (f"{scan['ms']:.2f} ms ({scan['objects']} objects, "
                     f"{scan['tensors']} tensors)" if scan else "not run")
        h = r["holders"]
        if h:
            scan_cell = (f"holders' walk {cell(h['ms'])}: {h['roots']} roots, "
                         f"{h['reached']} objects climbed, {h['held']} of "
                         f"{h['blocks']} allocations named")
        good = met(mode, r, fake)
        ok &= good
        print(f"| {mode} | {r['segments']} | {r['objects']} | {cell(r['explain'])} | "
              f"{scan_cell} | {cell(r['snapshot'])} | {own(r):.2f} ms | "
              f"{'met' if good else 'NOT met'} (<= {TARGET_MS[mode]:.0f} ms) |")
        if r["built"]:
            print(f"|   | model: {r['built']} | | | | | | |")
        if h and h.get("graphs"):
            t, n, b, path = h["graphs"][0]
            print(f"|   | its autograd graph: {t}, {n} saved activations, "
                  f"{b} bytes: {path} | | | | | | |")
        if h and "free_plan" in h:
            print(f"|   | free_plan(): {cell(h['free_plan'])}, its walk "
                  f"{cell(h['plan_walk'])}, of which its plan "
                  f"{cell(h['plan_phase'])}: {plan_added(h):.2f} ms more than "
                  f"explain(holders=True)'s walk (target <= "
                  f"{PLAN_TARGET_MS:.0f} ms); first steps: {h['steps']} "
                  f"| | | | | | |")
        if h:
            print(f"|   | e.g. {'; '.join(h['first'])} | | | | | | |")
            print("|   | its phases, median ms: " + ", ".join(
                f"{k} {statistics.median(v):.1f}"
                for k, v in h["phases"].items()) + " | | | | | | |")
    return ok


def us(xs):
    return f"{statistics.median(xs) * 1e3:.0f} ({min(xs) * 1e3:.0f})"


def against(envs, modes, runs, rounds, fake):
    """This build against the baseline: ROUNDS processes of each per mode,
    ABBA by round; every run of every round pooled per build."""
    print(f"this build (new) against --baseline (old): {rounds} rounds per "
          f"mode, a process of each build per round (order ABBA), {runs} "
          f"explain() calls per process; us, median (min) of all calls; "
          f"ratios new/old of the medians (of the minimums)")
    print("| mode | `explain()` new | old | new/old | minus the snapshot, new | "
          "old | heap scan new / old (ms) | target (new) |")
    print("|---|---|---|---|---|---|---|---|")
    ok = True
    for mode in modes:
        if mode in ("holders", "autograd"):  # an older build has no holders=True
            print(f"| {mode} | (not compared: run it without --baseline) "
                  "| | | | | | |")
            continue
        got = {"new": [], "old": []}
        for i in range(rounds):
            for b in (("new", "old") if i % 4 in (0, 3) else ("old", "new")):
                r = run_child(envs[b], runs, mode, fake)
                if r is None:
                    return False
                got[b].append(r)
        ex = {b: [x for r in got[b] for x in r["explain"]] for b in got}
        own_ = {b: [own(r) for r in got[b]] for b in got}
        scans = {b: [r["scan"]["ms"] for r in got[b] if r["scan"]] for b in got}
        n, o = ex["new"], ex["old"]
        ratio = statistics.median(n) / statistics.median(o)
        mratio = min(n) / min(o)
        pooled = dict(got["new"][0], explain=n,
                      snapshot=[x for r in got["new"] for x in r["snapshot"]])
        good = met(mode, pooled, fake)
        ok &= good
        sc = " / ".join(f"{statistics.median(scans[b]):.2f}" if scans[b] else "-"
                        for b in ("new", "old"))
        print(f"| {mode} | {us(n)} | {us(o)} | {ratio:.2f} ({mratio:.2f}) | "
              f"{statistics.median(own_['new']) * 1e3:.0f} | "
              f"{statistics.median(own_['old']) * 1e3:.0f} | {sc} | "
              f"{'met' if good else 'NOT met'} (<= {TARGET_MS[mode]:.0f} ms) |")
    return ok


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="?", type=int)
    ap.add_argument("--fakes", action="store_true")
    ap.add_argument("--baseline", metavar="PYTHONPATH")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--modes", default="plain,scan,model,holders,autograd")
    a = ap.parse_args(argv)
    runs = a.runs or (15 if a.baseline else 50)
    modes = [m for m in a.modes.split(",") if m]
    if any(m not in TARGET_MS for m in modes):
        print(f"--modes: of {','.join(TARGET_MS)}", file=sys.stderr)
        return 2
    if a.baseline and a.rounds < 7:
        print("--baseline: at least 7 rounds", file=sys.stderr)
        return 2
    fake = a.fakes
    if not fake and not have_gpu():
        print("no GPU with Torch: running on the simulated driver (--fakes)")
        fake = True
    alloc = dict(PYTORCH_CUDA_ALLOC_CONF="expandable_segments:False")
    envs = {"new": child_env(PKG, fake, f"explain-bench-{os.getpid()}",
                             **alloc)}
    if a.baseline:
        envs["old"] = child_env(a.baseline, fake,
                                f"explain-bench-{os.getpid()}-old", **alloc)
    try:
        ok = (against(envs, modes, runs, a.rounds, fake) if a.baseline
              else one_build(envs, modes, runs, fake))
    finally:
        remove_states(envs.values())
    print(f"\n{'fake Torch on the simulated driver' if fake else 'real Torch'}; "
          f"targets: explain() <= 30 ms with >= 1,000 segments and a 200,000-"
          f"object heap (plain, scan), <= 5 ms with a model and {MODEL_OBJECTS:,} "
          f"objects (model), the holders' walk <= 100 ms there (holders), "
          f"with the model's autograd graph too, free_plan() adding <= "
          f"{PLAN_TARGET_MS:.0f} ms (autograd): "
          f"{'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
