"""Signals and `gpureclaim trace`: what is sent to the process group of
`trace` reaches CMD once, never twice; SIGHUP and SIGQUIT sent to `trace`
are passed on, and `trace` then waits for CMD, leaves its log closed,
removes its private names directory and exits as CMD did.

Every wait is for an event (a line from CMD, a process's end), none for
a time. GPR, TRACER, SIM_DIR: set by meson test."""
import os
import signal
import struct
import subprocess
import sys

import pytest

GPR = os.environ["GPR"]
TRACER = os.environ["TRACER"]
SIM_DIR = os.environ["SIM_DIR"]

# CMD: counts the SIGINTs it gets; SIGUSR1 asks for the count so far,
# SIGTERM for the count, then it exits 0
COUNTER = r"""
import os, signal, sys
n = 0
def on_int(s, f):
    global n
    n += 1
signal.signal(signal.SIGINT, on_int)
signal.signal(signal.SIGUSR1, lambda s, f: print("count", n, flush=True))
def on_term(s, f):
    print("final", n, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print("ready", os.getpid(), flush=True)
while True:
    signal.pause()
"""

# CMD: a traced process (the sim's driver through ctypes, which the
# preloaded interposer sees) that allocates and waits for a signal
TRACED = r"""
import ctypes, os, signal
cu = ctypes.CDLL(os.environ["GPURECLAIM_CUDA_LIBRARY"])
ctx, p = ctypes.c_void_p(), ctypes.c_uint64()
assert cu.cuInit(0) == 0
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
assert cu.cuCtxSetCurrent(ctx) == 0
assert cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20)) == 0
print("ready", os.getpid(), flush=True)
while True:
    signal.pause()
"""


def sanitizer_runtimes():
    """A sanitizer build's tracer needs its runtimes first in every
    program it is preloaded into (`gpureclaim trace` keeps them first)."""
    out = subprocess.run(["ldd", TRACER], capture_output=True, text=True)
    return ":".join(sorted(
        line.split()[2] for line in out.stdout.splitlines()
        if ("libasan.so" in line or "libubsan.so" in line) and "=>" in line))


def env_for(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    env = dict(os.environ, GPURECLAIM_TRACE_LIBRARY=TRACER,
               GPURECLAIM_CUDA_LIBRARY=os.path.join(SIM_DIR, "libcuda.so.1"),
               GPURECLAIM_SIM=f"gpus=1;state=signals-{os.getpid()}",
               TMPDIR=str(tmp))
    env.pop("LD_PRELOAD", None)
    san = sanitizer_runtimes()
    if san:  # python is not ours: no leak report for it
        env["LD_PRELOAD"] = san
        env["ASAN_OPTIONS"] = ":".join(
            filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    return env, tmp


def default_signals():
    """In the child before exec: no core files, and the forwarded signals
    at their defaults. A caller under nohup, or a shell's background job,
    ignores SIGHUP (and SIGINT, SIGQUIT), which `trace` rightly leaves
    ignored in CMD: CMD would then outlive the signal these tests send."""
    import resource
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for s in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM):
        signal.signal(s, signal.SIG_DFL)


def start(tmp_path, code, *args):
    env, tmp = env_for(tmp_path)
    p = subprocess.Popen(
        [GPR, "trace", "-q", "--backend", "interpose", *args, "--",
         sys.executable, "-c", code],
        stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
        start_new_session=True,  # `trace` leads a process group of its own
        preexec_fn=default_signals)
    word, pid = p.stdout.readline().split()
    assert word == "ready"
    return p, int(pid), tmp


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_signal_to_the_group_reaches_cmd_once(tmp_path):
    p, child, _ = start(tmp_path, COUNTER)
    try:
        # `trace` stopped: it cannot pass anything on yet
        os.kill(p.pid, signal.SIGSTOP)
        os.killpg(p.pid, signal.SIGINT)  # to the group `trace` leads
        os.kill(child, signal.SIGUSR1)
        # CMD is not in that group: nothing reached it directly
        assert p.stdout.readline().split() == ["count", "0"]
        os.kill(p.pid, signal.SIGCONT)  # now `trace` passes SIGINT on
        os.kill(p.pid, signal.SIGTERM)  # and then SIGTERM, sent to it alone
        assert p.stdout.readline().split() == ["final", "1"]
        assert p.wait() == 0
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)
        p.kill()


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGQUIT])
def test_hup_and_quit_are_passed_on(tmp_path, sig):
    log = tmp_path / "run.trace"
    p, child, tmp = start(tmp_path, TRACED, "-o", str(log))
    try:
        os.kill(p.pid, sig)  # to `trace` alone
        # `trace` passed it on and waited: CMD died of it, as `trace` exits
        assert p.wait() == 128 + sig
        assert not alive(child)
        # the log was closed by CMD's tracer on its way out
        with open(log, "rb") as f:
            head = f.read(64)
        assert head[:8] == b"GPRTRACE"
        (flags,) = struct.unpack_from("<H", head, 14)
        assert flags & 1, "the log was not closed"
        # the private names directory is gone
        assert list(tmp.iterdir()) == []
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)
        p.kill()
        shm = f"/dev/shm/gpureclaim-sim-{os.getuid()}-signals-{os.getpid()}"
        if os.path.exists(shm):
            os.unlink(shm)


def test_cmd_dies_with_trace(tmp_path):
    """SIGKILL cannot be passed on: CMD gets it from the kernel when
    `trace` dies, before it can answer anything."""
    p, child, _ = start(tmp_path, COUNTER)
    try:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        try:
            os.kill(child, signal.SIGUSR1)  # alive, it would answer
        except ProcessLookupError:
            pass
        assert p.stdout.readline() == ""  # its end of the pipe closed
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)


# CMD on a terminal: reads lines, counts SIGINTs (a terminal's Ctrl-C);
# each line read is answered with the count so far
READER = r"""
import os, signal, sys
n = 0
def on_int(s, f):
    global n
    n += 1
signal.signal(signal.SIGINT, on_int)
signal.signal(signal.SIGTERM, lambda s, f: sys.exit(0))
print("ready", os.getpid(), flush=True)
for line in sys.stdin:
    print("got", line.strip(), n, flush=True)
"""

# a guard against a hang, not a measure of speed: how long the terminal's
# test waits for output that should come before it says what it saw
WAIT_S = float(os.environ.get("GPR_TEST_WAIT_S", "120"))


class Terminal:
    """`trace` as the session leader of a pseudo-terminal, as a shell's
    foreground job is: it owns the terminal, CMD reads from it."""

    def __init__(self, tmp_path, code):
        import fcntl
        import termios
        self.master, slave = os.openpty()
        env, _ = env_for(tmp_path)

        def own_terminal():
            os.setsid()
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

        self.p = subprocess.Popen(
            [GPR, "trace", "-q", "--backend", "interpose", "--",
             sys.executable, "-c", code],
            stdin=slave, stdout=slave, stderr=slave, env=env, cwd=tmp_path,
            preexec_fn=own_terminal)
        os.close(slave)
        self.seen = b""
        self.child = int(self.expect(b"ready ").split()[1])

    def expect(self, marker):
        """The line holding marker, output after the last one seen."""
        while marker not in self.seen:
            self.read(marker)
        at = self.seen.index(marker)
        end = self.seen.index(b"\n", at) if b"\n" in self.seen[at:] else None
        while end is None:
            self.read(marker)
            end = self.seen.find(b"\n", at)
            end = None if end < 0 else end
        line = self.seen[at:end].strip()
        self.seen = self.seen[end + 1:]
        return line

    def wait_for(self, marker):
        """Reads until marker was output (no line needed), and drops what
        came up to it."""
        while marker not in self.seen:
            self.read(marker)
        self.seen = self.seen[self.seen.index(marker) + len(marker):]

    def read(self, marker):
        import select
        if not select.select([self.master], [], [], WAIT_S)[0]:
            raise AssertionError(f"no {marker!r} from the terminal in "
                                 f"{WAIT_S:g} s; it showed {self.seen!r}")
        self.seen += os.read(self.master, 4096)

    def type(self, data):
        os.write(self.master, data)

    def close(self):
        if alive(self.child):
            os.kill(self.child, signal.SIGKILL)
        self.p.kill()
        self.p.wait()
        os.close(self.master)


def test_on_a_terminal_cmd_has_the_terminal(tmp_path):
    t = Terminal(tmp_path, READER)
    try:
        t.type(b"hello\n")  # CMD reads the terminal: it is in the foreground
        assert t.expect(b"got ") == b"got hello 0"
        t.type(b"\x03")  # Ctrl-C: the terminal signals CMD's group, once
        # the terminal sends SIGINT, flushes its queues and echoes ^C, in
        # that order: a line typed after the echo is read after the signal
        t.wait_for(b"^C")
        t.type(b"one\n")
        assert t.expect(b"got ") == b"got one 1"
        t.type(b"\x1a")  # Ctrl-Z: CMD stops, and so does `trace`
        _, status = os.waitpid(t.p.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status)
        os.kill(t.p.pid, signal.SIGCONT)  # as a shell's `fg`
        t.type(b"again\n")  # CMD continued, in the foreground again
        assert t.expect(b"got ") == b"got again 1"
        os.kill(t.p.pid, signal.SIGTERM)
        assert t.p.wait() == 0
    finally:
        t.close()
