"""Fixtures for the CLI tests: the built tool and the simulated driver.

GPURECLAIM_BIN: the tool (default build/cli/gpureclaim); GPR_SIM_DIR: the folder
holding the sim's libcuda.so.1 and libnvidia-ml.so.1 (default build/sim);
GPR_FAKES_BUILD: the test stand-ins built from tests/fixtures (default
build/tests/fixtures).
Each test gets its own sim state (a file under /dev/shm), removed after.
"""
import fcntl
import itertools
import json
import os
import pathlib
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("GPURECLAIM_BIN", ROOT / "build/cli/gpureclaim"))
SIM_DIR = pathlib.Path(os.environ.get("GPR_SIM_DIR", ROOT / "build/sim"))
FAKES_BUILD = pathlib.Path(os.environ.get("GPR_FAKES_BUILD",
                                         ROOT / "build/tests/fixtures"))
HELPER = pathlib.Path(__file__).with_name("sim_alloc.py")
# How long a wait for output or an exit may last before it counts as a
# hang: a guard, never a measure (the tests wait for events, not time).
HANG_S = 60
MiB = 1 << 20
GiB = 1 << 30

_counter = itertools.count()


def _sanitizer_preload(lib):
    """The sanitizer runtimes `lib` needs (an ASan build of the sim): a
    Python child can load such a library only with them preloaded."""
    try:
        out = subprocess.run(["ldd", str(lib)], capture_output=True,
                             text=True).stdout
    except OSError:
        return None
    libs = [line.split("=>")[1].split()[0] for line in out.splitlines()
            if "=>" in line and ("libasan" in line or "libubsan" in line)]
    return ":".join(libs) or None


_JSON_CLOCK = re.compile(r'"time":"[^"]*","unix_time":[0-9.]+,')


def same_listing(a, b):
    """Two outputs of `ps` alike: text as is, JSON but for the time its
    round began."""
    return _JSON_CLOCK.sub("", a) == _JSON_CLOCK.sub("", b)


def asan_build(path):
    """Whether the program at path is built with AddressSanitizer (the
    runtime's entry point is in it, linked statically or not)."""
    try:
        return b"__asan_init" in pathlib.Path(path).read_bytes()
    except OSError:
        return False


class Result:
    def __init__(self, proc):
        self.rc = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    def json(self):
        return json.loads(self.out)

    def __repr__(self):
        return f"rc={self.rc}\nstdout:\n{self.out}\nstderr:\n{self.err}"


class Sim:
    """One simulated machine: a GPURECLAIM_SIM configuration with a state
    of its own, the environment that points the tool at it, and the
    processes started on it."""

    def __init__(self, request):
        self.state = f"cli-{os.getpid()}-{next(_counter)}"
        self.config = ""
        self.children = []
        self.sleepers = []
        request.addfinalizer(self.close)

    def configure(self, config=""):
        self.config = config
        return self

    def env(self, **extra):
        env = dict(os.environ)
        env.pop("NO_COLOR", None)
        sim = f"{self.config};state={self.state}" if self.config else \
            f"state={self.state}"
        env["GPURECLAIM_SIM"] = sim
        env["GPURECLAIM_NVML_LIBRARY"] = str(SIM_DIR / "libnvidia-ml.so.1")
        env["GPURECLAIM_CUDA_LIBRARY"] = str(SIM_DIR / "libcuda.so.1")
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def run(self, *args, env=None, timeout=30):
        proc = subprocess.run([str(BIN), *args], env=env or self.env(),
                              capture_output=True, text=True,
                              timeout=timeout)
        return Result(proc)

    def run_on_tty(self, *args, cols=80, rows=24, until=None, env=None):
        """Runs the tool with stdout on a pseudo-terminal of cols x rows;
        with `until` (a test of what the terminal received so far, bytes),
        stops it with SIGINT once that holds (--watch): the rounds are
        waited for, never timed (a minute without them is a hang).
        Returns (exit code, what the terminal received, stderr)."""
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ,
                    struct.pack("HHHH", rows, cols, 0, 0))
        proc = subprocess.Popen([str(BIN), *args], env=env or self.env(),
                                stdout=slave, stderr=subprocess.PIPE)
        os.close(slave)
        out = b""
        hang = time.monotonic() + HANG_S
        waiting = until is not None
        while True:
            if waiting and (until(out) or time.monotonic() > hang):
                proc.send_signal(signal.SIGINT)
                waiting = False
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the other side is closed
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None and not waiting:
                break
        os.close(master)
        err = proc.stderr.read().decode()
        proc.stderr.close()
        return proc.wait(timeout=HANG_S), out.decode(), err

    def watch(self, args, until, env=None):
        """Runs `gpureclaim ps ARGS` (a --watch) with stdout on a pipe,
        reads it line by line until `until(output so far)` holds, then
        stops it with SIGINT and reads the rest: the rounds are waited for,
        never timed. Returns (exit code, the whole stdout, stderr)."""
        proc = subprocess.Popen([str(BIN), "ps", *args],
                                env=env or self.env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        out = ""
        try:
            while not until(out):
                line = proc.stdout.readline()
                if not line:  # it ended by itself
                    break
                out += line
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            rest, err = proc.communicate(timeout=HANG_S)
        return proc.returncode, out + rest, err

    def spawn_sleeper(self, *args):
        """A Python child that waits with `args` (str or bytes) as the rest
        of its command line, for `extra=GPU:PID:SIZE`; returns its Popen
        once it runs. It waits until it is killed, when the test ends
        (never for a time a slow test could outlast)."""
        child = subprocess.Popen(
            [sys.executable.encode(), b"-c",
             b"import signal; print('up', flush=True); signal.pause()",
             *(a.encode() if isinstance(a, str) else a for a in args)],
            stdout=subprocess.PIPE)
        self.sleepers.append(child)
        assert child.stdout.readline() == b"up\n"
        return child

    def spawn_alloc(self, gpu, *sizes, extra_env=None):
        """A child that holds a context on `gpu` and allocations of
        `sizes` bytes, with `extra_env` added to its environment; returns
        its Popen once it holds them."""
        env = self.env(**(extra_env or {}))
        preload = _sanitizer_preload(SIM_DIR / "libcuda.so.1")
        if preload:
            # Python itself leaks by LSan's measure: leak checks off
            env["LD_PRELOAD"] = preload
            env["ASAN_OPTIONS"] = "detect_leaks=0"
        child = subprocess.Popen(
            [sys.executable, str(HELPER), str(SIM_DIR / "libcuda.so.1"),
             str(gpu), *map(str, sizes)],
            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True)
        self.children.append(child)
        line = child.stdout.readline().strip()
        assert line == "ready", f"sim_alloc.py: {line!r}"
        return child

    def close(self):
        for child in self.sleepers:
            child.kill()
            child.wait()
            child.stdout.close()
        for child in self.children:
            try:
                child.stdin.close()
                child.wait(timeout=10)
            except Exception:
                child.kill()
                child.wait()
        try:
            os.unlink(f"/dev/shm/gpureclaim-sim-{os.getuid()}-{self.state}")
        except FileNotFoundError:
            pass


@pytest.fixture
def sim(request):
    if not BIN.exists():
        pytest.fail(f"{BIN} not built (make all)")
    if not (SIM_DIR / "libnvidia-ml.so.1").exists():
        pytest.fail(f"{SIM_DIR}/libnvidia-ml.so.1 not built")
    return Sim(request)
