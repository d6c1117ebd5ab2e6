"""The agent (gpureclaim/agent/) on the
simulated driver: processes holding fake-Torch cache, started with
GPURECLAIM_AGENT=1, asked from this process (the client) about their
memory and told to give it back; the paths and who may ask; a socket that
is planted, foreign, stale or hostile; fork; a request that runs long."""
import json
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from agentkit import (GiB, MiB, Target, driver_bytes, for_another_user,
                      raw_answer, sim_env, wait_for)
from conftest import PY_PATH

sys.path.insert(0, PY_PATH)
from gpureclaim import agent  # noqa: E402

CACHE = """\
t = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
keep = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
del t
"""


@pytest.fixture
def env(monkeypatch):
    """The sim, and the test's own folder of sockets, here too."""
    e = sim_env()
    monkeypatch.setenv("GPURECLAIM_AGENT_DIR", e["GPURECLAIM_AGENT_DIR"])
    return e


@pytest.fixture
def rule_env(monkeypatch):
    """The sim, the sockets where the folder rule puts them."""
    monkeypatch.delenv("GPURECLAIM_AGENT_DIR", raising=False)
    return sim_env(agent_dir=False)


def test_an_agent_answers_status_explain_and_release_exactly(env):
    with Target(env, CACHE) as t:
        path = agent.socket_path(t.pid)
        assert path == os.path.join(env["GPURECLAIM_AGENT_DIR"],
                                    f"{t.pid}.sock")
        st = os.lstat(path)
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
        d = os.lstat(os.path.dirname(path))
        assert stat.S_IMODE(d.st_mode) == 0o700 and d.st_uid == os.getuid()
        assert (t.pid, path) in list(agent.discover())
        assert list(agent.discover([t.pid])) == [(t.pid, path)]

        s = agent.ask(t.pid, "status")
        assert s["pid"] == t.pid and s["frameworks"] == ["torch"]
        assert s["argv"] == ["-c"] and s["gpureclaim"]
        before = driver_bytes(env, t.pid)[0]
        assert s["devices"] == {"0": before}

        full = agent.ask_full(t.pid, "explain")
        ex = full["result"]
        [g] = ex["gpus"]
        assert g["driver"] == before
        parts = {(p["kind"], p["source"]): p["bytes"] for p in g["parts"]}
        assert parts[("releasable", "torch")] == 2 * GiB
        assert parts[("live", "torch")] == 256 * MiB
        assert full["text"].startswith("gpureclaim.explain(): where this "
                                       "process's GPU memory goes")

        r = agent.ask(t.pid, "release")
        after = driver_bytes(env, t.pid)[0]
        assert r["source"] == "driver"
        assert r["bytes"] == before - after == 2 * GiB
        assert agent.ask(t.pid, "release")["bytes"] == 0
        rc, err = t.end()
        assert rc == 0 and err == "", err
    assert not os.path.lexists(path)  # atexit removed it


def test_release_passes_its_options_and_explain_its_devices(env):
    with Target(env, CACHE) as t:
        r = agent.ask(t.pid, "release", devices=[0], workspaces=True,
                      collect=False)
        assert r["bytes"] == 2 * GiB and r["collected"] is False
        ex = agent.ask(t.pid, "explain", devices=[0])
        assert [g["device"] for g in ex["gpus"]] == [0]


@pytest.mark.parametrize("op,args,says", [
    ("nope", {}, "unknown op 'nope'; accepted: status, explain, release, "
                 "trace"),
    ("release", {"force": True}, "release takes no force; accepted: "
                                 "devices, workspaces, collect"),
    ("release", {"collect": "sometimes"}, 'collect must be "auto", true '
                                          "or false"),
    ("explain", {"devices": "zero"}, "devices must be a list"),
    ("trace", {"action": "pause"}, 'trace takes action "start" or "stop"'),
    ("status", {"x": 1}, "status takes no x; accepted: none"),
])
def test_a_bad_request_is_one_line_saying_what_is_accepted(env, op, args,
                                                           says):
    with Target(env) as t:
        with pytest.raises(agent.AgentError) as e:
            agent.ask(t.pid, op, **args)
        assert e.value.kind == "error" and says in str(e.value)
        assert "\n" not in str(e.value)


def test_explain_passes_what_explain_accepts(env):
    """holders (another issue's) goes through when explain() takes it;
    here a stand-in explain with that keyword shows it arrives."""
    code = """\
    import gpureclaim
    real = gpureclaim.explain
    def explain(devices=None, *, measure_context=False, holders=False):
        e = real(devices, measure_context=measure_context)
        e.notes.append(f"holders={holders}")
        return e
    gpureclaim.explain = explain
    """
    with Target(env, code) as t:
        ex = agent.ask(t.pid, "explain", holders=True)
        assert "holders=True" in ex["notes"]


def test_trace_start_and_stop_through_the_agent(env, tmp_path):
    log = tmp_path / "t.trace"
    with Target(env, CACHE) as t:
        s = agent.ask(t.pid, "trace", action="start", path=str(log))
        assert s["action"] == "start" and s["path"] == str(log)
        with pytest.raises(agent.AgentError, match="records already"):
            agent.ask(t.pid, "trace", action="start")
        r = agent.ask(t.pid, "trace", action="stop")
        assert r["action"] == "stop" and "traced" in r
        with pytest.raises(agent.AgentError, match="no trace started"):
            agent.ask(t.pid, "trace", action="stop")


# -- paths and who may ask ------------------------------------------------

def test_the_folder_rule_without_the_variable(rule_env):
    with Target(rule_env) as t:
        want = (os.path.join(os.environ["XDG_RUNTIME_DIR"], "gpureclaim")
                if agent._xdg_ok(os.environ.get("XDG_RUNTIME_DIR"),
                                 os.getuid())
                else f"/tmp/gpureclaim-{os.getuid()}")
        assert agent.socket_path(t.pid) == f"{want}/{t.pid}.sock"
        assert agent.ask(t.pid, "status")["pid"] == t.pid


def test_xdg_runtime_dir_is_used_only_when_private(rule_env, tmp_path):
    env = rule_env
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    os.chmod(xdg, 0o700)
    with Target(dict(env, XDG_RUNTIME_DIR=str(xdg))) as t:
        assert agent.socket_path(t.pid) == str(xdg / "gpureclaim" /
                                               f"{t.pid}.sock")
        # found from the target's environment, not this process's
        assert agent.ask(t.pid, "status")["pid"] == t.pid
    os.chmod(xdg, 0o755)
    with Target(dict(env, XDG_RUNTIME_DIR=str(xdg))) as t:
        assert agent.socket_path(t.pid) == \
            f"/tmp/gpureclaim-{os.getuid()}/{t.pid}.sock"


def start_error(env, path):
    """What GPURECLAIM_AGENT=path says on stderr (the program runs)."""
    t = Target(env, agent=str(path))
    rc, err = t.end()
    assert rc == 0
    return err


@pytest.mark.parametrize("plant", ["file", "symlink", "dir"])
def test_a_planted_file_at_the_path_is_refused_and_left(env, tmp_path,
                                                       plant):
    d = tmp_path / "sock"
    d.mkdir(mode=0o700)
    os.chmod(d, 0o700)
    path = d / "agent.sock"
    if plant == "file":
        path.write_text("x")
    elif plant == "symlink":
        os.symlink("/etc/passwd", path)
    else:
        path.mkdir()
    err = start_error(env, path)
    want = {"file": "is not a socket", "symlink": "is a symbolic link",
            "dir": "is not a socket"}[plant]
    assert err.startswith(f"gpureclaim: GPURECLAIM_AGENT={path}: ") and \
        want in err and err.endswith("; not started\n"), err
    assert err.count("\n") == 1
    assert os.path.lexists(path)  # untouched
    if plant == "symlink":
        assert os.readlink(path) == "/etc/passwd"


def test_a_folder_open_to_others_is_refused(env, tmp_path):
    d = tmp_path / "open"
    d.mkdir()
    os.chmod(d, 0o755)
    err = start_error(env, d / "a.sock")
    assert "is not a directory of uid" in err and "mode 0700" in err, err


def test_a_foreign_socket_at_the_path_is_refused(env, tmp_path):
    if os.getuid() != 0:
        pytest.skip("needs root to make a socket of another uid")
    d = tmp_path / "s"
    d.mkdir(mode=0o700)
    os.chmod(d, 0o700)
    path = d / "a.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()
    os.chown(path, 65534, 65534)
    err = start_error(env, path)
    assert "belongs to uid 65534" in err and "not replaced" in err, err


def test_a_stale_socket_is_replaced_and_one_served_is_not(env, tmp_path):
    d = tmp_path / "s"
    d.mkdir(mode=0o700)
    os.chmod(d, 0o700)
    path = d / "a.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()  # nobody listens: stale
    with Target(env, agent=str(path)) as t:
        assert agent._owned_socket(str(path), os.getuid()) is None
        err = start_error(env, path)  # the first one serves it
        assert "another process serves this socket" in err, err
        assert t.proc.poll() is None
    assert not os.path.lexists(path)


def test_a_killed_agent_leaves_a_stale_socket_that_discover_cleans(env):
    t = Target(env)
    path = agent.socket_path(t.pid)
    t.proc.kill()
    t.end()
    assert os.path.lexists(path)
    with pytest.raises(agent.AgentError) as e:
        agent.ask(t.pid, "status")
    assert e.value.kind in ("no_agent", "died")
    assert t.pid not in dict(agent.discover())
    assert not os.path.lexists(path)


def test_a_process_without_an_agent_or_gone(env):
    with Target(env, agent=None) as t:
        with pytest.raises(agent.AgentError) as e:
            agent.ask(t.pid, "status")
        assert e.value.kind == "no_agent"
        assert f"process {t.pid} has no agent" in str(e.value)
    with pytest.raises(agent.AgentError) as e:
        agent.ask(t.pid, "status")
    assert e.value.kind == "no_agent" and "does not exist" in str(e.value)


def test_a_socket_served_by_another_process_is_refused(env, tmp_path):
    """A process of this user serving the socket of another pid (a
    planted server): the client sees by SO_PEERCRED it is not that pid's,
    and sends nothing."""
    with Target(env, agent=None) as victim:
        d = f"/tmp/gpureclaim-{os.getuid()}"
        os.makedirs(d, mode=0o700, exist_ok=True)
        path = os.path.join(d, f"{victim.pid}.sock")
        srv = socket.socket(socket.AF_UNIX)
        srv.bind(path)
        srv.listen(1)
        got = []
        th = threading.Thread(target=lambda: got.append(
            srv.accept()[0].recv(100)), daemon=True)
        th.start()
        try:
            with pytest.raises(agent.AgentError) as e:
                agent.ask(victim.pid, "release")
            assert e.value.kind == "refused"
            assert f"served by process {os.getpid()}" in str(e.value)
            th.join(2)
            assert got in ([], [b""])  # not a byte of the request
        finally:
            srv.close()
            os.unlink(path)


HOSTILE = """\
import os, socket, sys, time
mode = sys.argv[1]
d = f"/tmp/gpureclaim-{os.getuid()}"
os.makedirs(d, mode=0o700, exist_ok=True)
path = os.path.join(d, f"{os.getpid()}.sock")
s = socket.socket(socket.AF_UNIX)
s.bind(path)
os.chmod(path, 0o600)
s.listen(4)
print("ready", flush=True)
try:
    while True:
        c, _ = s.accept()
        c.recv(1 << 16)
        if mode == "garbage":
            c.sendall(b"\\x00\\xffnot json at all\\n")
        elif mode == "notprotocol":
            c.sendall(b'{"hello": 1}\\n')
        elif mode == "huge":
            chunk = b"x" * (1 << 20)
            try:
                for _ in range(40):
                    c.sendall(chunk)
            except OSError:
                pass
        elif mode == "slow":
            try:
                for _ in range(1000):
                    c.sendall(b" ")
                    time.sleep(0.05)
            except OSError:
                pass
        elif mode == "close":
            pass
        elif mode == "silent":
            time.sleep(60)
        elif mode == "badkind":
            c.sendall(b'{"v":1,"ok":false,"error":"no\\\\nway","kind":"zz"}\\n')
        c.close()
finally:
    os.unlink(path)
"""


@pytest.mark.parametrize("mode,kind,says", [
    ("garbage", "bad_answer", "not JSON"),
    ("notprotocol", "bad_answer", "not protocol version 1"),
    ("huge", "bad_answer", "larger than 16 MiB"),
    ("slow", "timeout", "did not answer in time"),
    ("silent", "timeout", "did not answer in time"),
    ("close", "bad_answer", "closed the connection without a full answer"),
    ("badkind", "error", "no way"),
])
def test_a_hostile_server_gets_a_clear_line_never_a_hang(mode, kind, says):
    p = subprocess.Popen([sys.executable, "-c", HOSTILE, mode],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        t0 = time.monotonic()
        with pytest.raises(agent.AgentError) as e:
            agent.ask(p.pid, "status", timeout=1.0)
        # the limit is the timeout, plus a scheduler's slack
        assert time.monotonic() - t0 < 1.0 + 5.0
        assert e.value.kind == kind and says in str(e.value), str(e.value)
        assert "\n" not in str(e.value)
    finally:
        p.kill()
        p.wait()


def test_a_stopped_process_is_a_timeout_that_says_so(env):
    with Target(env) as t:
        os.kill(t.pid, signal.SIGSTOP)
        try:
            wait_for(lambda: agent._proc_state(t.pid) == "T", what="stop")
            with pytest.raises(agent.AgentError) as e:
                agent.ask(t.pid, "status", timeout=0.5)
            assert e.value.kind == "timeout"
            assert "it is stopped" in str(e.value)
        finally:
            os.kill(t.pid, signal.SIGCONT)
        assert agent.ask(t.pid, "status")["pid"] == t.pid


def test_a_request_that_runs_long_is_cut_off_and_says_so(env):
    """A releaser of the user's that takes `delay` seconds: the agent
    answers at the request's timeout, before the client gives up; the
    release goes on; the next request waits its turn and is answered."""
    code = CACHE + textwrap.dedent("""\
    import time, gpureclaim, threading
    gate = threading.Event()
    gpureclaim.register("slow", lambda dev: gate.wait(30))
    """)
    with Target(env, code) as t:
        with pytest.raises(agent.AgentError) as e:
            agent.ask(t.pid, "release", timeout=0.5)
        assert e.value.kind == "timeout"
        assert "release did not finish within" in str(e.value)
        assert "goes on in the process" in str(e.value)
        # status does not wait for the release
        assert agent.ask(t.pid, "status", timeout=5)["pid"] == t.pid
        # another release waits for the first, which never ends here
        with pytest.raises(agent.AgentError) as e:
            agent.ask(t.pid, "release", timeout=0.5)
        assert e.value.kind == "timeout"
        assert "did not start" in str(e.value)


def test_a_request_cut_off_before_it_started_never_runs(env, tmp_path):
    """A release told "did not start" is dropped, not run once the
    operation before it ends: the releaser's calls count two releases
    (the first and a later one), never three."""
    gate, calls = tmp_path / "gate", tmp_path / "calls"
    code = CACHE + textwrap.dedent(f"""\
    import os, time, gpureclaim
    def slow(dev):
        with open({str(calls)!r}, "a") as f:
            f.write("call\\n")
        end = time.monotonic() + 60
        while not os.path.exists({str(gate)!r}) and time.monotonic() < end:
            time.sleep(0.01)
    gpureclaim.register("slow", slow)
    """)

    def count():
        return len(calls.read_text().splitlines()) if calls.exists() else 0

    with Target(env, code) as t:
        with pytest.raises(agent.AgentError) as e:
            agent.ask(t.pid, "release", timeout=0.5)
        assert "release did not finish within" in str(e.value)
        with pytest.raises(agent.AgentError) as e:
            agent.ask(t.pid, "release", timeout=0.5)
        assert "did not start" in str(e.value)
        gate.write_text("open")
        agent.ask(t.pid, "release", timeout=60)  # after the first ends
        two = count()
        agent.ask(t.pid, "release", timeout=60)
        each = count() - two
        assert each >= 1
        assert two == 2 * each


def test_a_request_never_sent_holds_nothing(env):
    """A client that connects and sends nothing does not stop others."""
    with Target(env) as t:
        idle = []
        for _ in range(3):
            c = socket.socket(socket.AF_UNIX)
            c.connect(agent.socket_path(t.pid))
            idle.append(c)
        assert agent.ask(t.pid, "status")["pid"] == t.pid
        for c in idle:
            c.close()


def test_the_server_refuses_a_request_too_large(env):
    with Target(env) as t:
        doc = json.loads(raw_answer(agent.socket_path(t.pid),
                                    b"{" + b" " * (80 << 10), timeout=10))
        assert doc["ok"] is False and "larger than 64 KiB" in doc["error"]


# -- fork ------------------------------------------------------------------

def test_a_forked_child_does_not_serve_its_parents_socket(env):
    code = """\
    import gpureclaim.agent as agent
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        st = agent.status()
        os.write(w, json.dumps(st).encode())
        os._exit(0)
    os.close(w)
    child = json.loads(os.read(r, 4096))
    os.waitpid(pid, 0)
    print("child", json.dumps(child), flush=True)
    """
    with Target(env, code) as t:
        assert t.said == ['child {"on": false, "path": null, '
                          '"requests": 0}\n']
        path = agent.socket_path(t.pid)
        assert os.path.lexists(path)  # the child's exit left it
        assert agent.ask(t.pid, "status")["pid"] == t.pid
        rc, err = t.end()
    assert rc == 0 and err == "", err


def test_a_forked_child_may_start_its_own(env):
    code = """\
    import gpureclaim.agent as agent
    pid = os.fork()
    if pid == 0:
        p = agent.start()
        print("childsock", p, flush=True)
        time.sleep(30)
        os._exit(0)
    time.sleep(0.5)
    """
    code = "import time\n" + textwrap.dedent(code)
    with Target(env, code) as t:
        line = t.said[0].split()
        assert line[0] == "childsock"
        child = int(os.path.basename(line[1]).split(".")[0])
        try:
            assert agent.ask(child, "status")["pid"] == child
            assert agent.ask(t.pid, "status")["pid"] == t.pid
        finally:
            os.kill(child, signal.SIGKILL)


# -- a second user -----------------------------------------------------------

@pytest.fixture
def other_user():
    """A uid created for the test (root only), removed after."""
    if os.getuid() != 0 or not shutil.which("useradd"):
        pytest.skip("needs root and useradd to create a second uid")
    name = f"gpra{os.getpid() % 100000}"
    subprocess.run(["useradd", "-M", "-N", "-s", "/bin/false", name],
                   check=True, capture_output=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], capture_output=True)
        shutil.rmtree(f"/tmp/gpureclaim-{pwd.getpwnam('root').pw_uid}-x",
                      ignore_errors=True)


def as_user(u):
    def become():
        os.setgid(u.pw_gid)
        os.setuid(u.pw_uid)
    return become


ASK = """\
import sys, json
sys.path.insert(0, sys.argv[1])
from gpureclaim import agent
try:
    agent.ask(int(sys.argv[2]), "status", timeout=5)
    print("answered")
except agent.AgentError as e:
    print(e.kind, e)
"""


def test_another_uid_is_refused_both_ways_and_root_may_ask(rule_env,
                                                           other_user,
                                                           tmp_path):
    with for_another_user(dict(rule_env, HOME="/")) as world:
        refused_both_ways_and_root_may_ask(world, other_user, tmp_path)


def refused_both_ways_and_root_may_ask(world, u, tmp_path):
    e, python = world.env, world.python
    # root's agent, asked by the other user: refused
    with Target(e) as mine:
        p = subprocess.run([python, "-c", ASK, world.py_path,
                            str(mine.pid)], env=e, capture_output=True,
                           text=True, preexec_fn=as_user(u), timeout=60)
        assert p.stdout.startswith("refused "), (p.stdout, p.stderr)
        assert "only that user and root" in p.stdout
        # the command's client (C), the same
        p = subprocess.run([world.gpr, "release", "--pid", str(mine.pid)],
                           env=e, capture_output=True, text=True,
                           preexec_fn=as_user(u), timeout=60)
        assert p.returncode == 1 and p.stderr == (
            f"gpureclaim release: process {mine.pid} belongs to uid 0; "
            f"only that user and root may ask it\n"), p.stderr
    # the other user's agent: root may ask it, in that user's folder
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(shared, 0o777)  # the sim's state and a cwd the user can use
    with Target(e, CACHE, preexec=as_user(u), python=python,
                boot=world.boot) as theirs:
        path = agent.socket_path(theirs.pid)
        assert path == f"/tmp/gpureclaim-{u.pw_uid}/{theirs.pid}.sock"
        assert os.lstat(path).st_uid == u.pw_uid
        assert agent.ask(theirs.pid, "status")["pid"] == theirs.pid
        assert (theirs.pid, path) in list(agent.discover())
        # the server's own check: a folder opened by mistake lets the
        # connection through, SO_PEERCRED still refuses it
        os.chmod(os.path.dirname(path), 0o711)
        os.chmod(path, 0o666)
        third = f"gprb{os.getpid() % 100000}"
        subprocess.run(["useradd", "-M", "-N", "-s", "/bin/false", third],
                       check=True, capture_output=True)
        try:
            v = pwd.getpwnam(third)
            raw = textwrap.dedent(f"""\
                import socket
                c = socket.socket(socket.AF_UNIX)
                c.connect({path!r})
                c.sendall(b'{{"v":1,"op":"release","args":{{}}}}\\n')
                got = b""
                while not got.endswith(b"\\n"):
                    chunk = c.recv(4096)
                    if not chunk:
                        break
                    got += chunk
                print(got.decode())
                """)
            p = subprocess.run([python, "-c", raw],
                               capture_output=True, text=True,
                               preexec_fn=as_user(v), timeout=60)
            assert p.stdout.strip(), (p.returncode, p.stderr)
            doc = json.loads(p.stdout)
            assert doc["ok"] is False and doc["kind"] == "refused", doc
            assert f"uid {v.pw_uid} may not ask" in doc["error"]
        finally:
            subprocess.run(["userdel", third], capture_output=True)
            os.chmod(os.path.dirname(path), 0o700)
        theirs.end()
    shutil.rmtree(f"/tmp/gpureclaim-{u.pw_uid}", ignore_errors=True)


# -- the ways in -------------------------------------------------------------

def test_gpureclaim_run_agent_starts_it_in_the_child(env):
    from agentkit import GPR

    code = ("import os, sys, torch\n"
            "t = torch.empty(1 << 30, dtype=torch.uint8, device='cuda'); del t\n"
            "print('ready', flush=True); sys.stdin.read()")
    p = subprocess.Popen([GPR, "run", "--agent", "--", sys.executable, "-c",
                          code], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        assert agent.ask(p.pid, "release")["bytes"] == GiB  # exec'd: one pid
    finally:
        p.stdin.close()
        p.wait(30)
    assert p.returncode == 0 and p.stderr.read() == ""


def test_sigterm_removes_the_socket(env):
    """A process with the agent ended by SIGTERM (its default action) takes
    its socket with it, as at a normal exit: only SIGKILL leaves one
    (issue 33); started by `gpureclaim run --agent` and by the variable."""
    from agentkit import GPR

    code = ("import sys, torch\n"
            "print('ready', flush=True); sys.stdin.read()")
    for argv in ([GPR, "run", "--agent", "--", sys.executable, "-c", code],
                 [sys.executable, "-c", "import gpureclaim.agent as a; "
                  "a.start(); " + code.replace("\n", "; ")]):
        p = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        try:
            assert p.stdout.readline() == "ready\n", p.stderr.read()
            path = agent.socket_path(p.pid)
            assert os.path.exists(path)
            p.send_signal(signal.SIGTERM)
            p.wait(30)
        finally:
            p.kill()
            p.wait()
        assert p.returncode == -signal.SIGTERM  # still ended by it
        assert not os.path.exists(path), argv[:2]


PTH_PROBE = """
import os, sys, site
sys.path.insert(0, {py!r})
site.addsitedir(sys.argv[1])   # processes the .pth there, as at start-up
from gpureclaim import agent
print(agent.status()["on"])
"""


@pytest.mark.parametrize("value,on", [("1", True), ("0", False)])
def test_the_pth_starts_the_agent_by_its_variable(env, tmp_path, value, on):
    from conftest import ROOT

    shutil.copy(os.path.join(ROOT, "python", "gpureclaim-startup.pth"),
                tmp_path)
    p = subprocess.run([sys.executable, "-S", "-c",
                        PTH_PROBE.format(py=PY_PATH), str(tmp_path)],
                       env=dict(env, GPURECLAIM_AGENT=value),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert p.stdout == f"{on}\n"
