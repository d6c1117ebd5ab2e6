"""Helpers for the scenarios the tests run in fresh interpreters."""
import ctypes
import json
import os
import sys


def emit(obj):
    """The scenario's result: one JSON line the test reads back."""
    sys.stdout.write("SCENARIO " + json.dumps(obj) + "\n")
    sys.stdout.flush()


def sim():
    """The sim's libcuda (loading it makes CUDA 'loaded' in this process)."""
    return ctypes.CDLL(os.environ["GPURECLAIM_CUDA_LIBRARY"],
                       mode=ctypes.RTLD_GLOBAL)


def libcuda_mapped():
    with open("/proc/self/maps") as f:
        return any("libcuda.so" in line for line in f)


def primary_active(dev):
    """cuDevicePrimaryCtxGetState's active flag (needs cuInit done)."""
    lb = sim()
    flags, active = ctypes.c_uint(), ctypes.c_int()
    rc = lb.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags),
                                       ctypes.byref(active))
    return None if rc else bool(active.value)


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def parts(e, dev=0):
    """An explanation's parts of GPU dev: {"kind:source": bytes}, None
    for a part whose bytes are unknown."""
    [g] = [g for g in e.gpus if g.device == dev]
    out = {}
    for p in g.parts:
        k = p.kind + ":" + p.source
        out[k] = out.get(k, 0) + p.bytes if p.known else None
    return out


def check(e):
    """The parts add up to each GPU's figure, the driver's where known."""
    import gpureclaim

    for g in e.gpus:
        assert sum(p.bytes for p in g.parts if p.known) == g.driver, g
        if g.source == "driver":
            assert g.driver == gpureclaim.process_memory()[g.device], g
    return e
