"""`gpureclaim top` in a real terminal (tmux, 80x24 unless said) on the
simulated driver, with processes that run the agent (fake Torch holding
cache) and one that does not: the screen's figures are
`ps --explain --json`'s, each key does what its question says (the bytes
released are the drop of the driver's figure), the window resizes, the
terminal is left as it was on q, Ctrl-C, SIGTERM and a crash, NO_COLOR turns
colours off, and without a terminal it prints one reading. Every wait is
for what the screen shows (tmuxkit.py); none measures time."""
import json
import os
import re
import signal
import subprocess
import sys

import pytest

from agentkit import GPR, GiB, MiB, Target, driver_bytes, gpr, sim_env
from conftest import PY_PATH
from tmuxkit import Tmux

sys.path.insert(0, PY_PATH)
from gpureclaim import format_bytes  # noqa: E402  the screen's one rule

#: a target: `cached` MiB of Torch cache, 256 MiB live, and its GPU busy
#: at `busy` percent (the sim's samples: gprsim_busy), or busy then idle
HOLD = """\
import ctypes
t = torch.empty({cached} << 20, dtype=torch.uint8, device="cuda")
keep = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
del t
sim = ctypes.CDLL(os.environ["GPURECLAIM_CUDA_LIBRARY"])
assert sim.gprsim_busy(0, {busy}) == 0
if {then_idle}:
    assert sim.gprsim_busy(0, 0) == 0
"""


def hold(cached, busy=0, then_idle=False):
    return HOLD.format(cached=cached, busy=busy, then_idle=then_idle)


@pytest.fixture
def env():
    e = sim_env(gpus=2)
    e.pop("NO_COLOR", None)
    return e


@pytest.fixture
def three(env):
    """A busy agent with 2 GiB of cache, an idle one with 512 MiB (busy
    once), one without an agent."""
    ts = [Target(env, hold(2048, busy=80)),
          Target(env, hold(512, busy=30, then_idle=True)),
          Target(env, hold(1024), agent=None)]
    yield ts
    for t in ts:
        t.end()


def top(tmp_path, env, *args, cols=80, rows=24, **extra):
    e = dict(env, **{k: str(v) for k, v in extra.items()})
    return Tmux(tmp_path, [GPR, "top", *args], e, cols=cols, rows=rows)


# ---------------- reading the screen ----------------

#: the byte columns, as the header names them, and their keys here
COLUMNS = {"MEMORY": "memory", "RELEASABLE": "releasable", "LIVE": "live",
           "NOT REL.": "not releasable", "WORKSPACES": "workspaces",
           "POOLS": "pools", "REST": "rest"}
ROW = re.compile(r"^\S +\d+ ")


def rows(lines):
    """{pid: {key, user, gpu, memory, releasable, ..., state, command}}
    of the process list: a key, then PID (7), USER (8), GPU (3), a byte
    column of 10 for each the header names, STATE (11), COMMAND."""
    head = next((x for x in lines if x.strip().startswith("PID USER")), "")
    names = [n for n in COLUMNS if f" {n}" in head]
    names.sort(key=head.index)
    out = {}
    for line in lines:
        if not ROW.match(line):
            continue
        r = dict(key=line[0], user=line[10:18].strip(),
                 gpu=int(line[19:22]))
        at = 23
        for n in names:
            r[COLUMNS[n]] = line[at:at + 10].strip()
            at += 11
        r["state"] = line[at:at + 11].strip()
        r["command"] = line[at + 12:]
        out[int(line[2:9])] = r
    return out


def order(lines):
    return [int(x[2:9]) for x in lines if ROW.match(x)]


def details(lines):
    """The selected process's details line: (pid, its text)."""
    m = re.match(r"^(\d+) on GPU \d+: (.*)$", lines[-2])
    return (int(m[1]), m[2]) if m else (None, "")


def answered(*pids):
    """The screen shows each pid's parts (its agent answered)."""
    def test(lines):
        r = rows(lines)
        return all(p in r and r[p]["releasable"] not in ("...", "?", "-")
                   for p in pids)
    return test


def explain_json(env):
    r = gpr(env, "ps", "--explain", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def select(t, pid):
    """Moves the selection to pid's row: to the first row, then down one
    row at a time, each move waited for (the details line names it)."""
    t.keys("Escape", "g")  # the keys' line back, then the first row
    seen = t.wait(lambda ls: order(ls) and details(ls)[0] == order(ls)[0],
                  "the first row selected")
    for _ in range(len(rows(seen))):
        now = details(t.screen())[0]
        if now == pid:
            return
        t.keys("j")
        t.wait(lambda ls: details(ls)[0] != now, "the next row")
    assert details(t.screen())[0] == pid, t.text()


def message(lines):
    """The bottom line's message: a long one takes the details line too."""
    if details(lines)[0] is None and lines[-2].strip():
        return lines[-2].strip() + " " + lines[-1].strip()
    return lines[-1].strip()


def bottom(t):
    return message(t.screen())


# ---------------- the figures ----------------

@pytest.mark.parametrize("cols", [80, 132])
def test_the_screens_figures_are_ps_explain_jsons(tmp_path, env, three,
                                                  cols):
    busy, idle, plain = three
    with top(tmp_path, env, cols=cols) as t:
        t.wait(answered(busy.pid, idle.pid), "both agents' parts")
        # idle once its last work is older than a sample's few seconds
        lines = t.wait(lambda ls: rows(ls)[idle.pid]["state"].startswith(
            "idle "), "the idle one idle")
        doc = explain_json(env)
        shown = rows(lines)
        g0 = doc["gpus"][0]
        names = {"live": "live", "releasable": "releasable",
                 "not releasable": "not_releasable",
                 "workspaces": "workspaces", "pools": "pools",
                 "rest": "rest"}
        for p in g0["processes"]:
            r = shown[p["pid"]]
            assert r["gpu"] == 0
            assert r["memory"] == format_bytes(p["bytes"])
            cells = [k for k in names if k in r]
            assert cells == (list(names) if cols >= 124
                             else ["releasable"])
            for k in cells:
                if p["agent"] is None:
                    assert r[k] == "-"
                else:
                    assert r[k] == format_bytes(
                        p["agent"]["parts"][names[k]])
        assert shown[busy.pid]["state"] == "running 80%"
        assert shown[idle.pid]["state"].startswith("idle ")
        assert set(shown) == {p["pid"] for p in g0["processes"]}
        # the selected process's details line: its parts, by name
        pid, text = details(lines)
        parts = next(p for p in g0["processes"] if p["pid"] == pid)
        assert text == ", ".join(
            f"{k} {format_bytes(parts['agent']['parts'][v])}"
            for k, v in names.items() if parts["agent"]["parts"][v] > 0)
        # the GPU's line: its figures and what a release would return
        title = next(x for x in lines if x.startswith("GPU 0 "))
        assert (f"{format_bytes(g0['used'])} / {format_bytes(g0['total'])}"
                f" used, {format_bytes(g0['free'])} free, "
                f"{format_bytes(g0['releasable'])} releasable") in title
        # and the JSON's activity: the busy one's samples, the other's end
        act = {p["pid"]: p["activity"] for p in g0["processes"]}
        assert act[busy.pid]["sm_util"] == 80
        assert act[idle.pid]["sm_util"] == 30
        assert act[idle.pid]["idle_seconds"] >= 0
        assert act[plain.pid] == {"time": None, "sm_util": None,
                                  "idle_seconds": None}
        # both bars fill the width and no line is longer
        assert all(len(x) <= cols for x in lines)
        bar = next(x for x in lines if x.startswith(" parts ["))
        assert len(bar) == cols and "R" in bar and "?" in bar
        procs = next(x for x in lines if x.startswith(" procs ["))
        for p in (busy, idle, plain):
            assert shown[p.pid]["key"] in procs


def test_a_process_never_busy_is_idle_since_top_began(tmp_path, env):
    with Target(env, hold(64)) as t_, top(tmp_path, env) as t:
        lines = t.wait(lambda ls: rows(ls).get(t_.pid, {}).get(
            "state", "").startswith("idle >"), "idle >N")
        assert rows(lines)[t_.pid]["state"].startswith("idle >")


# ---------------- the keys ----------------

def test_release_key_gives_back_the_drop_of_the_drivers_figure(
        tmp_path, env, three):
    busy, idle, plain = three
    with top(tmp_path, env) as t:
        t.wait(answered(busy.pid, idle.pid), "both agents' parts")
        select(t, busy.pid)
        releasable = next(
            p["agent"]["parts"]["releasable"]
            for p in explain_json(env)["gpus"][0]["processes"]
            if p["pid"] == busy.pid)
        before = driver_bytes(env, busy.pid)[0]
        t.keys("r")
        t.wait_text("y/n")
        q = bottom(t)
        assert q.startswith(f"Release {busy.pid}'s caches: "
                            f"{format_bytes(releasable)} ({releasable} "
                            "bytes)"), q
        assert driver_bytes(env, busy.pid)[0] == before  # asked, not done
        t.keys("y")
        lines = t.wait_text("released")
        m = re.search(rf"{busy.pid} released (\S+ \S+) \((\d+) bytes\)",
                      lines[-1])
        assert m, lines[-1]
        after = driver_bytes(env, busy.pid)[0]
        assert int(m[2]) == before - after == releasable == 2 * GiB
        assert m[1] == format_bytes(int(m[2]))
        # the list follows: a reading after the release shows it
        t.wait(lambda ls: rows(ls).get(busy.pid, {}).get("releasable")
               == "0 B", "the release in the list")


def test_a_question_answered_no_does_nothing(tmp_path, env, three):
    busy = three[0]
    with top(tmp_path, env) as t:
        t.wait(answered(busy.pid), "the agent's parts")
        select(t, busy.pid)
        before = driver_bytes(env, busy.pid)[0]
        t.keys("r")
        t.wait_text("y/n")
        t.keys("n")
        t.wait_text("nothing done")
        assert driver_bytes(env, busy.pid)[0] == before


def test_holders_key_shows_who_holds_the_live_memory(tmp_path, env, three):
    busy = three[0]
    with top(tmp_path, env) as t:
        t.wait(answered(busy.pid), "the agent's parts")
        select(t, busy.pid)
        t.keys("h")
        t.wait_text("y/n")
        assert f"Walk {busy.pid}'s heap for who holds its 256.0 MiB live" \
            in bottom(t)
        t.keys("y")
        lines = t.wait_text("Who holds")
        assert lines[0].startswith(
            f"gpureclaim explain --pid {busy.pid} --holders")
        assert any("del keep" in x for x in lines)
        t.keys("q")  # back to the list, top still runs
        t.wait(answered(busy.pid), "the list again")
        assert not os.path.exists(tmp_path / "rc")


def test_without_an_agent_nothing_is_asked(tmp_path, env):
    """r on a process without an agent says so; R with no agent to ask
    says that."""
    with Target(env, hold(64), agent=None) as plain, top(tmp_path, env) as t:
        t.wait(lambda ls: plain.pid in rows(ls), "the process")
        select(t, plain.pid)
        t.keys("r")
        t.wait_text(f"{plain.pid} runs no agent")
        t.keys("R")
        t.wait_text("reclaim: no process with an agent to ask")


def test_reclaim_key_asks_its_dry_run_first(tmp_path, env, three):
    busy, idle, plain = three
    with top(tmp_path, env) as t:
        t.wait(answered(busy.pid, idle.pid), "both agents' parts")
        before = {p.pid: driver_bytes(env, p.pid)[0] for p in three}
        t.keys("R")
        t.wait_text("y/n")
        want = 2 * GiB + 512 * MiB
        assert bottom(t).startswith(
            f"Reclaim {format_bytes(want)} ({want} bytes) from 2 "
            "processes? y/n"), bottom(t)
        # the dry run released nothing
        assert {p.pid: driver_bytes(env, p.pid)[0] for p in three} == before
        t.keys("y")
        lines = t.wait_text("reclaim released")
        assert (f"reclaim released {format_bytes(want)} ({want} bytes) "
                "from 2 processes") in lines[-1]
        after = {p.pid: driver_bytes(env, p.pid)[0] for p in three}
        assert sum(before.values()) - sum(after.values()) == want
        assert after[plain.pid] == before[plain.pid]


def test_sort_by_what_would_come_back(tmp_path, env, three):
    busy, idle, plain = three
    with top(tmp_path, env) as t:
        t.wait(answered(busy.pid, idle.pid), "both agents' parts")
        # by memory: the process without an agent (1.75 GiB) before the
        # idle one (1.25 GiB) ...
        assert order(t.screen()) == [busy.pid, plain.pid, idle.pid]
        t.keys("s")
        t.wait_text("sort: releasable")
        # ... by what a release would give back: it goes last
        assert order(t.screen()) == [busy.pid, idle.pid, plain.pid]


def test_suspend_and_resume_keys(tmp_path, env):
    """z: suspend --dry-run, its question with the bytes, y: suspended
    (its agent's cache released first, the rest off the GPU: NVML lists
    it no more); the row says so; u: its question, y: resumed, the bytes
    back."""
    with Target(env, hold(512)) as p, top(tmp_path, env) as t:
        t.wait(answered(p.pid), "its agent's parts")
        select(t, p.pid)
        before = driver_bytes(env, p.pid)[0]
        t.keys("z")
        q = message(t.wait(lambda ls: ls[-1].rstrip().endswith("y/n"),
                           "the question"))
        assert q == (f"Suspend {p.pid}: 512.0 MiB cache released, the rest "
                     f"of {format_bytes(before)} ({before} bytes) to host "
                     "memory? y/n"), q
        assert driver_bytes(env, p.pid) == {0: before}  # a dry run
        t.keys("y")
        said = message(t.wait(lambda ls: f"{p.pid} suspended:" in
                              message(ls), "the suspend"))
        m = re.search(r"512\.0 MiB of cache released, then \S+ \S+ "
                      r"\((\d+) bytes\) off the GPU", said)
        assert m, said
        assert int(m[1]) == before - 512 * MiB
        # NVML lists it no more: ps shows it from gpureclaim's record
        assert driver_bytes(env, p.pid) == {0: 0}
        lines = t.wait(lambda ls: rows(ls).get(p.pid, {}).get("state")
                       == "suspended", "the row suspended")
        assert rows(lines)[p.pid]["releasable"] == "-"
        select(t, p.pid)
        text = details(t.screen())[1]
        assert text.startswith(f"suspended: {format_bytes(int(m[1]))} "
                               "released on this GPU, "), text
        t.keys("u")
        q = message(t.wait(lambda ls: ls[-1].rstrip().endswith("y/n"),
                           "the question"))
        assert q.startswith(f"Resume {p.pid}: restore "
                            f"{format_bytes(int(m[1]))} ({m[1]} bytes) on "
                            "the GPU"), q
        t.keys("y")
        said = message(t.wait(lambda ls: f"{p.pid} resumed:" in message(ls),
                              "the resume"))
        assert f"({m[1]} bytes) restored on the GPU" in said, said
        assert driver_bytes(env, p.pid) == {0: before - 512 * MiB}
        t.wait(lambda ls: rows(ls).get(p.pid, {}).get("state", "")
               .startswith(("idle", "running")), "the row running")


# ---------------- a slow agent ----------------

def test_the_screen_never_waits_for_a_slow_agent(tmp_path, env, three):
    busy, idle, plain = three
    os.kill(idle.pid, signal.SIGSTOP)
    try:
        with top(tmp_path, env, "--timeout", "600") as t:
            # the other agent's parts are shown while the stopped one is
            # still being asked (its request ends at the timeout only)
            lines = t.wait(answered(busy.pid), "the answering agent")
            assert rows(lines)[idle.pid]["releasable"] == "..."
            select(t, idle.pid)
            t.wait_text("asking its agent...")
            t.keys("q")
            assert t.exit_status() == 0
    finally:
        os.kill(idle.pid, signal.SIGCONT)


def test_an_agent_that_does_not_answer_in_time_says_why(tmp_path, env,
                                                         three):
    idle = three[1]
    os.kill(idle.pid, signal.SIGSTOP)
    try:
        with top(tmp_path, env, "--timeout", "0.5") as t:
            t.wait(lambda ls: rows(ls).get(idle.pid, {}).get("releasable")
                   == "?",
                   "the timeout")
            select(t, idle.pid)
            t.wait_text("agent: timeout: ")
    finally:
        os.kill(idle.pid, signal.SIGCONT)


# ---------------- the terminal ----------------

def test_resizes_to_the_window(tmp_path, env, three):
    busy = three[0]
    with top(tmp_path, env) as t:
        t.wait(answered(busy.pid), "the agent's parts")
        t.resize(132, 40)
        lines = t.wait_text("NOT REL.")  # every part a column
        assert len(lines) == 40 and max(map(len, lines)) <= 132
        assert len(next(x for x in lines if x.startswith(" parts ["))) == 132
        t.resize(60, 12)
        lines = t.wait(lambda ls: len(ls) == 12 and any(
            x.startswith("GPU 0  [") for x in ls), "a line a GPU")
        assert max(map(len, lines)) <= 60
        assert lines[-1].startswith("r release")
        t.keys("q")
        assert t.exit_status() == 0


@pytest.mark.parametrize("how", ["q", "C-c", "SIGTERM", "SIGHUP"])
def test_every_way_out_gives_the_terminal_back(tmp_path, env, how):
    with top(tmp_path, env) as t:
        t.wait_text("r release")
        assert t.flag("alternate_on") == "1"
        if how.startswith("SIG"):
            t.signal(getattr(signal, how))
        else:
            t.keys(how)
        assert t.exit_status() == 0
        assert t.modes_restored() == (True, "0", "1")
        assert t.stderr() == ""


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGABRT])
def test_a_crash_gives_the_terminal_back(tmp_path, env, sig):
    with top(tmp_path, env) as t:
        t.wait_text("r release")
        t.signal(sig)
        assert t.exit_status() == 128 + sig  # it died of the signal
        assert t.modes_restored() == (True, "0", "1")


SGR_COLOR = re.compile(r"\x1b\[[0-9;]*(3[0-7]|4[0-7]|38;|48;)")


def test_colours_and_no_color(tmp_path, env, three):
    busy = three[0]
    for name, extra, coloured in (("a", {}, True),
                                  ("b", {"NO_COLOR": "1"}, False)):
        (tmp_path / name).mkdir()
        with top(tmp_path / name, env, **extra) as t:
            lines = t.wait(answered(busy.pid), "the agent's parts")
            shown = "\n".join(t.screen(escapes=True))
            assert bool(SGR_COLOR.search(shown)) == coloured, shown
            # the bars are told apart by their letters either way
            parts = next(x for x in lines if x.startswith(" parts ["))
            assert "L" in parts and "R" in parts and "C" in parts


def test_a_gpu_that_cannot_be_read_is_shown_in_place(tmp_path, env):
    e = dict(env, GPURECLAIM_SIM=env["GPURECLAIM_SIM"] + ";fault=broken:1")
    with top(tmp_path, e) as t:
        t.wait_text("GPU 1: error: NVML call failed")
        assert any(x.startswith("GPU 0 Simulated GPU") for x in t.screen())
        t.keys("q")
        assert t.exit_status() == 0


# ---------------- without a terminal ----------------

def test_not_a_terminal_prints_one_reading(env, three):
    busy, idle, plain = three
    p = subprocess.run([GPR, "top"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("gpureclaim top  ")
    shown = rows(lines)
    assert set(shown) == {busy.pid, idle.pid, plain.pid}
    # one reading waits for every agent (each bounded by --timeout)
    assert shown[busy.pid]["releasable"] == format_bytes(2 * GiB)
    assert "no agent: its parts are unknown" in p.stdout
    assert "r release" not in p.stdout and "\x1b" not in p.stdout
    assert all(len(x) <= 80 for x in lines)


def test_json_is_ps_explain_jsons_document(env, three):
    a = json.loads(gpr(env, "top", "--json").stdout)
    b = explain_json(env)
    for d in (a, b):
        d.pop("time"), d.pop("unix_time")
        for g in d["gpus"]:
            for p in g["processes"]:
                p["activity"].pop("idle_seconds")
                if p["activity"]["time"] and p["activity"]["sm_util"] == 80:
                    p["activity"].pop("time")  # busy: stamped now
    assert a == b


def test_where_nvml_cannot_sample_processes_they_are_running(env):
    """MIG: NVML has no per-process utilization; the state says only that
    the process runs, the JSON's activity is null."""
    e = dict(env, GPURECLAIM_SIM=env["GPURECLAIM_SIM"] + ";fault=mig")
    with Target(e, hold(64)) as t_:
        a = json.loads(gpr(e, "top", "--json").stdout)
        [p] = [p for g in a["gpus"] for p in g["processes"]
               if p["pid"] == t_.pid]
        assert p["activity"] is None
        text = gpr(e, "top").stdout.splitlines()
        assert rows(text)[t_.pid]["state"] == "running"


def test_an_unknown_terminal_is_one_line(tmp_path, env):
    # tmux sets the pane's TERM: set it after
    argv = ["env", "TERM=no-such-terminal", GPR, "top"]
    with Tmux(tmp_path, argv, env) as t:
        assert t.exit_status() == 1
        err = t.stderr()
        assert err.startswith("gpureclaim top: cannot use this terminal "
                              "(TERM=no-such-terminal)"), err
        assert err.count("\n") == 1
        assert t.modes_restored()[0]


def test_no_driver_is_one_line(tmp_path, env):
    e = dict(env, GPURECLAIM_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1")
    r = gpr(e, "top")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("gpureclaim: NVIDIA driver not found")
    with top(tmp_path, e) as t:
        assert t.exit_status() == 1
        assert t.stderr().startswith("gpureclaim: NVIDIA driver not found")
        assert t.modes_restored() == (True, "0", "1")


@pytest.mark.parametrize("args,says", [
    (["-d", "0"], "--interval needs a number of seconds"),
    (["--interval", "1e3"], "--interval needs a number of seconds"),
    (["-i", "x"], "-i/--gpu needs GPU indexes"),
    (["--color=pink"], "--color takes always, never or auto"),
    (["extra"], "unexpected argument 'extra'"),
    (["--bogus"], "unknown option '--bogus'"),
])
def test_usage_errors(env, args, says):
    r = gpr(env, "top", *args)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith(f"gpureclaim top: {says}")
    assert r.stderr.endswith("Run 'gpureclaim top --help' for the "
                             "options.\n")


def test_help(env):
    a = gpr(env, "top", "--help")
    b = gpr(env, "help", "top")
    assert a.returncode == b.returncode == 0
    assert a.stdout == b.stdout and a.stdout.startswith("USAGE: gpureclaim "
                                                        "top")
    assert "top" in gpr(env, "--help").stdout
