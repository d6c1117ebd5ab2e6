"""torch.utils.hooks.RemovableHandle: an id in a hooks dict, kept weakly
(as Torch's)."""
import itertools
import weakref

_ids = itertools.count()


class RemovableHandle:
    def __init__(self, hooks_dict):
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = next(_ids)

    def remove(self):
        d = self.hooks_dict_ref()
        if d is not None:
            d.pop(self.id, None)
