"""torch.nn.functional for the fake Torch."""
from ..autograd._ops import linear, relu  # noqa: F401
