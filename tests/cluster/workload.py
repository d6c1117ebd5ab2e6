"""What a test worker does on the simulated driver (imported by the Dask
workers, the torch.distributed ranks and the Ray actors of tests/cluster,
which find it on PYTHONPATH): allocate known byte counts with the fake
frameworks, keep some and drop the rest, and misbehave on purpose.

Sizes are multiples of 2 MiB, so each pool maps them one to one onto
driver allocations and the drop of the driver's figure is exact.
"""
import os
import signal
import time

MiB = 1 << 20
_kept = []


def _alloc(framework, device, nbytes):
    if framework == "torch":
        import torch

        return torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{device}")
    import cupy

    # use(), not `with`: leaving the block would make the previous device
    # current again, which opens a context there (as CUDA 12's runtime does)
    cupy.cuda.Device(device).use()
    return cupy.empty(nbytes, dtype=cupy.uint8)


def load(plan):
    """plan: [(framework, device, keep_bytes, drop_bytes)]. Allocates
    keep + drop on each device, keeps `keep` alive in this process and
    drops the rest (into the framework's cache). Returns {"pid", "figure":
    {device: driver bytes of this process}} after the drop."""
    import gpureclaim

    dropped = []
    for framework, device, keep, drop in plan:
        if keep:
            _kept.append(_alloc(framework, device, keep))
        if drop:
            dropped.append(_alloc(framework, device, drop))
    del dropped
    return {"pid": os.getpid(), "figure": gpureclaim.process_memory()}


def figure():
    """{device: driver bytes of this process} now."""
    import gpureclaim

    return gpureclaim.process_memory()


def free_all():
    """Drops what load() kept and gives the caches back."""
    import gpureclaim

    _kept.clear()
    gpureclaim.release(collect=True)
    return os.getpid()


def make_release_raise():
    """This process's gpureclaim.release and explain raise from now on,
    as they do where the library cannot run."""
    import gpureclaim

    def broken(**kw):
        raise gpureclaim.Error("simulated: the driver library could not "
                               "be opened")

    gpureclaim.release = broken
    gpureclaim.explain = broken
    return os.getpid()


def hold(started, flag, limit=600.0):
    """Holds the caller (a task, an actor's method) until the file `flag`
    exists, `limit` seconds at most; first creates the file `started`, so
    a test waits for the hold to begin instead of sleeping. Returns this
    process's pid."""
    open(started, "w").close()
    end = time.monotonic() + limit
    while not os.path.exists(flag) and time.monotonic() < end:
        time.sleep(0.05)
    return os.getpid()


def wait_for_files(paths, limit=120.0):
    """Waits until every path in `paths` exists (a hang guard of `limit`
    seconds, then returns False)."""
    end = time.monotonic() + limit
    while not all(os.path.exists(p) for p in paths):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def make_release_hang(flag, limit=120.0):
    """The next release in this process blocks (in a releaser of its own)
    until the file `flag` exists, `limit` seconds at most."""
    import gpureclaim

    def hang(device):
        end = time.monotonic() + limit
        while not os.path.exists(flag) and time.monotonic() < end:
            time.sleep(0.05)

    gpureclaim.register("test-hang", hang)
    return os.getpid()


def make_release_kill():
    """The next release kills this process (SIGKILL, as the OOM killer
    does) from inside the call."""
    import gpureclaim

    gpureclaim.register("test-kill",
                        lambda device: os.kill(os.getpid(), signal.SIGKILL))
    return os.getpid()


def hide_module(name):
    """Makes `name` unimportable in this process, as where it is not
    installed (None in sys.modules stops its import)."""
    import sys

    sys.modules[name] = None


def pid():
    return os.getpid()
