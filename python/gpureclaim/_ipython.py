"""``%load_ext gpureclaim`` in IPython or Jupyter (docs/trace.md, "In
Jupyter"; docs/agent.md, "In Jupyter"; docs/explain.md, "Free it for
me"): the trace's cell magic, the explain wing's line magic and the
agent, the wings a notebook gets at once. The package offers
:func:`load_ipython_extension` on first use (its ``__getattr__``).
"""
from __future__ import annotations

import sys as _sys
from typing import Any, Optional

from ._trace import Trace, TraceReport


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext gpureclaim``: the cell magic ``%%gpureclaim [FILE]``
    runs the cell traced and shows its report; the line magic
    ``%gpureclaim free`` shows free_plan(), ``%gpureclaim free --yes``
    runs it (gpureclaim/_explain/_free.py), ``%gpureclaim explain`` is
    explain(holders=True); and the agent starts (gpureclaim/agent/), so
    that the kernel's memory can be explained and released from outside
    (``gpureclaim release --pid N``, ``gpureclaim reclaim``:
    docs/agent.md). An agent that cannot start is one line on stderr; the
    magics are there anyway."""

    def gpureclaim(line: str, cell: Optional[str] = None) -> Any:
        if cell is None:
            from ._explain._free import magic

            try:
                return magic(line)
            except ValueError as e:
                from IPython.core.error import UsageError

                raise UsageError(str(e)) from None
        t = Trace(line.strip() or None)
        with t:
            ipython.run_cell(cell)
        return t.report()

    ipython.register_magic_function(gpureclaim, "line_cell", "gpureclaim")
    try:
        from . import agent
        from .agent import _cells

        agent.start()
        _cells.watch(ipython)  # resume on demand before a cell
    except Exception as e:
        _sys.stderr.write(f"gpureclaim: the agent did not start: "
                          f"{type(e).__name__}: {e}\n")
