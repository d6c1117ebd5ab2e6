"""The fake Torch's differentiable ops: float32 tensors with shapes
(randn, zeros), each op's output the output of a node of Torch's name that
saves what Torch's derivative formula saves (tools/autograd/
derivatives.yaml): relu its result, pow its input, mm its input when the
weight requires grad and the weight's transpose when the input does, add
and sum nothing; and backward(), which accumulates .grad into the leaves
and, without retain_graph, frees what the nodes saved."""
import math
import sys
from collections import OrderedDict
from operator import attrgetter

from . import _nodes, function
from ._cpp import NO_META
from ._nodes import (AccumulateGrad, AddBackward0, AddmmBackward0,
                     MmBackward0, MulBackward0, PowBackward0, ReluBackward0,
                     SumBackward0, TBackward0, meta, record, requires_grad)

F32 = 4  # bytes of a float32 element


def _torch():
    return sys.modules["torch"]


def shape(t):
    return t.__dict__.get("_shape", (t.nbytes,))


def new(size, device):
    """A float32 tensor of that shape (the one place the ops make one)."""
    size = tuple(size)
    t = _torch().Tensor(math.prod(size) * F32, str(device))
    t._shape = size
    return t


def _size(size):
    return tuple(size[0]) if len(size) == 1 and isinstance(
        size[0], (tuple, list)) else tuple(size)


def randn(*size, device="cpu", requires_grad=False, dtype=None):
    t = new(_size(size), device)
    if requires_grad:
        meta(t).requires_grad = True
    return t


zeros = randn


def zeros_like(t, **kw):
    return new(shape(t), t.device)


def _is_tensor(x):
    return hasattr(x, "_storage")


def add(a, b):
    ts = [x for x in (a, b) if _is_tensor(x)]
    big = max(ts, key=lambda x: x.nbytes)
    return record(new(shape(big), big.device), AddBackward0, (a, b),
                  scalars=[("alpha", 1)])


def mul(a, b):
    ts = [x for x in (a, b) if _is_tensor(x)]
    big = max(ts, key=lambda x: x.nbytes)
    saved = [("self", a if _is_tensor(a) and requires_grad(b) else None,
              False),
             ("other", b if _is_tensor(b) and requires_grad(a) else None,
              False)]
    return record(new(shape(big), big.device), MulBackward0, (a, b), saved)


def pow(x, exponent):
    return record(new(shape(x), x.device), PowBackward0, (x,),
                  [("self", x, False)], [("exponent", exponent)])


def sum(x):
    return record(new((), x.device), SumBackward0, (x,),
                  scalars=[("self_sym_sizes", shape(x))])


def relu(x):
    out = new(shape(x), x.device)
    return record(out, ReluBackward0, (x,), [("result", out, True)])


def t(x):
    """x.t(): a view (the same storage) of the transposed shape."""
    v = _nodes.alias(x)
    v._shape = tuple(reversed(shape(x)))
    return record(v, TBackward0, (x,))


def linear(x, weight, bias=None):
    wt = t(weight)
    out = new(shape(x)[:-1] + shape(weight)[:1], x.device)
    if bias is None:
        return record(out, MmBackward0, (x, wt),
                      [("self", x if requires_grad(wt) else None, False),
                       ("mat2", wt if requires_grad(x) else None, False)],
                      [("mat2_sym_sizes", shape(wt))])
    return record(out, AddmmBackward0, (bias, x, wt),
                  [("mat1", x if requires_grad(wt) else None, False),
                   ("mat2", wt if requires_grad(x) else None, False)],
                  [("alpha", 1), ("beta", 1)])


def detach(x):
    return _nodes.alias(x)


def backward(root, retain_graph=False):
    """Torch's engine, in short: every node reachable from root's grad_fn
    runs; an AccumulateGrad gives its leaf a .grad (allocated once, then
    accumulated in place); then, unless retain_graph, the saved variables
    are freed."""
    order, seen, todo = [], set(), [root.grad_fn]
    while todo:
        n = todo.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        order.append(n)
        todo.extend(fn for fn, _ in n.next_functions)
    for n in order:
        if type(n) is AccumulateGrad:
            v = n.variable
            m = meta(v)
            if m.grad is None:
                m.grad = new(shape(v), v.device)
    if not retain_graph:
        for n in order:
            if isinstance(n, function._FunctionBase):
                function.release(n)
            else:
                _nodes.release(n)


def register_hook(self, hook):
    """Tensor.register_hook: the hook in the tensor's _backward_hooks; for
    a non-leaf, its grad_fn keeps that dict too (in C++)."""
    if not requires_grad(self):
        raise RuntimeError("cannot register a hook on a tensor that "
                           "doesn't require gradient")
    from ..utils.hooks import RemovableHandle

    hooks = self.__dict__.get("_backward_hooks")
    if hooks is None:
        hooks = self.__dict__["_backward_hooks"] = OrderedDict()
        fn = self.grad_fn
        if fn is not None and not isinstance(fn, function._FunctionBase):
            fn._pre_hooks = hooks
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def _set_grad(t, g):
    meta(t).grad = g


def _set_requires_grad(t, v):
    meta(t).requires_grad = bool(v)


def requires_grad_(self, on=True):
    _set_requires_grad(self, on)
    return self


def install(g):
    """Adds the autograd side to the fake torch package (its globals g):
    TensorBase's C getters (grad_fn, grad, requires_grad, is_leaf,
    _backward_hooks), _C._FunctionBase, the ops as Tensor methods and
    torch functions (none the package defines already)."""
    base, Tensor = g["_C"].TensorBase, g["Tensor"]
    props = {"_meta": NO_META,
             "grad_fn": property(attrgetter("_meta.grad_fn")),
             "grad": property(attrgetter("_meta.grad"), _set_grad),
             "requires_grad": property(attrgetter("_meta.requires_grad"),
                                       _set_requires_grad),
             "is_leaf": property(lambda x: x._meta.grad_fn is None),
             # Torch's is a C getter of a slot its traverse shows; the
             # fake keeps the dict in the instance's own __dict__
             "_backward_hooks": property(
                 lambda x: x.__dict__.get("_backward_hooks"))}
    for k, v in props.items():
        if k not in base.__dict__:
            setattr(base, k, v)
    if not hasattr(g["_C"], "_FunctionBase"):
        g["_C"]._FunctionBase = function._FunctionBase
    plain_backward = Tensor.backward

    def tensor_backward(self, gradient=None, retain_graph=None):
        if self.grad_fn is None:
            return plain_backward(self)
        backward(self, bool(retain_graph))

    methods = {"__add__": add, "__radd__": lambda a, b: add(b, a),
               "__mul__": mul, "__rmul__": lambda a, b: mul(b, a),
               "__pow__": pow, "pow": pow, "sum": sum, "relu": relu,
               "t": t, "detach": detach, "item": lambda self: 0.0,
               "register_hook": register_hook,
               "requires_grad_": requires_grad_,
               "backward": tensor_backward}
    for k, v in methods.items():
        if k not in Tensor.__dict__ or k == "backward":
            setattr(Tensor, k, v)
    from . import no_grad

    for k, v in (("randn", randn), ("zeros", zeros), ("no_grad", no_grad),
                 ("zeros_like", zeros_like), ("relu", relu),
                 ("float32", "float32")):
        g.setdefault(k, v)
