"""The agent's commands (gpureclaim/_commands/agent.py) on the simulated driver:
`explain --pid`, `release --pid` with exact bytes, `reclaim` over several
processes (one stopped, one that dies while asked, one without an agent),
`ps --explain`, `agent list|start`, and the usage errors."""
import json
import os
import signal
import sys

import pytest

from agentkit import GiB, MiB, Target, driver_bytes, gpr, sim_env

CACHE = """\
t = torch.empty({cached} << 20, dtype=torch.uint8, device="cuda")
keep = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
del t
"""


def cache(mib):
    return CACHE.format(cached=mib)


#: a target whose release ends the process mid-request (a releaser of the
#: user's that exits)
DIES = cache(512) + """\
import gpureclaim
gpureclaim.register("exit", lambda dev: os._exit(9))
"""


@pytest.fixture
def env():
    return sim_env(gpus=2)


def test_explain_pid_prints_the_processs_own_report(env):
    with Target(env, cache(2048)) as t:
        r = gpr(env, "explain", "--pid", t.pid)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("gpureclaim.explain(): where this "
                                   "process's GPU memory goes\n")
        assert "cached, releasable  torch" in r.stdout
        j = gpr(env, "explain", "--pid", t.pid, "--json")
        doc = json.loads(j.stdout)
        parts = {p["kind"]: p["bytes"] for p in doc["gpus"][0]["parts"]}
        assert parts["releasable"] == 2 * GiB


def test_explain_pid_holders_is_passed_or_refused_in_one_line(env):
    """--holders reaches explain(holders=True) where the process's
    gpureclaim has it; where it has not, the agent says so in one line."""
    with Target(env) as t:
        r = gpr(env, "explain", "--pid", t.pid, "--holders")
        import inspect
        sys.path.insert(0, os.environ.get("GPR_PY_PATH", ""))
        import gpureclaim
        if "holders" in inspect.signature(gpureclaim.explain).parameters:
            assert r.returncode == 0, r.stderr
        else:
            assert r.returncode == 1
            assert r.stderr == (f"gpureclaim explain: process {t.pid}: "
                                "explain takes no holders; accepted: "
                                "devices, measure_context\n")


def test_release_pid_returns_the_drop_of_the_driver_figure(env):
    with Target(env, cache(3072)) as t:
        before = driver_bytes(env, t.pid)[0]
        r = gpr(env, "release", "--pid", t.pid, "--json")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        after = driver_bytes(env, t.pid)[0]
        assert doc["bytes"] == before - after == 3 * GiB
        assert doc["source"] == "driver"
        txt = gpr(env, "release", "--pid", t.pid)
        assert txt.returncode == 0 and txt.stdout.strip()


def test_release_pid_passes_workspaces_and_collect(env):
    code = """\
    import gpureclaim.agent._server as srv
    real = srv.OPS["release"]
    def spy(args):
        print("ARGS", json.dumps(args), file=sys.stderr, flush=True)
        return real(args)
    srv.OPS["release"] = spy
    """
    import textwrap
    with Target(env, cache(1024) + textwrap.dedent(code)) as t:
        r = gpr(env, "release", "--pid", t.pid, "--workspaces", "--collect",
                "never")
        assert r.returncode == 0, r.stderr
        rc, err = t.end()
    assert 'ARGS {"workspaces": true, "collect": false}' in err


@pytest.mark.parametrize("args,says", [
    (["release"], "give --pid N (a process with an agent) or --dask "
                  "ADDRESS"),
    (["release", "--pid", "x"], "--pid needs a process id (a positive "
                                "number), not 'x'"),
    (["release", "--pid", "1", "--timeout", "0"], "--timeout needs a number "
                                                  "of seconds from 0.1"),
    (["release", "--pid", "1", "--collect", "often"], "--collect needs "
                                                      "auto, always or "
                                                      "never"),
    (["explain", "--pid", "1", "--workspaces"], "unknown option "
                                                "'--workspaces'"),
    (["explain", "--pid", "1", "extra"], "unexpected argument 'extra'"),
    (["reclaim", "--timeout", "0"], "--timeout must be positive"),
    (["reclaim", "--min", "lots"], "--min needs a size"),
    (["reclaim", "--gpu", "7"], "7"),
    (["agent"], "give start --pid N or list"),
    (["agent", "stop"], "unknown action 'stop'"),
    (["ps", "--explain", "-i", "x"], "-i/--gpu needs GPU indexes"),
])
def test_usage_errors_are_two_lines_exit_2(env, args, says):
    r = gpr(env, *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert says in lines[0], r.stderr
    if args[0] != "reclaim" or "--min" in args:
        assert len(lines) == 2 and lines[1].startswith("Run 'gpureclaim ")


def test_a_process_without_an_agent_is_one_line_exit_1(env):
    with Target(env, agent=None) as t:
        for cmd in ("explain", "release"):
            r = gpr(env, cmd, "--pid", t.pid)
            assert r.returncode == 1 and r.stdout == ""
            assert r.stderr.startswith(
                f"gpureclaim {cmd}: process {t.pid} has no agent (no socket "
                f"in {env['GPURECLAIM_AGENT_DIR']}")
            assert r.stderr.endswith("); start one with gpureclaim.agent."
                                     "start() or GPURECLAIM_AGENT=1\n")
            assert r.stderr.count("\n") == 1


def test_reclaim_over_several_processes_one_hung_one_dying_one_without(
        env):
    a = Target(env, cache(1024))
    b = Target(env, cache(2048))
    hung = Target(env, cache(512))
    dying = Target(env, DIES)
    plain = Target(env, cache(768), agent=None)
    try:
        os.kill(hung.pid, signal.SIGSTOP)
        before = {t.pid: driver_bytes(env, t.pid)[0] for t in (a, b)}
        r = gpr(env, "reclaim", "--json", "--timeout", "2")
        assert r.returncode == 3, r.stderr  # some did not answer
        rep = json.loads(r.stdout)
        got = {p["pid"]: p for p in rep["processes"]}
        assert set(got) == {a.pid, b.pid}
        for t, want in ((a, GiB), (b, 2 * GiB)):
            assert got[t.pid]["released"] == want
            assert before[t.pid] - driver_bytes(env, t.pid)[0] == want
            [g] = got[t.pid]["gpus"]
            assert g["gpu"] == 0 and g["released"] == want
            # the keys of the release before (docs/naming.md, deprecated)
            assert got[t.pid]["returned"] == g["returned"] == want
            assert g["nvml_index"] == 0
        assert rep["total"] == 3 * GiB
        assert rep["gpus"] == [{"gpu": 0, "released": 3 * GiB,
                                "processes": 2, "index": 0,
                                "returned": 3 * GiB}]
        failed = {p["pid"]: p for p in rep["failed"]}
        assert failed[hung.pid]["kind"] == "timeout"
        assert "it is stopped" in failed[hung.pid]["error"]
        assert failed[dying.pid]["kind"] == "died"
        [none] = rep["no_agent"]
        assert none["pid"] == plain.pid and none["kind"] == "no_agent"
        assert none["held"]["0"] == driver_bytes(env, plain.pid)[0]
    finally:
        for t in (a, b, hung, dying, plain):
            t.end()


def test_reclaim_text_says_who_gave_what_and_who_did_not(env):
    with Target(env, cache(1024)) as a, \
            Target(env, cache(128), agent=None) as plain:
        r = gpr(env, "reclaim")
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines[0] == ("gpureclaim reclaim: 1 process with an agent "
                            "asked; 1 answered and released 1.0 GiB "
                            f"({GiB} bytes)")
        assert lines[1].split() == ["PID", "USER", "RELEASED", "PER", "GPU",
                                    "/", "COMMAND"]
        assert any(str(a.pid) in x and "GPU 0 1.0 GiB" in x for x in lines)
        assert f"GPU 0: 1.0 GiB ({GiB} bytes) released by 1 process" \
            in lines
        i = lines.index("No agent (not asked):")
        assert str(plain.pid) in lines[i + 1]


def test_reclaim_dry_run_releases_nothing_and_min_skips(env):
    with Target(env, cache(1024)) as a, Target(env, cache(256)) as b:
        held = {t.pid: driver_bytes(env, t.pid)[0] for t in (a, b)}
        r = gpr(env, "reclaim", "--dry-run", "--json")
        rep = json.loads(r.stdout)
        assert rep["dry_run"] and rep["total"] == GiB + 256 * MiB
        got = {p["pid"]: p for p in rep["processes"]}
        assert got[a.pid]["releasable"] == got[a.pid]["would_return"] == GiB
        [g] = got[a.pid]["gpus"]
        assert g["releasable"] == g["returnable"] == GiB
        assert rep["gpus"][0]["releasable"] == GiB + 256 * MiB
        assert {t.pid: driver_bytes(env, t.pid)[0] for t in (a, b)} == held
        t = gpr(env, "reclaim", "--dry-run")
        assert t.stdout.splitlines()[0].endswith(
            f"2 answered; 1.2 GiB releasable ({GiB + 256 * MiB} bytes)")
        assert "RELEASABLE" in t.stdout.splitlines()[1]
        assert (f"GPU 0: 1.2 GiB ({GiB + 256 * MiB} bytes) releasable in 2 "
                "processes") in t.stdout.splitlines()
        r = gpr(env, "reclaim", "--min", "512MiB", "--json")
        rep = json.loads(r.stdout)
        got = {p["pid"]: p for p in rep["processes"]}
        assert got[a.pid]["released"] == GiB
        assert got[b.pid]["released"] == 0
        assert "less than --min 512.0 MiB" in got[b.pid]["skipped"]
        assert driver_bytes(env, b.pid)[0] == held[b.pid]


def test_reclaim_gpu_releases_only_that_gpu(env):
    code = """\
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda:0"); del a
    b = torch.empty(2 << 30, dtype=torch.uint8, device="cuda:1"); del b
    """
    import textwrap
    with Target(env, textwrap.dedent(code)) as t:
        before = driver_bytes(env, t.pid)
        r = gpr(env, "reclaim", "--gpu", "1", "--json")
        assert r.returncode == 0, r.stderr
        rep = json.loads(r.stdout)
        [p] = rep["processes"]
        assert p["released"] == 2 * GiB
        # only GPU 1 is visited and measured (Torch's empty_cache empties
        # the caches of every GPU at once, the fake's as the real one's)
        after = driver_bytes(env, t.pid)
        assert before[1] - after[1] == 2 * GiB
        assert [g["gpu"] for g in p["gpus"]] == [1]


def test_ps_explain_shows_each_agents_parts_and_the_gpu_total(env):
    with Target(env, cache(2048)) as a, Target(env, cache(512)) as b, \
            Target(env, cache(128), agent=None) as plain:
        r = gpr(env, "ps", "--explain", "--json")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        g0 = doc["gpus"][0]
        rows = {p["pid"]: p for p in g0["processes"]}
        parts = rows[a.pid]["agent"]["parts"]
        assert parts["releasable"] == 2 * GiB
        assert list(parts)[:6] == ["live", "releasable", "not_releasable",
                                   "workspaces", "pools", "rest"]
        # the keys of the release before (docs/naming.md, deprecated)
        assert parts["returnable"] == 2 * GiB
        assert parts["not returnable"] == parts["not_releasable"] == 0
        assert rows[a.pid]["agent"]["parts"]["live"] == 256 * MiB
        assert rows[b.pid]["agent"]["parts"]["releasable"] == 512 * MiB
        assert rows[plain.pid]["agent"] is None
        assert g0["releasable"] == g0["returnable"] == 2 * GiB + 512 * MiB
        assert g0["agents"] == 2
        t = gpr(env, "ps", "--explain")
        assert t.returncode == 0, t.stderr
        assert ("  releasable by the 2 processes with an agent: 2.5 GiB") \
            in t.stdout.splitlines()
        assert "releasable 2.0 GiB, not releasable 0 B" in t.stdout
        # nothing was released by looking
        assert driver_bytes(env, a.pid)[0] == rows[a.pid]["bytes"]


def test_ps_explain_says_why_an_agent_did_not_answer(env):
    with Target(env, cache(256)) as t:
        os.kill(t.pid, signal.SIGSTOP)
        try:
            r = gpr(env, "ps", "--explain", "--timeout", "0.5")
        finally:
            os.kill(t.pid, signal.SIGCONT)
        assert r.returncode == 0, r.stderr
        assert (f"agent: timeout: process {t.pid} did not answer in time (it "
                "is stopped: SIGSTOP or a debugger; SIGCONT resumes it)") \
            in r.stdout
        assert "  no agent here answered (1 asked)" in r.stdout


def test_agent_list_and_start(env):
    with Target(env) as t, Target(env, agent=None) as plain:
        r = gpr(env, "agent", "list", "--json")
        rows = {x["pid"]: x for x in json.loads(r.stdout)["agents"]}
        assert rows[t.pid]["status"]["frameworks"] == ["torch"]
        assert plain.pid not in rows
        r = gpr(env, "agent", "start", "--pid", plain.pid)
        if hasattr(sys, "remote_exec"):
            assert r.returncode == 0, r.stderr
        else:  # test_agent_remote.py starts it in a 3.14
            assert r.returncode == 1
            v = "%d.%d" % sys.version_info[:2]
            assert r.stderr.startswith(
                f"gpureclaim agent: process {plain.pid} runs Python {v}, "
                f"which has no sys.remote_exec")
            assert r.stderr.count("\n") == 1


@pytest.mark.parametrize("mode,says", [
    ("garbage", "agent answered something that is not JSON (?"),
    ("notprotocol", "JSON that is not protocol version 1's"),
    ("huge", "answer is larger than 16 MiB; refused"),
    ("slow", "did not answer in time"),
    ("silent", "did not answer in time"),
    ("close", "closed the connection without a full answer"),
    ("badkind", ": no way"),
])
def test_the_commands_client_in_c_never_hangs_on_a_hostile_server(
        env, mode, says):
    """release --pid is C (cli/cmd_agent.c): the same checks and lines as
    the Python client's (test_agent.py runs these servers against it)."""
    import subprocess

    from test_agent import HOSTILE

    p = subprocess.Popen([sys.executable, "-c", HOSTILE, mode], env=env,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        r = gpr(env, "release", "--pid", p.pid, "--timeout", "1")
        assert r.returncode == 1 and r.stdout == "", r
        assert r.stderr.startswith("gpureclaim release: process ")
        assert says in r.stderr and r.stderr.count("\n") == 1, r.stderr
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("mode,kind,says", [
    ("garbage", "bad_answer", "agent answered something that is not JSON"),
    ("notprotocol", "bad_answer", "JSON that is not protocol version 1's"),
    ("huge", "bad_answer", "answer is larger than 16 MiB; refused"),
    ("slow", "timeout", "did not answer in time"),
    ("silent", "timeout", "did not answer in time"),
    ("close", "bad_answer", "closed the connection without a full answer"),
    ("badkind", "error", ": no way"),
])
def test_reclaim_and_ps_explain_never_hang_on_a_hostile_server(
        env, mode, kind, says):
    """reclaim and ps --explain ask every agent found (C: cli/cmd_reclaim.c,
    cli/ps_explain.c, a thread each): a hostile one is one line of its
    own, the others go on."""
    import subprocess

    from test_agent import HOSTILE

    here = 'd = f"/tmp/gpureclaim-{os.getuid()}"'
    assert here in HOSTILE
    server = HOSTILE.replace(here, 'd = os.environ["GPURECLAIM_AGENT_DIR"]')
    p = subprocess.Popen([sys.executable, "-c", server, mode], env=env,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        with Target(env, cache(512)) as t:
            r = gpr(env, "reclaim", "--json", "--timeout", "1")
            assert r.returncode == 3, (r.stdout, r.stderr)
            rep = json.loads(r.stdout)
            [bad] = rep["failed"]
            assert bad["pid"] == p.pid and bad["kind"] == kind, bad
            assert says in bad["error"] and "\n" not in bad["error"]
            [good] = rep["processes"]
            assert good["pid"] == t.pid and good["returned"] == 512 * MiB
            r = gpr(env, "ps", "--explain", "--json", "--timeout", "1")
            assert r.returncode == 0, r.stderr
            rows = {x["pid"]: x for x in json.loads(r.stdout)["gpus"][0]
                    ["processes"]}
            assert rows[t.pid]["agent"]["parts"]["live"] == 256 * MiB
    finally:
        p.kill()
        p.wait()


def test_python_m_gpureclaim_is_the_same_program(env):
    """`python3 -m gpureclaim release --pid N` runs the command's client;
    its help is the Python side's, however asked."""
    import subprocess

    with Target(env, cache(512)) as t:
        e = dict(env)
        r = subprocess.run([sys.executable, "-m", "gpureclaim", "release",
                            "--pid", str(t.pid), "--json"], env=e,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["bytes"] == 512 * MiB
        assert r.stdout.count("\n") == 1  # one line, the C command's
        helps = {gpr(env, *a).stdout for a in (
            ["release", "--help"], ["release", "--pid", "1", "--help"],
            ["help", "release"])}
        assert len(helps) == 1 and helps.pop().startswith(
            "USAGE: gpureclaim release --pid N")


def test_the_commands_python_never_imports_from_the_current_folder(
        env, tmp_path):
    """Root running `gpureclaim agent start` in a user's folder must not
    run that user's files: the current folder is not on the path of the
    command's Python (cli/cmd_python.c), nor of the process's own
    interpreter when it sends the start (gpureclaim/agent/_remote_start.py)."""
    planted = tmp_path / "gpureclaim"
    planted.mkdir()
    (planted / "__init__.py").write_text(
        "raise SystemExit('the planted package was imported')\n")
    from agentkit import GPR
    import subprocess
    r = subprocess.run([GPR, "agent", "list"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    assert r.stdout.lower().startswith("no agents"), r.stdout
