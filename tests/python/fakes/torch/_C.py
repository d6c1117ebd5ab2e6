"""torch._C: the host cache and cuBLAS workspaces."""
import collections

WORKSPACE = 32 << 20  # cuBLAS workspace on Hopper

_workspaces = {}
host_empty_calls = collections.deque(maxlen=1000)
clear_workspaces_calls = collections.deque(maxlen=1000)


def _host_emptyCache():
    host_empty_calls.append(1)


def _cuda_clearCublasWorkspaces():
    clear_workspaces_calls.append(1)
    _workspaces.clear()
