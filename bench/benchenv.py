"""What the Python benchmarks share: the environment of a child process
that imports one build's package (on the GPU, or on the simulated driver
with the test suite's fake frameworks), and the simulator's state files
those children leave behind."""
import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def child_env(pkg, fake, state, **extra):
    """The environment of a child importing the package in folder `pkg`;
    with `fake`, on the simulator (state `state`) with the fakes first."""
    env = dict(os.environ, **extra)
    path = [str(pkg)]
    if fake:
        sim = ROOT / "build/sim"
        path.append(str(ROOT / "tests/python/fakes"))
        env.update(GPURECLAIM_SIM=f"gpus=1;memory=200GiB;state={state}",
                   GPURECLAIM_CUDA_LIBRARY=str(sim / "libcuda.so.1"),
                   GPURECLAIM_NVML_LIBRARY=str(sim / "libnvidia-ml.so.1"),
                   GPR_FAKES_BUILD=str(ROOT / "build/tests/fixtures"))
    if env.get("PYTHONPATH"):
        path.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(path)
    return env


def remove_states(envs):
    """Removes the simulator's shared state of each environment."""
    for e in envs:
        sim = e.get("GPURECLAIM_SIM", "")
        if "state=" not in sim:
            continue
        state = sim.rsplit("state=", 1)[1]
        for who in (str(os.getuid()), os.environ.get("USER", "")):
            try:
                os.unlink(f"/dev/shm/gpureclaim-sim-{who}-{state}")
            except OSError:
                pass
