"""`gpureclaim agent start --pid N`: the agent started in a running Python
process that never opted in, through sys.remote_exec (PEP 768, 3.14).

What sys.remote_exec needs, and what is done about each:
- the same Python (major.minor) on both sides. The process's version is
  read from the files it maps (its python3.X, or a libpython3.X). Where
  this Python cannot send to it, the sending is done by the process's own
  interpreter (`python -m gpureclaim._remote_start send`), if that file
  and its folders belong to root or to the caller and nobody else may
  write them: root does not run a program another user could change.
- the kernel's ptrace rules, and remote debugging left on in the process
  (-X disable_remote_debug, PYTHON_DISABLE_REMOTE_DEBUG): a refusal is one
  line saying which.
- the process's main thread runs the script at its next bytecode. A main
  thread blocked in C code runs it later. An idle Jupyter kernel is such a
  process (its main thread waits in the event loop), so a kernel is woken
  with a kernel_info_request on its shell channel, which frontends send
  all the time: its connection file comes from its command line, and is
  used only if it is a regular file of the kernel's own user
  (jupyter_client does the talking, where it can be imported).
The script removes its own file when it runs (a namespace of its own, not
the process's __main__), so one that runs late leaves nothing behind.

Under attack (issue 34): the script is made in a folder that nobody but
root and the caller may write (or a sticky one, /tmp), its mode and owner
set on its descriptor, never by path; a start that fails in the process
is written to a file beside it, which the command reads through the
descriptor it made it with, and said in one line at once, nothing in the
program's output; a kernel is woken only over tcp on this machine's
loopback.
"""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import time
from typing import Optional

from .. import agent as _agent

#: a mapped file that is a Python interpreter or its library
_PYTHON_FILE = re.compile(r"(?:^|/)(?:lib)?python(\d+)\.(\d+)(?:[.d-][^/]*)?$")

#: what the process runs (its own namespace; the file goes first); a
#: failure goes to the file beside it, for the command, never to the
#: program's stderr
_SCRIPT = """\
import os, sys
try:
    os.unlink({script!r})
except OSError:
    pass
try:
    try:
        import gpureclaim.agent as _gpr_agent
    except ImportError:
        sys.path.append({parent!r})
        import gpureclaim.agent as _gpr_agent
    _gpr_agent.start()
except BaseException as _gpr_e:
    try:
        with open({err!r}, "w") as _gpr_f:
            _gpr_f.write(" ".join(f"{{type(_gpr_e).__name__}}: {{_gpr_e}}"
                                  .split())[:500])
    except OSError:
        pass
"""

#: how long the script may take before a Jupyter kernel is woken
WAKE_AFTER_S = 0.2
#: the bound of a step run by the process's own interpreter (its start and
#: the package's import; --timeout is the wait for the socket)
STEP_S = 30.0


class Refused(Exception):
    """The start cannot be sent; the message is the command's line."""


def process_python(pid: int) -> Optional[tuple]:
    """(major, minor) of the Python that process pid runs, from the files
    it maps; () when none of them is a Python (nor a python or python3 of
    no version); None where they cannot be read or the version is not in
    a name."""
    unversioned = False
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) < 6:
                    continue
                path = parts[5].strip()
                m = _PYTHON_FILE.search(path)
                if m:
                    return int(m.group(1)), int(m.group(2))
                unversioned |= path.rsplit("/", 1)[-1] in ("python",
                                                           "python3")
    except OSError:
        return None
    return None if unversioned else ()


def _cmdline(pid: int) -> list:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace")
                    for a in f.read().split(b"\0")[:-1]]
    except OSError:
        return []


def _up(path: str):
    """path, then each folder above it up to /: (path, its stat, or the
    OSError of its stat)."""
    p = path
    while True:
        try:
            yield p, os.stat(p)
        except OSError as e:
            yield p, e
            return
        parent = os.path.dirname(p)
        if parent == p:
            return
        p = parent


def _untrusted(path: str) -> Optional[str]:
    """Why path may not be run by this user (None: it may): the file and
    every folder above it belong to root or to this user, and nobody else
    may write them."""
    me = os.geteuid()
    for p, st in _up(path):
        if isinstance(st, OSError):
            return f"{p}: {st.strerror}"
        if st.st_uid not in (0, me):
            return f"{p} belongs to uid {st.st_uid}"
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not (
                stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX):
            return f"others may write {p}"
    return None


def interpreter_of(pid: int) -> tuple:
    """(path, None) of the interpreter process pid runs, to run it here, or
    (None, why not). As its own user, its argv[0] where that is the same
    file (a virtual environment's bin/python keeps its site-packages); as
    root, the resolved file only."""
    try:
        exe = os.path.realpath(f"/proc/{pid}/exe", strict=True)
    except OSError as e:
        return None, f"its program cannot be read ({e.strerror})"
    if not re.fullmatch(r"python[0-9.]*", os.path.basename(exe)):
        # Python embedded in another program (uwsgi, a C++ server)
        return None, f"its program, {exe}, is not a python interpreter"
    cands = [exe]
    argv = _cmdline(pid)
    if os.geteuid() != 0 and argv and os.path.isabs(argv[0]):
        try:
            if os.path.samefile(argv[0], exe):
                cands.insert(0, argv[0])
        except OSError:
            pass
    why = None
    for c in cands:
        why = _untrusted(c)
        if why is None:
            return c, None
    return None, why


def send(pid: int, script: str) -> None:
    """sys.remote_exec(pid, script), its failures said as Refused."""
    try:
        sys.remote_exec(pid, script)
    except PermissionError as e:
        raise Refused(
            f"process {pid}: the kernel's ptrace rules refused it ({e}; "
            f"kernel.yama.ptrace_scope = {_ptrace_scope()}): run it as "
            f"root, or as the same user with ptrace_scope 0") from None
    except Exception as e:
        text = str(e)
        if "not enabled in the remote process" in text:
            raise Refused(
                f"process {pid} runs with remote debugging off "
                f"(-X disable_remote_debug, PYTHON_DISABLE_REMOTE_DEBUG, "
                f"or a Python built without it): start the agent in the "
                f"program (GPURECLAIM_AGENT=1, gpureclaim run --agent)") \
                from None
        if "PyRuntime" in text:
            raise Refused(
                f"process {pid} has no Python runtime that sys.remote_exec "
                f"can find (it is not Python, or a Python older than "
                f"3.14)") from None
        raise Refused(f"process {pid}: sys.remote_exec failed: "
                      f"{type(e).__name__}: {text}") from None


def _ptrace_scope() -> str:
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            return f.read().strip()
    except OSError:
        return "none (no Yama: the same user may)"


def _run_step(interp: str, args: list,
              timeout: float) -> subprocess.CompletedProcess:
    """`interp -P -m gpureclaim._remote_start ARGS` (-P: not the current
    folder on its path; this package first on it)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [_package_parent()] + ([env["PYTHONPATH"]]
                               if env.get("PYTHONPATH") else []))
    return subprocess.run([interp, "-P", "-m",
                           "gpureclaim.agent._remote_start", *args],
                          env=env, capture_output=True, text=True,
                          timeout=timeout)


def _send_through(interp: str, pid: int, script: str) -> None:
    """send() run by interp (the process's own Python)."""
    try:
        p = _run_step(interp, ["send", str(pid), script], STEP_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Refused(f"process {pid}: its Python {interp} could not "
                      f"send the start: {e}") from None
    if p.returncode == 0:
        return
    said = p.stdout.strip()  # send()'s line, from _main
    if not said:
        last = p.stderr.strip().splitlines()[-1:] or ["no output"]
        said = f"process {pid}: {interp} failed: {last[0]}"
    raise Refused(said)


def _script_dir(pid: int, owner: Optional[int]) -> str:
    """Where the script goes: the temporary folder, which the process (of
    uid owner) must be able to read when it is another user's (root
    starting it in a user's process): else /tmp. Refused where another
    user may write the folder or one above it, unless it is sticky (as
    /tmp): they could swap the file."""
    d = os.path.realpath(tempfile.gettempdir())
    if not (owner in (None, os.geteuid()) or _others_reach(d)):
        if not _others_reach("/tmp"):
            raise Refused(
                f"process {pid} belongs to uid {owner}, who cannot read "
                f"{d} or /tmp, where the start's script would be: set "
                f"TMPDIR to a folder that user can read")
        d = "/tmp"
    why = _untrusted(d)
    if why is not None:
        raise Refused(f"the start's script would be in {d}, and {why} "
                      f"(not sticky): set TMPDIR to a folder only root or "
                      f"you may write")
    return d


def _write_script(d: str, owner: Optional[int]) -> tuple:
    """The script, made in d: (its path, the descriptor of the file
    beside it, path + ".err", where the process writes why the start
    failed). Mode and owner are set on the descriptors, never by path
    (the owner could swap a path for a link between two calls)."""
    fd, script = tempfile.mkstemp(prefix="gpureclaim-agent-", suffix=".py",
                                  dir=d)
    err = script + ".err"
    try:
        efd = os.open(err, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                      | os.O_CLOEXEC, 0o600)
    except OSError:
        os.close(fd)
        os.unlink(script)
        raise
    try:
        os.fchmod(fd, 0o644)  # the process reads it, as its own user
        if os.geteuid() == 0 and owner not in (None, 0):
            os.fchown(fd, owner, -1)   # so that it may remove it, run late
            os.fchown(efd, owner, -1)  # and write why it failed
        with os.fdopen(fd, "w") as f:
            f.write(_SCRIPT.format(script=script, parent=_package_parent(),
                                   err=err))
    except BaseException:
        os.close(efd)
        for p in (script, err):
            try:
                os.unlink(p)
            except OSError:
                pass
        raise
    return script, efd


def _others_reach(d: str) -> bool:
    """Every folder of d, and d, may be searched by other users."""
    return all(not isinstance(st, OSError) and st.st_mode & stat.S_IXOTH
               for _, st in _up(os.path.realpath(d)))


def _package_parent() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))


# -- waking a Jupyter kernel ------------------------------------------------

def connection_file(pid: int) -> Optional[str]:
    """The connection file of process pid when it is a Jupyter kernel
    (ipykernel, `-f FILE` on its command line), and that file is a regular
    file of the process's own user; else None."""
    argv = _cmdline(pid)
    if not any("ipykernel" in a for a in argv[:3]):
        return None
    path = None
    for i, a in enumerate(argv):
        if a == "-f" and i + 1 < len(argv):
            path = argv[i + 1]
        elif a.startswith(("-f=", "--f=")):
            path = a.split("=", 1)[1]
    if not path:
        return None
    if not os.path.isabs(path):
        try:
            path = os.path.join(os.readlink(f"/proc/{pid}/cwd"), path)
        except OSError:
            return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_uid != _agent._proc_uid(pid):
        return None
    return path


def _loopback_tcp(path: str) -> dict:
    """The connection file at path, Refused unless it names tcp on
    loopback (checked here too, before another interpreter is run for
    it)."""
    try:
        with open(path) as f:
            info = json.load(f)
    except (OSError, ValueError) as e:
        raise Refused(f"its connection file cannot be read: {e}") from None
    if not isinstance(info, dict):
        raise Refused("its connection file is not a JSON object")
    if info.get("transport", "tcp") != "tcp" or info.get("ip") not in (
            "127.0.0.1", "localhost", "::1", "0.0.0.0", ""):
        raise Refused(f"its connection file names "
                      f"{info.get('transport')!r} on {info.get('ip')!r}: "
                      f"only tcp on this machine's loopback is used to wake "
                      f"a kernel")
    return info


def wake(path: str, timeout: float) -> None:
    """A kernel_info_request to the kernel of connection file path, and
    its reply (so its main thread has run Python). Raises on failure."""
    from jupyter_client import BlockingKernelClient

    # another transport (ipc: a Unix socket anywhere, root's too) or
    # address is never connected to; the file is read once, what was
    # checked is what is used
    info = _loopback_tcp(path)
    kc = BlockingKernelClient()
    kc.load_connection_info(info)
    if kc.ip in ("0.0.0.0", ""):
        kc.ip = "127.0.0.1"
    kc.start_channels(shell=True, iopub=False, stdin=False, hb=False,
                      control=False)
    try:
        kc.kernel_info()
        kc.get_shell_msg(timeout=timeout)
    finally:
        kc.stop_channels()


def _wake(path: str, interp: Optional[str], timeout: float) -> Optional[str]:
    """Wakes the kernel from here, else through interp; None when woken,
    else why not."""
    try:
        _loopback_tcp(path)
    except Refused as e:
        return str(e)
    try:
        import jupyter_client  # noqa: F401
    except ImportError:
        if interp is None:
            return (f"jupyter_client, which would wake it, cannot be "
                    f"imported by {sys.executable}")
        try:
            p = _run_step(interp, ["wake", path, str(timeout)],
                          timeout + STEP_S)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{interp} could not wake it: {e}"
        return None if p.returncode == 0 else (
            p.stdout.strip() or f"{interp} could not wake it")
    try:
        wake(path, timeout)
        return None
    except Exception as e:
        return f"waking it failed: {type(e).__name__}: {e}"


# -- the command --------------------------------------------------------------

def start(pid: int, timeout: float) -> str:
    """Starts the agent in process pid; returns its socket's path. Raises
    Refused with the command's line."""
    owner = _agent._proc_uid(pid)
    if owner is None:
        raise Refused(f"process {pid} does not exist")
    if _agent.socket_path(pid):
        try:
            _agent.ask(pid, "status", timeout=timeout)
            return _agent.socket_path(pid)
        except _agent.AgentError:
            pass
    theirs = process_python(pid)
    mine = sys.version_info[:2]
    if theirs == ():
        raise Refused(f"process {pid} is not a Python process (none of "
                      f"the files it maps is a python3.X or libpython3.X)")
    if theirs is not None and theirs < (3, 14):
        raise Refused(
            f"process {pid} runs Python {theirs[0]}.{theirs[1]}, which has "
            f"no sys.remote_exec (PEP 768 is 3.14's): start the agent in "
            f"the program (GPURECLAIM_AGENT=1, gpureclaim run --agent, "
            f"%load_ext gpureclaim)")
    here = hasattr(sys, "remote_exec") and theirs in (None, mine)
    interp = None
    if not here:
        if theirs is None:
            v = ".".join(map(str, sys.version_info[:3]))
            raise Refused(
                f"start --pid needs Python 3.14 or newer (sys.remote_exec, "
                f"PEP 768) here and in process {pid}; this is Python {v} "
                f"({sys.executable}): set GPURECLAIM_PYTHON to a 3.14, or "
                f"start the agent in the program (GPURECLAIM_AGENT=1, "
                f"gpureclaim run --agent)")
        interp, why = interpreter_of(pid)
        if interp is None:
            raise Refused(
                f"process {pid} runs Python {theirs[0]}.{theirs[1]} and "
                f"this is {sys.executable} ({mine[0]}.{mine[1]}); its own "
                f"cannot be run here ({why}): set GPURECLAIM_PYTHON to a "
                f"Python {theirs[0]}.{theirs[1]}")
    script, err = _write_script(_script_dir(pid, owner), owner)
    try:
        try:
            if here:
                send(pid, script)
            else:
                _send_through(interp, pid, script)
        except Refused:
            os.unlink(script)
            raise
        return _wait(pid, timeout, interp, script, err)
    finally:
        os.close(err)
        try:
            os.unlink(script + ".err")
        except OSError:
            pass


def _failed_inside(err: int) -> Optional[str]:
    """Why the start failed in the process, as its script wrote it into
    the file of descriptor err (read through it: the path may have been
    swapped since), one printable line; None while it says nothing."""
    from ._protocol import printable

    try:
        said = os.pread(err, 600, 0).decode("utf-8", "replace").strip()
    except OSError:
        return None
    return printable(" ".join(said.split()))[:500] or None


def _wait(pid: int, timeout: float, interp: Optional[str],
          script: str, err: int) -> str:
    t0 = time.monotonic()
    end = t0 + timeout
    kernel = connection_file(pid)
    tried, why = False, None  # a kernel woken; why that failed
    while time.monotonic() < end:
        path = _agent.socket_path(pid)
        if path:
            try:
                os.unlink(script)  # it does so itself where it can
            except OSError:
                pass
            return path
        failed = _failed_inside(err)
        if failed:
            raise Refused(f"process {pid} ran the start but could not start "
                          f"the agent: {failed}")
        if kernel and not tried and time.monotonic() - t0 > WAKE_AFTER_S:
            tried = True
            why = _wake(kernel, interp, max(0.5, end - time.monotonic()))
            continue
        time.sleep(0.02)
    if _agent._proc_uid(pid) is None:
        raise Refused(f"process {pid} ended before it started the agent")
    if _agent._proc_state(pid) == "T":
        raise Refused(
            f"process {pid} is stopped (a signal or a debugger): it starts "
            f"the agent when it is continued (the request waits in it)")
    if kernel:
        how = (f"; {why}" if why else "; woken, it did not start it"
               if tried else "")
        raise Refused(
            f"process {pid}, a Jupyter kernel, has not started the agent "
            f"within {timeout:g} s{how}: it starts it when its main thread "
            f"next runs Python (its next cell)")
    raise Refused(
        f"process {pid} has not run the start within {timeout:g} s: Python "
        f"runs it in the main thread at its next bytecode, and that thread "
        f"is blocked (in C code, or waiting for input); it starts the agent "
        f"when that thread runs Python again")


def _main(argv: list) -> int:
    """`python -m gpureclaim._remote_start send PID SCRIPT | wake FILE S`:
    the parts run in the process's own Python; the failure's line on
    stdout, exit 1."""
    try:
        if argv[0] == "send":
            send(int(argv[1]), argv[2])
        elif argv[0] == "wake":
            wake(argv[1], float(argv[2]))
        else:
            print(f"unknown step {argv[0]!r}")
            return 2
    except Refused as e:
        print(e)
        return 1
    except Exception as e:
        print(f"{type(e).__name__}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
