"""Numba CUDA: a releaser, nothing to explain (Numba keeps no cache of
its own: a dropped device array joins the current context's pending
deallocations, flushed when the list grows; flushing it hands those
blocks to the driver).

Runs once per call, only if the user imported ``numba.cuda`` and Numba's
driver already has a current context: ``numba.cuda.current_context()``
would otherwise create one.
"""
from __future__ import annotations

from typing import Optional

from ._base import ONCE, Framework, failed, imported


def probe() -> tuple:
    """Numba's driver object once Numba initialised it."""
    if imported("numba.cuda") is None:
        return None, "numba.cuda not imported"
    drv = getattr(imported("numba.cuda.cudadrv.driver"), "driver", None)
    try:
        ok = drv is not None and bool(drv.is_initialized)
    except Exception:
        ok = False
    if not ok:
        return None, "numba.cuda imported, driver not initialised"
    return drv, "numba.cuda driver initialised"


def release(device: int) -> Optional[str]:
    if device != ONCE:
        return None
    drv = probe()[0]
    if drv is None:
        return None
    try:
        # __exit__ runs only after an __enter__ that returned
        with drv.get_active_context() as ac:
            active = bool(ac)
    except Exception as e:
        raise failed("active context", e) from e
    if not active:
        return ("no current context in this thread; pending deallocations "
                "of other threads stay")
    try:
        nc = imported("numba.cuda")
        if nc is None:
            raise AttributeError("no context.deallocations")
        nc.current_context().deallocations.clear()
    except Exception as e:
        raise failed("deallocations", e) from e
    return None


FRAMEWORK = Framework("numba", "cuda", probe, None, release)
