"""Processes with an agent on the simulated driver, for the agent's tests
(test_agent.py, test_agent_cli.py, test_agent_notebook.py): each one a
fresh interpreter holding fake-Torch cache, started the way a user starts
it (GPURECLAIM_AGENT through the bootstrap's startup hook), told to exit
by closing its stdin."""
import atexit
import contextlib
import json
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid

from conftest import FAKES, FAKES_BUILD, PY_PATH, SAN_PRELOAD, SIM_DIR

GiB = 1 << 30
MiB = 1 << 20
BOOT = os.path.join(PY_PATH, "gpureclaim", "_startup", "_bootstrap")
GPR = os.environ.get("GPURECLAIM_BIN", os.path.join(
    os.path.dirname(PY_PATH), "cli", "gpureclaim"))

#: what a target runs before its own code: fake Torch on the sim
HOLD = """\
import os, sys, json
import torch
"""
#: ... and after it: says "ready" (with its pid), waits for stdin to close
WAIT = """\
print("ready", os.getpid(), flush=True)
sys.stdin.read()
"""


def remove_state(state):
    """The sim's state files of `state`, whoever's they are."""
    for f in glob.glob(f"/dev/shm/gpureclaim-sim-*-{state}"):
        try:
            os.unlink(f)
        except OSError:
            pass


def sim_env(state=None, gpus=1, agent_dir=True, **extra):
    """The environment of the sim, nothing of gpureclaim's features on;
    the agents' sockets in a folder of the test's own
    (GPURECLAIM_AGENT_DIR; agent_dir=False: the usual rule), so that
    discovery and reclaim see only the test's agents."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("GPURECLAIM_", "PYTHON"))}
    state = state or "agent-" + uuid.uuid4().hex[:10]
    # a target killed with SIGKILL leaves its rows in the sim's state
    # file, which only a later reader would prune: none comes
    atexit.register(remove_state, state)
    e.update(GPURECLAIM_SIM=f"gpus={gpus};memory=16GiB;state={state}",
             GPURECLAIM_CUDA_LIBRARY=os.path.join(SIM_DIR, "libcuda.so.1"),
             GPURECLAIM_NVML_LIBRARY=os.path.join(SIM_DIR,
                                                  "libnvidia-ml.so.1"),
             PYTHONPATH=os.pathsep.join([PY_PATH, FAKES]),
             PYTHONDONTWRITEBYTECODE="1", GPURECLAIM_BIN=GPR)
    if SAN_PRELOAD:
        e["LD_PRELOAD"] = SAN_PRELOAD
    if agent_dir:
        d = tempfile.mkdtemp(prefix="gpr-agents-")
        atexit.register(shutil.rmtree, d, True)
        e["GPURECLAIM_AGENT_DIR"] = d
    e.update({k: str(v) for k, v in extra.items()})
    return e


class Target:
    """A process started with `code` between HOLD and WAIT."""

    def __init__(self, env, code="", agent="1", preexec=None, hold=HOLD,
                 python=sys.executable, boot=BOOT):
        e = dict(env)
        if agent is not None:
            e["GPURECLAIM_AGENT"] = agent
            e["PYTHONPATH"] = os.pathsep.join([boot, e["PYTHONPATH"]])
        src = hold + textwrap.dedent(code) + WAIT
        self.proc = subprocess.Popen(
            [python, "-c", src], env=e, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=preexec)
        self.said = []  # what it printed before "ready"
        line = self.proc.stdout.readline()
        while line and not line.startswith("ready"):
            self.said.append(line)
            line = self.proc.stdout.readline()
        if not line.startswith("ready"):
            self.proc.kill()
            raise AssertionError(f"the target did not start: {line!r} "
                                 f"{self.proc.stderr.read()}")
        self.pid = self.proc.pid

    def end(self, timeout=30):
        """Closes stdin; returns (returncode, stderr)."""
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGCONT)
            except OSError:
                pass
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.proc.returncode, self.proc.stderr.read()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.end()


def reachable_by_all(path):
    """Every folder on the way to path (resolved), and path, may be
    searched by every user."""
    import stat

    parts = os.path.realpath(path).split("/")
    return all(os.stat("/".join(parts[:i])).st_mode & stat.S_IXOTH
               for i in range(2, len(parts) + 1))


def world_python():
    """An interpreter every user may run (this one, unless it lives in a
    private folder such as /root), or None."""
    for cand in (sys.executable, shutil.which("python3", path="/usr/bin")):
        if cand and reachable_by_all(cand):
            return cand
    return None


class World:
    """What for_another_user() yields: env (the given environment with its
    paths moved to where the other uid reads them), python (an interpreter
    it may run), py_path (the built package), boot (its startup hook's
    folder, Target's boot), gpr (the command), and where
    (the folder of the copies, or None when nothing had to be copied)."""

    def __init__(self, env, python, moves, where):
        self.where, self._moves = where, moves
        self.env = {k: self.path(v) for k, v in env.items()}
        self.python = python
        self.py_path = self.path(PY_PATH)
        self.boot = self.path(BOOT)
        self.gpr = self.path(GPR)

    def path(self, text):
        """text (a path, or a PATH-like list) with every path this test
        tree's uid alone may read replaced by its copy."""
        for old, new in self._moves:
            text = text.replace(old, new)
        return text


@contextlib.contextmanager
def for_another_user(env):
    """What a process of another uid needs from this build, where that uid
    can read it, wherever the checkout lives: the built package and its
    extension, the fake frameworks and their stand-in libraries, the sim's
    libraries and the command. Each that lies in a folder another user
    cannot reach (a clone under a 0700 `mktemp -d`, /root) is copied into
    one fresh folder under /tmp (0755, removed after); the rest is used
    where it is. Skips the test, saying why, when no interpreter may be
    run by every user. Yields a World; use world.env for the other uid's
    processes and world.py_path, world.gpr, world.python in their
    commands."""
    import pytest

    python = world_python()
    if python is None:
        pytest.skip("no Python interpreter that another user may run")
    # each path, and which of its entries the other uid needs (None: all)
    needs = [(PY_PATH, lambda n: n == "gpureclaim"),
             (FAKES, None),
             (SIM_DIR, lambda n: n.startswith("lib") and ".so" in n),
             (FAKES_BUILD, lambda n: n.endswith(".so")),
             (GPR, None)]
    moves, where = [], None
    try:
        for src, wanted in needs:
            if not os.path.exists(src) or reachable_by_all(src):
                continue
            if where is None:
                where = tempfile.mkdtemp(prefix="gpr-world-", dir="/tmp")
            dst = os.path.join(where, str(len(moves)),
                               os.path.basename(src))
            os.makedirs(os.path.dirname(dst))
            ignore = shutil.ignore_patterns("__pycache__")
            if os.path.isfile(src):
                shutil.copy2(src, dst)
            elif wanted is None:
                shutil.copytree(src, dst, ignore=ignore)
            else:
                os.makedirs(dst)
                for n in filter(wanted, os.listdir(src)):
                    f = os.path.join(src, n)
                    if os.path.isdir(f):
                        shutil.copytree(f, os.path.join(dst, n),
                                        ignore=ignore)
                    else:
                        shutil.copy2(f, dst)
            moves.append((src, dst))
        if where:
            for d, dirs, files in os.walk(where):
                for f in [d] + [os.path.join(d, n) for n in files]:
                    m = os.stat(f).st_mode
                    os.chmod(f, m | 0o044 | (0o011 if m & 0o100 else 0))
        # the longest first, so that a path inside another moves with its
        # own copy
        moves.sort(key=lambda m: -len(m[0]))
        yield World(env, python, moves, where)
    finally:
        if where:
            shutil.rmtree(where, ignore_errors=True)


def driver_bytes(env, pid):
    """The driver's figure for pid on each GPU, as `gpureclaim ps --json`
    reads NVML (from outside the process)."""
    p = subprocess.run([GPR, "ps", "--json"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    out = {}
    for g in json.loads(p.stdout)["gpus"]:
        for q in g["processes"]:
            if q["pid"] == pid:
                out[g["gpu"]] = q["bytes"]
    return out


def gpr(env, *args, timeout=60):
    """`gpureclaim ARGS` -> CompletedProcess (text)."""
    return subprocess.run([GPR, *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=timeout)


def wait_for(cond, seconds=30.0, what="condition"):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def remote_exec_python():
    """(python, site) of a Python that has sys.remote_exec (3.14 or newer)
    and ipykernel: this one, or the one scripts/python-remote-exec.sh made
    (make check's install-deps runs it), where its site is the folder of
    its ipykernel (None: its own). None where there is none."""
    if hasattr(sys, "remote_exec"):
        return sys.executable, None
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          "..", "..", "scripts", "python-remote-exec.sh")
    p = subprocess.run(["bash", script, "--find"], capture_output=True,
                       text=True, timeout=60)
    if p.returncode != 0:
        return None
    python = p.stdout.strip()
    return python, os.path.join(os.path.dirname(python), "site")


def raw_answer(path, data, timeout=30):
    """data sent as is to the agent's socket at path; its answer's line
    (bytes, what came before the end of the connection)."""
    import socket

    c = socket.socket(socket.AF_UNIX)
    c.settimeout(timeout)
    try:
        c.connect(path)
        try:
            c.sendall(data)
        except OSError:
            pass
        got = b""
        while not got.endswith(b"\n"):
            chunk = c.recv(4096)
            if not chunk:
                break
            got += chunk
        return got
    finally:
        c.close()
