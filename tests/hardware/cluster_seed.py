"""The seed scenario in one worker process of tests/hardware/test_cluster.py
(a Dask worker or a torchrun rank): Torch and CuPy started on this
process's GPU (CUDA ordinal 0 under a per-worker CUDA_VISIBLE_DEVICES, or
`device`), a 1 GiB Torch tensor in a reference cycle and a 1 GiB CuPy array,
all names dropped. Imported by the workers (found on sys.path)."""
import os

GiB = 1 << 30
_keep = []


def seed(device=0):
    """Runs the scenario; {"pid", "device", "held" (what it added to the
    driver's figure), "figure" (this process's figure now), "visible"}."""
    import cupy
    import torch

    import gpureclaim

    torch.cuda.set_device(device)
    cupy.cuda.Device(device).use()
    # both frameworks started, a tiny live allocation each (kept), and a
    # clean start: nothing cached before the scenario
    _keep.append((torch.zeros(1, device="cuda"), cupy.zeros(1)))
    torch.cuda.synchronize()
    gpureclaim.release()
    start = gpureclaim.process_memory()[device]
    t = torch.empty(GiB, dtype=torch.uint8, device="cuda")
    a = cupy.empty(GiB, dtype=cupy.uint8)
    cycle = [t]
    cycle.append(cycle)
    torch.cuda.synchronize()
    cupy.cuda.Device(device).synchronize()
    now = gpureclaim.process_memory()[device]
    del t, a, cycle
    return {"pid": os.getpid(), "device": device, "held": now - start,
            "figure": now, "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}


def figure(device=0):
    import gpureclaim

    return gpureclaim.process_memory().get(device)
