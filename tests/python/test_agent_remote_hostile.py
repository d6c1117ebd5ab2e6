"""Issue 34, `gpureclaim agent start --pid N`
(gpureclaim/agent/_remote_start.py) under attack: its script never acted on by path twice, a temporary folder
others can write refused (finding 1); a start that fails inside the
process said in one line, at once, nothing in the program's output
(finding 11); the kernel's wake-up only over tcp on loopback (finding
12)."""
import json
import os
import socket
import stat
import sys
import threading

import pytest

from agentkit import PY_PATH, gpr
from test_agent_remote import (env, leftovers, needs_remote,  # noqa: F401
                               remote_target)

sys.path.insert(0, PY_PATH)
from gpureclaim.agent import _remote_start  # noqa: E402


# -- finding 1: the script, by its descriptor only -----------------------------

def test_the_script_is_made_through_its_descriptor_never_its_path(
        tmp_path, monkeypatch):
    """chmod and chown by path let the target user swap the file for a
    link between mkstemp and them (root's TMPDIR writable by that user):
    root's 0600 file became theirs. The mode and owner are set on the
    open descriptor."""
    called = []
    for name in ("chmod", "chown", "lchown"):
        def by_path(*a, _n=name, **k):
            called.append((_n, a))
            raise AssertionError(f"os.{_n} by path")
        monkeypatch.setattr(os, name, by_path)
    path, err = _remote_start._write_script(str(tmp_path), os.getuid())
    try:
        assert called == []
        st = os.lstat(path)
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o644
        text = open(path).read()
        assert "_gpr_agent.start()" in text and path in text
        assert os.fstat(err).st_size == 0
    finally:
        os.close(err)
        os.unlink(path)
        os.unlink(path + ".err")


@pytest.mark.parametrize("mode,refused", [(0o777, True), (0o1777, False),
                                          (0o755, False)])
def test_a_folder_others_may_write_is_refused_unless_sticky(
        tmp_path, monkeypatch, mode, refused):
    d = tmp_path / "tmp"
    d.mkdir()
    os.chmod(d, mode)
    monkeypatch.setenv("TMPDIR", str(d))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    if refused:
        with pytest.raises(_remote_start.Refused) as e:
            _remote_start._script_dir(os.getpid(), os.getuid())
        assert f"others may write {d}" in str(e.value)
        assert "\n" not in str(e.value)
        assert os.listdir(d) == []
    else:
        assert _remote_start._script_dir(os.getpid(), os.getuid()) == str(d)


@needs_remote
def test_agent_start_refuses_a_temporary_folder_others_may_write(env):  # noqa: F811
    os.chmod(env["SCRATCH"], 0o777)
    with remote_target(env) as t:
        r = gpr(env, "agent", "start", "--pid", t.pid)
        assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
        assert "others may write" in r.stderr
        assert leftovers(env) == []


# -- finding 11: a start that fails in the process ------------------------------

@needs_remote
def test_a_start_that_fails_in_the_process_is_one_line_at_once(
        env, tmp_path):  # noqa: F811
    """The process's agent folder is not private: the start fails there.
    The command said "blocked main thread" after the whole --timeout, and
    the program's stderr got "Error executing debugger script" and a
    traceback. It says the real reason in one line; the program's output
    has nothing of it."""
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o755)
    e = dict(env, GPURECLAIM_AGENT_DIR=str(open_dir))
    with remote_target(e) as t:
        r = gpr(env, "agent", "start", "--pid", t.pid, "--timeout", "20")
        assert r.returncode == 1, r.stderr
        assert r.stderr.count("\n") == 1, r.stderr
        assert "could not start the agent" in r.stderr
        assert "is not a directory of uid" in r.stderr, r.stderr
        assert "blocked" not in r.stderr
        code, err = t.end()
        assert "Traceback" not in err and "debugger script" not in err, err
        assert leftovers(env) == []


# -- finding 12: the kernel's wake-up ---------------------------------------------

def test_the_wake_up_is_tcp_on_loopback_only(tmp_path):
    """A user's connection file with "transport": "ipc" pointed root's
    wake-up at a root-only Unix socket (a ZeroMQ greeting written there).
    Only tcp on loopback is used; anything else is refused in one line,
    and nothing connects."""
    target = tmp_path / "root-only"
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(target) + "-1")
    srv.listen(4)
    srv.settimeout(0.5)
    got = []

    def watch():
        try:
            got.append(srv.accept())
        except OSError:
            pass

    th = threading.Thread(target=watch)
    th.start()
    for info in ({"transport": "ipc", "ip": str(target), "shell_port": 1},
                 {"transport": "tcp", "ip": "10.1.2.3", "shell_port": 1},
                 {"transport": "udp", "ip": "127.0.0.1", "shell_port": 1}):
        f = tmp_path / "kernel.json"
        f.write_text(json.dumps(dict(info, key="", signature_scheme=
                                     "hmac-sha256")))
        why = _remote_start._wake(str(f), None, 0.5)
        assert why and "\n" not in why, why
        assert "tcp on this machine's loopback" in why, why
    th.join()
    srv.close()
    assert got == []
