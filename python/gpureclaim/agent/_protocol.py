"""The agent's protocol, shared by its two ends (docs/agent.md, "The
protocol" and "Who can ask what"): its version and limits, the
operations and the kinds of failure, the folders the sockets go in and
the checks of a socket and of the peer. The server
(gpureclaim/agent/_server.py) and the client (gpureclaim/agent/) both
import it; the C client (cli/agent_client.c) keeps the same rules, and
tests/agent_protocol/ holds the exchanges both clients are tested with.
"""
from __future__ import annotations

import json
import os
import re
import socket
import stat
import struct
from typing import Any, Optional

#: the protocol's version
VERSION = 1
#: the most a request may hold (bytes, its newline included)
MAX_REQUEST = 64 << 10
#: the most an answer may hold; the client refuses a larger one
MAX_ANSWER = 16 << 20
#: the operations the agent answers
OPS = ("status", "explain", "release", "trace")
#: what AgentError.kind may be
KINDS = ("no_agent", "refused", "timeout", "died", "bad_answer", "error")
#: the deepest an answer's value may lie (the top object at 0, its members
#: at 1), as deep as the C client reads (cli/agent_client.c jvalue)
MAX_DEPTH = 512


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _too_deep(doc: Any) -> bool:
    todo = [(doc, 0)]
    while todo:
        v, depth = todo.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(v, dict):
            todo += [(x, depth + 1) for x in v.values()]
        elif isinstance(v, list):
            todo += [(x, depth + 1) for x in v]
    return False


def loads(line: bytes) -> Any:
    """An answer's line as both clients read it (tests/agent_protocol/
    replays the same exchanges against each): UTF-8 only (no byte order
    mark, no UTF-16 guessed), JSON's grammar only (no NaN, no Infinity),
    nothing nested deeper than MAX_DEPTH. ValueError otherwise."""
    try:
        doc = json.loads(line.decode("utf-8"), parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("nested too deep") from None
    if line.count(b"[") + line.count(b"{") > MAX_DEPTH and _too_deep(doc):
        raise ValueError("nested too deep")
    return doc


_BLANKS = re.compile(r"[ \t\n\v\f\r]+")


def one_line(error: Any) -> str:
    """An agent's error as its clients say it: each run of ASCII white
    space one blank, none at the ends, at most 500 characters."""
    return _BLANKS.sub(" ", str(error)).strip(" ")[:500]


def printable(text: str) -> str:
    """Text another process chose (a command line, an agent's error or
    report line), as a terminal may show it: every character that does
    not print (control bytes and so escape sequences, C1 controls, the
    bidirectional overrides, newlines, line separators) becomes '?', as
    the C command's terminal-safe rule (src/out/text.h) shows it."""
    return "".join(c if c.isprintable() else "?" for c in text)


def _private_dir(path: str, uid: int) -> bool:
    """path is a real directory (not a link) owned by uid, mode 0700."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == uid
            and stat.S_IMODE(st.st_mode) == 0o700)


def _xdg_ok(path: Optional[str], uid: int) -> bool:
    """XDG_RUNTIME_DIR as the protocol accepts it: a directory owned by
    uid with mode 0700 (it may be reached through a link)."""
    if not path or not os.path.isabs(path):
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == uid
            and stat.S_IMODE(st.st_mode) == 0o700)


def tmp_dir(uid: int) -> str:
    """The fallback folder of uid's sockets."""
    return f"/tmp/gpureclaim-{uid}"


def home_dir(uid: int) -> Optional[str]:
    """The folder of uid's sockets when another user holds tmp_dir(uid)
    (anyone may make a folder of that name in /tmp first): HOME/.gpureclaim,
    HOME being uid's home in the password database (never $HOME), a
    directory of uid (or root) that nobody else may write, so that only
    uid can make the folder. None where there is no such home.
    cli/agent_client.c follows the same rule."""
    import pwd

    try:
        home = pwd.getpwuid(uid).pw_dir
        st = os.stat(home)
    except (KeyError, OSError):
        return None
    if (not os.path.isabs(home) or not stat.S_ISDIR(st.st_mode)
            or st.st_uid not in (uid, 0) or st.st_mode & 0o022):
        return None
    return os.path.join(home, ".gpureclaim")


#: the variable naming one folder for the sockets instead of the rule (a
#: sandbox, the tests): the agent serves there, discover() looks only there
DIR_VARIABLE = "GPURECLAIM_AGENT_DIR"


def server_dir(env: Optional[dict] = None) -> str:
    """The folder this process's socket goes in (created 0700 if missing).
    Raises OSError, one line, when the folder there is not this user's
    private directory: a planted one is never used."""
    uid = os.getuid()
    env = os.environ if env is None else env
    xdg = env.get("XDG_RUNTIME_DIR")
    if env.get(DIR_VARIABLE):
        d = os.path.abspath(env[DIR_VARIABLE])
    elif _xdg_ok(xdg, uid):
        d = os.path.join(xdg, "gpureclaim")
    else:
        d = tmp_dir(uid)
    why = (f"{d} is not a directory of uid {uid} with mode 0700 (a link, a "
           f"file, another user's or open to others)")
    if _make_private(d, uid):
        return d
    if d != tmp_dir(uid):
        raise PermissionError(f"{why}; not used: remove it, or set "
                              f"XDG_RUNTIME_DIR to a private folder")
    # someone else made /tmp/gpureclaim-UID first: uid's own folder
    home = home_dir(uid)
    if home is not None and _make_private(home, uid):
        import sys

        sys.stderr.write(f"gpureclaim: agent: {why}: someone else may have "
                         f"made it; the socket is in {home} instead\n")
        return home
    raise PermissionError(
        f"{why}, and {home or 'the home of uid ' + str(uid)} cannot hold "
        f"the socket instead; not used: set XDG_RUNTIME_DIR (or "
        f"{DIR_VARIABLE}) to a private folder")


def _make_private(d: str, uid: int) -> bool:
    """d made 0700 if missing; whether it is uid's private directory."""
    try:
        os.mkdir(d, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return False
    return _private_dir(d, uid)


def _owned_socket(path: str, uid: int) -> Optional[str]:
    """None if path is a socket owned by uid (not a link); else why not
    (or "missing")."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "missing"
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISSOCK(st.st_mode):
        return "is not a socket"
    if st.st_uid != uid:
        return f"belongs to uid {st.st_uid}, not {uid}"
    return None


_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def peer_cred(sock: socket.socket) -> tuple:
    """(pid, uid, gid) of the process at the other end (SO_PEERCRED)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size)
    return _CRED.unpack(raw)
