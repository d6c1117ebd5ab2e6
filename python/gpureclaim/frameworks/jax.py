"""JAX/XLA: a pool that never shrinks (by default 75% of each GPU, taken
when its backend starts); nothing outside XLA can return it.

Its releaser returns nothing: per visited GPU it writes a note with the
pool's size and the environment variables that change it. It holds no
counters (held() is not given): live JAX arrays must not trigger a garbage
collection that could not give the driver anything back. Its explainer
splits the pool into live bytes and the part that never shrinks. Both
read only backends already started: ``jax.devices()`` would start one and
take the pool.
"""
from __future__ import annotations

import os
from operator import index as _index
from typing import Any, Optional

from ._base import Framework, Parts, imported, item


def probe() -> tuple:
    """The dict of JAX backends already started."""
    if imported("jax") is None:
        return None, "jax not imported"
    b = getattr(imported("jax._src.xla_bridge"), "_backends", None)
    if b is None:
        return None, "jax imported; cannot tell whether a backend started"
    if not isinstance(b, dict) or not b:
        return None, "jax imported, no backend started"
    return b, "jax backend started (its pool cannot be released)"


def _is_gpu(d: Any, device: int) -> bool:
    """The JAX device d is a GPU with hardware id ``device``."""
    try:
        if d.platform not in ("gpu", "cuda", "rocm"):
            return False
        try:
            hw = d.local_hardware_id
        except AttributeError:
            hw = d.id
        return _index(hw) == device
    except Exception:
        return False


def device_of(backend: Any, device: int) -> Any:
    """The JAX device of CUDA ordinal ``device`` in one backend, or None."""
    try:
        for d in backend.local_devices():
            if _is_gpu(d, device):
                return d
    except Exception:
        pass
    return None


def _find(device: int) -> Any:
    backends = probe()[0]
    for backend in list(backends.values()) if backends else ():
        d = device_of(backend, device)
        if d is not None:
            return d
    return None


def _env(name: str) -> str:
    return os.environ.get(name, "unset")


def release(device: int) -> Optional[str]:
    if device < 0:
        return None
    d = _find(device)
    if d is None:
        return None
    try:
        stats = d.memory_stats()
    except Exception:
        stats = None
    pool = item(stats, "pool_bytes")
    if pool < 0:
        pool = item(stats, "bytes_limit")
    in_use = item(stats, "bytes_in_use")
    gb = 0.0 if pool < 0 else pool / 1e9
    return (f"jax: GPU {device}: XLA pool of {gb:.3f} GB ({in_use} bytes "
            f"in use) cannot be released; it is set by "
            f"XLA_PYTHON_CLIENT_PREALLOCATE="
            f"{_env('XLA_PYTHON_CLIENT_PREALLOCATE')}, "
            f"XLA_PYTHON_CLIENT_MEM_FRACTION="
            f"{_env('XLA_PYTHON_CLIENT_MEM_FRACTION')}, "
            f"XLA_PYTHON_CLIENT_ALLOCATOR="
            f"{_env('XLA_PYTHON_CLIENT_ALLOCATOR')} before JAX starts")


def explain(call: Any, g: Parts) -> None:
    d = _find(g.device)
    if d is None:
        return
    stats = d.memory_stats()
    in_use = item(stats, "bytes_in_use")
    pool, what = item(stats, "pool_bytes"), "pool_bytes - bytes_in_use"
    if pool < 0:
        pool, what = item(stats, "bytes_reserved"), \
            "bytes_reserved - bytes_in_use"
    if in_use < 0 or pool < 0:
        g.note(f"jax: GPU {g.device}: memory_stats() gives no bytes_in_use "
               f"or pool_bytes; JAX's memory is in the rest")
        return
    g.add("live", "jax", in_use, advice="free_arrays",
          how="bytes_in_use of the device's memory_stats()")
    g.add("pool", "jax", pool - in_use, hint="xla_preallocate",
          how=f"{what} of the device's memory_stats(); "
              f"XLA_PYTHON_CLIENT_PREALLOCATE="
              f"{_env('XLA_PYTHON_CLIENT_PREALLOCATE')}, "
              f"XLA_PYTHON_CLIENT_MEM_FRACTION="
              f"{_env('XLA_PYTHON_CLIENT_MEM_FRACTION')}")


FRAMEWORK = Framework("jax", "cuda", probe, None, release, explain)
