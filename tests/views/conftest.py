"""The views are rendered with the environment docs/sim.md tells a user
to set: the sim's libraries, a state of their own, the built package and
the fake frameworks on PYTHONPATH (GPR_SIM_DIR, GPR_PY_PATH as in
tests/python; GPURECLAIM_BIN and GPR_TRACE_SAMPLE from the build)."""
import os
import sys
import uuid

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM_DIR = os.path.abspath(os.environ.get("GPR_SIM_DIR", os.path.join(ROOT, "build", "sim")))
PY_PATH = os.path.abspath(os.environ.get("GPR_PY_PATH", os.path.join(ROOT, "build", "python")))
FAKES = os.path.join(ROOT, "tests", "python", "fakes")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session", autouse=True)
def sim_environment():
    state = "views-" + uuid.uuid4().hex[:10]
    saved = dict(os.environ)
    os.environ.update(
        GPURECLAIM_SIM=f"gpus=2;state={state}",
        GPURECLAIM_CUDA_LIBRARY=os.path.join(SIM_DIR, "libcuda.so.1"),
        GPURECLAIM_NVML_LIBRARY=os.path.join(SIM_DIR, "libnvidia-ml.so.1"),
        PYTHONPATH=os.pathsep.join([PY_PATH, FAKES]),
        PYTHONDONTWRITEBYTECODE="1",
        GPR_FAKES_BUILD=os.path.join(ROOT, "build", "tests"))
    os.environ.setdefault("GPURECLAIM_BIN", os.path.join(ROOT, "build", "gpureclaim"))
    os.environ.setdefault("GPR_TRACE_SAMPLE", os.path.join(
        ROOT, "build", "tests", "trace", "test_trace_log"))
    yield
    os.environ.clear()
    os.environ.update(saved)
    for name in os.listdir("/dev/shm"):
        if name.startswith("gpureclaim-sim-") and name.endswith("-" + state):
            os.unlink(os.path.join("/dev/shm", name))
