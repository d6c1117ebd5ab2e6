"""gpureclaim.trace: record this process's driver allocations and frees
from inside the program, no relaunch (docs/trace.md, "From inside a
program").

    with gpureclaim.trace("cell.trace") as t:
        model(batch)
    t.report()              # the tables of `gpureclaim report`; in Jupyter
                            # with the plot

The recording is the tracer library's (C): the interposer when the
program was started under ``gpureclaim trace --dormant`` (about 0.1 us a
call), else CUPTI, subscribed now (about 1 us a call; one subscriber per
process). The report is the trace reader's (C). This module holds the
policy: one session per Trace, what raises and what only warns.
"""
from __future__ import annotations

import json as _json
import os as _os
import sys as _sys
import warnings as _warnings
from typing import Any, Optional

from . import _gpureclaim as _c

_BACKENDS = {"auto": 0, "interpose": 1, "cupti": 2}
# gpureclaim_trace.h's result table, by name (the extension says which)
_OK, _E_ACTIVE, _E_UNAVAILABLE = "OK", "E_ACTIVE", "E_UNAVAILABLE"
_count = 0
# What to do when CUPTI cannot record here: the interposer needs none.
_WAY_OUT = ("to trace without CUPTI, run the program under "
            "`gpureclaim trace --dormant -- ...` (a notebook: "
            "`gpureclaim trace --dormant -- jupyter lab`)")


def _caller_level() -> int:
    """The stacklevel of warnings.warn that names the first frame outside
    this package: the user's `with gpureclaim.trace(...)`, or the cell a
    %%gpureclaim magic runs."""
    here = _os.path.dirname(__file__)
    frame, level = _sys._getframe(1), 1
    while frame is not None and _os.path.dirname(
            frame.f_code.co_filename) == here:
        frame, level = frame.f_back, level + 1
    return level


class TraceReport:
    """The report of one trace: ``str()`` the text tables, ``to_dict()``
    the JSON of ``gpureclaim report --json``, ``_repr_html_()`` the tables
    and the plot of driver memory over time (Jupyter shows it). A trace
    that could not record reports ``traced=False`` and why."""

    def __init__(self, path: str, top: int, why: Optional[str] = None):
        self.path = path
        self.traced = why is None
        self.why = why
        self._top = top
        self.text = (_c._trace_report(path, "text", top) if self.traced
                     else f"not traced: {why}\n")

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    def to_dict(self) -> dict[str, Any]:
        """The report as ``gpureclaim report --json`` writes it."""
        if not self.traced:
            return {"file": self.path, "traced": False, "why": self.why}
        d = _json.loads(_c._trace_report(self.path, "json", self._top))
        d["traced"] = True
        return d

    def _repr_html_(self) -> str:
        if not self.traced:  # the views' one renderer, as every view
            return _c.render(("gpureclaim.trace: not traced",
                              [("warn", f"not traced: {self.why}")]),
                             "html")
        return _c._trace_report(self.path, "html", self._top)


class Trace:
    """A recording of this process's driver allocations and frees (every
    thread), from :meth:`start` to :meth:`stop`, into a trace log at
    ``path``. Use it as a context manager, or call start() and stop().

    Only one trace records at a time in a process: a second one (nested,
    or from another thread) raises :class:`gpureclaim.Error`, and so does
    a second start() of the same trace. When nothing can record here (the
    interposer is not preloaded and CUPTI is absent or held by another
    tool such as torch.profiler) start() warns once, the block runs
    untraced, ``traced`` is False and report() says why; the other tool
    keeps CUPTI. A forked child is not traced: stop() there raises.
    """

    def __init__(self, path: Optional[str] = None, *, backend: str = "auto"):
        global _count
        if backend not in _BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(_BACKENDS)}")
        if path is None:
            _count += 1
            path = f"gpureclaim-{_os.getpid()}-{_count}.trace"
        self.path = _os.path.abspath(_os.fspath(path))
        self.backend = backend
        self.traced = False
        self.why: Optional[str] = None
        self._pid: Optional[int] = None  # the process that started it
        self._stopped = False

    def start(self) -> "Trace":
        """Starts recording; returns self."""
        if self._pid is not None:
            raise _c.Error(f"gpureclaim.trace: {self.path} was started "
                           "already (a Trace records once)")
        rc, why, status = _c._trace_start(self.path, _BACKENDS[self.backend])
        self._pid = _os.getpid()
        if rc == _OK:
            self.traced = True
            self.backend = status["backend"]
            return self
        if rc == _E_UNAVAILABLE:
            self.why = why
            self.backend = "none"
            # the tracer is here, CUPTI failed, no interposer: the way out
            hint = (f"; {_WAY_OUT}" if status is not None
                    and not status["interposer"] and "--dormant" not in why
                    else "")
            _warnings.warn(f"gpureclaim.trace: {why}; nothing traced in "
                           f"this block{hint}", RuntimeWarning,
                           stacklevel=_caller_level())
            return self
        self._pid = None
        if rc == _E_ACTIVE:
            raise _c.Error(f"gpureclaim.trace: {why} in this process; "
                           "traces do not nest: stop that one first")
        raise _c.Error(f"gpureclaim.trace: {why}")

    def stop(self) -> "Trace":
        """Stops recording and closes the log; returns self."""
        if self._pid is None:
            raise _c.Error("gpureclaim.trace: this trace was not started")
        if self._pid != _os.getpid():
            raise _c.Error(f"gpureclaim.trace: this trace was started in "
                           f"process {self._pid}; a forked child is not "
                           "traced and cannot stop it")
        if self._stopped:
            raise _c.Error("gpureclaim.trace: this trace was stopped "
                           "already")
        self._stopped = True
        if self.traced:
            _c._trace_stop()
        return self

    def __enter__(self) -> "Trace":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def report(self, top: int = 10) -> TraceReport:
        """The report of the log (the tables of ``gpureclaim report``)."""
        if self._pid is None:
            raise _c.Error("gpureclaim.trace: this trace was not started")
        if not self._stopped:
            raise _c.Error("gpureclaim.trace: stop the trace before its "
                           "report")
        return TraceReport(self.path, top, None if self.traced else self.why)


def trace(path: Optional[str] = None, *, backend: str = "auto") -> Trace:
    """A :class:`Trace` of this process into ``path`` (default
    ``./gpureclaim-<pid>-<n>.trace``): ``with gpureclaim.trace(p) as t:``.
    ``backend``: "auto" (the interposer when preloaded, else CUPTI),
    "interpose" or "cupti". An old trace log at ``path`` is replaced;
    any other file there raises."""
    return Trace(path, backend=backend)
