"""torch.utils for the fake Torch: hooks' RemovableHandle."""
from . import hooks  # noqa: F401
