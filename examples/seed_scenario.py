"""The design record's scenario, as a plain script to run and to trace:

    python3 examples/seed_scenario.py
    gpureclaim trace -o seed.trace -- python3 examples/seed_scenario.py

Torch and CuPy started; a 1 GiB Torch tensor put in a list that contains
itself (a reference cycle) and a 1 GiB CuPy array; all names deleted; then
the usual call (torch.cuda.empty_cache() + CuPy's free_all_blocks()),
which leaves the cycle's gigabyte held, and gpureclaim.release(), which
hands it back. Prints what the driver held for the process after each step
(its CUDA context included, as nvidia-smi counts it).

With real Torch and CuPy on a GPU it runs as it reads. Without a GPU it
runs on the simulated driver with the test suite's fake torch and cupy
(docs/sim.md, "Tracing on the simulated driver"):

    GPURECLAIM_SIM="gpus=1" LD_LIBRARY_PATH=build/sim \\
    GPURECLAIM_CUDA_LIBRARY=build/sim/libcuda.so.1 \\
    GPURECLAIM_NVML_LIBRARY=build/sim/libnvidia-ml.so.1 \\
    PYTHONPATH=build/python:tests/python/fakes \\
    build/cli/gpureclaim trace -o seed.trace -- python3 examples/seed_scenario.py
"""
import cupy
import torch

import gpureclaim

GiB = 1 << 30


def held(dev):
    """What the driver holds for this process on GPU dev, for people."""
    return gpureclaim.format_bytes(gpureclaim.process_memory().get(dev) or 0)


def main():
    dev = torch.cuda.current_device()
    # CUDA started (one tiny tensor, dropped and released): the driver's
    # figure is the context alone before the scenario
    small = torch.empty(1, device="cuda")
    del small
    gpureclaim.release()
    print(f"CUDA started: the driver holds {held(dev)} for this process "
          "(its CUDA context)")
    t = torch.empty(GiB, dtype=torch.uint8, device="cuda")
    a = cupy.empty(GiB, dtype=cupy.uint8)
    cycle = [t]
    cycle.append(cycle)
    print(f"1 GiB in Torch (in a reference cycle) and 1 GiB in CuPy: "
          f"{held(dev)}")
    del t, a, cycle
    torch.cuda.empty_cache()
    cupy.get_default_memory_pool().free_all_blocks()
    print(f"names deleted, empty_cache() + free_all_blocks(): {held(dev)}")
    r = gpureclaim.release()
    print(f"gpureclaim.release(): {held(dev)} "
          f"({gpureclaim.format_bytes(r.bytes)} released)")


if __name__ == "__main__":
    main()
