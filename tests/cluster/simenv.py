"""What the cluster tests share (imported by name: tests/cluster is on
sys.path). The cluster tests run real engines (a distributed.LocalCluster, spawned
torch.distributed ranks, a local Ray) whose worker processes sit on the
simulated driver with the fake frameworks.

Every worker inherits its environment from sim_env(): the sim's libraries,
a GPURECLAIM_SIM state of its own per test module (so that the processes
of one cluster share their simulated GPUs and nothing else), and a
PYTHONPATH with the built package, the fakes and tests/cluster (the
workload module).

Environment: GPR_SIM_DIR and GPR_PY_PATH as in tests/python.
"""
import getpass
import os
import sys
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FAKES = os.path.join(ROOT, "tests", "python", "fakes")
SIM_DIR = os.path.abspath(os.environ.get("GPR_SIM_DIR", os.path.join(ROOT, "build", "sim")))
PY_PATH = os.path.abspath(os.environ.get("GPR_PY_PATH", os.path.join(ROOT, "build", "python")))
MiB = 1 << 20
GiB = 1 << 30

# The client side (this process) imports the package and the workload
# module; it never loads the simulated driver.
for p in (HERE, PY_PATH):
    if p not in sys.path:
        sys.path.insert(0, p)


def cupy_only_fakes(tmp):
    """A folder with the fake cupy and simcuda but not the fake torch, for
    processes that run the real (CPU) torch."""
    os.makedirs(tmp, exist_ok=True)
    for name in ("cupy", "simcuda.py"):
        dst = os.path.join(tmp, name)
        if not os.path.exists(dst):
            os.symlink(os.path.join(FAKES, name), dst)
    return tmp


def sim_env(state, sim="gpus=2", fakes=FAKES):
    """The environment of a process on the simulated driver."""
    return {
        "GPURECLAIM_SIM": f"{sim};state={state}",
        "GPURECLAIM_CUDA_LIBRARY": os.path.join(SIM_DIR, "libcuda.so.1"),
        "GPURECLAIM_NVML_LIBRARY": os.path.join(SIM_DIR, "libnvidia-ml.so.1"),
        "PYTHONPATH": os.pathsep.join([PY_PATH, fakes, HERE]),
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def remove_state(state):
    for who in (str(os.getuid()), getpass.getuser()):
        try:
            os.unlink(f"/dev/shm/gpureclaim-sim-{who}-{state}")
        except OSError:
            pass


@pytest.fixture(scope="module")
def sim_state():
    """A GPURECLAIM_SIM state of its own for a test module's cluster (a
    test module imports this fixture: no conftest.py here, so that
    tests/python's conftest module keeps its name)."""
    state = "cluster-" + uuid.uuid4().hex[:12]
    yield state
    remove_state(state)


class patched_environ:
    """Sets os.environ for the processes started inside the block (the
    Dask nannies spawn their workers with this process's environment)."""

    def __init__(self, env):
        self.env, self.saved = env, {}

    def __enter__(self):
        for k, v in self.env.items():
            self.saved[k] = os.environ.get(k)
            os.environ[k] = v

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
