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
import re
import sys
import threading
from operator import index as _index
from typing import Any, Optional

from .. import _gpureclaim as _c
from ._base import (Framework, Holders, OOMHook, Parts, Request, imported,
                    item)


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


# ------------------------------------------------------------------- OOM

_ERRORS = frozenset({"JaxRuntimeError", "XlaRuntimeError"})
_BYTES = re.compile(r"allocate ([0-9]+) bytes")
_HUMAN = re.compile(r"allocate ([0-9]+(?:\.[0-9]+)?) ?([KMGT])i?B\b")
_ORDINAL = re.compile(r"device ordinal ([0-9]+)")
_SCALE = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
#: the hooks set, by where: JAX has no out-of-memory callback of its own
#: (jax-ml/jax#9530 asks for one), so its RESOURCE_EXHAUSTED error is
#: caught where it reaches the top
_hooked: dict = {}


def oom_request(exc: BaseException) -> Optional[Request]:
    """JAX's runtime error (``jax.errors.JaxRuntimeError``, XlaRuntimeError
    in older jaxlib) saying RESOURCE_EXHAUSTED, and the request it names
    ("Out of memory while trying to allocate 33762398024 bytes.", or in a
    unit: not exact); the device where the message says "device ordinal
    N"."""
    if imported("jax") is None:
        return None
    if not any(c.__name__ in _ERRORS for c in type(exc).__mro__):
        return None
    try:
        msg = str(exc)
    except Exception:
        return None
    if "RESOURCE_EXHAUSTED" not in msg:
        return None
    d = _ORDINAL.search(msg)
    device = int(d[1]) if d else None
    m = _BYTES.search(msg)
    if m:
        return Request(int(m[1]), device, True)
    m = _HUMAN.search(msg)
    nbytes = round(float(m[1]) * _SCALE[m[2]]) if m else 0
    return Request(nbytes, device, False)


def _ipython(watch: Any) -> Optional[str]:
    """In IPython, a cell's exception never reaches sys.excepthook: the
    shell's custom exception handler for JAX's error type (a handler the
    program set itself is left alone, and then this one is not set)."""
    get = getattr(imported("IPython"), "get_ipython", None)
    shell = get() if get is not None else None
    if shell is None or _hooked.get("ipython") is shell:
        return None
    error = getattr(imported("jax.errors"), "JaxRuntimeError", None)
    if not isinstance(error, type):
        return "jax.errors.JaxRuntimeError not found"
    if getattr(shell, "custom_exceptions", ()):
        return ("IPython has a custom exception handler already: JAX's "
                "out-of-memory errors in cells are not watched")

    def handler(self, etype, value, tb, tb_offset=None):
        # a custom handler shows the error itself: as IPython would, then
        # the post-mortem under it
        self.showtraceback((etype, value, tb), tb_offset=tb_offset)
        watch.top_level(value)

    shell.set_custom_exc((error,), handler)
    _hooked["ipython"] = shell
    return None


def oom_attach(watch: Any) -> Optional[str]:
    """Where JAX's RESOURCE_EXHAUSTED reaches the top: ``sys.excepthook``
    and ``threading.excepthook`` (each calls the hook it replaces first,
    so the traceback comes before the post-mortem), and IPython's custom
    exception handler in a shell. An error caught by the program is not
    seen (``@retry_on_oom`` reports those it catches)."""
    if "sys" not in _hooked:
        prev = sys.excepthook

        def excepthook(etype, value, tb):
            prev(etype, value, tb)
            watch.top_level(value)

        sys.excepthook = _hooked["sys"] = excepthook
    if "threading" not in _hooked:
        prev_t = threading.excepthook

        def thread_excepthook(args):
            prev_t(args)
            watch.top_level(args.exc_value)

        threading.excepthook = _hooked["threading"] = thread_excepthook
    return _ipython(watch)


def arrays(call: Any, objs: list) -> tuple:
    """JAX's arrays on a GPU among objs (``jax._src.array.ArrayImpl``): one
    buffer each (``unsafe_buffer_pointer()``, ``nbytes``), the first
    shard's for an array over several devices. Deleted or donated arrays
    hold nothing. XLA lists no live blocks. (Tested on the fake JAX's
    stand-in of ArrayImpl, not yet on real JAX.)"""
    mod = imported("jax._src.array")
    cls = getattr(mod, "ArrayImpl", None)
    if not isinstance(cls, type):
        return [], None, 0
    out, odd = [], 0
    for a in _c._of_types(objs, (cls,)):
        try:
            if cls.is_deleted(a):
                continue
            dev = next(iter(cls.devices(a)))
            if getattr(dev, "platform", "") != "gpu":
                continue
            ptr = int(cls.unsafe_buffer_pointer(a))
            n = int(cls.nbytes.__get__(a, cls))
            out.append((a, int(dev.id), ptr, n))
        except Exception:
            odd += 1
    return out, None, odd


def array_types() -> tuple:
    """The class of JAX's arrays (``jax._src.array.ArrayImpl``)."""
    cls = getattr(imported("jax._src.array"), "ArrayImpl", None)
    return (cls,) if isinstance(cls, type) else ()


def _no_segments(call: Any) -> list:
    """XLA's pool gives the driver nothing back (free_plan())."""
    return []


FRAMEWORK = Framework("jax", "cuda", probe, None, release, explain,
                      oom=OOMHook("jax", oom_attach, oom_request),
                      holders=Holders(
                          arrays, cpp="XLA, a jitted function's cache, an "
                                      "extension", types=array_types,
                          cannot="JAX keeps no autograd graph between "
                                 "calls (a function jax.vjp returned keeps "
                                 "its residuals in its closure, which the "
                                 "walk follows); buffers XLA keeps itself "
                                 "(a jitted function's constants) are not "
                                 "followed",
                          release_note="jax: a freed array's bytes go back "
                                       "to XLA's pool, which never shrinks: "
                                       "the driver gets none of them",
                          segments=_no_segments))
