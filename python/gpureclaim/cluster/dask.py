"""gpureclaim across a Dask cluster, through ``Client.run``.

``Client.run`` calls a function in each worker process outside the task
queue (on the worker's event loop), so it answers while tasks hold the
worker's threads. Each worker is asked on its own, with a timeout: a
worker that raises, hangs or dies is listed with the reason, and the
others' reports stay whole.

Imports nothing of Dask until a call is made with a client (which means
``distributed`` is already imported).
"""
from __future__ import annotations

import asyncio
import inspect
import time
from typing import Any, Iterable, Optional, Union

from . import _records, _report

#: seconds a worker may take to answer, by default
DEFAULT_TIMEOUT = 30.0


def release(client, *, workers: Optional[Iterable[str]] = None,
            timeout: Optional[float] = DEFAULT_TIMEOUT, devices=None,
            collect: Union[str, bool] = "auto", workspaces: bool = False):
    """Run :func:`gpureclaim.release` in every worker (or ``workers``, a
    list of worker addresses) and bring the reports together.

    ``devices``, ``collect`` and ``workspaces`` are passed to each
    worker's release (``devices`` are CUDA ordinals as each worker sees
    them). ``timeout``: seconds each worker may take (None: no limit).

    Returns a :class:`gpureclaim.cluster.ClusterRelease` (an awaitable of
    one with an asynchronous client).
    """
    return _call(client, "release", workers, timeout,
                 dict(devices=devices, collect=collect,
                      workspaces=workspaces))


def explain(client, *, workers: Optional[Iterable[str]] = None,
            timeout: Optional[float] = DEFAULT_TIMEOUT, devices=None):
    """Run :func:`gpureclaim.explain` in every worker (or ``workers``):
    a :class:`gpureclaim.cluster.ClusterExplanation`."""
    return _call(client, "explain", workers, timeout,
                 dict(devices=devices))


def ps(client, *, workers: Optional[Iterable[str]] = None,
       timeout: Optional[float] = DEFAULT_TIMEOUT):
    """Every GPU of the workers' hosts, once, with each worker's own
    driver bytes and the other processes there: a
    :class:`gpureclaim.cluster.ClusterUsage`. Reads only."""
    return _call(client, "ps", workers, timeout, {})


def _check(workers, timeout) -> Optional[list]:
    _records.check_timeout(timeout)
    if workers is None:
        return None
    if isinstance(workers, str):
        return [workers]
    out = list(dict.fromkeys(workers))  # each worker asked once
    if not all(isinstance(w, str) for w in out):
        raise TypeError("workers must be worker addresses (strings)")
    return out


def _call(client, kind: str, workers, timeout, kwargs: dict):
    if not hasattr(client, "run") or not hasattr(client, "sync"):
        raise TypeError(f"expected a distributed.Client, not "
                        f"{type(client).__name__}")
    workers = _check(workers, timeout)
    return client.sync(_fanout, client, kind, workers, timeout, kwargs)


async def _fanout(client, kind: str, workers, timeout, kwargs: dict):
    from distributed.comm import get_address_host

    t0 = time.perf_counter()
    known = await _wait(client.nthreads(), timeout)
    asked = list(known) if workers is None else workers

    def host_of(addr):
        try:
            return get_address_host(addr)
        except Exception:
            return "?"

    async def one(addr):
        if addr not in known:
            return _records.failure(
                kind, addr, "dead", "not a worker of this scheduler now "
                "(it died, left, or never joined)", host=host_of(addr))
        start = time.perf_counter()
        try:
            out = await _wait(
                client.run(_records.run, kind, kwargs, workers=[addr],
                           on_error="return"), timeout)
        except asyncio.TimeoutError:
            return _records.failure(
                kind, addr, "timeout", f"no answer within {timeout:g} s "
                "(its call may still finish there)", host=host_of(addr),
                seconds=time.perf_counter() - start)
        except Exception as e:  # the scheduler could not be asked
            return _records.failure(kind, addr, "error", _describe(e),
                                    host=host_of(addr))
        r = out.get(addr) if isinstance(out, dict) else None
        if isinstance(r, _records.Worker):
            return _records.with_id(r, addr)
        if isinstance(r, OSError):  # CommClosedError is one
            return _records.failure(
                kind, addr, "dead", "the connection to it broke during "
                f"the call ({_describe(r)})", host=host_of(addr),
                seconds=time.perf_counter() - start)
        if isinstance(r, BaseException):
            return _records.failure(kind, addr, "error", _describe(r),
                                    host=host_of(addr))
        return _records.failure(kind, addr, "error",
                                f"unexpected answer {r!r:.200}",
                                host=host_of(addr))

    records = await asyncio.gather(*(one(a) for a in asked))
    return _report.build(kind, records, engine="dask",
                         seconds=time.perf_counter() - t0)


async def _wait(aw, timeout):
    if not inspect.isawaitable(aw):  # already a value
        return aw
    return await asyncio.wait_for(aw, timeout)


def _describe(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def __getattr__(name: str) -> Any:
    # The plugin subclasses distributed's WorkerPlugin: defined on first
    # use, so that importing this module imports nothing of Dask.
    if name == "GPUMetricsPlugin":
        from ._dask_plugin import GPUMetricsPlugin

        return GPUMetricsPlugin
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
