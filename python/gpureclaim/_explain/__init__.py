"""The explain wing (docs/explain.md): where this process's GPU memory
goes. ``_parts.py`` splits each GPU's figure into parts (the frameworks'
explainers, the driver's figure, the evidence), ``_holders.py`` names who
holds the largest live arrays (explain(holders=True)), ``_views.py`` is
the result (:class:`Explanation`) and how it shows. ``gpureclaim.explain``
(the package's ``__init__``) is the entry; the classes are re-exported
there.
"""
from ._views import Explanation, GPUExplanation, Part

__all__ = ["Explanation", "GPUExplanation", "Part"]
