"""`gpureclaim top`'s two targets (issue 37) on a big simulated node: 16
GPUs x 64 processes (64 `sleep` processes listed on every GPU through the
sim's `extra`: 1,024 rows, each with its user and command from /proc),
plus AGENTS processes of the test suite's fake Torch that run the agent,
each holding CACHE_MIB of cache on GPU 0. On the simulated driver
anywhere (on the GPU machine too: the node is simulated either way).

1. A refresh costs no more than one `ps --explain` of the same node.
   ROUNDS interleaved rounds (ABBA: a drift favours neither), each one
   `gpureclaim ps --explain` (its wall time, and its CPU time, user and
   system, from wait4) and one `gpureclaim top -d 0.2` in a 132x50
   pseudo-terminal for RUN_S seconds, quit with q, its own profile read
   (GPURECLAIM_TOP_PROFILE, docs/top.md): per refresh, the reading's wall
   time (NVML, /proc, the GPU work: what a refresh waits for; the agents
   are asked in threads and answer into later screens) and the whole
   process's CPU time divided by its refreshes (the reading, every
   agent's request and answer, every screen drawn: what a refresh
   costs the machine). Target: both at most ps --explain's (its wall
   time, its CPU time), medians.
2. A key answers within 100 ms of the agent's own work. In a real
   terminal (tmux, tests/python/tmuxkit.py), ROUNDS times: every target's
   cache refilled (untimed), the list sorted by what would come back (s),
   the first process selected, r, then y; top's profile times from the y
   to the screen that shows the outcome, and the agent's answer says how
   long its release took in the process (release_seconds). Target: that
   time minus the agent's at most 100 ms, medians (and each round's).

Medians and minimums, us, and the ratios. bench/RESULTS.md keeps runs.

Usage: python3 bench/top_bench.py [ROUNDS] (>= 7, default 9; make first)
"""
import os
import pathlib
import pty
import select
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid

import fcntl
import termios

from benchenv import child_env, remove_states

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))
from agent_bench import PKG, GPR, start_agents  # noqa: E402
from tmuxkit import Tmux  # noqa: E402

GPUS, PROCS = 16, 64
AGENTS = 16
CACHE_MIB = 256
RUN_S = 3.0


def us(xs):
    return (f"median {statistics.median(xs) * 1e6:10.0f} us, "
            f"min {min(xs) * 1e6:10.0f} us")


def profile(err):
    """top's profile lines (GPURECLAIM_TOP_PROFILE) as a dict."""
    out = {"acts": []}
    for line in err.splitlines():
        w = line.split()
        if not w or w[0] != "top-profile":
            continue
        if w[1] == "rounds":
            out["rounds"], out["publishes"] = int(w[2]), int(w[4])
        elif w[1] == "round_ms":
            out["round_ms"] = [float(x) for x in w[2:]]
        elif w[1] == "draws":
            out["draws"], out["cpu_ms"] = int(w[2]), float(w[4])
        elif w[1] == "draw_ms":
            out["draw_ms"] = [float(x) for x in w[2:]]
        elif w[1] == "act":
            out["acts"].append((int(w[2]), float(w[3]), float(w[4])))
    return out


def ps_explain(env):
    """(wall s, CPU s) of one `gpureclaim ps --explain`."""
    t0 = time.perf_counter()
    p = subprocess.Popen([GPR, "ps", "--explain"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read()
    p.stderr.close()
    assert p.returncode == 0, err
    return wall, ru.ru_utime + ru.ru_stime


def top_run(env):
    """One top in a 132x50 pseudo-terminal for RUN_S s: its profile."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 132, 0,
                                                       0))
    e = dict(env, GPURECLAIM_TOP_PROFILE="1", TERM="xterm-256color")
    p = subprocess.Popen([GPR, "top", "-d", "0.2"], env=e, stdin=slave,
                         stdout=slave, stderr=subprocess.PIPE,
                         start_new_session=True)
    os.close(slave)
    end = time.monotonic() + RUN_S
    quit_sent = False
    while True:
        if not quit_sent and time.monotonic() > end:
            os.write(master, b"q")
            quit_sent = True
        r, _, _ = select.select([master], [], [], 0.05)
        if r:
            try:
                if not os.read(master, 1 << 16):
                    break
            except OSError:
                break
        elif p.poll() is not None:
            break
    err = p.stderr.read().decode()
    p.stderr.close()
    assert p.wait(60) == 0, err
    os.close(master)
    return profile(err)


def bench_refresh(env, rounds):
    ps_wall, ps_cpu, rd_wall, rd_cpu = [], [], [], []
    for r in range(rounds):
        for which in (("ps", "top") if r % 2 == 0 else ("top", "ps")):
            if which == "ps":
                w, c = ps_explain(env)
                ps_wall.append(w)
                ps_cpu.append(c)
                continue
            prof = top_run(env)
            n = prof["rounds"]
            rd_wall.append(statistics.median(prof["round_ms"]) / 1e3)
            rd_cpu.append(prof["cpu_ms"] / 1e3 / n)
    print(f"1. a refresh of top against one ps --explain, {GPUS} GPUs x "
          f"{PROCS} processes + {AGENTS} agents ({rounds} rounds)")
    print(f"   ps --explain, wall          {us(ps_wall)}")
    print(f"   ps --explain, CPU           {us(ps_cpu)}")
    print(f"   top refresh: reading, wall  {us(rd_wall)}")
    print(f"   top refresh: CPU            {us(rd_cpu)}")
    walls = statistics.median(rd_wall) / statistics.median(ps_wall)
    cpus = statistics.median(rd_cpu) / statistics.median(ps_cpu)
    print(f"   ratios (medians): wall {walls:.2f}x, CPU {cpus:.2f}x; mins: "
          f"wall {min(rd_wall) / min(ps_wall):.2f}x, "
          f"CPU {min(rd_cpu) / min(ps_cpu):.2f}x")
    ok = walls <= 1 and cpus <= 1
    print(f"   target: a refresh <= one ps --explain: "
          f"{'met' if ok else 'MISSED'}")


def bench_keys(env, ts, rounds):
    with tempfile.TemporaryDirectory(prefix="gpr-topbench-") as d:
        e = dict(env, GPURECLAIM_TOP_PROFILE="1")
        with Tmux(d, [GPR, "top"], e, cols=132, rows=50) as t:
            t.wait(lambda ls: any(" MiB " in x and "python" in x
                                  for x in ls), "an agent's parts")
            t.keys("s")
            t.wait_text("sort: releasable")
            for r in range(rounds):
                for x in ts:
                    x.fill(CACHE_MIB)
                # the list's first process shows its cache again
                t.wait(lambda ls: any(x.startswith("a ") and
                                      f" {CACHE_MIB}.0 MiB" in x
                                      for x in ls), "the refill")
                t.keys("g")
                t.keys("r")
                t.wait(lambda ls: ls[-1].rstrip().endswith("y/n"),
                       "the question")
                t.keys("y")
                t.wait(lambda ls: " released " in ls[-1], "the release")
                t.keys("Escape")
            t.keys("q")
            assert t.exit_status() == 0, t.stderr()
            prof = profile(t.stderr())
    acts = [(ms / 1e3, agent) for kind, ms, agent in prof["acts"]
            if kind == 1]  # GPR_CLI_TOP_RELEASE
    assert len(acts) == rounds, prof["acts"]
    key = [k for k, _ in acts]
    own = [a for _, a in acts]
    over = [k - a for k, a in acts]
    print(f"2. the release key: from y to the outcome on the screen "
          f"({rounds} rounds, {CACHE_MIB} MiB each)")
    print(f"   key to screen               {us(key)}")
    print(f"   the agent's own release     {us(own)}")
    print(f"   key minus the agent's       {us(over)}")
    ok = statistics.median(over) <= 0.1
    worst = max(over)
    print(f"   target: within 100 ms of the agent's own work: "
          f"{'met' if ok else 'MISSED'} (median "
          f"{statistics.median(over) * 1e3:.1f} ms, worst "
          f"{worst * 1e3:.1f} ms)")


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    if rounds < 7:
        sys.exit("top_bench: at least 7 rounds")
    sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(PROCS)]
    state = "topbench-" + uuid.uuid4().hex[:8]
    agents = tempfile.mkdtemp(prefix="gpr-agents-")
    env = child_env(PKG, True, state, GPURECLAIM_BIN=GPR,
                    GPURECLAIM_AGENT_DIR=agents)
    extra = ",".join(f"{g}:{p.pid}:{64 + i}MiB" for g in range(GPUS)
                     for i, p in enumerate(sleepers))
    env["GPURECLAIM_SIM"] = (f"gpus={GPUS};memory=200GiB;state={state};"
                             f"extra={extra}")
    # the simulated driver of the command's own build (build/gpu/sim on
    # the GPU machine), else the checkout's build/sim
    sim = pathlib.Path(GPR).resolve().parents[1] / "sim"
    if (sim / "libnvidia-ml.so.1").exists():
        env["GPURECLAIM_CUDA_LIBRARY"] = str(sim / "libcuda.so.1")
        env["GPURECLAIM_NVML_LIBRARY"] = str(sim / "libnvidia-ml.so.1")
    ts = []
    try:
        ts = start_agents(env, AGENTS)
        for t in ts:
            t.fill(CACHE_MIB)
        print(f"top bench: simulated driver, {GPUS} GPUs x {PROCS} "
              f"processes, {AGENTS} agents (fake Torch), {rounds} rounds")
        bench_refresh(env, rounds)
        if shutil.which("tmux"):
            bench_keys(env, ts, rounds)
        else:
            print("2. the release key: skipped (needs tmux)")
    finally:
        for t in ts:
            t.end()
        for s in sleepers:
            s.kill()
            s.wait()
        shutil.rmtree(agents, ignore_errors=True)
        remove_states([env])


if __name__ == "__main__":
    main()
