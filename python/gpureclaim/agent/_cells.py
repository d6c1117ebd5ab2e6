"""The agent's notebook hook for resume on demand (docs/suspend.md,
"Resume on demand"): a kernel that `gpureclaim suspend` suspended is
resumed before a cell runs, rather than once the cell's first CUDA call
has waited for the watcher's next look at its threads.

IPython's ``pre_run_cell`` event: before each cell, one read of the
process's page (the extension's ``_wake_state``: a word of shared memory,
include/gpureclaim_wake.h); while a watcher holds the process suspended,
the cell waits for its answer (``_wake_ask``, the GIL released: the
watcher is woken at once and resumes the process; a resume that fails
lets the cell go on, and its first CUDA call waits in the driver as it
would without gpureclaim). The page is made when the hook is set, so a
watcher finds one only in a process that asks.

Set by ``%load_ext gpureclaim`` (gpureclaim/_ipython.py), by
:func:`gpureclaim.agent.start` inside IPython, and by the agent's
``status`` and ``release`` requests in a kernel whose agent started before
its shell (``GPURECLAIM_AGENT=1`` in the kernel's environment): `gpureclaim
suspend` asks the agent to release first, so the hook is in place before
the suspension.
"""
from __future__ import annotations

import sys
from typing import Any, Optional

#: ids of the shells the hook is registered with
_shells: set = set()


def _shell() -> Optional[Any]:
    """The running IPython shell, without importing IPython."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    try:
        return ipython.get_ipython()
    except Exception:
        return None


def _before_cell(info: Any = None) -> None:
    from .. import _gpureclaim

    if _gpureclaim._wake_state() != 0:
        _gpureclaim._wake_ask(0.0)


def watch(shell: Optional[Any] = None) -> bool:
    """Sets the hook on ``shell`` (default: the running one), once; True
    when a shell has it. Raises OSError when the page cannot be made."""
    shell = shell if shell is not None else _shell()
    events = getattr(shell, "events", None)
    if events is None:
        return False
    if id(shell) in _shells:
        return True
    from .. import _gpureclaim

    _gpureclaim._wake_start()
    events.register("pre_run_cell", _before_cell)
    _shells.add(id(shell))
    return True


def watch_quietly() -> None:
    """:func:`watch` for the agent's own moments (its start, a request):
    never raises."""
    try:
        watch()
    except Exception:
        pass
