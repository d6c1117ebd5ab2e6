"""torch.nn for the fake Torch: Parameter, Module (its _parameters,
_buffers, _modules and hook dicts as Torch keeps them, attributes read
through __getattr__), Linear, ReLU, Sequential, ModuleList."""
from collections import OrderedDict

from . import functional  # noqa: F401
from .. import Tensor
from ..autograd import _nodes, _ops
from ..utils.hooks import RemovableHandle


class Parameter(Tensor):
    """A tensor on data's storage that requires grad."""

    def __new__(cls, data=None, requires_grad=True):
        p = Tensor.__new__(cls)
        p.nbytes, p.device, p._storage = data.nbytes, data.device, \
            data._storage
        p._shape = _ops.shape(data)
        if requires_grad:
            _nodes.meta(p).requires_grad = True
        return p

    def __init__(self, data=None, requires_grad=True):
        pass


class Module:
    def __init__(self):
        d = self.__dict__
        d["training"] = True
        for k in ("_parameters", "_buffers", "_modules", "_forward_hooks",
                  "_forward_pre_hooks", "_backward_hooks"):
            d[k] = OrderedDict() if k.endswith("hooks") else {}

    def __getattr__(self, k):
        d = self.__dict__
        for where in ("_parameters", "_buffers", "_modules"):
            if where in d and k in d[where]:
                return d[where][k]
        raise AttributeError(f"'{type(self).__name__}' object has no "
                             f"attribute '{k}'")

    def __setattr__(self, k, v):
        d = self.__dict__
        if isinstance(v, Parameter):
            d["_parameters"][k] = v
        elif isinstance(v, Module):
            d["_modules"][k] = v
        elif k in d.get("_parameters", ()):
            d["_parameters"][k] = v
        else:
            object.__setattr__(self, k, v)

    def __delattr__(self, k):
        for where in ("_parameters", "_buffers", "_modules"):
            if k in self.__dict__[where]:
                del self.__dict__[where][k]
                return
        object.__delattr__(self, k)

    def __call__(self, *args):
        out = self.forward(*args)
        for hook in list(self._forward_hooks.values()):
            r = hook(self, args, out)
            if r is not None:
                out = r
        return out

    def named_parameters(self, prefix=""):
        seen = set()
        for name, p in self._parameters.items():
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                yield prefix + name, p
        for name, m in self._modules.items():
            for n, p in m.named_parameters(prefix + name + "."):
                if id(p) not in seen:
                    seen.add(id(p))
                    yield n, p

    def parameters(self):
        for _, p in self.named_parameters():
            yield p

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            p.grad = None

    def register_forward_hook(self, hook):
        handle = RemovableHandle(self._forward_hooks)
        self._forward_hooks[handle.id] = hook
        return handle


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        dev = device or "cpu"
        self.weight = Parameter(_ops.new((out_features, in_features), dev))
        if bias:
            self.bias = Parameter(_ops.new((out_features,), dev))
        else:
            self._parameters["bias"] = None

    def forward(self, x):
        return functional.linear(x, self.weight, self.bias)


class ReLU(Module):
    def forward(self, x):
        return functional.relu(x)


class ModuleList(Module):
    """Its modules under "0", "1", ... (model.layers[3])."""

    def __init__(self, mods=()):
        super().__init__()
        self._modules.update((str(i), m) for i, m in enumerate(mods))

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __iter__(self):
        return iter(self._modules.values())

    def __len__(self):
        return len(self._modules)


class Sequential(ModuleList):
    def __init__(self, *mods):
        super().__init__(mods)

    def forward(self, x):
        for m in self:
            x = m(x)
        return x
