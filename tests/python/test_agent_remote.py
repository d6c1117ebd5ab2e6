"""`gpureclaim agent start --pid N` (gpureclaim/agent/_remote_start.py): the agent
started through sys.remote_exec in a process that never opted in, on the
simulated driver, then asked from outside with exact bytes.

The processes run a Python that has sys.remote_exec (3.14 or newer): on
Debian 12, whose Python is 3.11, the one scripts/python-remote-exec.sh
makes (Debian unstable's; make check's install-deps runs the script). The
command's own Python is the suite's, so unless GPURECLAIM_PYTHON says
otherwise the start is sent by the process's own interpreter."""
import ast
import json
import os
import shutil
import signal
import stat
import subprocess
import sys

import pytest

from agentkit import (GiB, Target, driver_bytes, for_another_user, gpr,
                      reachable_by_all, remote_exec_python, sim_env,
                      wait_for)
from test_agent import as_user, other_user  # noqa: F401 (a fixture)

REMOTE = remote_exec_python()
needs_remote = pytest.mark.skipif(
    REMOTE is None, reason="no Python 3.14 or newer with sys.remote_exec: "
    "run scripts/python-remote-exec.sh")

#: 2 GiB of cache and a live tensor; then the main thread runs Python (a
#: training loop would) until stdin closes
SPIN = """\
t = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
keep = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
del t
import select
print("ready", os.getpid(), flush=True)
while not select.select([sys.stdin], [], [], 0.02)[0]:
    pass
"""

#: the same cache, the main thread blocked reading stdin (in C) until a
#: line comes, then running Python as SPIN's does
BLOCKED = SPIN.replace("import select\n", """\
import select
print("ready", os.getpid(), flush=True)
sys.stdin.readline()
""", 1)


@pytest.fixture
def env(tmp_path):
    """The sim; the command's temporary files in tmp_path (TMPDIR), so a
    test sees what the start left behind."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    e = sim_env(TMPDIR=str(scratch),
                GPURECLAIM_PYTHON=sys.executable)
    e["SCRATCH"] = str(scratch)
    return e


def remote_target(env, code=SPIN, **kw):
    e = dict(env)
    if REMOTE[1]:
        e["PYTHONPATH"] = os.pathsep.join([e["PYTHONPATH"], REMOTE[1]])
    return Target(e, code, agent=None, python=REMOTE[0], **kw)


def leftovers(env):
    return [f for f in os.listdir(env["SCRATCH"])
            if f.startswith("gpureclaim-agent-")]


def released_exactly(env, pid, want):
    before = driver_bytes(env, pid)[0]
    r = gpr(env, "release", "--pid", pid, "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["bytes"]
    assert got == before - driver_bytes(env, pid)[0] == want


@needs_remote
@pytest.mark.parametrize("sender", ["the process's own Python",
                                    "GPURECLAIM_PYTHON"])
def test_start_pid_starts_the_agent_in_a_process_that_never_opted_in(
        env, sender):
    if sender == "GPURECLAIM_PYTHON":
        env = dict(env, GPURECLAIM_PYTHON=REMOTE[0])
    with remote_target(env) as t:
        r = gpr(env, "agent", "start", "--pid", t.pid)
        assert r.returncode == 0, r.stderr
        path = os.path.join(env["GPURECLAIM_AGENT_DIR"], f"{t.pid}.sock")
        assert r.stdout == path + "\n" and r.stderr == ""
        st = os.lstat(path)
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
        assert st.st_uid == os.getuid()
        released_exactly(env, t.pid, 2 * GiB)
        # a second start finds it running
        r = gpr(env, "agent", "start", "--pid", t.pid)
        assert (r.returncode, r.stdout) == (0, path + "\n"), r.stderr
        assert leftovers(env) == []


def test_start_pid_of_an_older_python_or_no_python_is_one_line(env):
    if sys.version_info >= (3, 14):
        pytest.skip("this Python has sys.remote_exec")
    v = "%d.%d" % sys.version_info[:2]
    with Target(env, agent=None) as t:
        r = gpr(env, "agent", "start", "--pid", t.pid)
        assert r.returncode == 1
        assert r.stderr == (
            f"gpureclaim agent: process {t.pid} runs Python {v}, which has "
            f"no sys.remote_exec (PEP 768 is 3.14's): start the agent in "
            f"the program (GPURECLAIM_AGENT=1, gpureclaim run --agent, "
            f"%load_ext gpureclaim)\n")
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        r = gpr(env, "agent", "start", "--pid", sleeper.pid)
        assert r.returncode == 1 and r.stderr == (
            f"gpureclaim agent: process {sleeper.pid} is not a Python "
            f"process (none of the files it maps is a python3.X or "
            f"libpython3.X)\n")
    finally:
        sleeper.kill()
        sleeper.wait()
    r = gpr(env, "agent", "start", "--pid", sleeper.pid)
    assert r.returncode == 1 and r.stderr == (
        f"gpureclaim agent: process {sleeper.pid} does not exist\n")
    assert leftovers(env) == []


@needs_remote
def test_remote_debugging_turned_off_in_the_process_is_said(env):
    with remote_target(dict(env, PYTHON_DISABLE_REMOTE_DEBUG="1")) as t:
        r = gpr(env, "agent", "start", "--pid", t.pid)
        assert r.returncode == 1
        assert r.stderr == (
            f"gpureclaim agent: process {t.pid} runs with remote debugging "
            f"off (-X disable_remote_debug, PYTHON_DISABLE_REMOTE_DEBUG, or "
            f"a Python built without it): start the agent in the program "
            f"(GPURECLAIM_AGENT=1, gpureclaim run --agent)\n")
        assert leftovers(env) == []


@needs_remote
def test_a_blocked_main_thread_starts_it_later_and_leaves_no_file(env):
    with remote_target(env, BLOCKED) as t:
        r = gpr(env, "agent", "start", "--pid", t.pid, "--timeout", "0.3")
        assert r.returncode == 1
        assert r.stderr == (
            f"gpureclaim agent: process {t.pid} has not run the start "
            f"within 0.3 s: Python runs it in the main thread at its next "
            f"bytecode, and that thread is blocked (in C code, or waiting "
            f"for input); it starts the agent when that thread runs Python "
            f"again\n")
        assert len(leftovers(env)) == 1  # the script waits in the process
        t.proc.stdin.write("go\n")
        t.proc.stdin.flush()
        sock = os.path.join(env["GPURECLAIM_AGENT_DIR"], f"{t.pid}.sock")
        wait_for(lambda: os.path.exists(sock), what="the late agent")
        wait_for(lambda: leftovers(env) == [], what="the script's removal")
        released_exactly(env, t.pid, 2 * GiB)


@needs_remote
def test_a_stopped_process_is_said_and_starts_it_when_continued(env):
    with remote_target(env) as t:
        os.kill(t.pid, signal.SIGSTOP)
        try:
            r = gpr(env, "agent", "start", "--pid", t.pid, "--timeout",
                    "0.3")
        finally:
            os.kill(t.pid, signal.SIGCONT)
        assert r.returncode == 1
        assert r.stderr == (
            f"gpureclaim agent: process {t.pid} is stopped (a signal or a "
            f"debugger): it starts the agent when it is continued (the "
            f"request waits in it)\n")
        sock = os.path.join(env["GPURECLAIM_AGENT_DIR"], f"{t.pid}.sock")
        wait_for(lambda: os.path.exists(sock), what="the agent")
        assert leftovers(env) == []


@needs_remote
def test_an_idle_jupyter_kernel_is_woken_and_its_namespace_untouched(
        env, tmp_path):
    from test_oom_notebook import execute, kernel

    kenv = dict(env)
    if REMOTE[1]:
        kenv["PYTHONPATH"] = os.pathsep.join([kenv["PYTHONPATH"], REMOTE[1]])
    argv = [REMOTE[0], "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    with kernel(kenv, tmp_path, argv) as (km, kc):
        out = execute(kc, "import torch\n"
                          "t = torch.empty(3 << 30, dtype=torch.uint8, device='cuda')\n"
                          "keep = torch.empty(1 << 28, dtype=torch.uint8, device='cuda')\n"
                          "del t\n")
        assert [k for k, _ in out if k == "error"] == [], out
        pid = km.provisioner.process.pid
        # the kernel is idle: its main thread waits in its event loop
        r = gpr(env, "agent", "start", "--pid", pid, "--timeout", "30")
        assert r.returncode == 0, r.stderr
        released_exactly(env, pid, 3 * GiB)
        out = execute(kc, "print(sorted(k for k in globals() "
                          "if not k.startswith('_')))")
        text = "".join(c.get("text", "") for k, c in out if k == "stream")
        names = ast.literal_eval(text)
        assert "keep" in names and "torch" in names
        assert not {"os", "sys", "gpureclaim"} & set(names), names


@needs_remote
def test_another_uid_is_refused_by_ptrace_and_root_may_start_theirs(
        env, other_user, tmp_path):  # noqa: F811
    py = REMOTE[0]
    if not reachable_by_all(py):
        pytest.skip(f"{py} is not reachable by another user")
    with for_another_user(dict(env, HOME="/", GPURECLAIM_PYTHON=py)) as world:
        refused_by_ptrace_and_root_may_start_theirs(world, env, other_user,
                                                    tmp_path)


def refused_by_ptrace_and_root_may_start_theirs(world, env, u, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(shared, 0o777)
    os.chmod(env["SCRATCH"], 0o1777)
    os.chmod(env["GPURECLAIM_AGENT_DIR"], 0o755)
    e = world.env
    # root's process, asked by the other user: the kernel refuses
    with remote_target(e) as mine:
        p = subprocess.run([e["GPURECLAIM_BIN"], "agent", "start", "--pid",
                            str(mine.pid)], env=dict(e, GPURECLAIM_AGENT_DIR=
                                                     str(shared)),
                           capture_output=True, text=True,
                           preexec_fn=as_user(u), timeout=60)
        assert p.returncode == 1, p.stderr
        assert p.stderr.startswith(
            f"gpureclaim agent: process {mine.pid}: the kernel's ptrace "
            f"rules refused it ("), p.stderr
        assert p.stderr.endswith(": run it as root, or as the same user "
                                 "with ptrace_scope 0\n")
        assert not os.path.exists(os.path.join(
            env["GPURECLAIM_AGENT_DIR"], f"{mine.pid}.sock"))
    # the other user's process: root starts the agent in it, in that
    # user's folder, and may ask it
    theirs_env = {k: v for k, v in e.items() if k != "GPURECLAIM_AGENT_DIR"}
    with remote_target(theirs_env, preexec=as_user(u)) as theirs:
        r = gpr(theirs_env, "agent", "start", "--pid", theirs.pid)
        assert r.returncode == 0, r.stderr
        assert r.stdout == f"/tmp/gpureclaim-{u.pw_uid}/{theirs.pid}.sock\n"
        r = gpr(theirs_env, "release", "--pid", theirs.pid, "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["bytes"] == 2 * GiB
        theirs.end()
    assert leftovers(env) == []
    assert not [f for f in os.listdir("/tmp") if f.startswith(
        "gpureclaim-agent-") and os.stat(f"/tmp/{f}").st_uid == u.pw_uid]
    shutil.rmtree(f"/tmp/gpureclaim-{u.pw_uid}", ignore_errors=True)
