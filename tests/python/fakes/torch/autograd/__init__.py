"""torch.autograd for the fake Torch: a graph with Torch's node classes
and attributes (next_functions, _saved_*, _raw_saved_*, AccumulateGrad's
variable, a custom Function's ctx and saved_tensors), kept "in C++"
(_cpp.py) as Torch keeps it, for explain(holders=True) and free_plan();
Function, graph.saved_tensors_hooks, no_grad; the differentiable ops
(_ops.py), installed into torch by _ops.install."""
from . import graph  # noqa: F401
from ._nodes import grad_enabled, set_grad_enabled
from .function import Function  # noqa: F401


class no_grad:
    def __enter__(self):
        self.was = grad_enabled()
        set_grad_enabled(False)

    def __exit__(self, *exc):
        set_grad_enabled(self.was)

    def __call__(self, fn):
        def run(*a, **k):
            with no_grad():
                return fn(*a, **k)
        return run
