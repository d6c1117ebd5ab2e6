from . import mps  # noqa: F401
