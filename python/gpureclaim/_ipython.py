"""``%load_ext gpureclaim`` in IPython or Jupyter (docs/trace.md, "In
Jupyter"; docs/agent.md, "In Jupyter"): the trace's cell magic and the
agent, the two wings a notebook gets at once. The package offers
:func:`load_ipython_extension` on first use (its ``__getattr__``).
"""
from __future__ import annotations

import sys as _sys
from typing import Any

from ._trace import Trace, TraceReport


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext gpureclaim``: the cell magic ``%%gpureclaim [FILE]``
    runs the cell traced and shows its report; and the agent starts
    (gpureclaim/agent/), so that the kernel's memory can be explained
    and released from outside (``gpureclaim release --pid N``,
    ``gpureclaim reclaim``: docs/agent.md). An agent that cannot start is
    one line on stderr; the magic is there anyway."""

    def gpureclaim(line: str, cell: str) -> TraceReport:
        t = Trace(line.strip() or None)
        with t:
            ipython.run_cell(cell)
        return t.report()

    ipython.register_magic_function(gpureclaim, "cell", "gpureclaim")
    try:
        from . import agent

        agent.start()
    except Exception as e:
        _sys.stderr.write(f"gpureclaim: the agent did not start: "
                          f"{type(e).__name__}: {e}\n")
