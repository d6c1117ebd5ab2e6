"""What the metrics tests share (imported by name: tests/metrics is on
sys.path; no conftest.py, so tests/python's conftest keeps its name).

Processes on the simulated driver, each with its own GPURECLAIM_SIM state
per test (a file under /dev/shm, removed after): `workload` starts one
(tests/metrics/workload.py: fake torch tensors held and cached on one GPU,
an agent when asked) and waits until it says it is ready.

Environment: GPR_SIM_DIR, GPR_PY_PATH, GPR_FAKES_BUILD and GPURECLAIM_BIN,
as the other suites have them (tests/metrics/meson.build sets them).
"""
import getpass
import json
import os
import select
import subprocess
import sys
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FAKES = os.path.join(ROOT, "tests", "python", "fakes")
SIM_DIR = os.path.abspath(os.environ.get("GPR_SIM_DIR", os.path.join(ROOT, "build", "sim")))
PY_PATH = os.path.abspath(os.environ.get("GPR_PY_PATH", os.path.join(ROOT, "build", "python")))
FAKES_BUILD = os.path.abspath(os.environ.get("GPR_FAKES_BUILD", os.path.join(ROOT, "build", "tests", "fixtures")))
BIN = os.path.abspath(os.environ.get("GPURECLAIM_BIN", os.path.join(ROOT, "build", "cli", "gpureclaim")))
WORKLOAD = os.path.join(HERE, "workload.py")
MiB = 1 << 20
# How long a wait for an event may last before it counts as a hang: a
# guard, never a measure (the tests wait for events, not for time).
HANG_S = 60


def sim_env(state, sim="gpus=2", extra_path=()):
    """The environment of a process on the simulated driver."""
    env = dict(os.environ)
    env.update({
        "GPURECLAIM_SIM": f"{sim};state={state}",
        "GPURECLAIM_CUDA_LIBRARY": os.path.join(SIM_DIR, "libcuda.so.1"),
        "GPURECLAIM_NVML_LIBRARY": os.path.join(SIM_DIR, "libnvidia-ml.so.1"),
        "PYTHONPATH": os.pathsep.join([*extra_path, PY_PATH, FAKES, HERE]),
        "PYTHONDONTWRITEBYTECODE": "1",
        "GPR_FAKES_BUILD": FAKES_BUILD,
        "GPURECLAIM_BIN": BIN,
    })
    return env


class Sim:
    """One test's simulated host: its state, its environment, the
    processes started on it (killed at the end)."""

    def __init__(self, sim="gpus=2"):
        self.state = "metrics-" + uuid.uuid4().hex[:12]
        self.env = sim_env(self.state, sim)
        self.procs = []

    def workload(self, gpu, keep_mib, cached_mib, agent=False, argv=(),
                 answer=None):
        """A process holding keep_mib live and cached_mib cached on GPU
        `gpu`, with an agent if asked (`answer`: a stand-in answering that
        line instead); returns (Popen, its ready line's JSON: pid, and the
        figures it saw itself)."""
        env = self.env
        if answer is not None:
            agent, env = 4, dict(env, GPR_WORKLOAD_ANSWER=answer)
        cmd = [sys.executable, WORKLOAD, str(gpu), str(keep_mib),
               str(cached_mib), str(int(agent)), *argv]
        p = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        self.procs.append(p)
        line = read_line(p, "READY ")
        return p, json.loads(line[len("READY "):])

    def run(self, *args, **kw):
        return subprocess.run([BIN, *args], env=self.env, capture_output=True,
                              text=True, timeout=HANG_S, **kw)

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
            for f in (p.stdin, p.stdout, p.stderr):
                if f:
                    f.close()
        for who in (str(os.getuid()), getpass.getuser()):
            try:
                os.unlink(f"/dev/shm/gpureclaim-sim-{who}-{self.state}")
            except OSError:
                pass


def read_line(p, prefix):
    """The first line of p's stdout that starts with prefix (fails the
    test if p ends first or says nothing for HANG_S)."""
    deadline = time.monotonic() + HANG_S
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            pytest.fail(f"no '{prefix}' line from {p.args} in {HANG_S} s")
        r, _, _ = select.select([p.stdout], [], [], left)
        if not r:
            continue
        line = p.stdout.readline()
        if not line:
            err = p.stderr.read() if p.poll() is not None else ""
            pytest.fail(f"{p.args} ended ({p.wait()}) before '{prefix}': "
                        f"{err}")
        if line.startswith(prefix):
            return line.rstrip("\n")


def wait_for(what, check, interval=0.05):
    """Polls check() until it returns a true value (returned); fails the
    test after HANG_S."""
    deadline = time.monotonic() + HANG_S
    while True:
        v = check()
        if v:
            return v
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what} ({HANG_S} s)")
        time.sleep(interval)


@pytest.fixture
def sim():
    s = Sim()
    yield s
    s.close()


def parse_exposition(text):
    """{(name, frozenset(labels.items())): value} of a text exposition,
    through prometheus_client's own parser."""
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def series(parsed, metric, /, **labels):
    """The samples of `metric` whose labels include `labels`: [(labels
    dict, value)]."""
    want = set(labels.items())
    return [(dict(k), v) for (n, k), v in parsed.items()
            if n == metric and want <= set(k)]
