"""The agent's server (gpureclaim/agent/ is the public side): a daemon
thread serving this process's Unix socket.

Why it is built this way:
- The listening thread sleeps in select() on the socket and a wake-up
  pipe, with no timeout: idle, it never runs and never takes the GIL
  (bench/agent_bench.py measures a loop with and without it).
- Each connection gets its own short-lived thread, at most MAX_CLIENTS at
  once, so a client that sends nothing (a hostile one, a stopped one)
  holds only its own thread, for at most REQUEST_SECONDS.
- Every peer is checked with SO_PEERCRED on every connection: this uid
  or root, nobody else (the folder is 0700 and the socket 0600 as well).
- Operations run one at a time, in the order asked, in one thread kept
  for the agent's life (status, which only reads, in a thread of its
  own); the connection waits for its operation up to the request's
  timeout (less a margin, so the answer that says so reaches the client
  before it gives up). One not started by then never starts; a release
  cut off goes on in the process, its result dropped.
- A request read after its asker gave up (the process was stopped, the
  requests waited in the socket's queue) never runs: the request's
  "deadline" (the asker's CLOCK_MONOTONIC) has passed, or, from a client
  that sends none, its connection is closed; checked when it is read and
  again when its turn comes.
- The socket is bound under a temporary name in the private folder,
  made 0600, then renamed into place: it is never open to others, not
  even for an instant, and no umask (process-wide) is touched.
- atexit removes the socket (only if it is still ours: same inode), and
  so does SIGTERM or SIGHUP at its default action, which ends the process
  without atexit (a C handler, python/src/agent_signal.c, that then ends
  it as the signal would have); os.register_at_fork closes it in a child,
  which does not serve its parent's socket (it may call start() to serve
  its own).
"""
from __future__ import annotations

import atexit
import inspect
import json
import math
import os
import queue
import select
import socket
import sys
import threading
import time
from typing import Any, Optional

from .. import _gpureclaim as _c
from . import _protocol

#: connections served at once; more are told so and closed
MAX_CLIENTS = 8
#: seconds a client has to send its request line
REQUEST_SECONDS = 5.0
#: the longest a request may ask for (seconds)
MAX_TIMEOUT = 600.0
#: the default when the request names none
DEFAULT_TIMEOUT = 10.0

_lock = threading.Lock()
_state: Optional["_Server"] = None
_hooks_installed = False


def _margin(timeout: float) -> float:
    """The server's deadline for a request of that timeout: earlier, by
    up to 0.25 s, so its answer arrives while the client still waits."""
    return max(timeout - min(0.25, timeout * 0.2), 0.001)


class _Server:
    def __init__(self, path: str, sock: socket.socket):
        self.path = path
        self.sock = sock
        self.pid = os.getpid()
        st = os.lstat(path)
        self.ident = (st.st_dev, st.st_ino)
        self.started = time.time()
        self.requests = 0
        self.active = 0
        self.count_lock = threading.Lock()
        self.wake_r, self.wake_w = os.pipe()
        self.stopping = False
        self.thread = threading.Thread(target=self._serve,
                                       name="gpureclaim-agent", daemon=True)

    # -- the listening thread
    def _serve(self) -> None:
        while not self.stopping:
            try:
                ready, _, _ = select.select([self.sock, self.wake_r], [], [])
            except (OSError, ValueError):
                return
            if self.stopping or self.wake_r in ready:
                return
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with self.count_lock:
                busy = self.active >= MAX_CLIENTS
                if not busy:
                    self.active += 1
            if busy:
                _send(conn, _fail("error", f"busy: {MAX_CLIENTS} requests "
                                  "already being answered; ask again"))
                conn.close()
                continue
            try:
                threading.Thread(target=self._client, args=(conn,),
                                 name="gpureclaim-agent-request",
                                 daemon=True).start()
            except RuntimeError:  # the process limit reached, for now
                with self.count_lock:
                    self.active -= 1
                _send(conn, _fail("error", _NO_THREAD))
                conn.close()

    def _client(self, conn: socket.socket) -> None:
        try:
            self._answer(conn)
        except Exception:
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass
            with self.count_lock:
                self.active -= 1

    def _answer(self, conn: socket.socket) -> None:
        try:
            _, uid, _ = _protocol.peer_cred(conn)
        except OSError:
            return
        me = os.getuid()
        if uid != me and uid != 0:
            _send(conn, _fail("refused", f"uid {uid} may not ask process "
                              f"{os.getpid()} (uid {me}): only uid {me} "
                              f"and root"))
            _drain(conn)
            return
        line = _read_request(conn)
        if isinstance(line, dict):  # the failure to answer
            _send(conn, line)
            return
        try:
            req = json.loads(line)
        except (ValueError, UnicodeDecodeError, RecursionError):
            _send(conn, _fail("error", "the request is not JSON (or is "
                              "nested too deep): one line "
                              '{"v": 1, "op": ..., "args": {...}}'))
            return
        if _hung_up(conn):  # its asker gave up: nobody to answer
            return
        answer = handle(req)
        with self.count_lock:
            self.requests += 1
        _send(conn, answer)


_NO_THREAD = ("busy: no thread could be started to answer (the "
              "process limit reached?); ask again")


def _hung_up(conn: socket.socket) -> bool:
    """The client has closed its end (POLLHUP: both directions shut; a
    client that only ended its sending is still waiting)."""
    try:
        p = select.poll()
        p.register(conn, select.POLLIN)
        return any(ev & select.POLLHUP for _, ev in p.poll(0))
    except (OSError, ValueError):
        return False


def _drain(conn: socket.socket, seconds: float = 1.0) -> None:
    """After an answer sent before the request was read (a refusal): the
    write side closed, what the client still sends read and dropped for a
    moment, so that its send does not fail before it reads the answer."""
    try:
        conn.shutdown(socket.SHUT_WR)
        end = time.monotonic() + seconds
        got = 0
        while got < _protocol.MAX_REQUEST:
            left = end - time.monotonic()
            if left <= 0:
                return
            conn.settimeout(left)
            chunk = conn.recv(1 << 16)
            if not chunk or b"\n" in chunk:
                return
            got += len(chunk)
    except OSError:
        pass


def _read_request(conn: socket.socket):
    """The request's line (bytes), or the failure answer (a dict)."""
    deadline = time.monotonic() + REQUEST_SECONDS
    buf = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return _fail("timeout", f"no request line within "
                         f"{REQUEST_SECONDS:g} s")
        conn.settimeout(left)
        try:
            chunk = conn.recv(1 << 16)
        except socket.timeout:
            continue
        except OSError:
            return _fail("error", "the connection broke")
        if not chunk:
            return _fail("error", "the request ended without a newline")
        nl = chunk.find(b"\n")
        if nl >= 0:
            buf += chunk[:nl]
            if len(buf) < _protocol.MAX_REQUEST:
                return bytes(buf)
        else:
            buf += chunk
        if len(buf) >= _protocol.MAX_REQUEST:
            return _fail("error", f"the request is larger than "
                         f"{_protocol.MAX_REQUEST >> 10} KiB")


def _send(conn: socket.socket, answer: dict) -> None:
    answer.setdefault("pid", os.getpid())
    try:
        data = json.dumps(answer, separators=(",", ":"),
                          default=str).encode() + b"\n"
    except (TypeError, ValueError) as e:
        data = json.dumps(_fail("error", f"the result cannot be written as "
                                f"JSON: {e}")).encode() + b"\n"
    try:
        conn.settimeout(REQUEST_SECONDS)
        conn.sendall(data)
    except OSError:
        pass


def _fail(kind: str, error: str) -> dict:
    return {"v": _protocol.VERSION, "ok": False, "pid": os.getpid(),
            "error": " ".join(error.split()), "kind": kind}


# -- the operations ----------------------------------------------------

class _Usage(Exception):
    """A bad request: answered ok false, kind error."""


def _devices(v: Any) -> Optional[list]:
    if v is None:
        return None
    if not isinstance(v, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) for d in v):
        raise _Usage("devices must be a list of CUDA ordinals or null")
    return v


def _check_args(op: str, args: dict, accepted: tuple) -> None:
    extra = sorted(set(args) - set(accepted))
    if extra:
        raise _Usage(f"{op} takes no {', '.join(extra)}; accepted: "
                     f"{', '.join(accepted) or 'none'}")


def _frameworks() -> list:
    names = ("torch", "cupy", "jax", "numba", "rmm", "mlx", "tensorflow")
    return [n for n in names if n in sys.modules]


def _uptime() -> Optional[float]:
    """Seconds since the process started (/proc/self/stat's start time)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            data = f.read(4096)
        fields = data[data.rindex(b")") + 2:].split()
        start_ticks = int(fields[19])
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
        return round(up - start_ticks / os.sysconf("SC_CLK_TCK"), 2)
    except (OSError, ValueError, IndexError):
        return None


def op_status(args: dict) -> tuple:
    _check_args("status", args, ())
    import gpureclaim

    try:
        held = gpureclaim.process_memory()
    except Exception as e:
        held = {"error": f"{type(e).__name__}: {e}"}
    devices = ({str(k): v for k, v in held.items()}
               if isinstance(held, dict) else held)
    s = _state
    idx = _nvml_indexes(tuple(k for k in held if isinstance(k, int))
                        if isinstance(held, dict) else ())
    return {"pid": os.getpid(), "argv": list(sys.argv),
            "python": sys.version.split()[0],
            "executable": sys.executable,
            "gpureclaim": gpureclaim.__version__,
            "frameworks": _frameworks(), "devices": devices,
            "uptime_s": _uptime(),
            "agent_s": round(time.time() - s.started, 2) if s else None,
            "nvml_index": idx}, {"ordinals": flat_ordinals(idx)}


def explain_accepts() -> tuple:
    """The keyword arguments explain() takes here (another version may
    take more, e.g. holders): the request may pass any of them."""
    import gpureclaim

    params = inspect.signature(gpureclaim.explain).parameters
    return tuple(n for n, p in params.items()
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


def op_explain(args: dict) -> tuple:
    import gpureclaim

    accepted = explain_accepts()
    _check_args("explain", args, accepted)
    kw = dict(args)
    if "devices" in kw:
        kw["devices"] = _devices(kw["devices"])
    e = gpureclaim.explain(**kw)
    d = e.to_dict()
    idx = _nvml_indexes(tuple(g.get("device") for g in d.get("gpus", [])
                              if isinstance(g.get("device"), int)))
    return d, {"text": str(e), "nvml_index": idx,
               "groups": flat_groups(d, idx)}


#: the parts `ps --explain` shows, each a group of explain()'s kinds (the
#: policy of what a group is stays here; the C command reads numbers)
GROUPS = (
    ("live", ("live", "unattributed")),
    ("releasable", ("releasable",)),
    ("not releasable", ("not_releasable",)),
    ("workspaces", ("workspace",)),
    ("pools", ("pool", "graph_pool")),
    ("rest", ("rest", "unreported", "context")),
)


def groups(gpu: dict) -> dict:
    """An explained GPU's parts as GROUPS (bytes; unknown parts left
    out)."""
    out = {name: 0 for name, _ in GROUPS}
    for part in gpu.get("parts", []):
        if part.get("known") is False or part.get("bytes") is None:
            continue
        for name, kinds in GROUPS:
            if part.get("kind") in kinds:
                out[name] += part["bytes"]
                break
    return out


def flat_groups(result: dict, nvml_index: dict) -> list:
    """The explain answer's "groups": per explained GPU, in order, nine
    integers: [CUDA ordinal, NVML index, live, releasable, not releasable,
    workspaces, pools, rest, driver], -1 where unknown, one GPU after
    another: what the C command (cli/ps_explain.c, cli/cmd_reclaim.c)
    reads without a JSON parser."""
    out: list = []
    for g in result.get("gpus", []):
        parts = groups(g)
        out += [_int(g.get("device")),
                _int(nvml_index.get(str(g.get("device"))))]
        out += [int(parts[n]) for n, _ in GROUPS] + [_int(g.get("driver"))]
    return out


def _int(v: Any) -> int:
    """v as the flat fields carry it: an integer, -1 for unknown."""
    return v if isinstance(v, int) and not isinstance(v, bool) else -1


def flat_ordinals(nvml_index: dict) -> list:
    """The status answer's "ordinals": [CUDA ordinal, NVML index, ...]."""
    out: list = []
    for d, i in nvml_index.items():
        out += [_int(int(d)) if str(d).isdigit() else -1, _int(i)]
    return out


def flat_released(r: dict) -> list:
    """The release answer's "returned": [bytes, then per GPU its CUDA
    ordinal, NVML index, released bytes, known (1 or 0)], -1 where
    unknown: what `gpureclaim reclaim` (cli/cmd_reclaim.c) reads."""
    out = [_int(r.get("bytes"))]
    for g in r.get("gpus", []):
        out += [_int(g.get("device")), _int(g.get("nvml_index")),
                _int(g.get("released")), 0 if g.get("known") is False else 1]
    return out


#: {CUDA ordinal (str): NVML index}, as last read: an ordinal's index is
#: fixed for the process's life, and reading it asks NVML about every GPU
#: (0.3 ms alone, 20 ms and more while 16 agents answer `ps --explain` at
#: once: the driver serializes them)
_nvml_index: dict = {}


def _nvml_indexes(want: tuple = ()) -> dict:
    """{CUDA ordinal (str): NVML index} of this process's GPUs, beside an
    explanation (its GPUs are CUDA ordinals; ps lists NVML indexes): read
    once, and again while one of the ordinals wanted is missing (a GPU
    opened since, or none opened yet)."""
    if _nvml_index and all(str(d) in _nvml_index for d in want):
        return dict(_nvml_index)
    try:
        from .. import _gpureclaim as _c

        fresh = {str(g["device"]): g["nvml_index"] for g in _c.gpus()
                 if g.get("device") is not None}
    except Exception:
        return {}
    _nvml_index.clear()
    _nvml_index.update(fresh)
    return fresh


def op_release(args: dict) -> tuple:
    import gpureclaim

    _check_args("release", args, ("devices", "workspaces", "collect"))
    kw = dict(args)
    if "devices" in kw:
        kw["devices"] = _devices(kw["devices"])
    c = kw.get("collect")
    if c is not None and c not in ("auto", True, False):
        raise _Usage('collect must be "auto", true or false')
    r = gpureclaim.release(**kw)
    d = r.to_dict()
    sec = d.get("seconds")
    return d, {"text": repr(r), "returned": flat_released(d),
               "release_seconds": sec if isinstance(sec, (int, float))
               else None}


_trace = None  # the trace the agent started


def op_trace(args: dict) -> tuple:
    global _trace
    _check_args("trace", args, ("action", "path"))
    action = args.get("action")
    from .. import _trace as tr

    if action == "start":
        if _trace is not None:
            raise _Usage(f"a trace started by the agent records already "
                         f"into {_trace.path}; stop it first")
        path = args.get("path")
        if path is not None and not isinstance(path, str):
            raise _Usage("path must be a string")
        t = tr.Trace(path)
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t.start()
        _trace = t
        return {"action": "start", "path": t.path, "traced": t.traced,
                "backend": t.backend, "why": t.why}, None
    if action == "stop":
        if _trace is None:
            raise _Usage("no trace started by the agent records")
        t, _trace = _trace, None
        t.stop()
        return dict(t.report().to_dict(), action="stop", path=t.path), None
    raise _Usage('trace takes action "start" or "stop"')


OPS = {"status": op_status, "explain": op_explain, "release": op_release,
       "trace": op_trace}


def handle(req: Any) -> dict:
    """One request's answer (never raises): ok with the result, or ok
    false with kind and a one-line error."""
    if not isinstance(req, dict):
        return _fail("error", "the request must be a JSON object")
    if req.get("v") != _protocol.VERSION:
        return _fail("error", f"protocol version {req.get('v')!r} is not "
                     f"spoken here; this agent speaks v "
                     f"{_protocol.VERSION}")
    op = req.get("op")
    if op not in OPS:
        return _fail("error", f"unknown op {op!r}; accepted: "
                     f"{', '.join(OPS)}")
    args = req.get("args", {})
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return _fail("error", "args must be a JSON object")
    if op in ("status", "release"):
        # a kernel whose agent started before its shell: the notebook
        # hook of resume on demand, before a suspend asks (_cells.py)
        from ._cells import watch_quietly

        watch_quietly()
    timeout = req.get("timeout", DEFAULT_TIMEOUT)
    if (not isinstance(timeout, (int, float)) or isinstance(timeout, bool)
            or not timeout > 0):
        return _fail("error", "timeout must be a positive number of "
                     "seconds")
    timeout = min(float(timeout), MAX_TIMEOUT)
    seconds = _margin(timeout)
    deadline = req.get("deadline")
    if (isinstance(deadline, (int, float)) and not isinstance(deadline, bool)
            and math.isfinite(deadline)):
        left = deadline - time.monotonic()
        if left <= 0:
            return _fail("timeout", f"{op} was not run: its asker had given "
                         f"up before the request was read (the process "
                         f"was stopped or too busy to read it)")
        if left <= timeout + 1.0:  # else the clocks disagree: not used
            seconds = min(seconds, _margin(left))
    return _run(op, args, seconds)


class _Job:
    """One request's operation, for the operations' thread: state
    "queued", "running" or "cancelled" (its asker gave up before it
    started), changed under _job_lock."""

    __slots__ = ("op", "args", "out", "fail", "state", "done", "deadline")

    def __init__(self, op: str, args: dict, seconds: float):
        self.op, self.args, self.out, self.fail = op, args, None, None
        self.state = "queued"
        self.done = threading.Event()
        self.deadline = time.monotonic() + seconds


_job_lock = threading.Lock()
_jobs: Optional["queue.SimpleQueue"] = None


def _execute(job: _Job) -> None:
    """Runs a job's operation: its result, or the failure in one line."""
    try:
        job.out = OPS[job.op](job.args)
    except _Usage as e:
        job.fail = ("error", str(e))
    except Exception as e:
        job.fail = ("error", f"{job.op} failed: {type(e).__name__}: {e}")
    finally:
        job.done.set()


def _operations(q: "queue.SimpleQueue") -> None:
    """The operations' thread: one operation at a time, in the order asked,
    for the agent's life (no thread started per request). A job its
    asker cancelled before it started is skipped: "did not start" holds."""
    while True:
        job = q.get()
        with _job_lock:
            # its asker's time is up (it may not have been told yet: a
            # process stopped and continued runs this thread first)
            if job.state == "cancelled" or time.monotonic() >= job.deadline:
                job.state = "cancelled"
                continue
            job.state = "running"
        _execute(job)
        job = None


def _queue() -> "queue.SimpleQueue":
    global _jobs
    with _job_lock:
        if _jobs is None:
            q = queue.SimpleQueue()
            threading.Thread(target=_operations, args=(q,),
                             name="gpureclaim-agent-ops", daemon=True).start()
            _jobs = q  # only once its thread runs
        return _jobs


def _run(op: str, args: dict, seconds: float) -> dict:
    job = _Job(op, args, seconds)
    try:
        if op == "status":  # reads only: never waits for another operation
            job.state = "running"
            threading.Thread(target=_execute, args=(job,),
                             name="gpureclaim-agent-status",
                             daemon=True).start()
        else:
            _queue().put(job)
    except RuntimeError:  # no thread to be had: said, and tried next time
        return _fail("error", _NO_THREAD)
    if not job.done.wait(seconds):
        with _job_lock:
            if job.state in ("queued", "cancelled"):
                job.state = "cancelled"
                return _fail("timeout", f"{op} did not start within "
                             f"{seconds:.3g} s: an earlier request "
                             f"still runs in the process")
        if not job.done.is_set():
            return _fail("timeout", f"{op} did not finish within "
                         f"{seconds:.3g} s; it goes on in the process "
                         f"and its result is dropped (ask with a "
                         f"longer timeout)")
    if job.fail:
        return _fail(*job.fail)
    result, extra = job.out
    answer = {"v": _protocol.VERSION, "ok": True, "pid": os.getpid(),
              "result": result}
    answer.update(extra or {})
    return answer


# -- start and stop ----------------------------------------------------

def _check_folder(d: str) -> None:
    if not _protocol._private_dir(d, os.getuid()):
        raise PermissionError(f"{d} is not a directory of uid "
                              f"{os.getuid()} with mode 0700; not used")


def _clear_stale(path: str) -> None:
    """A socket of ours at path from a process that is gone is removed;
    anything else there is refused, untouched."""
    why = _protocol._owned_socket(path, os.getuid())
    if why == "missing":
        return
    if why is not None:
        raise PermissionError(f"{path} {why}; not replaced (remove it if "
                              f"it is yours)")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        try:
            os.unlink(path)  # stale: its process is gone
        except FileNotFoundError:
            pass
        return
    except OSError:
        pass
    finally:
        probe.close()
    raise FileExistsError(f"{path}: another process serves this socket; "
                          f"not replaced")


def _bind(path: str) -> socket.socket:
    d = os.path.dirname(path)
    tmp = os.path.join(d, f".{os.getpid()}-{os.urandom(4).hex()}.tmp")
    if len(os.fsencode(tmp)) >= 104:
        raise OSError(f"{path}: too long for a Unix socket; set "
                      f"XDG_RUNTIME_DIR to a shorter folder")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(tmp)
        os.chmod(tmp, 0o600)
        s.listen(16)
        os.rename(tmp, path)
    except BaseException:
        s.close()
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    s.setblocking(True)
    return s


def start(path: Optional[str] = None) -> str:
    global _state, _hooks_installed
    with _lock:
        s = _state
        if s is not None and s.pid == os.getpid():
            return s.path
        if path is None:
            path = os.path.join(_protocol.server_dir(),
                                f"{os.getpid()}.sock")
        else:
            path = os.path.abspath(os.fspath(path))
            _check_folder(os.path.dirname(path))
        _clear_stale(path)
        sock = _bind(path)
        s = _Server(path, sock)
        _state = s
        _c._agent_signals(path, *s.ident)
        if not _hooks_installed:
            atexit.register(_at_exit)
            os.register_at_fork(after_in_child=_after_fork_child)
            _hooks_installed = True
        s.thread.start()
        return path


def _remove(s: _Server) -> None:
    try:
        st = os.lstat(s.path)
        if (st.st_dev, st.st_ino) == s.ident:
            os.unlink(s.path)
    except OSError:
        pass


def _close(s: _Server) -> None:
    s.stopping = True
    try:
        os.write(s.wake_w, b"x")
    except OSError:
        pass
    if s.thread.is_alive() and s.thread is not threading.current_thread():
        s.thread.join(2.0)
    for fd in (s.wake_r, s.wake_w):
        try:
            os.close(fd)
        except OSError:
            pass
    s.sock.close()


def stop() -> None:
    global _state
    with _lock:
        s, _state = _state, None
        if s is None or s.pid != os.getpid():
            return
        _c._agent_signals()
        _remove(s)
        _close(s)


def _at_exit() -> None:
    s = _state
    if s is not None and s.pid == os.getpid():
        _remove(s)


def _after_fork_child() -> None:
    """A forked child does not serve its parent's socket: it closes its
    copy (the file stays, the parent's) and has no agent."""
    global _state, _lock, _job_lock, _jobs
    s, _state = _state, None
    _lock = threading.Lock()
    _job_lock = threading.Lock()
    _jobs = None  # the operations' thread is the parent's
    if s is None:
        return
    _c._agent_signals()  # the parent's socket is not the child's to remove
    for fd in (s.wake_r, s.wake_w):
        try:
            os.close(fd)
        except OSError:
            pass
    try:
        s.sock.close()
    except OSError:
        pass


def status() -> dict:
    s = _state
    on = s is not None and s.pid == os.getpid()
    return {"on": on, "path": s.path if on else None,
            "requests": s.requests if on else 0}
