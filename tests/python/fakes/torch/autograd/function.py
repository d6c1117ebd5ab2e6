"""torch.autograd.Function for the fake: the ctx object is the node, as
in Torch (a BackwardCFunction subclass made per Function class, whose
instances are Python objects with a __dict__ for what forward keeps on
ctx); what it saves with save_for_backward and its next nodes are kept
"in C++" (ctx._cpp, untracked), read by the C getters
torch._C._FunctionBase.saved_tensors and .next_functions."""
from operator import attrgetter

from . import _nodes
from ._cpp import Cpp, HookedSaved


class _FnCpp(Cpp):
    """A PyNode's C++ side: its next edges and saved variables."""

    __slots__ = ("next", "saved")


class _SavedTuple(Cpp):
    """ctx.saved_tensors: the saved variables, read in C when none was
    packed by a hook (else through each hook's unpack, in Python)."""

    __slots__ = ("values",)


class _HookedTuple(_SavedTuple):
    __slots__ = ("items",)

    @property
    def values(self):
        return tuple(s.value for s in self.items)


class _FunctionBase:
    """torch._C._FunctionBase."""

    __slots__ = ("_cpp", "__dict__")
    next_functions = property(attrgetter("_cpp.next"))
    saved_tensors = property(attrgetter("_cpp.saved.values"))

    def save_for_backward(self, *tensors):
        self.to_save = tensors

    def name(self):
        return type(self).__name__


class BackwardCFunction(_FunctionBase):
    pass


class Function:
    """torch.autograd.Function: apply(*args) runs forward(ctx, *args) with
    grad mode off and makes its tensor outputs the outputs of ctx."""

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls._backward_cls = type(cls.__name__ + "Backward",
                                 (BackwardCFunction,), {"_forward_cls": cls})

    @classmethod
    def apply(cls, *args):
        ctx = cls._backward_cls()
        ctx._cpp = _FnCpp()
        ctx._cpp.next = tuple(_nodes.edge(a) for a in args)
        ctx.needs_input_grad = tuple(
            hasattr(a, "_storage") and _nodes.requires_grad(a) for a in args)
        was = _nodes.grad_enabled()
        _nodes.set_grad_enabled(False)
        try:
            out = cls.forward(ctx, *args)
        finally:
            _nodes.set_grad_enabled(was)
        outs = out if isinstance(out, tuple) else (out,)
        ids = {id(o) for o in outs}
        items = tuple(_nodes.save(t, id(t) in ids)
                      for t in ctx.__dict__.pop("to_save", ()))
        if any(type(s) is HookedSaved for s in items):
            saved = _HookedTuple()
            saved.items = items
        else:
            saved = _SavedTuple()
            saved.values = tuple(s.value for s in items)
        ctx._cpp.saved = saved
        if was and any(ctx.needs_input_grad):
            for i, o in enumerate(outs):
                if hasattr(o, "_storage"):
                    o.__dict__["_meta"] = _nodes.Meta(
                        grad_fn=ctx, output_nr=i, requires_grad=True)
        return out


def release(ctx):
    """What backward frees of a PyNode: its saved variables (reading
    saved_tensors then raises)."""
    ctx._cpp.saved = _SavedTuple()
