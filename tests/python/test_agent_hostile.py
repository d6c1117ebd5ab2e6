"""Issue 34: what the agent's clients hear from a hostile agent, and how
the agent copes with a stopped or flooded process. A fake agent (a
process of this user serving its own pid's socket in the test's folder,
holding fake-Torch memory on the sim so that the driver lists it) answers
each operation with a line the test chooses; the commands (C:
cli/agent_client.c, cli/cmd_reclaim.c, cli/ps_explain.c, cli/cmd_agent.c;
Python: gpureclaim/agent/, `agent list`) must keep their sums exact and
their output free of terminal escapes, and say a bad answer in one line."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap

import pytest

from agentkit import GiB, Target, gpr, raw_answer, sim_env, wait_for
from conftest import FAKES_BUILD, PY_PATH

sys.path.insert(0, PY_PATH)
from gpureclaim import agent  # noqa: E402

BIG = (1 << 63) - 1

#: a fake agent: argv[1] is {"hold": MiB of fake-Torch memory to hold,
#: "answers": {op: the line to answer, without its newline}, "backlog": n,
#: "accept": false to never accept, "silent": true to read and never
#: answer}
FAKE = """\
import json, os, socket, sys, time
spec = json.loads(sys.argv[1])
if spec.get("hold"):
    import torch
    keep = torch.empty(spec["hold"] << 20, dtype=torch.uint8, device="cuda")
d = os.environ["GPURECLAIM_AGENT_DIR"]
path = os.path.join(d, f"{os.getpid()}.sock")
s = socket.socket(socket.AF_UNIX)
s.bind(path)
os.chmod(path, 0o600)
s.listen(spec.get("backlog", 16))
print("ready", flush=True)
if spec.get("accept") is False:
    time.sleep(3600)
while True:
    c, _ = s.accept()
    req = b""
    while not req.endswith(b"\\n"):
        chunk = c.recv(1 << 16)
        if not chunk:
            break
        req += chunk
    if spec.get("silent"):
        time.sleep(3600)
    try:
        op = json.loads(req)["op"]
    except ValueError:
        op = "?"
    line = spec["answers"].get(op, spec["answers"].get("*", "{}"))
    try:
        c.sendall(line.encode("utf-8", "surrogateescape") + b"\\n")
    except OSError:
        pass
    c.close()
"""


class Fake:
    def __init__(self, env, answers, hold=0, **spec):
        spec.update(answers=answers, hold=hold)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", FAKE, json.dumps(spec)], env=env,
            stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline() == "ready\n"
        self.pid = self.proc.pid

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            os.kill(self.pid, signal.SIGCONT)
        except OSError:
            pass
        self.proc.kill()
        self.proc.wait()


def ok(pid, result, **extra):
    return json.dumps(dict({"v": 1, "ok": True, "pid": pid,
                            "result": result}, **extra))


def released(pid, total, *gpus):
    """A release answer: "returned" [total, then per GPU ordinal, NVML
    index, bytes, known]."""
    flat = [total]
    for i, b in enumerate(gpus):
        flat += [i, i, b, 1]
    return ok(pid, {"bytes": total}, text="released", returned=flat,
              release_seconds=0.01)


def explained(pid, *parts_per_gpu):
    """An explain answer whose "groups" give each GPU the six parts."""
    flat = []
    for i, parts in enumerate(parts_per_gpu):
        flat += [i, i, *parts, -1]
    return ok(pid, {"gpus": []}, text="explained", groups=flat)


@pytest.fixture
def env(monkeypatch):
    e = sim_env()
    monkeypatch.setenv("GPURECLAIM_AGENT_DIR", e["GPURECLAIM_AGENT_DIR"])
    return e


CACHE = """\
t = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
keep = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
del t
"""


def consistent(rep, key="returned"):
    """total = the sum of the processes' rows = the sum of the GPUs'
    rows; each process's row = the sum of its GPUs'."""
    procs = rep["processes"]
    assert rep["total"] == sum(p[key] for p in procs)
    assert rep["total"] == sum(g[key] for g in rep["gpus"])
    per = "returnable" if key == "would_return" else "returned"
    for p in procs:
        assert p[key] == sum(g[per] for g in p["gpus"]), p
        assert all(g[per] >= 0 for g in p["gpus"]), p


# -- finding 4: reclaim's sums ----------------------------------------------

def test_reclaim_refuses_figures_beyond_the_drivers_and_never_overflows(
        env):
    """Two agents answering 2**63-1 bytes (the sum overflowed: "0 B (-2
    bytes)", or UBSan stopped the command): each is a bad answer, the
    figure above what the driver counts for that process; the honest
    process's bytes are the total."""
    with Fake(env, {"release": released(0, BIG, BIG)}, hold=64) as f1, \
            Fake(env, {"release": released(0, BIG, BIG)}, hold=64) as f2, \
            Target(env, CACHE) as t:
        for args in (("--json",), ()):
            r = gpr(env, "reclaim", "--timeout", "20", *args)
            assert r.returncode == 3, (r.stdout, r.stderr)
            if args:
                rep = json.loads(r.stdout)
                consistent(rep)
                assert rep["total"] == GiB
                failed = {p["pid"]: p for p in rep["failed"]}
                for f in (f1, f2):
                    assert failed[f.pid]["kind"] == "bad_answer"
                    assert "more than" in failed[f.pid]["error"]
                    assert "driver" in failed[f.pid]["error"]
            else:  # the honest one gave its cache at the first round
                first = r.stdout.splitlines()[0]
                assert first.endswith("3 answered and released 0 B "
                                      "(0 bytes)") or \
                    first.endswith("1 answered and released 0 B (0 bytes)"), \
                    r.stdout
                assert "GPU 0: 0 B (0 bytes) released by" in r.stdout
                assert f"  {f1.pid} " in r.stdout.split("Did not answer:")[1]


def test_reclaim_total_is_the_sum_of_its_rows_when_an_agent_says_less(
        env):
    """A negative figure (a process that allocated while it released)
    counts as 0 on its GPU and in the total alike: the total never goes
    below the rows (3 of 40 rounds printed -1 GiB against rows of 0)."""
    with Fake(env, {"release": released(0, -GiB, -GiB)}, hold=64) as f, \
            Target(env, CACHE) as t:
        r = gpr(env, "reclaim", "--json", "--timeout", "20")
        assert r.returncode == 0, (r.stdout, r.stderr)
        rep = json.loads(r.stdout)
        consistent(rep)
        got = {p["pid"]: p for p in rep["processes"]}
        assert got[f.pid]["returned"] == 0
        assert got[t.pid]["returned"] == GiB
        assert rep["total"] == GiB
        # the process's own total disagreeing with its GPUs' (-1 GiB
        # against 0): its GPUs' sum is its row
    with Fake(env, {"release": released(0, -GiB, 0)}, hold=64) as f:
        rep = json.loads(gpr(env, "reclaim", "--json").stdout)
        consistent(rep)
        assert rep["total"] == 0


def test_reclaim_dry_run_and_ps_explain_check_parts_against_the_driver(
        env):
    """explain's parts (ps --explain, reclaim --dry-run): a part larger
    than the driver's figure for the process ("would return 16.0 EiB" on
    a 16 GiB GPU) is the agent's bad answer; the GPU's line sums the
    others."""
    huge = explained(0, [0, BIG, 0, 0, 0, 0])
    with Fake(env, {"explain": huge}, hold=64) as f, \
            Target(env, CACHE) as t:
        r = gpr(env, "ps", "--explain", "--json", "--timeout", "20")
        assert r.returncode == 0, r.stderr
        g0 = json.loads(r.stdout)["gpus"][0]
        rows = {p["pid"]: p for p in g0["processes"]}
        assert rows[f.pid]["agent"]["kind"] == "bad_answer"
        assert "more than" in rows[f.pid]["agent"]["error"]
        assert g0["returnable"] == GiB
        r = gpr(env, "ps", "--explain", "--timeout", "20")
        assert "agent: bad_answer: " in r.stdout
        assert not [x for x in r.stdout.splitlines()
                    if "EiB" in x and "bad_answer" not in x], r.stdout
        assert "releasable by the 1 process with an agent: 1.0 GiB" in r.stdout
        r = gpr(env, "reclaim", "--dry-run", "--json", "--timeout", "20")
        rep = json.loads(r.stdout)
        consistent(rep, "would_return")
        assert rep["total"] == GiB
        assert {p["pid"] for p in rep["failed"]} == {f.pid}
        assert t.pid in {p["pid"] for p in rep["processes"]}


# -- finding 5: terminal escapes ---------------------------------------------

#: what a terminal obeys: OSC (window title), CSI (erase, colours), the
#: 8-bit CSI (U+009B and the raw byte), a bidi override, BEL
EVIL = "\x1b]0;pwned\x07\x1b[2J\x1b[31m\u009b1m\u202eevil"


def clean(text):
    for bad in ("\x1b", "\x07", "\u009b", "\u202e", "\udc9b", "\x9b"):
        assert bad not in text, repr(text)


def test_an_agents_text_reaches_no_terminal_with_its_escapes(env):
    """release --pid, explain --pid (text and --json), reclaim, ps
    --explain and agent list show an agent's error, text and status with
    its escapes made harmless ('?'); the JSON escapes them."""
    text = f"report {EVIL}\nsecond line {EVIL}"
    good = {
        # raw in the line: U+009B and U+202E as UTF-8, not escaped
        "explain": json.dumps({"v": 1, "ok": True, "pid": 0,
                               "result": {"gpus": [], "note": EVIL},
                               "text": text, "groups": []},
                              ensure_ascii=False),
        "status": ok(0, {"pid": 0, "argv": ["x", EVIL],
                         "python": "3" + EVIL, "frameworks": [EVIL]}),
        "release": json.dumps({"v": 1, "ok": False, "pid": 0,
                               "error": "no " + EVIL, "kind": "error"}),
    }
    bad = {"*": json.dumps({"v": 1, "ok": False, "pid": 0,
                            "error": "no " + EVIL, "kind": EVIL})}
    with Fake(env, good, hold=16) as f, Fake(env, bad, hold=16) as g:
        runs = [gpr(env, "explain", "--pid", f.pid),
                gpr(env, "explain", "--pid", f.pid, "--json"),
                gpr(env, "release", "--pid", f.pid),
                gpr(env, "release", "--pid", g.pid),
                gpr(env, "reclaim"), gpr(env, "reclaim", "--json"),
                gpr(env, "ps", "--explain"),
                gpr(env, "ps", "--explain", "--json"),
                gpr(env, "agent", "list"), gpr(env, "agent", "list",
                                                   "--json")]
        for r in runs:
            clean(r.stdout + r.stderr)
        assert "report " in runs[0].stdout and "second line" in runs[0].stdout
        assert runs[0].stdout.count("\n") == 2, runs[0].stdout
        doc = json.loads(runs[1].stdout)  # still JSON, the values kept
        assert doc["note"].startswith("\x1b]0;pwned")
        assert "gpureclaim release: process" in runs[2].stderr
        assert "no ?]0;pwned?" in runs[2].stderr
        for r in runs[4:8]:
            assert str(g.pid) in r.stdout
        assert str(f.pid) in runs[8].stdout and str(g.pid) in runs[8].stdout
        # the Python client's own fallback commands, too
        for cmd in ("explain", "release"):
            p = subprocess.run(
                [sys.executable, "-c",
                 "import sys; from gpureclaim._commands import agent as c; "
                 "sys.exit(c.%s_main(sys.argv[1:]))" % cmd,
                 "--pid", str(f.pid)], env=env, capture_output=True,
                text=True, timeout=60)
            clean(p.stdout + p.stderr)
            assert p.stdout or p.stderr


# -- finding 7: a full backlog, and requests whose askers gave up ----------

def test_a_full_backlog_is_busy_not_a_refusal_in_both_clients(env):
    """An agent that accepts nothing (stopped, or its thread stuck): once
    its queue of connections is full, connect() says EAGAIN. That is a
    timeout that says it is busy, not "refused: served by process 0"
    (the C client) nor "Resource temporarily unavailable" (Python's)."""
    with Fake(env, {}, accept=False, backlog=0) as f:
        path = agent.socket_path(f.pid)
        held = []
        while True:
            c = socket.socket(socket.AF_UNIX)
            c.setblocking(False)
            try:
                c.connect(path)
            except BlockingIOError:
                c.close()
                break
            held.append(c)
        try:
            r = gpr(env, "release", "--pid", f.pid, "--timeout", "0.3")
            assert r.returncode == 1
            assert "busy or not answering" in r.stderr, r.stderr
            assert "refused" not in r.stderr and "process 0" not in r.stderr
            with pytest.raises(agent.AgentError) as e:
                agent.ask(f.pid, "status", timeout=0.3)
            assert e.value.kind == "timeout", str(e.value)
            assert "busy or not answering" in str(e.value)
            r = gpr(env, "reclaim", "--json", "--timeout", "0.3")
            [x] = json.loads(r.stdout)["failed"]
            assert x["kind"] == "timeout" and "busy" in x["error"]
        finally:
            for c in held:
                c.close()


def test_a_request_whose_asker_gave_up_never_runs(env, tmp_path):
    """Releases sent to a stopped process, whose askers (both clients)
    gave up: after SIGCONT the agent reads them and runs none (they
    carry their asker's deadline; without it, the agent sees the
    connection closed). Two later releases run, one each."""
    calls = tmp_path / "calls"
    code = CACHE + textwrap.dedent(f"""\
    import gpureclaim
    def count(dev):
        with open({str(calls)!r}, "a") as f:
            f.write("call\\n")
    gpureclaim.register("count", count)
    """)

    def n():
        return len(calls.read_text().splitlines()) if calls.exists() else 0

    with Target(env, code) as t:
        os.kill(t.pid, signal.SIGSTOP)
        try:
            wait_for(lambda: agent._proc_state(t.pid) == "T", what="stop")
            for _ in range(2):
                with pytest.raises(agent.AgentError) as e:
                    agent.ask(t.pid, "release", timeout=0.3)
                assert e.value.kind == "timeout"
            r = gpr(env, "release", "--pid", t.pid, "--timeout", "0.3")
            assert r.returncode == 1 and "it is stopped" in r.stderr
            # an old client's request: no deadline, its connection closed
            c = socket.socket(socket.AF_UNIX)
            c.connect(agent.socket_path(t.pid))
            c.sendall(b'{"v":1,"op":"release","args":{},"timeout":5}\n')
            c.close()
        finally:
            os.kill(t.pid, signal.SIGCONT)
        agent.ask(t.pid, "release", timeout=60)
        first = n()
        agent.ask(t.pid, "release", timeout=60)
        assert first >= 1 and n() == 2 * first, (first, n())


# -- finding 13: one bound for the whole command ----------------------------

def no_threads(env):
    lib = os.path.join(FAKES_BUILD, "libno_threads.so")
    pre = " ".join(x for x in (env.get("LD_PRELOAD"), lib) if x)
    return dict(env, LD_PRELOAD=pre)


def test_without_threads_the_timeout_bounds_the_whole_command(env):
    """No thread can be started (RLIMIT_NPROC reached): reclaim and ps
    --explain ask the agents in turn, and --timeout still bounds the
    command: the first silent agent takes it all, the others are said
    not to have been asked (4 silent agents at --timeout 2 took 8 s)."""
    fakes = [Fake(env, {}, silent=True, hold=16) for _ in range(3)]
    try:
        e = no_threads(env)
        r = gpr(e, "reclaim", "--json", "--timeout", "1")
        assert r.returncode == 3, r.stderr
        failed = json.loads(r.stdout)["failed"]
        assert len(failed) == 3
        says = sorted("was not asked" in x["error"] for x in failed)
        assert says == [False, True, True], failed
        assert all(x["kind"] == "timeout" for x in failed)
        r = gpr(e, "ps", "--explain", "--timeout", "1")
        assert r.returncode == 0, r.stderr
        assert r.stdout.count("was not asked: the command's time") == 2, \
            r.stdout
        assert r.stdout.count("did not answer in time") == 1
    finally:
        for f in fakes:
            f.__exit__()


# -- finding 6: deep JSON -----------------------------------------------------

def test_a_deeply_nested_answer_is_a_bad_answer_and_a_deep_request_answered(
        env):
    """An answer of 1,000 nested arrays (4 KB) made the Python client raise
    RecursionError: `agent list` ended in a traceback, the good agents
    unlisted. It is AgentError bad_answer (the C client's "not JSON"); a
    request nested 1,000 or 30,000 deep gets an answer (it got none)."""
    deep = '{"v":1,"ok":true,"pid":0,"result":' + "[" * 1000 + \
        "]" * 1000 + "}"
    with Fake(env, {"*": deep}) as f, Target(env) as t:
        with pytest.raises(agent.AgentError) as e:
            agent.ask(f.pid, "status", timeout=10)
        assert e.value.kind == "bad_answer"
        assert "not JSON" in str(e.value)
        r = gpr(env, "agent", "list")
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        rows = {int(x.split()[0]): x for x in r.stdout.splitlines()[1:]}
        assert "bad_answer" in rows[f.pid] and "torch" in rows[t.pid]
        for depth in (1000, 30000):
            doc = json.loads(raw_answer(
                agent.socket_path(t.pid), b'{"v":1,"op":"status","args":' +
                b"[" * depth + b"]" * depth + b"}\n"))
            assert doc["ok"] is False and doc["kind"] == "error", doc
        assert agent.ask(t.pid, "status")["pid"] == t.pid


# -- finding 8: no thread to be had -------------------------------------------

NO_THREAD = """\
import threading
_start = threading.Thread.start
fails = [2]
def start(self):
    # RLIMIT_NPROC reached for a moment: what Thread.start raises then
    if self.name.startswith("gpureclaim-agent-") and fails[0] > 0:
        fails[0] -= 1
        raise RuntimeError("can't start new thread")
    return _start(self)
threading.Thread.start = start
"""


def test_the_listening_thread_survives_a_thread_that_cannot_start(env):
    """A request whose thread cannot be started (the user's process limit
    reached for a moment) is answered busy; the listening thread goes on
    and serves the next (it died, a traceback in the program's stderr,
    every later request a timeout)."""
    with Target(env, NO_THREAD) as t:
        for _ in range(2):
            with pytest.raises(agent.AgentError) as e:
                agent.ask(t.pid, "status", timeout=10)
            assert e.value.kind == "error", str(e.value)
            assert "no thread could be started" in str(e.value)
        assert agent.ask(t.pid, "status", timeout=10)["pid"] == t.pid
        code, err = t.end()
        assert "Traceback" not in err, err


# -- another user ------------------------------------------------------------

def make_user(name, home=None):
    if os.getuid() != 0 or not shutil.which("useradd"):
        pytest.skip("needs root and useradd to create another uid")
    args = ["useradd", "-N", "-s", "/bin/false"]
    args += ["-m", "-d", home] if home else ["-M"]
    subprocess.run([*args, name], check=True, capture_output=True)
    import pwd
    return pwd.getpwnam(name)


def drop_user(name):
    subprocess.run(["userdel", "-r", name], capture_output=True)
    subprocess.run(["userdel", name], capture_output=True)


def as_user(u):
    def become():
        os.setgid(u.pw_gid)
        os.setuid(u.pw_uid)
    return become


def public_copy():
    """The built package and the fake frameworks copied where every user
    may read them (the checkout may live under a folder only its owner
    can enter; /tmp is open to all): (an interpreter every user may run,
    the PYTHONPATH another uid's Python uses). Removed at the end."""
    import atexit
    import tempfile

    from agentkit import world_python
    from conftest import FAKES

    python = world_python()
    if python is None:
        pytest.skip("no Python interpreter that another user may run")
    base = tempfile.mkdtemp(prefix="gpr-public-", dir="/tmp")
    atexit.register(shutil.rmtree, base, True)
    shutil.copytree(PY_PATH, os.path.join(base, "py"), symlinks=False)
    shutil.copytree(FAKES, os.path.join(base, "fakes"), symlinks=False)
    for root, dirs, files in os.walk(base):
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    return python, os.pathsep.join([os.path.join(base, "py"),
                                    os.path.join(base, "fakes")])


#: an agent started as the user would (GPURECLAIM_AGENT=1 through the
#: startup hook), then waiting for stdin to close
AGENT = """\
import os, sys
from gpureclaim import agent
try:
    print("path", agent.start(), flush=True)
except OSError as e:
    print("error", e, flush=True)
sys.stdin.read()
"""


# -- finding 14: a squatted /tmp/gpureclaim-UID ------------------------------

def test_a_squatted_tmp_folder_falls_back_to_the_users_own(monkeypatch):
    """Another user made /tmp/gpureclaim-UID first: the victim's agent
    (without XDG_RUNTIME_DIR) never started, told to "remove it", which
    it cannot in sticky /tmp. It falls back to a folder only that user can
    make (~/.gpureclaim, its home from the password database), says so in
    one line, and both clients (root's C and Python) find it there."""
    name = f"gprv{os.getpid() % 100000}"
    home = f"/tmp/{name}-home"
    u = make_user(name, home)
    squat = f"/tmp/gpureclaim-{u.pw_uid}"
    try:
        python, path = public_copy()
        os.mkdir(squat, 0o777)  # root's, open: not the victim's
        e = sim_env(agent_dir=False)
        e.pop("XDG_RUNTIME_DIR", None)
        e.update(PYTHONPATH=path, HOME=home)
        p = subprocess.Popen([python, "-c", AGENT], env=e, cwd="/",
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             preexec_fn=as_user(u))
        try:
            said = p.stdout.readline().split(None, 1)
            assert said[0] == "path", said
            want = os.path.join(home, ".gpureclaim")
            assert said[1].strip() == f"{want}/{p.pid}.sock"
            err = p.stderr.readline()
            assert squat in err and want in err and "instead" in err, err
            monkeypatch.delenv("GPURECLAIM_AGENT_DIR", raising=False)
            assert agent.ask(p.pid, "status")["pid"] == p.pid
            assert p.pid in dict(agent.discover())
            env = dict(e)
            env.pop("PYTHONPATH")
            r = gpr(env, "explain", "--pid", p.pid, "--json")
            assert r.returncode == 0, r.stderr
        finally:
            p.stdin.close()
            p.wait(30)
    finally:
        shutil.rmtree(squat, ignore_errors=True)
        drop_user(name)
        shutil.rmtree(home, ignore_errors=True)
