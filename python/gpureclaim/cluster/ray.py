"""gpureclaim in Ray actors: a list of actor handles, or the actors of a
placement group.

Ray has no public way to run a function in every worker process
(``run_function_on_all_workers`` was removed): only actors can be reached,
through their handles. Each actor runs gpureclaim through the method Ray
gives every actor, ``__ray_call__``. What Ray cannot do, and so neither
can this module:

- reach the processes of plain tasks (they keep their GPU memory after a
  task ends; release at the end of the task, or use ``max_calls=1``);
- answer out of band: the call queues behind the method an actor is
  running, unless the actor is threaded (``max_concurrency > 1``) or
  async; ``timeout`` lists a busy actor as timed out, and Ray cannot
  cancel the call once it runs;
- list a placement group's actors without the State API (``pip install
  "ray[default]"``, a running dashboard), or give a handle to an unnamed
  actor: unnamed ones are listed as failed, pass their handles instead.

Imports ray only when called (the caller has it imported).
"""
from __future__ import annotations

import time
from typing import Iterable, Optional, Union

from . import _records, _report

DEFAULT_TIMEOUT = 30.0


def release(actors: Optional[Iterable] = None, *, placement_group=None,
            timeout: Optional[float] = DEFAULT_TIMEOUT, devices=None,
            collect: Union[str, bool] = "auto", workspaces: bool = False):
    """Run :func:`gpureclaim.release` in each actor (``actors``, a list of
    handles, and/or every live actor of ``placement_group``): a
    :class:`gpureclaim.cluster.ClusterRelease`. ``timeout``: seconds for
    all the actors to answer (None: no limit)."""
    return _call("release", actors, placement_group, timeout,
                 dict(devices=devices, collect=collect,
                      workspaces=workspaces))


def explain(actors: Optional[Iterable] = None, *, placement_group=None,
            timeout: Optional[float] = DEFAULT_TIMEOUT, devices=None):
    """Run :func:`gpureclaim.explain` in each actor: a
    :class:`gpureclaim.cluster.ClusterExplanation`."""
    return _call("explain", actors, placement_group, timeout,
                 dict(devices=devices))


def ps(actors: Optional[Iterable] = None, *, placement_group=None,
       timeout: Optional[float] = DEFAULT_TIMEOUT):
    """Every GPU of the actors' hosts with each actor's own bytes: a
    :class:`gpureclaim.cluster.ClusterUsage`."""
    return _call("ps", actors, placement_group, timeout, {})


def _actor_entry(actor, kind: str, kwargs: dict):
    """Runs in the actor (through __ray_call__): its record, named by the
    actor's id."""
    import ray

    rec = _records.run(kind, kwargs)
    return _records.with_id(rec, ray.get_runtime_context().get_actor_id())


def _actor_id(handle, i: int) -> str:
    aid = getattr(handle, "_actor_id", None)  # Ray keeps no public getter
    return aid.hex() if hasattr(aid, "hex") else f"actor #{i}"


def _pg_actors(pg, kind: str):
    """(handles, failure records) of the live actors of placement group
    pg, through Ray's State API."""
    import ray

    try:
        from ray.util.state import list_actors

        # the session this process is connected to, not a guess: with two
        # Ray instances on one host the State API refuses to pick one
        listed = list_actors(
            address=ray.get_runtime_context().gcs_address,
            filters=[("placement_group_id", "=", pg.id.hex()),
                     ("state", "=", "ALIVE")], limit=10000)
    except Exception as e:
        raise RuntimeError(
            "listing a placement group's actors needs Ray's State API "
            "(pip install \"ray[default]\" and a running dashboard); pass "
            f"the actor handles instead ({type(e).__name__}: {e})") from e
    handles, failed = [], []
    for a in listed:
        if not a.name:
            failed.append(_records.failure(
                kind, a.actor_id, "error", "an unnamed actor: Ray gives no "
                "handle for it; pass its handle in actors=", pid=a.pid))
            continue
        try:
            handles.append(ray.get_actor(a.name, namespace=a.ray_namespace))
        except Exception as e:
            failed.append(_records.failure(
                kind, a.actor_id, "dead", f"{type(e).__name__}: {e}",
                pid=a.pid))
    return handles, failed


def _call(kind, actors, pg, timeout, kwargs):
    import ray

    _records.check_timeout(timeout)
    if actors is None and pg is None:
        raise TypeError("pass actors= (actor handles) and/or "
                        "placement_group=")
    t0 = time.perf_counter()
    handles = list(actors or [])
    records = []
    if pg is not None:
        more, records = _pg_actors(pg, kind)
        ids = {_actor_id(h, i) for i, h in enumerate(handles)}
        handles += [h for i, h in enumerate(more)
                    if _actor_id(h, i) not in ids]
    refs = []
    for h in handles:
        call = getattr(h, "__ray_call__", None)
        if call is None:
            raise TypeError(f"{h!r} is not a Ray actor handle (or this "
                            "Ray has no __ray_call__)")
        refs.append(call.remote(_actor_entry, kind, kwargs))
    ready = set(ray.wait(refs, num_returns=len(refs), timeout=timeout)[0]
                if refs else ())
    for i, (h, ref) in enumerate(zip(handles, refs)):
        aid = _actor_id(h, i)
        if ref not in ready:
            records.append(_records.failure(
                kind, aid, "timeout", f"no answer within {timeout:g} s "
                "(busy in another method? the call still runs later)"))
            continue
        try:
            records.append(ray.get(ref))
        except ray.exceptions.RayActorError as e:
            records.append(_records.failure(
                kind, aid, "dead", _first_line(e)))
        except Exception as e:
            records.append(_records.failure(kind, aid, "error",
                                            _first_line(e)))
    return _report.build(kind, records, engine="ray",
                         seconds=time.perf_counter() - t0)


def _first_line(e: BaseException) -> str:
    lines = [ln for ln in str(e).splitlines() if ln.strip()]
    return f"{type(e).__name__}: {lines[0] if lines else ''}".rstrip(": ")
