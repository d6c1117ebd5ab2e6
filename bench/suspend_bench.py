"""Suspend and resume against the driver's bare checkpoint, and against
the link (docs/suspend.md; issue 35's "Speed"), for a Torch process with
LIVE GiB in use and CACHED GiB in Torch's cache, working in a loop.

Side by side, interleaved (the order alternates round by round, so a
drift favours neither), medians and minimums over ROUNDS (default 7; 3
when LIVE + CACHED > 8 GiB):

- bare: the driver's lock + checkpoint, then restore + unlock, through
  our driver layer (build/.../bench/suspend_probe), no release first: all
  of LIVE + CACHED + the context moves.
- gpureclaim: `gpureclaim suspend --pid` (its agent releases the cache
  first: only LIVE moves) and `gpureclaim resume --pid`.
For each: the time until the GPU has the memory back (the driver's lock +
checkpoint; for gpureclaim also the whole command: its cuInit, the
agent's release, the checks), the bytes moved (VmRSS growth) and the
GiB/s, and the time until the program runs again (from the start of the
restore to the end of the first step of its loop after it: a call that
waited), and the restore's GiB/s.
- the link: a pinned copy of the same bytes each way (cudaMemcpy through
  Torch), and a pageable one (into fresh pages, as the driver's copy
  goes into the process's fresh memory, and into touched ones).

Experiments (--experiments, comma list; each prints its own table):
- thp: the bare checkpoint with transparent huge pages never, then
  always (root: /sys/kernel/mm/transparent_hugepage/enabled, put back
  after): does the copy into the target's fresh pageable memory pay for
  its 4 KiB page faults? The probe gives the target's minor faults and
  CPU time during each step.
- parallel: the same bytes in K processes (K = 2, 4) checkpointed at
  once: does the driver copy one process at a time, or is the link shared?
- numa: the target's memory bound to the GPU's NUMA node, then to
  another (numactl; only where there are several nodes).
The probe's --info says whether the driver has CUDA 13.4's custom storage
(the controller copies the memory itself: cuCheckpointOperationComplete).

Resume on demand (docs/suspend.md; --on-demand-rounds N, default 5, 0 to
leave it out): the target's loop paused, suspended by `gpureclaim suspend`
(its watcher started), then one step called: the time from that call to
its return, the restore and unlock inside it (the actions' log) and the
rest (finding the demand), two ways:
- the watcher's look from outside, every 0.5 s (the default) and 0.1 s;
- the fast path: the target under `gpureclaim run --resume-on-demand`
  (the interposer asks at the call), the watcher's own look set to an
  hour so that only the ask can resume it.
And the watcher's CPU cost: the target idle with 64 threads waiting
(Torch's count), suspended, the watcher's CPU time over 10 s for each
poll interval.

Never asks for more than half of MemAvailable: LIVE + CACHED + 1 GiB (the
bare checkpoint's host copy; the copies' buffers are made one at a time).
Prints markdown tables for bench/RESULTS.md; --json FILE keeps every
figure.

Usage: python3 bench/suspend_bench.py [--live 20] [--cached 10]
       [--rounds N] [--on-demand-rounds N] [--experiments thp,parallel,numa]
       [--json FILE] [--fakes]
--fakes: on the simulated driver with the test suite's fake Torch (the
script's own flow, small sizes; no figure means anything).
$GPURECLAIM_PYTHONPATH: the built package (default build/python, or
build/gpu/python when it exists); $GPURECLAIM_BIN: the command;
$GPR_SUSPEND_PROBE: the probe.
"""
import argparse
import json
import os
import pathlib
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

from benchenv import child_env, remove_states

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD = ROOT / ("build/gpu" if (ROOT / "build/gpu/cli/gpureclaim").exists()
                else "build")
PKG = os.environ.get("GPURECLAIM_PYTHONPATH", str(BUILD / "python"))
GPR = os.environ.get("GPURECLAIM_BIN", str(BUILD / "cli/gpureclaim"))
PROBE = os.environ.get("GPR_SUSPEND_PROBE", str(BUILD / "bench/suspend_probe"))
GiB = 1 << 30

# The target: LIVE in use, CACHED cached, a loop of small CUDA calls (a
# step every 10 ms, its end time kept). On stdin: "cache" makes the cache
# again (a release emptied it); "since T" answers the end time of its
# first step ending after T (waiting for one): when it ran again.
TARGET = r"""
import ctypes, json, os, sys, threading, time
import torch
GiB = 1 << 30
live_b, cache_b, fake = int(float(sys.argv[1]) * GiB), int(float(sys.argv[2]) * GiB), sys.argv[3] == "1"
live = []
while live_b > 0:
    n = min(live_b, GiB)
    live.append(torch.empty(n, dtype=torch.uint8, device="cuda"))
    live_b -= n
if fake:
    lib = ctypes.CDLL(os.environ["GPURECLAIM_CUDA_LIBRARY"])
    def step():
        lib.cuCtxSynchronize()
else:
    x = torch.ones(1024, device="cuda")
    for t in live:
        t.fill_(7)  # its pages are real on the GPU
    def step():
        x.mul_(1.0)
        torch.cuda.synchronize()
def cache():
    c = torch.empty(cache_b, dtype=torch.uint8, device="cuda")
    del c
cache()
ends = []
cv = threading.Condition()
going = threading.Event()
going.set()
idle = threading.Lock()
idle.acquire()
def loop():
    while True:
        going.wait()
        step()
        with cv:
            ends.append(time.time())
            del ends[:-1000]
            cv.notify_all()
        time.sleep(0.01)
threading.Thread(target=loop, daemon=True).start()
print(json.dumps({"ready": os.getpid()}), flush=True)
for line in sys.stdin:
    w = line.split()
    if w[0] == "cache":
        cache()
        print("{}", flush=True)
    elif w[0] == "since":
        t0 = float(w[1])
        with cv:
            cv.wait_for(lambda: ends and ends[-1] > t0)
            first = min(e for e in ends if e > t0)
        print(json.dumps({"end": first}), flush=True)
    elif w[0] == "pause":  # the loop stops after its step under way
        going.clear()
        t0 = time.time()
        with cv:
            cv.wait_for(lambda: ends and ends[-1] > t0, timeout=1)
        print("{}", flush=True)
    elif w[0] == "go":
        going.set()
        print("{}", flush=True)
    elif w[0] == "call":  # one step here, timed: waits while suspended
        t0 = time.time()
        step()
        print(json.dumps({"start": t0, "end": time.time()}), flush=True)
    elif w[0] == "threads":  # idle threads, as a framework has
        for _ in range(int(w[1])):
            threading.Thread(target=idle.acquire, daemon=True).start()
        print("{}", flush=True)
"""

# The link: D2H and H2D of nbytes, pinned and pageable, best of 3 each.
LINK = r"""
import json, sys, time, torch
n = int(sys.argv[1])
d = torch.empty(n, dtype=torch.uint8, device="cuda")
d.fill_(1)
def timed(f):
    torch.cuda.synchronize(); t = time.perf_counter(); f(); torch.cuda.synchronize()
    return time.perf_counter() - t
out = {}
h = torch.empty(n, dtype=torch.uint8, pin_memory=True)
out["pinned_d2h"] = min(timed(lambda: h.copy_(d)) for _ in range(3))
out["pinned_h2d"] = min(timed(lambda: d.copy_(h)) for _ in range(3))
del h
fresh = []
for _ in range(3):
    h = torch.empty(n, dtype=torch.uint8)   # untouched: the copy faults it in
    fresh.append(timed(lambda: h.copy_(d)))
    del h
out["pageable_fresh_d2h"] = min(fresh)
h = torch.empty(n, dtype=torch.uint8)
h.fill_(0)
out["pageable_d2h"] = min(timed(lambda: h.copy_(d)) for _ in range(3))
out["pageable_h2d"] = min(timed(lambda: d.copy_(h)) for _ in range(3))
print(json.dumps(out))
"""


def mem_available():
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


class Target:
    def __init__(self, env, live, cached, fake, prefix=(), run_opts=()):
        cmd = [*prefix, GPR, "run", "--agent", *run_opts, "--",
               sys.executable, "-c", TARGET, str(live), str(cached),
               "1" if fake else "0"]
        self.p = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        if not line:
            sys.exit("suspend_bench: the target died")
        self.pid = json.loads(line)["ready"]

    def ask(self, *words):
        self.p.stdin.write(" ".join(map(str, words)) + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(timeout=60)
        except Exception:
            self.p.kill()
            self.p.wait()


def run_json(cmd, env, many=False):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True,
                       timeout=3600)
    if p.returncode != 0:
        sys.exit(f"suspend_bench: {' '.join(map(str, cmd))}: {p.stderr}")
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
    return lines if many else lines[0]


def probe(env, only, *pids):
    """The probe's lines: one per pid, then the concurrent walls."""
    out = run_json([PROBE, "--only", only, *map(str, pids)], env, many=True)
    for j in out[:-1]:
        if j.get("error"):
            sys.exit(f"suspend_bench: probe {only} {j['pid']}: {j['error']}")
    return out[:-1], out[-1]


def bare_round(t, env):
    t.ask("cache")
    (c,), _ = probe(env, "checkpoint", t.pid)
    moved = c["rss_checkpointed"] - c["rss_before"]
    t0 = time.time()
    (r,), _ = probe(env, "restore", t.pid)
    again = t.ask("since", t0)["end"] - t0
    return {"back": c["lock"] + c["checkpoint"], "lock": c["lock"],
            "checkpoint": c["checkpoint"], "moved": moved,
            "restore": r["restore"], "unlock": r["unlock"],
            "again": again, "faults": c["checkpoint_cpu"]["minflt"],
            "ckpt_cpu": c["checkpoint_cpu"], "restore_cpu": r["restore_cpu"]}


def gpr_round(t, env):
    t.ask("cache")
    w = time.time()
    # resumed by hand below: no watcher (its loop would have it resumed)
    s = run_json([GPR, "suspend", "--pid", str(t.pid), "--json", "--resume",
                  "manual"], env)
    wall = time.time() - w
    (s,) = s["processes"]
    t0 = time.time()
    r = run_json([GPR, "resume", "--pid", str(t.pid), "--json"], env)
    (r,) = r["processes"]
    again = t.ask("since", t0)["end"] - t0
    return {"back": s["seconds"]["total"], "wall": wall,
            "lock": s["seconds"]["lock"],
            "checkpoint": s["seconds"]["checkpoint"],
            "moved": s["host_bytes"] or 0,
            "cache_released": s["cache_released"] or 0,
            "released": s["released"] or 0,
            "restore": r["seconds"]["restore"], "unlock": r["seconds"]["unlock"],
            "again": again}


def med_min(xs):
    return statistics.median(xs), min(xs)


def fmt_s(xs):
    m, n = med_min(xs)
    return f"{m:.3f} / {n:.3f}"


def gibs(bytes_, secs):
    return bytes_ / GiB / secs if secs > 0 else float("nan")


def main_rounds(args, env):
    fake = args.fakes
    t = Target(env, args.live, args.cached, fake)
    rows = {"bare": [], "gpureclaim": []}
    try:
        for i in range(args.rounds):
            order = ["bare", "gpureclaim"] if i % 2 == 0 else \
                ["gpureclaim", "bare"]
            for v in order:
                rows[v].append((bare_round if v == "bare" else gpr_round)(
                    t, env))
            print(f"round {i + 1}/{args.rounds}: bare "
                  f"{rows['bare'][-1]['back']:.3f} s, gpureclaim "
                  f"{rows['gpureclaim'][-1]['back']:.3f} s", file=sys.stderr)
    finally:
        t.close()
    return rows


def link(args, env):
    if args.fakes:
        return None
    out = {}
    for what, gib in (("all", args.live + args.cached), ("live", args.live)):
        out[what] = run_json([sys.executable, "-c", LINK,
                              str(int(gib * GiB))], env)
    return out


def table_main(args, rows, lk):
    b, g = rows["bare"], rows["gpureclaim"]
    print(f"\n### Suspend and resume, Torch {args.live:g} GiB live + "
          f"{args.cached:g} GiB cached ({args.rounds} rounds, interleaved; "
          f"median / min)\n")
    print("| | moved to host | GPU memory back (s) | GiB/s | program runs "
          "again (s) | restore GiB/s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, r in (("driver's bare checkpoint", b),
                    ("gpureclaim suspend/resume", g)):
        moved = statistics.median(x["moved"] for x in r)
        ck = statistics.median(x["checkpoint"] for x in r)
        rs = statistics.median(x["restore"] for x in r)
        print(f"| {name} | {moved / GiB:.2f} GiB | "
              f"{fmt_s([x['back'] for x in r])} | {gibs(moved, ck):.2f} | "
              f"{fmt_s([x['again'] for x in r])} | {gibs(moved, rs):.2f} |")
    print(f"| gpureclaim, the whole command (cuInit, agent's release, "
          f"checks) | | {fmt_s([x['wall'] for x in g])} | | | |")
    mb = statistics.median(x["back"] for x in b)
    mg = statistics.median(x["back"] for x in g)
    mw = statistics.median(x["wall"] for x in g)
    ra = statistics.median(x["again"] for x in b)
    rg = statistics.median(x["again"] for x in g)
    print(f"\nGPU memory back: {mb / mg:.1f}x sooner (the driver's part; "
          f"the whole command {mb / mw:.1f}x; target 5x); program runs "
          f"again {ra / rg:.1f}x sooner (target 2x). The cache released "
          f"first: {statistics.median(x['cache_released'] for x in g) / GiB:.2f}"
          f" GiB.")
    if lk:
        print("\n| the link, same bytes | D2H pinned | H2D pinned | D2H "
              "pageable, fresh pages | D2H pageable | H2D pageable |")
        print("| --- | --- | --- | --- | --- | --- |")
        for what, gib in (("all", args.live + args.cached),
                          ("live", args.live)):
            x = lk[what]
            n = gib * GiB
            print(f"| {gib:g} GiB ({what}) | "
                  + " | ".join(f"{gibs(n, x[k]):.1f} GiB/s"
                               for k in ("pinned_d2h", "pinned_h2d",
                                         "pageable_fresh_d2h",
                                         "pageable_d2h", "pageable_h2d"))
                  + " |")
    faults = statistics.median(x["faults"] for x in b)
    cpu = b[len(b) // 2]["ckpt_cpu"]
    print(f"\nThe target during the bare checkpoint (median round): "
          f"{faults:.0f} minor faults ({faults * 4096 / GiB:.2f} GiB in 4 KiB"
          f" pages), user {cpu['utime']:.2f} s, system {cpu['stime']:.2f} s.")


# -- resume on demand --------------------------------------------------------

NEVER = 3600  # a watcher's poll interval that never comes in a round


def actions(env):
    """The actions' log of the bench's records folder (docs/suspend.md)."""
    path = pathlib.Path(env["GPURECLAIM_AGENT_DIR"], "suspended",
                        "actions.log")
    try:
        return [json.loads(x) for x in path.read_text().splitlines()]
    except OSError:
        return []


def on_demand_round(t, env, poll):
    """Suspended with a watcher; one call made; its wait and what it was."""
    t.ask("pause")
    t.ask("cache")
    done = len(actions(env))
    (s,) = run_json([GPR, "suspend", "--pid", str(t.pid), "--json",
                     "--poll", str(poll)], env)["processes"]
    if not (s["resume_on_demand"] or {}).get("ok"):
        sys.exit(f"suspend_bench: no watcher: {s['resume_on_demand']}")
    # a call at a random moment of the watcher's interval, as a program's
    # comes: the wait to be seen is half the interval on average
    time.sleep(random.uniform(0, poll) if poll < NEVER else 0)
    c = t.ask("call")
    end = time.monotonic() + 120
    while True:
        r = [a for a in actions(env)[done:] if a["action"] == "resume"
             and a["pid"] == t.pid]
        if r or time.monotonic() > end:
            break
        time.sleep(0.01)
    if not r or not r[0]["ok"]:
        sys.exit(f"suspend_bench: not resumed on demand: {r}")
    call = c["end"] - c["start"]
    t.ask("go")
    return {"call": call, "resume": r[0]["seconds"],
            "find": call - r[0]["seconds"], "moved": s["host_bytes"] or 0,
            "cause": r[0]["cause"]}


def on_demand(args, env):
    """The three ways, `args.on_demand_rounds` rounds each."""
    out = {}
    ways = (("the watcher, poll 0.5 s", 0.5, ()),
            ("the watcher, poll 0.1 s", 0.1, ()),
            ("the fast path (run --resume-on-demand)", NEVER,
             ("--resume-on-demand",)))
    for name, poll, opts in ways:
        t = Target(env, args.live, args.cached, args.fakes, run_opts=opts)
        try:
            out[name] = [on_demand_round(t, env, poll)
                         for _ in range(args.on_demand_rounds)]
        finally:
            t.close()
        print(f"on demand, {name}: {out[name][-1]['call']:.3f} s",
              file=sys.stderr)
    return out


def cpu_seconds(pid):
    """The time pid's threads have run (schedstat: nanoseconds)."""
    total = 0
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def watcher_cost(args, env, threads=64, seconds=10.0):
    """The watcher's CPU per poll interval, the target idle with threads."""
    t = Target(env, min(args.live, 1), 0, args.fakes)
    out = {}
    try:
        t.ask("pause")
        t.ask("threads", threads)
        for poll in (0.1, 0.5, 1.0, 2.0):
            (s,) = run_json([GPR, "suspend", "--pid", str(t.pid), "--json",
                             "--poll", str(poll)], env)["processes"]
            w = s["resume_on_demand"]["watcher"]
            c0, w0 = cpu_seconds(w), time.monotonic()
            time.sleep(seconds)
            c1, w1 = cpu_seconds(w), time.monotonic()
            run_json([GPR, "resume", "--pid", str(t.pid), "--json"], env)
            looks = (w1 - w0) / poll
            out[poll] = {"cpu_percent": 100 * (c1 - c0) / (w1 - w0),
                         "per_look_ms": 1000 * (c1 - c0) / looks,
                         "threads": threads + 3}
    finally:
        t.close()
    return out


def table_on_demand(args, od, cost):
    print(f"\n### Resume on demand, Torch {args.live:g} GiB live "
          f"({args.on_demand_rounds} rounds; median / min)\n")
    print("| how the demand is seen | the call's wait (s) | restore + unlock "
          "(s) | finding the demand (s) | moved |")
    print("| --- | --- | --- | --- | --- |")
    for name, r in od.items():
        moved = statistics.median(x["moved"] for x in r)
        print(f"| {name} | {fmt_s([x['call'] for x in r])} | "
              f"{fmt_s([x['resume'] for x in r])} | "
              f"{fmt_s([x['find'] for x in r])} | {moved / GiB:.2f} GiB |")
    if cost:
        print(f"\n| the watcher's poll interval | its CPU "
              f"({next(iter(cost.values()))['threads']} threads) | per look "
              "|")
        print("| --- | --- | --- |")
        for poll, c in cost.items():
            print(f"| {poll:g} s | {c['cpu_percent']:.3f} % | "
                  f"{c['per_look_ms']:.3f} ms |")


THP = pathlib.Path("/sys/kernel/mm/transparent_hugepage/enabled")


def exp_thp(args, env):
    if not THP.exists() or os.geteuid() != 0:
        print("\nthp: needs root and " + str(THP) + "; skipped")
        return {}
    was = THP.read_text().split("[")[1].split("]")[0]
    out = {}
    try:
        for mode in ("never", "always"):
            THP.write_text(mode)
            t = Target(env, args.live + args.cached, 0, args.fakes)
            try:
                out[mode] = [bare_round(t, env) for _ in range(3)]
            finally:
                t.close()
    finally:
        THP.write_text(was)
    print(f"\n### THP and the checkpoint's copy ({args.live + args.cached:g}"
          " GiB, bare, 3 rounds; median)\n")
    print("| THP | checkpoint GiB/s | restore GiB/s | target's minor faults "
          "| its system CPU (s) |")
    print("| --- | --- | --- | --- | --- |")
    for mode, r in out.items():
        moved = statistics.median(x["moved"] for x in r)
        print(f"| {mode} | "
              f"{gibs(moved, statistics.median(x['checkpoint'] for x in r)):.2f}"
              f" | {gibs(moved, statistics.median(x['restore'] for x in r)):.2f}"
              f" | {statistics.median(x['faults'] for x in r):.0f} | "
              f"{statistics.median(x['ckpt_cpu']['stime'] for x in r):.2f} |")
    return out


def exp_parallel(args, env):
    total = args.live + args.cached
    out = {}
    print(f"\n### {total:g} GiB in K processes checkpointed at once (bare; "
          "median of 3)\n")
    print("| K | checkpoint, all (s) | aggregate GiB/s | restore, all (s) "
          "| aggregate GiB/s |")
    print("| --- | --- | --- | --- | --- |")
    for k in (1, 2, 4):
        ts = [Target(env, total / k, 0, args.fakes) for _ in range(k)]
        try:
            rounds = []
            for _ in range(3):
                per, walls = probe(env, "checkpoint", *[t.pid for t in ts])
                moved = sum(j["rss_checkpointed"] - j["rss_before"]
                            for j in per)
                _, rw = probe(env, "restore", *[t.pid for t in ts])
                rounds.append((walls["wall_checkpoint"],
                               rw["wall_restore"], moved))
            out[k] = rounds
        finally:
            for t in ts:
                t.close()
        c = statistics.median(x[0] for x in rounds)
        r = statistics.median(x[1] for x in rounds)
        m = statistics.median(x[2] for x in rounds)
        print(f"| {k} | {c:.3f} | {gibs(m, c):.2f} | {r:.3f} | "
              f"{gibs(m, r):.2f} |")
    return out


def exp_numa(args, env):
    nodes = sorted(pathlib.Path("/sys/devices/system/node").glob("node[0-9]*"))
    if len(nodes) < 2 or not shutil.which("numactl"):
        print(f"\nnuma: {len(nodes)} NUMA node(s) here"
              f"{'' if shutil.which('numactl') else ', no numactl'}; skipped")
        return {}
    smi = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id",
                          "--format=csv,noheader"], capture_output=True,
                         text=True).stdout.split()[0].lower()
    bus = smi[4:] if smi.count(":") == 2 and len(smi) > 12 else smi
    near = int(pathlib.Path(f"/sys/bus/pci/devices/{bus}/numa_node")
               .read_text())
    near = max(near, 0)
    far = next(int(n.name[4:]) for n in nodes if int(n.name[4:]) != near)
    out = {}
    print("\n### The target's memory near the GPU and away from it (bare; "
          "3 rounds, median)\n")
    print("| memory on node | checkpoint GiB/s | restore GiB/s |")
    print("| --- | --- | --- |")
    for name, node in (("near", near), ("far", far)):
        t = Target(env, args.live + args.cached, 0, args.fakes,
                   prefix=("numactl", f"--membind={node}",
                           f"--cpunodebind={node}"))
        try:
            r = [bare_round(t, env) for _ in range(3)]
        finally:
            t.close()
        out[name] = r
        moved = statistics.median(x["moved"] for x in r)
        print(f"| {node} ({name}) | "
              f"{gibs(moved, statistics.median(x['checkpoint'] for x in r)):.2f}"
              f" | {gibs(moved, statistics.median(x['restore'] for x in r)):.2f}"
              " |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--live", type=float, default=20)
    ap.add_argument("--cached", type=float, default=10)
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--experiments", default="")
    ap.add_argument("--json")
    ap.add_argument("--fakes", action="store_true")
    ap.add_argument("--on-demand-rounds", type=int, default=5)
    args = ap.parse_args()
    if args.rounds is None:
        args.rounds = 7 if args.live + args.cached <= 8 else 3
    need = (args.live + args.cached + 1) * GiB
    if need > mem_available() / 2:
        sys.exit(f"suspend_bench: {need / GiB:.1f} GiB of host memory would "
                 f"be filled, more than half of MemAvailable "
                 f"({mem_available() / GiB:.1f} GiB): smaller sizes")
    state = f"suspend-bench-{uuid.uuid4().hex[:8]}"
    env = child_env(PKG, args.fakes, state)
    agents = tempfile.mkdtemp(prefix="gpr-suspend-bench-")
    os.chmod(agents, 0o700)
    env["GPURECLAIM_AGENT_DIR"] = agents
    if args.fakes:
        env["GPURECLAIM_SIM"] = (f"gpus=1;memory=200GiB;context=16MiB;"
                                 f"checkpoint_rate=2GiB;restore_rate=6GiB;"
                                 f"state={state}")
    out = {"args": vars(args)}
    try:
        out["driver"] = run_json([PROBE, "--info"], env)
        print(f"driver: {out['driver']}", file=sys.stderr)
        out["rounds"] = main_rounds(args, env)
        out["link"] = link(args, env)
        table_main(args, out["rounds"], out["link"])
        if args.on_demand_rounds > 0:
            out["on_demand"] = on_demand(args, env)
            out["watcher_cost"] = watcher_cost(args, env)
            table_on_demand(args, out["on_demand"], out["watcher_cost"])
        print(f"\nThe driver: CUDA {out['driver'].get('cuda_version')}, "
              f"custom storage (CUDA 13.4) "
              f"{'present' if out['driver'].get('custom_storage') else 'absent'}"
              f", THP {out['driver'].get('thp')}.")
        for e in filter(None, args.experiments.split(",")):
            out[e] = {"thp": exp_thp, "parallel": exp_parallel,
                      "numa": exp_numa}[e](args, env)
    finally:
        shutil.rmtree(agents, ignore_errors=True)
        remove_states([env])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=str)


if __name__ == "__main__":
    main()
