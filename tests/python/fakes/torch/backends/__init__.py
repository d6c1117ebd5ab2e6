from . import cuda, mps  # noqa: F401
