"""The startup hook: gpureclaim's features started in a Python program
nobody edited, by a variable in its environment (docs/oom.md, "How it
starts").

Two ways in, both calling :func:`start` as the interpreter starts:

- ``gpureclaim-startup.pth``, which the wheel installs at the root of
  site-packages: its one line imports nothing unless one of the variables
  of :data:`_STARTERS` is set (the cost is a dict look-up per variable,
  measured in bench/startup_bench.py), as coverage.py's subprocess hook;
- ``gpureclaim/_startup/_bootstrap/sitecustomize.py``, which ``gpureclaim run``
  puts first on the child's PYTHONPATH, for a build tree or an
  environment without the wheel (it then runs the user's own
  sitecustomize).

Each row of :data:`_STARTERS` is (variable, "module:function"); the
function is called with the variable's value. A failure is one line on
stderr ("gpureclaim: GPURECLAIM_OOM=...: <why>; not started"), never an
exception into the program. A feature imports no framework: it waits for
the program to import one (gpureclaim/_startup/_imports.py).
"""
from __future__ import annotations

import importlib
import os
import sys

#: (variable, "module:function called with its value"), in start order.
#: A row's variable is also in gpureclaim-startup.pth and the bootstrap's
#: VARIABLES (tests/python/test_startup.py checks that they agree).
_STARTERS = (
    ("GPURECLAIM_OOM", "gpureclaim.oom:_start_from_env"),
    ("GPURECLAIM_AGENT", "gpureclaim.agent:_start_from_env"),
)

#: the variables, as the .pth line tests them
VARIABLES = tuple(v for v, _ in _STARTERS)

#: values that leave a feature off, as if the variable were unset
OFF = frozenset({"", "0", "false", "no", "off"})

_started: set = set()


def _say(text: str) -> None:
    err = sys.stderr
    if err is None:
        return
    try:
        err.write(text + "\n")
        err.flush()
    except Exception:
        pass


def start() -> None:
    """Starts the feature of every variable set (once per process)."""
    for var, target in _STARTERS:
        value = os.environ.get(var)
        if value is None or var in _started:
            continue
        _started.add(var)
        if value.strip().lower() in OFF:
            continue
        try:
            module, function = target.split(":")
            getattr(importlib.import_module(module), function)(value)
        except Exception as e:
            _say(f"gpureclaim: {var}={value}: {type(e).__name__}: {e}; "
                 f"not started")
