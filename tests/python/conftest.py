"""Runs each scenario in a fresh interpreter: the simulated driver reads
GPURECLAIM_SIM once, and a framework, once imported, stays imported.

Environment: GPR_SIM_DIR (the sim's libraries, default build/sim),
GPR_PY_PATH (the folder holding the built gpureclaim package, default
build/python) and GPR_FAKES_BUILD (the stand-ins built from tests/fixtures,
default build/tests/fixtures); `meson test --suite python` sets them.
"""
import getpass
import json
import os
import subprocess
import sys
import textwrap
import uuid

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAKES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fakes")
SIM_DIR = os.path.abspath(os.environ.get("GPR_SIM_DIR", os.path.join(ROOT, "build", "sim")))
PY_PATH = os.path.abspath(os.environ.get("GPR_PY_PATH", os.path.join(ROOT, "build", "python")))
# the test stand-ins built from tests/fixtures (libtorch_cuda.so, the tracer)
FAKES_BUILD = os.path.abspath(os.environ.get("GPR_FAKES_BUILD", os.path.join(ROOT, "build", "tests", "fixtures")))

# An ASan build (make check's build/asan): the suite's environment preloads
# the ASan runtime (tests/python/meson.build), which must stay first in
# every LD_PRELOAD a scenario sets (the tracer's, or none).
SAN_PRELOAD = (os.environ.get("LD_PRELOAD", "")
               if "asan" in os.environ.get("LD_PRELOAD", "") else "")
#: RSS measures ASan's quarantine of freed memory there, not a leak
SANITIZED = bool(SAN_PRELOAD)

PRELUDE = """\
import gc, json, os, sys
from scenario import emit, sim, libcuda_mapped, primary_active, rss_bytes
import gpureclaim
"""


class Result:
    def __init__(self, proc):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.data = None
        for line in proc.stdout.splitlines():
            if line.startswith("SCENARIO "):
                self.data = json.loads(line[len("SCENARIO "):])

    def __getitem__(self, k):
        return self.data[k]


@pytest.fixture
def scenario():
    """scenario(code, sim="gpus=1", env={}, timeout=120) -> Result: runs
    code after PRELUDE in a fresh interpreter on the sim; fails the test if
    it exits non-zero or emits nothing."""
    states = []

    def run(code, sim="gpus=1", env=None, timeout=120, expect_ok=True):
        state = "pytest-" + uuid.uuid4().hex[:12]
        states.append(state)
        e = dict(os.environ)
        for k in ("FAKE_MPS", "FAKE_JAX_POOL", "FAKE_TORCH_LAYOUT",
                  "FAKE_TORCH_VERSION", "FAKE_TRACE_ROWS", "FAKE_STACKS",
                  "CUDA_INJECTION64_PATH"):
            e.pop(k, None)
        e.update(
            GPURECLAIM_SIM=f"{sim};state={state}" if sim else f"state={state}",
            GPURECLAIM_CUDA_LIBRARY=os.path.join(SIM_DIR, "libcuda.so.1"),
            GPURECLAIM_NVML_LIBRARY=os.path.join(SIM_DIR, "libnvidia-ml.so.1"),
            PYTHONPATH=os.pathsep.join([PY_PATH, FAKES]),
            PYTHONDONTWRITEBYTECODE="1",
            GPR_FAKES_BUILD=FAKES_BUILD,
        )
        e.update(env or {})
        if SAN_PRELOAD:
            e["LD_PRELOAD"] = ":".join(
                p for p in (SAN_PRELOAD, e.get("LD_PRELOAD", "").replace(
                    SAN_PRELOAD, "").strip(":")) if p)
        src = PRELUDE + textwrap.dedent(code)
        proc = subprocess.run([sys.executable, "-c", src], env=e,
                              capture_output=True, text=True, timeout=timeout)
        r = Result(proc)
        if expect_ok:
            assert proc.returncode == 0, (
                f"scenario failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
            assert r.data is not None, f"no result:\n{proc.stdout}\n{proc.stderr}"
        return r

    yield run
    user = getpass.getuser()
    uid = os.getuid()
    for s in states:
        for name in (f"/dev/shm/gpureclaim-sim-{uid}-{s}", f"/dev/shm/gpureclaim-sim-{user}-{s}"):
            try:
                os.unlink(name)
            except OSError:
                pass
