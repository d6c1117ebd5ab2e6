"""torch.optim for the fake Torch: an Optimizer's param_groups and state
(a defaultdict keyed by the parameters, as Torch's); SGD (momentum
buffers), Adam and AdamW (exp_avg, exp_avg_sq and a CPU step), each
made on a parameter's first step with a .grad."""
from collections import defaultdict

from .autograd import _ops


class Optimizer:
    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = [dict(params=list(params), **defaults)]

    def zero_grad(self, set_to_none=True):
        for g in self.param_groups:
            for p in g["params"]:
                p.grad = None

    def _params_with_grad(self):
        return [p for g in self.param_groups for p in g["params"]
                if p.grad is not None]


class SGD(Optimizer):
    def __init__(self, params, lr=0.01, momentum=0.0):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    def step(self):
        for p in self._params_with_grad():
            if self.defaults["momentum"] and not self.state[p]:
                self.state[p]["momentum_buffer"] = _ops.zeros_like(p)


class AdamW(Optimizer):
    def __init__(self, params, lr=1e-3, weight_decay=0.01):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay))

    def step(self):
        for p in self._params_with_grad():
            s = self.state[p]
            if not s:
                s["step"] = _ops.new((), "cpu")
                s["exp_avg"] = _ops.zeros_like(p)
                s["exp_avg_sq"] = _ops.zeros_like(p)


Adam = AdamW
