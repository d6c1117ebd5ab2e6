"""The agent's protocol as recorded exchanges (docs/agent.md, "The
protocol"), which both clients, Python's (gpureclaim/agent/) and C's
(cli/agent_client.c), are tested against: tests/python/
test_agent_protocol.py and tests/cli/test_agent_protocol.py replay every
one against the fake agent of fake_agent.py, so the clients cannot drift.

One exchange a file, NAME.json:

- "what": what it shows, in words;
- "ask": {"op", "args", "timeout"}: what the client is asked;
- "request": the bytes the client must send (its JSON line), or "" where
  it must send none; its "deadline" (the moment the client stops waiting,
  on CLOCK_MONOTONIC: a time) is recorded as D, the request's number put
  there before the comparison (normal());
- "agent": how the fake serves (default "answers"): "answers" binds the
  socket of its own pid; "none" binds nothing; "stale" binds and closes
  it (a socket nobody serves); "link" puts a symbolic link there;
  "another" serves the socket of another process (a child of its own);
- "answer": what it sends back, a list of parts: a string (its UTF-8
  bytes), {"hex": "..."} (raw bytes), {"repeat": "x", "times": N};
- "then": after the answer, "close" (default) the connection, "hold" it
  open without a byte more, or "exit" before answering at all;
- "expect": {"ok": true} (the answer's result), {"ok": true, "result": V}
  (V), or {"kind": K, "says": TEXT}: the failure the client must report,
  its kind one of docs/agent.md's and its one line holding TEXT ("{pid}"
  standing for the pid asked).

record.py records the exchanges of a real agent (the answers of
"status", "explain", "release"...) on the simulated driver.
"""
import contextlib
import glob
import json
import os
import shutil
import subprocess
import sys
import re
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fake_agent.py")
#: docs/agent.md's kinds: the exchanges show each of them
KINDS = ("no_agent", "refused", "timeout", "died", "bad_answer", "error")


def load():
    """{name: exchange} of every file here."""
    out = {}
    for path in sorted(glob.glob(os.path.join(HERE, "*.json"))):
        with open(path, encoding="utf-8") as f:
            out[os.path.basename(path)[:-5]] = json.load(f)
    return out


def answer_bytes(x):
    out = bytearray()
    for part in x.get("answer", []):
        if isinstance(part, str):
            out += part.encode()
        elif "hex" in part:
            out += bytes.fromhex(part["hex"])
        else:
            out += part["repeat"].encode() * part["times"]
    return bytes(out)


def check(x, pid, got):
    """What a client made of exchange x with process pid, ("ok", value)
    or ("fail", kind, its line), is what x expects."""
    e = x["expect"]
    if not e.get("ok"):
        says = e["says"].replace("{pid}", str(pid))
        assert got[:2] == ("fail", e["kind"]) and says in got[2], (got, e)
        assert "\n" not in got[2]
        return
    if "result" in e:
        want = e["result"]
    else:
        want = json.loads(answer_bytes(x).split(b"\n")[0])["result"]
    assert got == ("ok", want), str(got)[:200]


def request_line(x, deadline=None):
    """The request as the clients write it: what "request" records (its
    deadline D), or with a deadline the line to send."""
    a = x["ask"]
    line = json.dumps({"v": 1, "op": a["op"], "args": a["args"],
                       "timeout": a["timeout"], "deadline": 0},
                      separators=(",", ":")) + "\n"
    return line.replace('"deadline":0}',
                        f'"deadline":{"D" if deadline is None else deadline}}}')


_DEADLINE = re.compile(rb'"deadline":-?[0-9][0-9.eE+-]*}\n\Z')


def normal(request):
    """A request's bytes with its deadline's number as D (the recorded
    form): the rest is compared byte for byte."""
    return _DEADLINE.sub(b'"deadline":D}\n', request)


def args_members(x):
    """The args as the C client takes them: the members of the object."""
    return json.dumps(x["ask"]["args"], separators=(",", ":"))[1:-1]


def _wait_for(path, limit=60.0):
    end = time.monotonic() + limit
    while not os.path.exists(path):
        if time.monotonic() > end:
            raise AssertionError(f"the fake agent wrote no {path}")
        time.sleep(0.01)


@contextlib.contextmanager
def folder():
    """A folder for the sockets, removed after."""
    d = tempfile.mkdtemp(prefix="gpr-protocol-")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def serve(name, folder, env=None):
    """The fake agent of exchange `name`, its sockets in `folder` (the
    GPURECLAIM_AGENT_DIR of both sides): yields (pid to ask, a function
    that returns the bytes of the request it got once it has them)."""
    got = os.path.join(folder, f"{name}.request")
    p = subprocess.Popen([sys.executable, FAKE,
                          os.path.join(HERE, f"{name}.json"), folder, got],
                         env=env, stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline().split()
        assert line[:1] == ["ready"], f"the fake agent did not start: {line}"

        def request():
            _wait_for(got)
            with open(got, "rb") as f:
                return f.read()

        yield int(line[1]), request
    finally:
        p.kill()
        p.wait()
