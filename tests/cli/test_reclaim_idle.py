"""`gpureclaim reclaim --idle` on the simulated driver (docs/suspend.md,
"The node's policy"): the caches first, then the processes idle for at
least DURATION suspended, the largest first, as far as --target asks; a
dry run that says what and why; the opt-out; every action in the log with
its exact bytes.

Idle times come from NVML's per-process samples (the sim's: gprsim_busy)
and from gpureclaim's note of idle times across runs (the records
folder's `idle`), which the tests write where a process must have been
idle for hours: never a wait for time to pass."""
import json
import os
import time

import pytest

from conftest import HANG_S, MiB
from test_suspend import (CONTEXT, LIVE, agent_target, ask, env,  # noqa: F401
                          proc_in, ps, records, run)

HOURS = 3600 * 1000000  # an hour in the note's microseconds


def start_time(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def idle_since(env, seconds_ago, *children):
    """gpureclaim's note says each child has been idle since that long."""
    d = env.agent_dir / "suspended"
    d.mkdir(mode=0o700, exist_ok=True)
    since = int((time.time() - seconds_ago) * 1e6)
    note = d / "idle"
    old = note.read_text().splitlines() if note.exists() else []
    pids = {c.pid for c in children}
    lines = [ln for ln in old if int(ln.split()[0]) not in pids]
    lines += [f"{c.pid} {start_time(c.pid)} {since}" for c in children]
    note.write_text("".join(ln + "\n" for ln in lines))


def actions(env):
    path = env.agent_dir / "suspended" / "actions.log"
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines()]


def reclaim(env, *args, **extra):
    r = run(env, "reclaim", *args, **extra)
    return r


def idle_doc(r):
    assert r.rc in (0, 3), r
    return json.loads(r.out)["idle"]


def row_of(doc, pid, gpu=0):
    g = [x for x in doc["gpus"] if x["gpu"] == gpu][0]
    found = [p for p in g["processes"] if p["pid"] == pid]
    return found[0] if found else None


def test_only_the_idle_process_is_suspended_and_resumes_on_demand(env):
    idle = env.spawn_alloc(0, LIVE)
    busy = env.spawn_alloc(0, 2 * LIVE)
    assert ask(busy, "busy 50") == "busy 0"
    idle_since(env, 3 * 3600, idle, busy)  # the note: busy is busy now
    r = reclaim(env, "--idle", "2h", "--json")
    doc = idle_doc(r)
    assert r.rc == 0, r
    i, b = row_of(doc, idle.pid), row_of(doc, busy.pid)
    assert i["decision"] == "suspended" and i["released"] == CONTEXT + LIVE
    assert i["idle_seconds"] >= 3 * 3600 - 60, i
    assert i["host_bytes"] >= LIVE, i
    assert b["decision"] == "skipped" and b["why"].startswith("busy: "), b
    assert doc["suspended"] == 1 and doc["released"] == CONTEXT + LIVE
    g = doc["gpus"][0]
    assert g["used_before"] - g["used_after"] == CONTEXT + LIVE
    # the suspend is gpureclaim suspend's: ps lists it, its watcher runs
    p = proc_in(ps(env), idle.pid)
    assert p["state"] == "suspended" and p["resume_on_demand"]["watcher"]
    assert proc_in(ps(env), busy.pid)["state"] == "alive"
    [a] = [a for a in actions(env) if a["action"] == "suspend"]
    assert a["pid"] == idle.pid and a["released"] == CONTEXT + LIVE
    assert a["cause"] == "reclaim --idle 2 h 0 min: idle for 3 h 0 min", a
    # it touches the GPU again: its watcher brings it back
    assert ask(idle, f"alloc {2 * MiB}") == "alloc 0 blocked=1"
    end = time.monotonic() + HANG_S
    while proc_in(ps(env), idle.pid)["state"] != "alive":
        assert time.monotonic() < end, "never resumed"
        time.sleep(0.05)


def test_the_dry_run_says_what_and_why_and_does_nothing(env):
    idle = env.spawn_alloc(0, LIVE)
    fresh = env.spawn_alloc(0, 32 * MiB)
    idle_since(env, 5 * 3600, idle)
    r = reclaim(env, "--idle", "1h", "--dry-run", "--json")
    doc = idle_doc(r)
    i, f = row_of(doc, idle.pid), row_of(doc, fresh.pid)
    assert i["decision"] == "would_suspend" and i["released"] is None, i
    # never seen busy nor noted before: not known, noted from now
    assert f["decision"] == "skipped" and f["idle_seconds"] is None, f
    assert "idle for how long is not known" in f["why"], f
    assert doc["gpus"][0]["used_would_be"] == \
        doc["gpus"][0]["used_before"] - CONTEXT - LIVE
    assert proc_in(ps(env), idle.pid)["state"] == "alive"
    assert not records(env) and not actions(env)
    # the next run knows it: idle since the first run, less than an hour
    doc = idle_doc(reclaim(env, "--idle", "1h", "--dry-run", "--json"))
    f = row_of(doc, fresh.pid)
    assert f["decision"] == "skipped" and f["idle_seconds"] is not None
    assert "less than 1 h 0 min" in f["why"], f
    text = reclaim(env, "--idle", "1h", "--dry-run").out
    assert "Idle for at least 1 h 0 min: 1 process would be suspended " \
        "(--dry-run)" in text, text
    assert f"would suspend: idle for 5 h 0 min" in text, text


def test_the_target_stops_it_largest_first(env):
    env.configure("context=16MiB;memory=1GiB")
    small = env.spawn_alloc(0, 64 * MiB)
    large = env.spawn_alloc(0, 256 * MiB)
    idle_since(env, 3 * 3600, small, large)
    used = CONTEXT * 2 + 320 * MiB
    # room for the small one: suspending the large one is enough
    doc = idle_doc(reclaim(env, "--idle", "1h", "--target",
                           str(used - 200 * MiB), "--json"))
    assert row_of(doc, large.pid)["decision"] == "suspended"
    s = row_of(doc, small.pid)
    assert s["decision"] == "skipped" and "is at its target" in s["why"], s
    assert doc["target"] == {"bytes": used - 200 * MiB, "percent": None}
    assert doc["gpus"][0]["target_bytes"] == used - 200 * MiB
    # a percent of the GPU: 0% asks for everything idle
    doc = idle_doc(reclaim(env, "--idle", "1h", "--target", "0%",
                           "--json"))
    assert row_of(doc, small.pid)["decision"] == "suspended"
    assert doc["target"]["percent"] == 0
    assert ps(env)["gpus"][0]["used"] == 0


def test_a_process_may_opt_out(env):
    out = env.spawn_alloc(0, LIVE, extra_env={"GPURECLAIM_SUSPEND": "never"})
    other = env.spawn_alloc(0, LIVE)
    idle_since(env, 3 * 3600, out, other)
    doc = idle_doc(reclaim(env, "--idle", "1h", "--json"))
    o = row_of(doc, out.pid)
    assert o["decision"] == "skipped", o
    assert o["why"] == "opted out: GPURECLAIM_SUSPEND=never"
    assert row_of(doc, other.pid)["decision"] == "suspended"
    assert proc_in(ps(env), out.pid)["state"] == "alive"


def test_a_suspend_the_checks_refuse_is_skipped_with_why(env, tmp_path):
    child = env.spawn_alloc(0, LIVE)
    idle_since(env, 3 * 3600, child)
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 4194304 kB\nMemAvailable: 1099776 kB\n")
    r = reclaim(env, "--idle", "1h", "--json",
                GPURECLAIM_TEST_MEMINFO=meminfo)
    doc = idle_doc(r)
    c = row_of(doc, child.pid)
    assert c["decision"] == "skipped", c
    assert "host memory cannot hold it" in c["why"], c
    assert r.rc == 0 and doc["suspended"] == 0
    assert proc_in(ps(env), child.pid)["state"] == "alive"


@pytest.mark.skipif(bool(os.environ.get("GPR_SANITIZED")),
                    reason="the agent's Python cannot import a sanitized "
                           "build's extension (the gcc build runs it)")
def test_caches_first_then_the_idle_process_every_action_logged(env):
    target = agent_target(env)  # 48 MiB live, 32 MiB in its cache
    idle_since(env, 3 * 3600, target)
    r = reclaim(env, "--idle", "1h", "--json")
    assert r.rc == 0, r
    full = json.loads(r.out)
    assert full["total"] == 32 * MiB  # its cache, by its agent
    t = row_of(full["idle"], target.pid)
    assert t["decision"] == "suspended", t
    assert t["released"] == CONTEXT + 48 * MiB  # the cache never moved
    log = actions(env)
    assert [a["action"] for a in log] == ["release", "suspend"], log
    assert log[0]["released"] == 32 * MiB and log[0]["ok"], log
    assert log[0]["cause"] == "reclaim --idle 1 h 0 min: caches first"
    assert log[1]["released"] == CONTEXT + 48 * MiB


@pytest.mark.parametrize("args, words", [
    (("--target", "50%"), "--target goes with --idle"),
    (("--idle", "soon"), "--idle needs a duration"),
    (("--idle", "1h", "--target", "150%"), "--target needs a size"),
    (("--idle", "1h", "--target", "lots"), "--target needs a size"),
])
def test_usage_errors(env, args, words):
    r = reclaim(env, *args)
    assert r.rc == 2 and words in r.err, r
