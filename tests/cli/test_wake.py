"""Resume on demand on the simulated driver (docs/suspend.md): the
watcher `gpureclaim suspend` starts, seeing from outside a thread that
waits inside a CUDA call (the sim's lock makes a call wait in a futex,
return addresses into its libcuda on the stack, as the H200's driver
does), and the fast path of a process under `gpureclaim run
--resume-on-demand`, whose interposer asks before the call reaches the
driver. Every wait is for a state, bounded by a minute (a hang, never a
measure); poll intervals are the tests' own: 0.1 s where the watcher
must look, an hour where it must not."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import (BIN, HANG_S, HELPER, MiB, ROOT, SIM_DIR,
                      _sanitizer_preload)
from test_suspend import (FIGURE, LIVE, ask, env, environ, ok, proc_in,  # noqa: F401
                          ps, records, run, waiting_in_futex, FUTEX)

NEVER = 3600  # a poll interval the watcher never reaches in a test
SOON = 0.1


def wait_for(test, what):
    end = time.monotonic() + HANG_S
    while not test():
        assert time.monotonic() < end, f"never {what}"
        time.sleep(0.01)


def gone(pid):
    """pid has ended (a zombie nobody reaps counts: its watch is over)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def actions(env):
    path = env.agent_dir / "suspended" / "actions.log"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def resumes(env):
    return [a for a in actions(env) if a["action"] == "resume"]


def resumed(env, n=1):
    """The log's resumes, once there are n (the watcher writes its line
    and removes the record after the process runs again)."""
    wait_for(lambda: len(resumes(env)) >= n and not records(env),
             f"{n} resume(s) in the log")
    return resumes(env)


def suspend(env, child, poll, *more):
    s = ok(run(env, "suspend", "--pid", str(child.pid), "--json", "--poll",
               str(poll), *more))
    assert s["state"] == "suspended", s
    return s


def send(child, line):
    child.stdin.write(line + "\n")
    child.stdin.flush()


def spawn_under_run(sim, *sizes, extra=()):
    """sim_alloc started by `gpureclaim run --resume-on-demand`."""
    e = environ(sim, PYTHONPATH=os.environ.get("PYTHONPATH",
                                               str(ROOT / "build/python")))
    preload = _sanitizer_preload(SIM_DIR / "libcuda.so.1")
    if preload:
        e["LD_PRELOAD"] = preload
        e["ASAN_OPTIONS"] = "detect_leaks=0"
    child = subprocess.Popen(
        [str(BIN), "run", "--resume-on-demand", *extra, "--",
         sys.executable, str(HELPER), str(SIM_DIR / "libcuda.so.1"), "0",
         *map(str, sizes)],
        env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    sim.children.append(child)
    line = child.stdout.readline().strip()
    assert line == "ready", f"sim_alloc.py under run: {line!r}"
    return child


# -- from outside ------------------------------------------------------------


def test_a_call_that_waits_is_seen_and_the_process_resumed(env):
    child = env.spawn_alloc(0, LIVE)
    s = suspend(env, child, SOON)
    on = s["resume_on_demand"]
    assert on["ok"] and on["watcher"] > 0 and on["poll"] == SOON, on
    assert "looks at its threads every 0.1 s" in on["said"], on
    assert "asked" not in on["said"]  # no interposer, no agent: no page
    p = proc_in(ps(env), child.pid)
    assert p["state"] == "suspended"
    assert p["resume_on_demand"] == {"watcher": on["watcher"], "error": None}

    # the program touches the GPU again: its call waits in the driver's
    # lock, the watcher sees it there and resumes the process
    send(child, f"alloc {2 * MiB}")
    answer = child.stdout.readline().strip()
    assert answer == "alloc 0 blocked=1", answer  # it waited, then went on
    [r] = resumed(env)
    assert r["ok"] and r["restored"] == FIGURE, r
    assert r["cause"] == f"on demand: thread {child.pid} waits in a CUDA call"
    assert proc_in(ps(env), child.pid)["bytes"] == FIGURE + 2 * MiB
    assert not records(env)
    wait_for(lambda: gone(on["watcher"]), "the watcher ends")
    assert os.listdir(env.agent_dir / "suspended") == ["actions.log"]


def test_idle_threads_and_the_drivers_own_are_never_taken_for_a_call(env):
    """The sim's checkpoint thread waits inside its libcuda (return
    addresses into it on its stack, unlike the H200's driver threads):
    the watcher must set it aside, and threads that wait elsewhere too.
    Several looks of the watcher later it is still suspended."""
    child = env.spawn_alloc(0, LIVE)
    assert ask(child, "threads 8") == "threads 8"
    s = suspend(env, child, SOON)
    watcher = s["resume_on_demand"]["watcher"]
    log = env.agent_dir / "suspended" / "actions.log"
    before = log.stat().st_mtime_ns
    # twenty of its poll intervals: a watcher that took one of them for a
    # call would have resumed it (a slow machine may give it fewer looks:
    # this can miss such a watcher there, never fail a good one; the
    # unit tests check the look itself, tests/unit/test_wake.c)
    for _ in range(20):
        time.sleep(SOON)
    assert proc_in(ps(env), child.pid)["state"] == "suspended"
    assert not resumes(env) and log.stat().st_mtime_ns == before
    assert not gone(watcher)
    ok(run(env, "resume", "--pid", str(child.pid), "--json"))
    wait_for(lambda: gone(watcher), "the watcher ends after a resume by hand")


def test_resume_manual_starts_no_watcher(env):
    child = env.spawn_alloc(0, LIVE)
    s = suspend(env, child, SOON, "--resume", "manual")
    assert s["resume_on_demand"] is None
    assert proc_in(ps(env), child.pid)["resume_on_demand"] == {
        "watcher": None, "error": None}
    ok(run(env, "resume", "--pid", str(child.pid), "--json"))


def test_the_text_says_how_it_comes_back(env):
    child = env.spawn_alloc(0, LIVE)
    r = run(env, "suspend", "--pid", str(child.pid), "--poll", "2")
    assert r.rc == 0, r
    assert ("  resumed at its next CUDA call: watcher " in r.out and
            " looks at its threads every 2 s\n" in r.out), r.out
    assert f"gpureclaim resume --pid {child.pid} brings it back now" in r.out
    text = run(env, "ps", "--color=never").out
    assert "; resumes on demand>" in text, text
    ok(run(env, "resume", "--pid", str(child.pid), "--json"))


def test_a_resume_by_hand_ends_the_watcher_whatever_its_interval(env):
    child = env.spawn_alloc(0, LIVE)
    watcher = suspend(env, child, NEVER)["resume_on_demand"]["watcher"]
    ok(run(env, "resume", "--pid", str(child.pid), "--json"))
    wait_for(lambda: gone(watcher), "the watcher ends at the resume")
    assert ask(child, f"alloc {2 * MiB}") == "alloc 0 blocked=0"


def test_the_watcher_ends_with_the_process_and_leaves_nothing(env):
    child = env.spawn_alloc(0, LIVE)
    watcher = suspend(env, child, NEVER)["resume_on_demand"]["watcher"]
    child.kill()
    child.wait()
    wait_for(lambda: gone(watcher), "the watcher ends with its process")
    assert not records(env)
    assert sorted(os.listdir(env.agent_dir / "suspended")) == ["actions.log"]


def test_stopping_the_watcher_leaves_it_suspended_and_says_so(env):
    child = env.spawn_alloc(0, LIVE)
    watcher = suspend(env, child, NEVER)["resume_on_demand"]["watcher"]
    os.kill(watcher, signal.SIGTERM)
    wait_for(lambda: gone(watcher), "the watcher ends on SIGTERM")
    p = proc_in(ps(env), child.pid)
    assert p["state"] == "suspended"
    assert p["resume_on_demand"] == {"watcher": None, "error": None}
    # a watcher started by hand takes over, and resumes it at its call
    w = subprocess.Popen([str(BIN), "resume", "--pid", str(child.pid),
                          "--on-demand", "--poll", str(SOON)],
                         env=environ(env), stdout=subprocess.PIPE, text=True)
    first = w.stdout.readline()
    assert first.startswith(f"Process {child.pid} resumes on demand: "
                            f"watcher {w.pid} looks at its threads"), first
    send(child, f"alloc {2 * MiB}")
    assert child.stdout.readline().strip() == "alloc 0 blocked=1"
    rest = w.communicate(timeout=HANG_S)[0]
    assert w.returncode == 0 and f"Resumed process {child.pid}" in rest, rest


# -- from inside -------------------------------------------------------------


def test_under_run_the_call_asks_before_it_reaches_the_driver(env):
    child = spawn_under_run(env, LIVE)
    s = suspend(env, child, NEVER)
    on = s["resume_on_demand"]
    assert "is asked by its next driver call at once" in on["said"], on
    send(child, f"alloc {2 * MiB}")
    # resumed before the call went into the driver: it never waited there
    assert child.stdout.readline().strip() == "alloc 0 blocked=0"
    [r] = resumed(env)
    assert r["cause"] == "on demand: the process asked", r
    wait_for(lambda: gone(on["watcher"]), "the watcher ends")


def test_under_run_a_call_the_tracer_does_not_record_asks_too(env):
    """cuCtxSynchronize has no wrapper of the tracer's: the interposer
    hands it out as a stub that checks the page (trace/inject/
    wake_stubs.c), arguments untouched."""
    child = spawn_under_run(env, LIVE)
    assert ask(child, "sync") == "sync 0 blocked=0"  # running: no wait
    on = suspend(env, child, NEVER)["resume_on_demand"]
    send(child, "sync")
    assert child.stdout.readline().strip() == "sync 0 blocked=0"
    assert resumed(env)[0]["cause"] == "on demand: the process asked"
    wait_for(lambda: gone(on["watcher"]), "the watcher ends")
    # and again: a second suspension of the same process
    on = suspend(env, child, NEVER)["resume_on_demand"]
    assert ask(child, f"alloc {2 * MiB}") == "alloc 0 blocked=0"
    assert len(resumed(env, 2)) == 2
    wait_for(lambda: gone(on["watcher"]), "the second watcher ends")


# -- when the resume fails ---------------------------------------------------


def test_a_resume_that_fails_leaves_it_suspended_says_why_and_tries_again(
        env):
    env.configure("context=16MiB;memory=256MiB")
    child = env.spawn_alloc(0, LIVE)
    on = suspend(env, child, SOON)["resume_on_demand"]
    # another process takes the memory it gave back
    other = env.spawn_alloc(0, 200 * MiB)
    send(child, f"alloc {2 * MiB}")
    wait_for(lambda: any(not a["ok"] for a in resumes(env)),
             "a resume on demand that fails")
    failed = [a for a in resumes(env) if not a["ok"]][0]
    assert failed["step"] == "restore" and failed["state"] == "suspended"
    assert "the GPU has no room for it" in failed["error"], failed
    p = proc_in(ps(env), child.pid)
    assert p["state"] == "suspended" and p["resume_on_demand"]["watcher"]
    assert "the GPU has no room for it" in p["resume_on_demand"]["error"]
    text = run(env, "ps", "--color=never").out
    assert "; its resume on demand failed: process" in text, text
    # its call keeps waiting, in the driver's lock
    if FUTEX is not None:
        wait_for(lambda: waiting_in_futex(child.pid), "the call waits")
    # the memory comes free: the watcher's next try resumes it
    other.stdin.close()
    other.wait(timeout=HANG_S)
    assert child.stdout.readline().strip() == "alloc 0 blocked=1"
    wait_for(lambda: resumes(env)[-1]["ok"], "the resume that works")
    wait_for(lambda: gone(on["watcher"]), "the watcher ends")
    assert not records(env)


# -- usage -------------------------------------------------------------------


@pytest.mark.parametrize("args, words", [
    (("resume", "--pid", "1,2", "--on-demand"), "one --pid"),
    (("resume", "--pid", "1", "--on-demand", "--dry-run"), "no --dry-run"),
    (("resume", "--pid", "1", "--background"), "goes with --on-demand"),
    (("suspend", "--pid", "1", "--on-demand"), "are resume's"),
    (("suspend", "--pid", "1", "--resume", "later"),
     "on-demand or manual, not 'later'"),
    (("resume", "--pid", "1", "--resume", "manual"), "suspend's"),
    (("suspend", "--pid", "1", "--poll", "0"), "--poll needs"),
])
def test_usage_errors(env, args, words):
    r = run(env, *args)
    assert r.rc == 2 and words in r.err, r


def test_a_watcher_for_a_process_not_suspended_by_gpureclaim(env):
    child = env.spawn_alloc(0, LIVE)
    r = run(env, "resume", "--pid", str(child.pid), "--on-demand")
    assert r.rc == 1, r
    assert (f"process {child.pid} has no record of a suspension by this "
            "user's gpureclaim") in r.err, r
    r = run(env, "resume", "--pid", str(child.pid), "--on-demand", "--json")
    assert r.rc == 1 and json.loads(r.out)["on_demand"] is False, r
