"""The fake autograd graph's nodes, as Torch's Python sees them: a class
per node type (AddBackward0, ReluBackward0, ...) with next_functions, a
_saved_<name> getter for each SavedVariable with its _raw_saved_<name>
companion, _saved_<name> getters of non-tensor values without one (as
tools/autograd/gen_autograd_functions.py generates them), AccumulateGrad
with .variable. Every getter is C (attrgetter)."""
import sys
import threading
import weakref
from operator import attrgetter

from ._cpp import Cpp, HookedSaved, Meta, NO_META, RELEASED, Saved

_state = threading.local()


def grad_enabled():
    return getattr(_state, "enabled", True)


def set_grad_enabled(on):
    _state.enabled = on


def hooks_stack():
    """The saved-tensor hooks in force (graph.saved_tensors_hooks)."""
    if not hasattr(_state, "hooks"):
        _state.hooks = []
    return _state.hooks


class Node(Cpp):
    """torch.autograd.graph.Node's C++ nodes."""

    __slots__ = ("_next", "_pre_hooks")
    next_functions = property(attrgetter("_next"))

    def name(self):
        return type(self).__name__


def node_class(name, saved=(), scalars=()):
    ns = {"__slots__": tuple("_sv_" + s for s in saved)
          + tuple("_sc_" + s for s in scalars)}
    for s in saved:
        ns["_saved_" + s] = property(attrgetter(f"_sv_{s}.value"))
        ns["_raw_saved_" + s] = property(attrgetter(f"_sv_{s}"))
    for s in scalars:
        ns["_saved_" + s] = property(attrgetter(f"_sc_{s}"))
    cls = type(name, (Node,), ns)
    cls._fake_saved = tuple(saved)
    return cls


class AccumulateGrad(Node):
    """The node of a leaf: holds the leaf (Torch's AccumulateGrad holds its
    Variable), which holds it back only weakly."""

    __slots__ = ("_variable",)
    variable = property(attrgetter("_variable"))
    _fake_saved = ()


AddBackward0 = node_class("AddBackward0", scalars=("alpha",))
MulBackward0 = node_class("MulBackward0", saved=("self", "other"))
PowBackward0 = node_class("PowBackward0", saved=("self",),
                          scalars=("exponent",))
SumBackward0 = node_class("SumBackward0", scalars=("self_sym_sizes",))
ReluBackward0 = node_class("ReluBackward0", saved=("result",))
MmBackward0 = node_class("MmBackward0", saved=("self", "mat2"),
                         scalars=("mat2_sym_sizes",))
AddmmBackward0 = node_class("AddmmBackward0", saved=("mat1", "mat2"),
                            scalars=("alpha", "beta"))
TBackward0 = node_class("TBackward0")
DetachBackward0 = node_class("DetachBackward0")


def meta(t):
    m = t.__dict__.get("_meta", NO_META)
    if m is NO_META:
        m = t.__dict__["_meta"] = Meta()
    return m


def requires_grad(t):
    return getattr(t, "_meta", NO_META).requires_grad


def accumulator(t):
    m = meta(t)
    acc = m.accumulator() if m.accumulator is not None else None
    if acc is None:
        acc = AccumulateGrad()
        acc._next = ()
        acc._variable = t
        m.accumulator = weakref.ref(acc)
    return acc


def edge(t):
    """The (node, input number) an op's next_functions holds for input t."""
    if not hasattr(t, "_storage") or not requires_grad(t):
        return (None, 0)
    m = t._meta
    if m.grad_fn is not None:
        return (m.grad_fn, m.output_nr)
    return (accumulator(t), 0)


def alias(t):
    """Another tensor object on t's storage, with no autograd state (what
    Torch's SavedVariable keeps of an output: tensor_data())."""
    cls = sys.modules["torch"].Tensor  # a plain tensor, as Torch's
    a = cls.__new__(cls)
    a.nbytes, a.device, a._storage = t.nbytes, t.device, t._storage
    if "_shape" in t.__dict__:
        a._shape = t._shape
    return a


def save(t, is_output=False):
    hooks = hooks_stack()
    if hooks:
        pack, unpack = hooks[-1]
        return HookedSaved(pack(t), unpack)
    return Saved(alias(t) if is_output else t)


def record(out, cls, inputs, saved=(), scalars=()):
    """Makes out the output of a node of cls over inputs, when grad mode
    is on and some input requires grad: saved, (name, tensor or None,
    is_output) for its SavedVariables; scalars, (name, value)."""
    if not grad_enabled() or not any(hasattr(i, "_storage") and
                                     requires_grad(i) for i in inputs):
        return out
    node = cls()
    node._next = tuple(edge(i) for i in inputs)
    out.__dict__["_meta"] = Meta(grad_fn=node, requires_grad=True)
    for name, t, is_output in saved:
        setattr(node, "_sv_" + name,
                save(t, is_output) if t is not None else Saved(None))
    for name, v in scalars:
        setattr(node, "_sc_" + name, v)
    return out


def release(node):
    """What backward frees of a node (retain_graph=False): its saved
    variables."""
    for name in getattr(type(node), "_fake_saved", ()):
        setattr(node, "_sv_" + name, RELEASED)
