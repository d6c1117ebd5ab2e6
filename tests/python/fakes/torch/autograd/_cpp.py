"""What real Torch keeps in C++, for the fake: objects the collector does
not track (gc.get_objects() lists none of them, tp_traverse of the
objects that refer to them finds no object of the heap walk there), as
Torch's autograd nodes, saved variables and a tensor's autograd metadata
are C++ objects behind Python wrappers whose traverse shows none of their
edges. What they refer to is therefore held from outside the heap, as in
Torch.

Their readers are C (operator.attrgetter behind a property, a member
descriptor), as Torch's getters are C: reading one starts no Python frame;
only a saved-tensor hook's unpack does (HookedSaved.value), as in Torch."""
import ctypes

_untrack = ctypes.pythonapi.PyObject_GC_UnTrack
_untrack.argtypes = [ctypes.py_object]
_untrack.restype = None


class Cpp:
    """An object "in C++": untracked from its making on (its slots are
    never re-tracked: only dicts and tuples track themselves again)."""

    __slots__ = ("__weakref__",)

    def __new__(cls, *args, **kw):
        self = super().__new__(cls)
        _untrack(self)
        return self


class Meta(Cpp):
    """A tensor's AutogradMeta: its grad_fn and output number, its .grad,
    requires_grad, the AccumulateGrad of a leaf (weakly, as Torch), the
    hooks dict a node keeps for a non-leaf tensor (add_tensor_pre_hook)."""

    __slots__ = ("grad_fn", "output_nr", "grad", "requires_grad",
                 "accumulator")

    def __init__(self, grad_fn=None, output_nr=0, requires_grad=False):
        self.grad_fn, self.output_nr = grad_fn, output_nr
        self.grad, self.requires_grad = None, requires_grad
        self.accumulator = None


#: a tensor with no autograd state (TensorBase._meta's default)
NO_META = Meta()


class Saved(Cpp):
    """A SavedVariable: the tensor (for an output, another tensor object on
    the same storage, as Torch's tensor_data(): no cycle through the
    output's grad_fn)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class HookedSaved(Saved):
    """A SavedVariable packed by a saved-tensor hook: reading it runs the
    hook's unpack (Python), as Torch's SavedVariable::unpack does."""

    __slots__ = ("packed", "unpack")

    def __init__(self, packed, unpack):
        self.packed, self.unpack = packed, unpack

    @property
    def value(self):
        return self.unpack(self.packed)


class Released(Cpp):
    """A saved variable after backward freed it: reading it raises, as
    Torch's "Trying to backward through the graph a second time"."""

    __slots__ = ("value",)


RELEASED = Released()
