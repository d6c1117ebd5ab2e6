"""The agent: a thread in a running Python process that answers other
processes of the same user (or root) about its GPU memory, and gives the
memory back when asked (docs/agent.md; the protocol is
prompts/agent-protocol.md's, repeated there).

Opt-in, four ways: :func:`start`; ``GPURECLAIM_AGENT=1`` in the
environment (the startup hook, gpureclaim/_startup/); ``gpureclaim run
--agent -- CMD``; ``%load_ext gpureclaim`` in IPython/Jupyter. Python 3.14
adds a fifth for a process that never opted in: ``gpureclaim agent start
--pid N`` (``sys.remote_exec``).

The server (gpureclaim/agent/_server.py) listens on a Unix socket,
``$XDG_RUNTIME_DIR/gpureclaim/<pid>.sock`` or
``/tmp/gpureclaim-<uid>/<pid>.sock`` (directory 0700, socket 0600), and
checks every peer with SO_PEERCRED. The client here (:func:`ask`,
:func:`discover`) checks the other way: the socket file is a socket owned
by the target's user, and the process behind it is the target (its pid
and uid, by SO_PEERCRED), before it sends a byte. It never waits past its
timeout and never raises anything but :class:`AgentError` on a hostile or
broken answer.
"""
from __future__ import annotations

import errno
import json
import os
import socket
import time
from typing import Any, Iterator, Optional

from . import _protocol

# the protocol's names are gpureclaim.agent's too (agent.VERSION,
# agent.server_dir(), ...), as they were before it had a module
from ._protocol import (DIR_VARIABLE, KINDS, MAX_ANSWER, MAX_REQUEST, OPS,
                        VERSION, _owned_socket, _private_dir, _xdg_ok,
                        home_dir, peer_cred, server_dir, tmp_dir)

__all__ = ["AgentError", "ask", "discover", "socket_path", "start",
           "status", "stop"]


class AgentError(Exception):
    """A request that got no result. ``kind``: ``no_agent`` (no agent
    listens for that process), ``refused`` (not this user's to ask, or a
    socket that is not the process's), ``timeout`` (no answer in time),
    ``died`` (the process ended while asked), ``bad_answer`` (what came
    back is not the protocol's), ``error`` (the agent answered that the
    request failed). ``str()`` is one line."""

    def __init__(self, kind: str, message: str, pid: Optional[int] = None):
        super().__init__(message)
        self.kind = kind if kind in KINDS else "error"
        self.pid = pid


# -- paths --------------------------------------------------------------

def _proc_uid(pid: int) -> Optional[int]:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def _proc_state(pid: int) -> Optional[str]:
    """The one-letter state of /proc/P/stat (R, S, T...), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read(4096)
        return data[data.rindex(b")") + 2:][:1].decode()
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    st = _proc_state(pid)
    return st is not None and st not in ("Z", "X")


def _target_env(pid: int, name: str) -> Optional[str]:
    """A variable of the environment the process started with (only its
    own user and root may read it)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read(1 << 20)
    except OSError:
        return None
    key = name.encode() + b"="
    for item in data.split(b"\0"):
        if item.startswith(key):
            return os.fsdecode(item[len(key):])
    return None


def _dirs_of(uid: int, pid: Optional[int] = None) -> list:
    """The folders where uid's agents may have put their sockets (pid's
    own first, when given), each checked to be uid's private directory.
    With GPURECLAIM_AGENT_DIR set here, discovery looks only there."""
    mine = os.environ.get(DIR_VARIABLE)
    if pid is None and mine:
        d = os.path.abspath(mine)
        return [d] if _private_dir(d, uid) else []
    out = []
    if pid is not None:
        theirs = _target_env(pid, DIR_VARIABLE)
        for d in (theirs, mine):
            if d and os.path.isabs(d) and _private_dir(d, uid) \
                    and d not in out:
                out.append(d)
    xdgs = []
    if pid is not None:
        xdgs.append(_target_env(pid, "XDG_RUNTIME_DIR"))
    if uid == os.getuid():
        xdgs.append(os.environ.get("XDG_RUNTIME_DIR"))
    xdgs.append(f"/run/user/{uid}")
    for x in xdgs:
        if _xdg_ok(x, uid):
            d = os.path.join(x, "gpureclaim")
            if d not in out and _private_dir(d, uid):
                out.append(d)
    for d in (tmp_dir(uid), home_dir(uid)):
        if d and _private_dir(d, uid) and d not in out:
            out.append(d)
    return out


def socket_path(pid: Optional[int] = None) -> Optional[str]:
    """The socket of pid's agent (default: this process's), or None when
    no folder of that process's user holds one."""
    pid = os.getpid() if pid is None else int(pid)
    uid = _proc_uid(pid)
    if uid is None:
        return None
    for d in _dirs_of(uid, pid):
        p = os.path.join(d, f"{pid}.sock")
        if os.path.lexists(p):
            return p
    return None


# -- the client ---------------------------------------------------------

def _why_silent(pid: int) -> str:
    st = _proc_state(pid)
    if st == "T" or st == "t":
        return " (it is stopped: SIGSTOP or a debugger; SIGCONT resumes it)"
    if st == "D":
        return " (it waits in the kernel, uninterruptibly)"
    return " (it may be busy in code that holds the GIL)"


def _ended(pid: int, deadline: float) -> bool:
    """Whether pid has ended, after its agent's connection did: the kernel
    closes a dying process's files before it shows it as ended, so this
    looks again for a moment (at most 0.5 s, never past the deadline)."""
    end = min(time.monotonic() + 0.5, deadline)
    while True:
        if not _alive(pid):
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.005)


class _Busy(Exception):
    """connect() said EAGAIN until the deadline."""


def _connect_unix(s: socket.socket, path: str, deadline: float) -> None:
    """connect() to a Unix socket: at once, or EAGAIN while the listener's
    queue of connections is full (a stopped or busy agent; for a Unix
    socket never "in progress"), tried again until the deadline (_Busy)."""
    wait = 0.001
    while True:
        s.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            s.connect(path)
            return
        except BlockingIOError as e:
            if e.errno != errno.EAGAIN:
                raise
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Busy()
        time.sleep(min(wait, left))
        wait = min(wait * 2, 0.05)


def _connect(pid: int, deadline: float) -> socket.socket:
    uid = _proc_uid(pid)
    if uid is None:
        raise AgentError("no_agent", f"process {pid} does not exist", pid)
    me = os.getuid()
    if me != 0 and uid != me:
        raise AgentError("refused", f"process {pid} belongs to uid {uid}; "
                         f"only that user and root may ask it", pid)
    dirs = _dirs_of(uid, pid)
    path, why = None, "missing"
    for d in dirs:
        p = os.path.join(d, f"{pid}.sock")
        why = _owned_socket(p, uid)
        if why != "missing":
            path = p
            break
    if path is None:
        where = " or ".join(dirs) if dirs else tmp_dir(uid)
        raise AgentError("no_agent", f"process {pid} has no agent (no "
                         f"socket in {where}); start one with "
                         f"gpureclaim.agent.start() or GPURECLAIM_AGENT=1",
                         pid)
    if why is not None:
        raise AgentError("refused", f"{path} {why}: not an agent's socket; "
                         f"not used", pid)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        _connect_unix(s, path, deadline)
        ppid, puid, _ = peer_cred(s)
    except _Busy:
        s.close()
        raise AgentError("timeout", f"process {pid}'s agent did not take "
                         f"the connection in time: it is busy or not "
                         f"answering, its queue of connections full"
                         f"{_why_silent(pid)}", pid) from None
    except socket.timeout:
        s.close()
        raise AgentError("timeout", f"process {pid}'s agent did not accept "
                         f"the connection in time{_why_silent(pid)}",
                         pid) from None
    except OSError as e:
        s.close()
        if e.errno in (errno.ECONNREFUSED, errno.ENOENT):
            if not _alive(pid):
                raise AgentError("died", f"process {pid} ended", pid) \
                    from None
            raise AgentError("no_agent", f"process {pid}'s agent is not "
                             f"listening (a stale socket at {path})",
                             pid) from None
        if e.errno in (errno.EACCES, errno.EPERM):
            raise AgentError("refused", f"{path}: {e.strerror}", pid) \
                from None
        raise AgentError("error", f"cannot connect to {path}: "
                         f"{e.strerror}", pid) from None
    if ppid != pid or puid != uid:
        s.close()
        raise AgentError("refused", f"{path} is served by process {ppid} "
                         f"(uid {puid}), not process {pid} (uid {uid}): "
                         f"not its agent; not asked", pid)
    return s


def _read_line(s: socket.socket, pid: int, deadline: float,
               limit: int) -> bytes:
    buf = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AgentError("timeout", f"process {pid} did not answer in "
                             f"time{_why_silent(pid)}", pid)
        s.settimeout(left)
        try:
            chunk = s.recv(1 << 16)
        except socket.timeout:
            continue
        except OSError as e:
            if _ended(pid, deadline):
                raise AgentError("died", f"process {pid} ended before it "
                                 f"answered", pid) from None
            raise AgentError("bad_answer", f"process {pid}'s agent broke "
                             f"the connection ({e.strerror})", pid) \
                from None
        if not chunk:
            if _ended(pid, deadline):
                raise AgentError("died", f"process {pid} ended before it "
                                 f"answered", pid)
            raise AgentError("bad_answer", f"process {pid}'s agent closed "
                             f"the connection without a full answer", pid)
        nl = chunk.find(b"\n")
        if nl >= 0:
            buf += chunk[:nl]
            if len(buf) >= limit:
                break
            return bytes(buf)
        buf += chunk
        if len(buf) >= limit:
            break
    raise AgentError("bad_answer", f"process {pid}'s answer is larger than "
                     f"{limit >> 20} MiB; refused", pid)


def exchange(pid: int, request: dict, timeout: float) -> dict:
    """Sends one request to pid's agent, returns the answer's whole
    document (ok or not; checked to be the protocol's), or raises
    AgentError for no answer."""
    deadline = time.monotonic() + timeout
    s = _connect(pid, deadline)
    try:
        data = json.dumps(request, separators=(",", ":")).encode() + b"\n"
        if len(data) > MAX_REQUEST:
            raise AgentError("error", f"the request is larger than "
                             f"{MAX_REQUEST >> 10} KiB", pid)
        try:
            s.settimeout(max(deadline - time.monotonic(), 0.001))
            s.sendall(data)
        except socket.timeout:
            raise AgentError("timeout", f"process {pid} did not take the "
                             f"request in time{_why_silent(pid)}", pid) \
                from None
        except OSError as e:
            if not _alive(pid):
                raise AgentError("died", f"process {pid} ended", pid) \
                    from None
            try:  # it may have answered before it closed (a refusal)
                line = _read_line(s, pid, deadline, MAX_ANSWER)
            except AgentError:
                raise AgentError("bad_answer", f"process {pid}'s agent "
                                 f"closed the connection ({e.strerror})",
                                 pid) from None
        else:
            line = _read_line(s, pid, deadline, MAX_ANSWER)
    finally:
        s.close()
    return answer_of(pid, line)


def answer_of(pid: int, line: bytes) -> dict:
    """An answer's line (without its newline) from pid's agent, checked to
    be the protocol's: its whole document (ok or not), or AgentError
    bad_answer, never another exception (tests/python/test_agent_fuzz.py
    fuzzes it)."""
    try:
        doc = _protocol.loads(line)
    except ValueError:
        raise AgentError("bad_answer", f"process {pid}'s agent answered "
                         f"something that is not JSON ({line[:40]!r})",
                         pid) from None
    if (not isinstance(doc, dict) or type(doc.get("v")) is not int
            or doc["v"] != VERSION or not isinstance(doc.get("ok"), bool)):
        raise AgentError("bad_answer", f"process {pid}'s agent answered "
                         f"JSON that is not protocol version {VERSION}'s",
                         pid)
    if not doc["ok"] and not isinstance(doc.get("error"), str):
        raise AgentError("bad_answer", f"process {pid}'s agent failed "
                         f"without saying why", pid)
    return doc


def ask_full(pid: int, op: str, *, timeout: float = 10.0,
             **args: Any) -> dict:
    """As :func:`ask`, but the answer's whole document (``result`` and,
    for explain and release, ``text``: the report as the process prints
    it)."""
    if not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError("ask(): timeout must be a positive number")
    # "deadline": when this client stops waiting, on CLOCK_MONOTONIC (the
    # protocol, docs/agent.md): the agent runs nothing it reads later
    doc = exchange(int(pid), {"v": VERSION, "op": op, "args": args,
                              "timeout": timeout,
                              "deadline": time.monotonic() + timeout},
                   timeout)
    return result_of(int(pid), doc)


def result_of(pid: int, doc: dict) -> dict:
    """An answer's document (answer_of's) with its result, or the
    AgentError it says (its error one line, terminal-safe: the process
    wrote it)."""
    if not doc["ok"]:
        err = _protocol.printable(_protocol.one_line(doc["error"]))
        kind = doc.get("kind")
        raise AgentError(kind if isinstance(kind, str) else "error",
                         f"process {pid}: {err}", pid)
    if "result" not in doc:
        raise AgentError("bad_answer", f"process {pid}'s agent answered "
                         f"ok without a result", pid)
    return doc


def ask(pid: int, op: str, *, timeout: float = 10.0, **args: Any) -> Any:
    """Asks process pid's agent to run op ("status", "explain", "release",
    "trace") with args; returns its result (plain JSON values), e.g.
    ``ask(1234, "release", workspaces=True)["bytes"]``. Raises
    :class:`AgentError` (``.kind`` says which failure) and never waits
    longer than ``timeout`` seconds."""
    return ask_full(pid, op, timeout=timeout, **args)["result"]


def discover(pids: Optional[Any] = None) -> Iterator[tuple]:
    """(pid, socket path) of each live agent this user may ask (every
    user's, as root), in pid order; ``pids`` narrows it. A socket whose
    process is gone is removed when it is this user's (stale)."""
    me = os.getuid()
    want = None if pids is None else {int(p) for p in pids}
    found = {}
    if want is not None:
        for pid in sorted(want):
            p = socket_path(pid)
            if p is not None:
                found[pid] = p
    else:
        dirs = []
        if os.environ.get(DIR_VARIABLE):
            dirs = [(d, me) for d in _dirs_of(me)]
        elif me == 0:
            import glob

            import pwd

            homes = {os.path.join(p.pw_dir, ".gpureclaim")
                     for p in pwd.getpwall() if os.path.isabs(p.pw_dir)}
            for d in glob.glob("/tmp/gpureclaim-*") + glob.glob(
                    "/run/user/*/gpureclaim") + sorted(
                        h for h in homes if os.path.lexists(h)):
                try:
                    uid = os.lstat(d).st_uid
                except OSError:
                    continue
                if d in _dirs_of(uid):
                    dirs.append((d, uid))
        else:
            dirs = [(d, me) for d in _dirs_of(me)]
        for d, uid in dirs:
            try:
                names = os.listdir(d)
            except OSError:
                continue
            for n in names:
                if not n.endswith(".sock") or not n[:-5].isdigit():
                    continue
                pid, p = int(n[:-5]), os.path.join(d, n)
                if _owned_socket(p, uid) is not None:
                    continue
                if not _alive(pid) or _proc_uid(pid) != uid:
                    if uid == me:
                        try:
                            os.unlink(p)
                        except OSError:
                            pass
                    continue
                found.setdefault(pid, p)
    for pid in sorted(found):
        yield pid, found[pid]


# -- the server's entry points (gpureclaim/agent/_server.py) -----------

def start(path: Optional[str] = None) -> str:
    """Starts this process's agent (once; a second call returns the same
    path) and returns its socket's path. ``path`` overrides the folder
    rule (tests, a sandbox); its folder must be this user's, mode 0700.
    Raises OSError (one line) when the folder is not private or another
    process serves that path."""
    from . import _cells
    from . import _server as _agent_server

    path = _agent_server.start(path)
    _cells.watch_quietly()  # in IPython: resumed before a cell
    return path


def stop() -> None:
    """Stops the agent and removes its socket (nothing if not started)."""
    from . import _server as _agent_server

    _agent_server.stop()


def status() -> dict:
    """{"on": bool, "path": the socket or None, "requests": answered so
    far} for this process's agent."""
    from . import _server as _agent_server

    return _agent_server.status()


def _start_from_env(value: str) -> None:
    """GPURECLAIM_AGENT's value: 1 (true, yes, on) starts the agent at its
    usual path; anything else is a socket path (gpureclaim/_startup/
    leaves 0 and empty out)."""
    v = value.strip()
    start(None if v.lower() in ("1", "true", "yes", "on") else v)
