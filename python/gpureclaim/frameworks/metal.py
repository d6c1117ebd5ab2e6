"""Apple silicon's GPU, which CUDA and NVML do not see: Torch MPS and MLX,
each with its probe, releaser and explainer, on the GPU the core names
"mps". Their releasers run at the once step only, in the releases where
their figure() says they are in use.

- Torch MPS: ``torch.mps.driver_allocated_memory()`` is Metal's
  per-process total (currentAllocatedSize): it counts MLX's buffers as well
  as Torch's, so it is the figure a release there is measured with (read
  before any garbage collection: Metal buffers go back to the driver as
  soon as their objects are collected). Its tensor counter
  (``current_allocated_memory()``) is the live part: it reads zero as soon
  as a tensor is dropped, while the driver still holds the block. Torch's
  MPS cache is not reported apart from MLX's buffers: it stays in the rest.
- MLX: its buffer cache is emptied with ``mx.clear_cache()`` (MLX >= 0.22)
  or ``mx.metal.clear_cache()`` (older). Its own counters (active and
  cache memory) count MLX only, so it gives no figure of the GPU: Metal's
  total comes from torch.mps when Torch is there too, and the core falls
  back to the allocators' counters when it is not.

Tested on this project with a fake torch.mps and a fake mlx only (no
Apple machine).
"""
from __future__ import annotations

from operator import index as _index
from typing import Any, Optional

from ._base import ONCE, Framework, Parts, failed, imported

#: The name of the GPU the Metal releasers share.
DEVICE = "mps"


# ---------------------------------------------------------------- torch.mps

def mps_probe() -> tuple:
    torch = imported("torch")
    if torch is None:
        return None, "torch not imported"
    try:
        ok = bool(torch.backends.mps.is_available())
        mps = torch.mps if ok else None
    except Exception:
        mps = None
    if mps is None:
        return None, "torch imported, MPS not available"
    return mps, "torch MPS available"


def _mps_counters(mps: Any) -> tuple:
    """(live, cached): driver - live also counts MLX's buffers, an upper
    bound of the cache."""
    live = _index(mps.current_allocated_memory())
    driver = _index(mps.driver_allocated_memory())
    return live, max(driver - live, 0)


def _once(probe: Any, device: int) -> Any:
    """The framework's handle at the once step (the only step of a GPU
    that CUDA does not see), else None."""
    return probe()[0] if device == ONCE else None


def _held(counters: Any, handle: Any) -> Optional[tuple]:
    if handle is None:
        return None
    live, cached = counters(handle)
    return max(live, 0), max(cached, 0)


def mps_held(device: int) -> Optional[tuple]:
    return _held(_mps_counters, _once(mps_probe, device))


def mps_release(device: int) -> None:
    mps = _once(mps_probe, device)
    if mps is not None:
        mps.empty_cache()


def mps_figure() -> Optional[int]:
    """Metal's per-process total, or None when Torch MPS is not in use."""
    mps = mps_probe()[0]
    if mps is None:
        return None
    try:
        return max(_index(mps.driver_allocated_memory()), 0)
    except Exception as e:
        raise failed("torch.mps.driver_allocated_memory()", e) from e


def mps_explain(call: Any, g: Parts) -> None:
    """Torch's live tensors in the Metal entry."""
    mps = mps_probe()[0]
    if mps is None:
        return
    live, _ = _mps_counters(mps)
    g.add("live", "torch.mps", live, advice="free_arrays",
          how="torch.mps.current_allocated_memory()")


# ---------------------------------------------------------------------- MLX

def mlx_probe() -> tuple:
    mx = imported("mlx.core")
    return mx, "mlx.core imported" if mx is not None else "mlx not imported"


def _either(mx: Any, name: str) -> Any:
    """mx.<name>() or, for older MLX, mx.metal.<name>()."""
    if hasattr(mx, name):
        return getattr(mx, name)()
    metal = getattr(mx, "metal", None)
    if metal is None:
        raise AttributeError(f"mlx.core has no {name}")
    return getattr(metal, name)()


def _mlx_counters(mx: Any) -> tuple:
    return (_index(_either(mx, "get_active_memory")),
            _index(_either(mx, "get_cache_memory")))


def mlx_held(device: int) -> Optional[tuple]:
    return _held(_mlx_counters, _once(mlx_probe, device))


def mlx_release(device: int) -> None:
    mx = _once(mlx_probe, device)
    if mx is not None:
        _either(mx, "clear_cache")


def mlx_figure() -> Optional[str]:
    """In use when imported; never the GPU's figure (its counters miss
    Torch's buffers): the why says so where it is all there is."""
    if mlx_probe()[0] is None:
        return None
    return ("MLX's own counters stand in: Metal's per-process total is read "
            "through torch.mps, not in use here, and MLX's counters miss "
            "other frameworks' buffers")


def mlx_explain(call: Any, g: Parts) -> None:
    """MLX's live arrays and its cache in the Metal entry."""
    mx = mlx_probe()[0]
    if mx is None:
        return
    active, cache = _mlx_counters(mx)
    g.add("live", "mlx", active, advice="free_arrays",
          how="mx.get_active_memory()")
    g.add("releasable", "mlx", cache, advice="release",
          how="mx.get_cache_memory()")


MPS = Framework("mps", "metal", mps_probe, mps_held, mps_release,
                mps_explain, device=DEVICE, figure=mps_figure)
MLX = Framework("mlx", "metal", mlx_probe, mlx_held, mlx_release,
                mlx_explain, device=DEVICE, figure=mlx_figure)
