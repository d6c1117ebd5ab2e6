"""torch.autograd.graph for the fake: saved_tensors_hooks (what
activation checkpointing and save_on_cpu are made of): while one is in
force, each tensor an op saves is packed, and reading it back from the
graph runs the unpack hook."""
from . import _nodes


class saved_tensors_hooks:
    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        _nodes.hooks_stack().append((self.pack_hook, self.unpack_hook))

    def __exit__(self, *exc):
        _nodes.hooks_stack().pop()
