"""`gpureclaim suspend` and `gpureclaim resume` on the simulated driver
(docs/suspend.md), whose checkpoint API moves a process's device memory
into its own host memory for real (its VmRSS grows) and takes it off
NVML's lists: the exact bytes, ps, the records, every refusal, a failed
restore, the agent's release first. Times are never measured against the
machine: where a time is checked it is a lower bound the sim's copy rate
sets."""
import json
import os
import pathlib
import platform
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import BIN, FAKES_BUILD, HANG_S, MiB, ROOT, SIM_DIR

CONTEXT = 16 * MiB
LIVE = 64 * MiB
FIGURE = CONTEXT + LIVE  # NVML's figure of a sim_alloc holding LIVE
# host bytes are the growth of the process's resident memory: the copy,
# and whatever else it touched meanwhile (a page or so; its Python a few
# MiB when its agent answers)
SLACK = 1 * MiB


def about(v, want, slack=SLACK):
    return want <= v <= want + slack


@pytest.fixture
def env(sim, tmp_path):
    """The sim with a small context, and a records folder of the test's
    own (the agent's folder rule: GPURECLAIM_AGENT_DIR)."""
    sim.configure("context=16MiB")
    d = tmp_path / "run"
    d.mkdir(mode=0o700)
    os.chmod(d, 0o700)
    sim.agent_dir = d
    return sim


def environ(sim, **extra):
    return sim.env(GPURECLAIM_AGENT_DIR=sim.agent_dir, **extra)


def run(sim, *args, **extra):
    return sim.run(*args, env=environ(sim, **extra), timeout=HANG_S)


def ps(sim, **extra):
    r = run(sim, "ps", "--json", **extra)
    assert r.rc == 0, r
    return r.json()


def proc_in(doc, pid, gpu=0):
    g = doc["gpus"][gpu]
    found = [p for p in g["processes"] if p["pid"] == pid]
    return found[0] if found else None


def ok(r):
    assert r.rc == 0, r
    doc = r.json()
    assert len(doc["processes"]) == 1 and doc["processes"][0]["ok"], doc
    return doc["processes"][0]


def refused(r, *words):
    assert r.rc == 1, r
    for w in words:
        assert w in r.err, (w, r)
    return r.err


def rss(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def records(env):
    """The records in the folder (its actions' log and locks are not)."""
    d = env.agent_dir / "suspended"
    return sorted(p.name for p in d.iterdir()
                  if p.name.endswith(".suspended")) if d.exists() else []


def ask(child, line):
    """One command to a sim_alloc child and its answer."""
    child.stdin.write(line + "\n")
    child.stdin.flush()
    return child.stdout.readline().strip()


FUTEX = {"x86_64": 202, "aarch64": 98}.get(platform.machine())


def waiting_in_futex(pid):
    """The main thread of pid is in a futex wait: a sim call waiting for
    the checkpoint's unlock (it was reading its stdin before)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/syscall") as f:
            return f.read().split()[0] == str(FUTEX)
    except (OSError, IndexError):
        return False


def wait_for(test, what):
    end = time.monotonic() + HANG_S
    while not test():
        assert time.monotonic() < end, f"never {what}"
        time.sleep(0.01)


# -- the main path ----------------------------------------------------------


def test_suspend_gives_back_the_exact_bytes_and_resume_takes_them_back(env):
    child = env.spawn_alloc(0, LIVE)
    before = ps(env)
    assert proc_in(before, child.pid)["bytes"] == FIGURE
    used = before["gpus"][0]["used"]
    rss0 = rss(child.pid)

    # resumed by hand below, after a call that waits: no watcher
    s = ok(run(env, "suspend", "--pid", str(child.pid), "--json",
               "--resume", "manual"))
    # the GPU got back the drop of NVML's figure: all of it, the process
    # left the list, and the GPU's used memory fell by exactly that
    assert s["released"] == FIGURE and s["state"] == "suspended"
    g = s["gpus"][0]
    assert (g["before"], g["after"], g["released"]) == (FIGURE, 0, FIGURE)
    assert g["listed_after"] is False
    assert g["used_before"] - g["used_after"] == FIGURE == used - g["used_after"]
    # host memory holds the device memory (not the context): its VmRSS
    assert about(s["host_bytes"], LIVE)
    assert about(rss(child.pid) - rss0, LIVE)
    assert s["recorded"] is True and s["need"] == FIGURE

    # ps lists it though NVML no longer does, with the driver's state
    during = ps(env)
    p = proc_in(during, child.pid)
    assert p["state"] == "suspended" and p["bytes"] == 0
    assert p["released"] == FIGURE and p["host_bytes"] == s["host_bytes"]
    assert during["gpus"][0]["used"] == used - FIGURE
    text = run(env, "ps", "--color=never").out
    assert re.search(r"<suspended: 80\.0 MiB released, 64\.\d MiB in host "
                     r"memory>", text), text

    # a CUDA call made while it is suspended waits, then goes on
    child.stdin.write(f"alloc {2 * MiB}\n")
    child.stdin.flush()
    if FUTEX is not None:
        wait_for(lambda: waiting_in_futex(child.pid), "waited in the sim")
    r = ok(run(env, "resume", "--pid", str(child.pid), "--json"))
    assert r["restored"] == FIGURE and about(r["host_freed"], LIVE - SLACK)
    assert r["state"] == "running" and r["suspended_seconds"] >= 0
    answer = child.stdout.readline().strip()
    if FUTEX is not None:  # seen waiting: counted as a call that waited
        assert answer == "alloc 0 blocked=1", answer
    assert answer.startswith("alloc 0 "), answer
    after = ps(env)
    assert proc_in(after, child.pid)["bytes"] == FIGURE + 2 * MiB
    assert proc_in(after, child.pid)["state"] == "alive"
    assert not records(env)


def test_the_text_says_what_moved_where_and_how_fast(env):
    env.configure("context=16MiB;checkpoint_rate=256MiB;restore_rate=512MiB")
    child = env.spawn_alloc(0, LIVE)
    r = run(env, "suspend", "--pid", str(child.pid))
    assert r.rc == 0, r
    assert f"Suspended process {child.pid} (" in r.out
    assert re.search(r"moved 64\.\d MiB of data to host memory", r.out), r
    assert "released 80.0 MiB on the GPU: GPU 0 80.0 MiB" in r.out
    assert "NVML no longer lists the process" in r.out
    assert f"gpureclaim resume --pid {child.pid} brings it back" in r.out
    assert "has no agent" in r.out  # a note, not an error
    # the sim copies at its configured rate: a lower bound, never a race
    j = ok(run(env, "resume", "--pid", str(child.pid), "--json"))
    assert j["seconds"]["restore"] >= LIVE / (512 * MiB)
    s = ok(run(env, "suspend", "--pid", str(child.pid), "--json",
               "--no-release"))
    assert s["seconds"]["checkpoint"] >= LIVE / (256 * MiB)
    assert 0 < s["gib_per_s"] <= 0.25 + 1e-9
    assert s["agent"] is None and s["cache_released"] is None
    r = run(env, "resume", "--pid", str(child.pid))
    assert r.rc == 0, r
    assert f"Resumed process {child.pid} (" in r.out and "suspended for" in r.out
    assert "80.0 MiB back on the GPU: GPU 0 80.0 MiB" in r.out
    assert re.search(r"6[34]\.\d MiB of host memory freed", r.out), r


def test_two_suspends_in_a_row(env):
    child = env.spawn_alloc(0, LIVE, 32 * MiB)
    for _ in range(2):
        s = ok(run(env, "suspend", "--pid", str(child.pid), "--json"))
        assert s["released"] == FIGURE + 32 * MiB
        assert about(s["host_bytes"], LIVE + 32 * MiB)
        r = ok(run(env, "resume", "--pid", str(child.pid), "--json"))
        assert r["restored"] == FIGURE + 32 * MiB
        assert proc_in(ps(env), child.pid)["bytes"] == FIGURE + 32 * MiB
        assert ask(child, f"alloc {2 * MiB}") == "alloc 0 blocked=0"
        assert ask(child, "free") == "free 0"


def test_several_pids_one_after_the_other(env):
    a, b = env.spawn_alloc(0, LIVE), env.spawn_alloc(0, 32 * MiB)
    r = run(env, "suspend", "--pid", f"{a.pid},{b.pid}", "--json")
    assert r.rc == 0, r
    got = {p["pid"]: p["released"] for p in r.json()["processes"]}
    assert got == {a.pid: FIGURE, b.pid: CONTEXT + 32 * MiB}
    assert ps(env)["gpus"][0]["used"] == 0
    r = run(env, "resume", "--pid", str(a.pid), "--pid", str(b.pid))
    assert r.rc == 0 and r.out.count("Resumed process") == 2, r


def test_dry_run_says_what_would_move_and_locks_nothing(env):
    child = env.spawn_alloc(0, LIVE)
    r = run(env, "suspend", "--pid", str(child.pid), "--dry-run")
    assert r.rc == 0, r
    assert "can be suspended: 80.0 MiB would move" in r.out
    assert "host memory:" in r.out and "kept free" in r.out
    j = ok(run(env, "suspend", "--pid", str(child.pid), "--dry-run", "--json"))
    assert j["need"] == FIGURE and j["host"]["mem_available"] > 0
    assert j["released"] is None and j["state"] == "running"
    assert proc_in(ps(env), child.pid)["bytes"] == FIGURE
    assert ask(child, f"alloc {2 * MiB}") == "alloc 0 blocked=0"
    r = run(env, "resume", "--pid", str(child.pid), "--dry-run")
    assert r.rc == 1 and "would not be resumed" in r.out, r


# -- the agent first --------------------------------------------------------

AGENT_TARGET = """\
import os, sys, torch
live = torch.empty(48 << 20, dtype=torch.uint8, device="cuda")
dropped = torch.empty(32 << 20, dtype=torch.uint8, device="cuda")
del dropped  # cached by fake Torch: the driver still counts it
print("ready", os.getpid(), flush=True)
sys.stdin.read()
"""


def agent_target(env, src=AGENT_TARGET):
    """A fake-Torch program with its agent, started as a user starts it
    (docs/agent.md; run execs the program), once its agent listens."""
    py = os.environ.get("PYTHONPATH", str(ROOT / "build/python"))
    build_py = py.split(os.pathsep)[0]
    fakes = str(ROOT / "tests/python/fakes")
    e = environ(env, PYTHONPATH=os.pathsep.join([build_py, fakes]),
                GPR_FAKES_BUILD=FAKES_BUILD, PYTHONDONTWRITEBYTECODE="1")
    target = subprocess.Popen([str(BIN), "run", "--agent", "--",
                               sys.executable, "-c", src], env=e,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    env.children.append(target)
    line = target.stdout.readline()
    assert line.startswith("ready"), line
    sock = env.agent_dir / f"{target.pid}.sock"
    wait_for(sock.exists, "an agent's socket")
    return target


@pytest.mark.skipif(bool(os.environ.get("GPR_SANITIZED")),
                    reason="the agent's Python cannot import a sanitized "
                           "build's extension (the gcc build runs it)")
def test_the_agent_releases_the_cache_first(env):
    target = agent_target(env)
    figure = proc_in(ps(env), target.pid)["bytes"]
    r = run(env, "suspend", "--pid", str(target.pid), "--json")
    s = ok(r)
    assert s["agent"] == "released" and s["cache_released"] == 32 * MiB
    assert s["released"] == figure - 32 * MiB
    # its resident memory grew by the live data, and by what its Python
    # touched meanwhile (the agent's answer): a few MiB at most
    assert about(s["host_bytes"], 48 * MiB, 8 * MiB), s
    ok(run(env, "resume", "--pid", str(target.pid), "--json"))
    # once more in words, after the cache it had is gone
    r = run(env, "suspend", "--pid", str(target.pid))
    assert r.rc == 0, r
    assert "released 0 B of cache, then moved " in r.out, r
    assert " of live data to host memory" in r.out, r
    ok(run(env, "resume", "--pid", str(target.pid), "--json"))


# -- refusals: nothing is locked --------------------------------------------


def still_running(env, child):
    """Nothing happened to it: listed with its figure, calls go through."""
    assert proc_in(ps(env), child.pid)["bytes"] == FIGURE
    assert ask(child, f"alloc {2 * MiB}") == "alloc 0 blocked=0"
    assert ask(child, "free") == "free 0"
    r = run(env, "resume", "--pid", str(child.pid))
    assert "is running, not suspended" in r.err, r


def test_refused_when_host_memory_cannot_hold_it(env, tmp_path):
    child = env.spawn_alloc(0, LIVE)
    meminfo = tmp_path / "meminfo"
    # 1 GiB is kept free at least: 50 MiB may be filled, 80 would move
    meminfo.write_text("MemTotal:        4194304 kB\n"
                       "MemFree:          100000 kB\n"
                       "MemAvailable:    1099776 kB\n")
    r = run(env, "suspend", "--pid", str(child.pid),
            GPURECLAIM_TEST_MEMINFO=meminfo)
    refused(r, "host memory cannot hold it: 80.0 MiB to move, 1.0 GiB "
            "available of which 1.0 GiB is kept free")
    r = run(env, "suspend", "--pid", str(child.pid), "--dry-run",
            GPURECLAIM_TEST_MEMINFO=meminfo)
    assert r.rc == 1 and "would not be suspended" in r.out, r
    still_running(env, child)


def memory_cgroup(pid):
    """pid's memory cgroup: (version, path), as the command reads it."""
    lines = pathlib.Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    for line in lines:
        _, ctl, path = line.split(":", 2)
        if "memory" in ctl.split(","):
            return 1, path
    return 2, [line.split(":", 2)[2] for line in lines
               if line.startswith("0::")][0]


def test_refused_when_its_memory_cgroup_cannot_hold_it(env, tmp_path):
    child = env.spawn_alloc(0, LIVE)
    version, path = memory_cgroup(child.pid)
    root = tmp_path / "cgroup"
    d = root / ("memory" if version == 1 else "") / path.lstrip("/")
    d.mkdir(parents=True)
    limit, usage = ("memory.limit_in_bytes", "memory.usage_in_bytes") \
        if version == 1 else ("memory.max", "memory.current")
    (d / limit).write_text(f"{1024 * MiB}\n")
    (d / usage).write_text(f"{900 * MiB}\n")
    r = run(env, "suspend", "--pid", str(child.pid),
            GPURECLAIM_TEST_CGROUP_FS=root)
    shown = path if path != "/" else "/"
    refused(r, f"its memory cgroup {shown} cannot hold it: 80.0 MiB to move,"
            " 124.0 MiB free under its limit of 1.0 GiB")
    # its inactive page cache counts as free: the kernel reclaims it first
    key = "total_inactive_file" if version == 1 else "inactive_file"
    (d / "memory.stat").write_text(f"{key} {400 * MiB}\n")
    s = ok(run(env, "suspend", "--pid", str(child.pid), "--json",
               GPURECLAIM_TEST_CGROUP_FS=root))
    assert s["host"]["cgroup"] == shown and s["released"] == FIGURE
    ok(run(env, "resume", "--pid", str(child.pid), "--json"))


def world_copy():
    """The command and the sim where every user may run them (the clone
    may lie in a private folder)."""
    d = pathlib.Path(tempfile.mkdtemp(prefix="gpr-suspend-"))
    os.chmod(d, 0o755)
    for src in (BIN, SIM_DIR / "libcuda.so.1", SIM_DIR / "libnvidia-ml.so.1"):
        shutil.copy(src, d / src.name)
        os.chmod(d / src.name, 0o755)
    return d


def test_refused_for_another_users_process(env):
    if os.geteuid() != 0:
        # pid 1 is root's: refused before the driver is asked
        for cmd in ("suspend", "resume"):
            r = run(env, cmd, "--pid", "1")
            refused(r, "process 1 belongs to uid 0; only that user and root "
                    f"may {cmd} it")
        return
    child = env.spawn_alloc(0, LIVE)
    d = world_copy()
    try:
        e = environ(env, GPURECLAIM_CUDA_LIBRARY=d / "libcuda.so.1",
                    GPURECLAIM_NVML_LIBRARY=d / "libnvidia-ml.so.1")
        e["GPURECLAIM_AGENT_DIR"] = str(d / "nobody")

        def nobody():
            os.setgid(65534)
            os.setuid(65534)

        for cmd in ("suspend", "resume"):
            p = subprocess.run([str(d / "gpureclaim"), cmd, "--pid",
                                str(child.pid)], env=e, capture_output=True,
                               text=True, preexec_fn=nobody, timeout=HANG_S)
            assert p.returncode == 1, p
            assert (f"process {child.pid} belongs to uid 0; only that user "
                    f"and root may {cmd} it") in p.stderr, p.stderr
    finally:
        shutil.rmtree(d)
    still_running(env, child)


@pytest.mark.parametrize("kind", ["--managed", "--ipc"])
def test_the_driver_refuses_managed_and_ipc_memory_and_it_goes_on(env, kind):
    child = env.spawn_alloc(0, kind, LIVE)
    r = run(env, "suspend", "--pid", str(child.pid))
    refused(r, f"process {child.pid} was not suspended: the driver cannot "
            "checkpoint this process: it holds memory the driver cannot move",
            "CUDA_ERROR_NOT_SUPPORTED", "it was unlocked and goes on running")
    still_running(env, child)


def test_a_driver_without_the_checkpoint_api_says_which_is_needed(env):
    old = FAKES_BUILD / "libold_cuda.so"
    r = run(env, "suspend", "--pid", "1", GPURECLAIM_CUDA_LIBRARY=old)
    refused(r, "this NVIDIA driver (580.0-sim, CUDA 12.4) has no checkpoint "
            "API (cuCheckpointProcessGetState missing): suspend and resume "
            "need NVIDIA driver 570 or later")
    assert r.err.count("\n") == 1, r
    r = run(env, "resume", "--pid", "1", GPURECLAIM_CUDA_LIBRARY=old)
    refused(r, "need NVIDIA driver 570 or later")


def test_a_lock_that_times_out_leaves_it_running(env):
    env.configure("context=16MiB;fault=lock-timeout")
    child = env.spawn_alloc(0, LIVE)
    r = run(env, "suspend", "--pid", str(child.pid), "--lock-timeout", "0.2")
    refused(r, f"process {child.pid} was not locked: its CUDA calls did not "
            "stop in time", "it is running, nothing was moved")
    still_running(env, child)


def test_a_controller_the_driver_refuses(env):
    child = env.spawn_alloc(0, LIVE)
    r = run(env, "suspend", "--pid", str(child.pid),
            GPURECLAIM_SIM=f"context=16MiB;fault=checkpoint-denied;"
                           f"state={env.state}")
    refused(r, "the driver does not let this user checkpoint it",
            "CUDA_ERROR_NOT_PERMITTED")
    still_running(env, child)


def test_a_checkpoint_the_driver_fails_is_said_to_be_lost(env):
    env.configure("context=16MiB;fault=checkpoint-fails")
    child = env.spawn_alloc(0, LIVE)
    r = run(env, "suspend", "--pid", str(child.pid))
    refused(r, "the driver left it in state failed: its GPU state is lost "
            "and it must be restarted")
    r = run(env, "resume", "--pid", str(child.pid))
    refused(r, f"a checkpoint or restore of process {child.pid} failed")
    assert not records(env)
    child.kill()  # its calls would wait forever


def test_what_is_not_suspendable_is_refused_in_one_line(env):
    child = env.spawn_alloc(0, LIVE)
    sleeper = env.spawn_sleeper()
    for args, words in [
        (["--pid", str(sleeper.pid)], "knows no CUDA state of process"),
        (["--pid", "999999999"], "process 999999999 does not exist"),
    ]:
        r = run(env, "suspend", *args)
        refused(r, words)
        assert r.err.count("\n") == 1, r
    ok(run(env, "suspend", "--pid", str(child.pid), "--json"))
    r = run(env, "suspend", "--pid", str(child.pid))
    refused(r, f"process {child.pid} is suspended already (gpureclaim resume "
            f"--pid {child.pid} brings it back)")
    ok(run(env, "resume", "--pid", str(child.pid), "--json"))
    r = run(env, "suspend", "--pid", str(os.getpid()))
    refused(r, "knows no CUDA state")


def test_usage(env):
    for args, words in [
        (["suspend"], "--pid needs a process id"),
        (["suspend", "--pid", "x"], "--pid needs process ids"),
        (["suspend", "--pid", "0"], "--pid needs process ids"),
        (["resume", "--pid", "1", "--no-release"], "are suspend's"),
        (["suspend", "--pid", "1", "--bogus"], "unknown option"),
        (["suspend", "--pid", "1", "--timeout", "-1"], "the timeout needs"),
    ]:
        r = run(env, *args)
        assert r.rc == 2 and words in r.err and not r.out, (args, r)
    for cmd in ("suspend", "resume"):
        r = run(env, cmd, "--help")
        assert r.rc == 0 and r.out.startswith(f"USAGE: gpureclaim {cmd}"), r
        assert run(env, "help", cmd).out == r.out


# -- records ----------------------------------------------------------------


def record_of(env, pid):
    return env.agent_dir / "suspended" / f"{pid}.suspended"


def start_of(pid):
    stat_ = pathlib.Path(f"/proc/{pid}/stat").read_text()
    return int(stat_.rsplit(")", 1)[1].split()[19])


def plant(env, pid, start):
    d = env.agent_dir / "suspended"
    d.mkdir(mode=0o700, exist_ok=True)
    os.chmod(d, 0o700)
    p = d / f"{pid}.suspended"
    p.write_text(f"gpureclaim-suspended 1\npid {pid}\nstart {start}\n"
                 f"uid {os.getuid()}\ntime 1.000\nhost_bytes {LIVE}\n"
                 f"gpu 0 - {FIGURE}\n")
    os.chmod(p, 0o600)
    return p


def test_a_record_of_a_pid_used_again_is_never_taken_for_it(env):
    child = env.spawn_alloc(0, LIVE)
    rec = plant(env, child.pid, start_of(child.pid) + 1)
    p = proc_in(ps(env), child.pid)
    assert p["state"] == "alive" and p["bytes"] == FIGURE
    assert p["released"] is None and p["host_bytes"] is None
    assert not rec.exists()  # removed: another process's
    plant(env, child.pid, start_of(child.pid) + 1)
    r = run(env, "resume", "--pid", str(child.pid))
    refused(r, "is running, not suspended")
    assert "the record of an earlier process" in r.err
    assert not rec.exists()
    # a record of a process that is gone goes too
    gone = plant(env, 999999999, 1)
    ps(env)
    assert not gone.exists()


def test_a_record_of_a_process_running_again_is_removed(env):
    child = env.spawn_alloc(0, LIVE)
    rec = plant(env, child.pid, start_of(child.pid))
    p = proc_in(ps(env), child.pid)
    assert p["state"] == "alive" and p["released"] is None
    assert not rec.exists()


def test_a_record_is_read_only_when_it_is_one(env):
    child = env.spawn_alloc(0, LIVE)
    ok(run(env, "suspend", "--pid", str(child.pid), "--json"))
    rec = record_of(env, child.pid)
    good = rec.read_text()
    assert good.startswith("gpureclaim-suspended 1\n")
    for bad in [good.replace("pid ", "pid x"), good[:-1], good + "extra 1\n",
                "x" * 9000]:
        rec.write_text(bad)
        assert proc_in(ps(env), child.pid) is None  # never trusted
    rec.unlink()
    os.symlink("/etc/passwd", rec)
    assert proc_in(ps(env), child.pid) is None
    rec.unlink()
    rec.write_text(good)
    assert proc_in(ps(env), child.pid)["state"] == "suspended"
    # the folder open to others is not used: nothing is read or written
    os.chmod(env.agent_dir / "suspended", 0o755)
    assert proc_in(ps(env), child.pid) is None
    r = ok(run(env, "resume", "--pid", str(child.pid), "--json"))
    assert r["suspended_seconds"] is None
    os.chmod(env.agent_dir / "suspended", 0o700)


def test_ps_loads_the_driver_only_when_there_are_records(env):
    child = env.spawn_alloc(0, LIVE)
    step = "driver loaded for the records (cuInit)"
    r = run(env, "ps", GPURECLAIM_PS_PROFILE="1")
    assert r.rc == 0 and "ps-profile" in r.err and step not in r.err, r
    ok(run(env, "suspend", "--pid", str(child.pid), "--json"))
    r = run(env, "ps", GPURECLAIM_PS_PROFILE="1")
    assert r.rc == 0 and step in r.err, r
    ok(run(env, "resume", "--pid", str(child.pid), "--json"))
    r = run(env, "ps", GPURECLAIM_PS_PROFILE="1")
    assert step not in r.err, r


# -- a restore that fails ---------------------------------------------------


def test_a_failed_restore_leaves_it_suspended_and_resumable(env):
    env.configure("context=16MiB;memory=1GiB")
    a = env.spawn_alloc(0, 256 * MiB)
    ok(run(env, "suspend", "--pid", str(a.pid), "--json"))
    b = env.spawn_alloc(0, 900 * MiB)  # takes the room it left
    r = run(env, "resume", "--pid", str(a.pid))
    refused(r, f"process {a.pid} was not restored: the GPU has no room for "
            "it",
            "it stays suspended, its memory kept in host memory: run "
            f"gpureclaim resume --pid {a.pid} again",
            "GPU 0 needs 272.0 MiB back and has 108.0 MiB free")
    p = proc_in(ps(env), a.pid)
    assert p["state"] == "suspended" and about(p["host_bytes"], 256 * MiB)
    b.stdin.close()
    b.wait(timeout=HANG_S)
    env.children.remove(b)
    r = ok(run(env, "resume", "--pid", str(a.pid), "--json"))
    assert r["restored"] == 272 * MiB
    assert ask(a, f"alloc {2 * MiB}") == "alloc 0 blocked=0"
