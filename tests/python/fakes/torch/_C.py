"""torch._C: the host cache and cuBLAS workspaces. A workspace is taken
from the caching allocator, once per device, by the first matmul; its size
follows Torch: CUBLAS_WORKSPACE_CONFIG (":SIZE_KiB:COUNT" pairs), else
32 MiB on sm_90, else 8.125 MiB (":4096:2:16:8")."""
import collections
import os
import re

WORKSPACE = 32 << 20  # cuBLAS workspace on Hopper

_workspaces = {}
_lt_workspaces = {}
host_empty_calls = collections.deque(maxlen=1000)
clear_workspaces_calls = collections.deque(maxlen=1000)


def _workspace_size(device):
    cfg = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    pairs = re.findall(r":([0-9]+):([0-9]+)", cfg or "")
    if pairs:
        return sum(int(s) * 1024 * int(n) for s, n in pairs)
    from . import cuda

    if cuda.get_device_capability(device) == (9, 0):
        return WORKSPACE
    return 4096 * 1024 * 2 + 16 * 1024 * 8


def _host_emptyCache():
    host_empty_calls.append(1)


def _cuda_clearCublasWorkspaces():
    clear_workspaces_calls.append(1)
    _workspaces.clear()
    _lt_workspaces.clear()


def _cuda_memoryStats(device):
    """Torch's C call beneath memory_stats(): the same figures, nested
    ("allocated_bytes" -> "all" -> "current"), as the releaser reads them."""
    from . import cuda

    nested = {}
    for key, value in cuda.memory_stats(device).items():
        parts = key.split(".")
        node = nested
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return nested
