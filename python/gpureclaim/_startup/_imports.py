"""A callback once a module is imported, without importing it: how the
startup hook attaches to a framework when the user's program imports it
(docs/oom.md, "How it starts").

:func:`when_imported` runs the callback at once if the module is in
``sys.modules``; otherwise a finder first on ``sys.meta_path`` waits for
that name only. When the import system asks for it, the finder asks the
other finders for the module's spec (nothing is loaded or executed by
that), wraps the spec's loader, and returns it: the module is then loaded
by its own loader as before, and once it has executed the callbacks run
with it. The wrapper puts the module's own loader back on the module and
its spec before the module executes, and the finder leaves
``sys.meta_path`` when no name is awaited. An import that fails runs no
callback (a later one may). Nothing here imports a module.
"""
from __future__ import annotations

import sys
import threading
from typing import Any, Callable

_lock = threading.Lock()
#: name -> the callbacks waiting for it
_waiting: dict = {}


def _say(text: str) -> None:
    err = sys.stderr
    if err is not None:
        try:
            err.write(text + "\n")
            err.flush()
        except Exception:
            pass


def _run(callback: Callable[[Any], Any], module: Any) -> None:
    """A callback's failure is one line, never the import's."""
    try:
        callback(module)
    except Exception as e:
        _say(f"gpureclaim: after importing {module.__name__}: "
             f"{type(e).__name__}: {e}")


def when_imported(name: str, callback: Callable[[Any], Any]) -> None:
    """``callback(module)`` once the program has imported ``name`` (now,
    if it has). The callback must not raise; if it does, its error is one
    line on stderr."""
    module = sys.modules.get(name)
    if module is None:
        with _lock:
            module = sys.modules.get(name)
            if module is None:
                _waiting.setdefault(name, []).append(callback)
                if _FINDER not in sys.meta_path:
                    sys.meta_path.insert(0, _FINDER)
                return
    _run(callback, module)


def waiting() -> list:
    """The names awaited (for tests and status)."""
    with _lock:
        return sorted(_waiting)


class _Loader:
    """The module's loader, with the callbacks after it executed the
    module; every other attribute is the loader's own."""

    def __init__(self, inner: Any, name: str):
        self._inner = inner
        self._name = name

    def create_module(self, spec: Any) -> Any:
        create = getattr(self._inner, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: Any) -> None:
        inner = self._inner
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = inner
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = inner
        inner.exec_module(module)
        with _lock:
            callbacks = _waiting.pop(self._name, [])
            if not _waiting:
                try:
                    sys.meta_path.remove(_FINDER)
                except ValueError:
                    pass
        for callback in callbacks:
            _run(callback, module)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._inner, attr)


class _Finder:
    """A meta path finder for the awaited names only."""

    def find_spec(self, name: str, path: Any = None, target: Any = None):
        if name not in _waiting:
            return None
        for finder in list(sys.meta_path):
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec  # a namespace package, an old loader: as it is
        spec.loader = _Loader(loader, name)
        return spec

    def invalidate_caches(self) -> None:
        pass


_FINDER = _Finder()
