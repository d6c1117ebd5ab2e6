"""Runs a command as a shell does and watches how it ends, for
tests/cli/test_ps_exit.py. Prints one JSON object on stdout.

    end_watch.py [--hold DIR] -- CMD [ARG]...

This process makes itself a subreaper (PR_SET_CHILD_SUBREAPER), so a
process that CMD leaves behind comes to it once CMD has exited. A child of
it, "the shell", runs CMD with stdout and stderr on pipes, reads both to
EOF (giving up after 60 s, a hang guard: "eof" false), reaps CMD and lists the
processes left as its own children ("left_to_shell": there must be none).
With --hold DIR, CMD runs with tests' libexit_hold.so preloaded (the
caller sets LD_PRELOAD and GPR_HOLD_DIR=DIR for CMD alone): the process CMD
leaves writes its pid to DIR/pid and waits in its _exit; the shell then
describes it ("held": its pid, parent, state and open descriptors, as
/proc shows them) and lets it go through the FIFO DIR/fifo, which the
caller made. Then this process reaps every process that came to it
("orphans": pid and exit status each), for at most 60 s (then SIGALRM
ends it: a process that does not end on its own fails the test).
"eof_ms", "exit_ms" and each orphan's "ms" say when (ms after CMD was
started) stdout reached EOF, CMD was reaped, and the orphan was.
"""
import ctypes
import json
import os
import select
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
WAIT_S = 60  # a hang guard, never a measure


def stat_of(pid):
    """(state, parent pid) of pid, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        after_comm = f.read().rsplit(")", 1)[1].split()
    return after_comm[0], int(after_comm[1])


def children_of(parent):
    kids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if stat_of(int(name))[1] == parent:
                kids.append(int(name))
        except (OSError, IndexError, ValueError):
            pass  # gone meanwhile
    return kids


def fds_of(pid):
    links = []
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{name}"))
        except OSError:
            pass
    return sorted(links)


def read_to_eof(fds, out, t0):
    """{fd: bytes} read from each until EOF, with "eof_ms": when `out`
    reached it; also whether all did."""
    got = {fd: b"" for fd in fds}
    got["eof_ms"] = None
    pending = set(fds)
    deadline = time.monotonic() + WAIT_S
    while pending and time.monotonic() < deadline:
        ready, _, _ = select.select(list(pending), [], [], 0.2)
        for fd in ready:
            chunk = os.read(fd, 65536)
            if chunk:
                got[fd] += chunk
            else:
                pending.discard(fd)
                if fd == out:
                    got["eof_ms"] = (time.monotonic() - t0) * 1e3
    return got, not pending


def held_process(hold):
    """The process waiting in libexit_hold.so's _exit, described, then
    let go."""
    path = os.path.join(hold, "pid")
    deadline = time.monotonic() + WAIT_S
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        pid = int(f.read())
    state, ppid = stat_of(pid)
    held = {"pid": pid, "ppid": ppid, "state": state, "fds": fds_of(pid)}
    os.close(os.open(os.path.join(hold, "fifo"), os.O_WRONLY))
    return held


def shell(cmd, hold):
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.closerange(3, 1024)
        os.execvp(cmd[0], cmd)
    os.close(out_w)
    os.close(err_w)
    pipe = f"pipe:[{os.fstat(out_r).st_ino}]"
    got, eof = read_to_eof([out_r, err_r], out_r, t0)
    _, status = os.waitpid(pid, 0)
    exit_ms = (time.monotonic() - t0) * 1e3
    return {
        "t0": t0,
        "eof_ms": got["eof_ms"],
        "exit_ms": exit_ms,
        "rc": os.waitstatus_to_exitcode(status),
        "out": got[out_r].decode(errors="replace"),
        "err": got[err_r].decode(errors="replace"),
        "eof": eof,
        "pipe": pipe,
        "cmd_pid": pid,
        "shell_pid": os.getpid(),
        "left_to_shell": children_of(os.getpid()),
        "held": held_process(hold) if hold else None,
    }


def main(argv):
    hold = None
    if argv[:1] == ["--hold"]:
        hold, argv = argv[1], argv[2:]
    assert argv[:1] == ["--"] and len(argv) > 1, __doc__
    cmd = argv[1:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit(f"prctl: {os.strerror(ctypes.get_errno())}")
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        code = 0
        try:
            os.write(w, json.dumps(shell(cmd, hold)).encode())
        except BaseException as e:  # said, not lost in a forked child
            os.write(w, json.dumps({"error": repr(e)}).encode())
            code = 1
        os._exit(code)
    os.close(w)
    text = b""
    while chunk := os.read(r, 65536):
        text += chunk
    os.waitpid(child, 0)
    result = json.loads(text)
    signal.alarm(WAIT_S)
    orphans = []
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        orphans.append({"pid": pid,
                        "status": os.waitstatus_to_exitcode(status),
                        "ms": (time.monotonic() - result.get("t0", 0)) * 1e3})
    result["orphans"] = orphans
    result["reaper_pid"] = os.getpid()
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
