"""The frameworks gpureclaim knows, one module each (``torch``, ``cupy``,
``numba``, ``jax``, ``rmm``, ``metal`` for Torch MPS and MLX), each with
its probe, releaser and explainer, in one table.

Every framework takes part in releases through the mechanism a user's
own pool goes through (:func:`gpureclaim.register`): the one trampoline
of the C extension (``_gpureclaim.register``, python/src/releaser.c),
under the framework's name. The order of :data:`TABLE` is the order
releases run them in, the order ``releasers()`` lists them and the order
``explain()`` asks them. docs/frameworks.md says how to add one.

A framework is active only once the program imported it (``sys.modules``):
nothing here imports one, initialises CUDA or opens a context.
"""
from __future__ import annotations

from .. import _gpureclaim as _c
from . import cupy, jax, metal, numba, rmm, torch
from ._base import Framework, Parts, options

__all__ = ["Framework", "NAMES", "Parts", "TABLE", "options", "register_all"]

TABLE: tuple = (torch.FRAMEWORK, cupy.FRAMEWORK, numba.FRAMEWORK,
                jax.FRAMEWORK, rmm.FRAMEWORK, metal.MPS, metal.MLX)
NAMES = frozenset(f.name for f in TABLE)


def register_all() -> None:
    """Registers every framework of the table with the core (at import of
    gpureclaim, before any pool of the user's)."""
    for f in TABLE:
        _c.register(f.name, f.release, f.held, once=True, device=f.device,
                    figure=f.figure)
