"""Out of memory: a post-mortem at the moment it happens, and the rescue
(docs/oom.md).

:func:`watch_oom` attaches each framework's out-of-memory hook (its
``OOMHook`` in gpureclaim/frameworks/: Torch's observer, CuPy's allocator,
JAX's RESOURCE_EXHAUSTED where it reaches the top) to the frameworks the
program has imported, and to the others when it imports them
(gpureclaim/_startup/_imports.py: nothing is imported here). On an
out-of-memory error the hook calls :meth:`_Watch.report` (or ``capture``
and ``done``), which builds the post-mortem (gpureclaim/oom/_postmortem.py:
the figures of that moment, without a garbage collection) and shows it: a
short text on stderr (HTML in a notebook) and a JSON file created, never
replacing anything, at the watch's path. The program's exception is raised
unchanged; only a hook that can retry the allocation itself (CuPy's, with
``rescue=True``) makes it go away.

:func:`retry_on_oom` catches any framework's out-of-memory error, runs
:func:`gpureclaim.release` and calls the function again; the post-mortem
of the failure, held until then, says whether the retry succeeded.

``GPURECLAIM_OOM=1`` (or ``=PATH``) starts the watch in a program nobody
edited (gpureclaim/_startup/, ``gpureclaim run --oom``).
"""
from __future__ import annotations

import functools
import os
import sys
import threading
from typing import Any, Callable, Optional, Union

from . import _postmortem
from .. import frameworks as _frameworks
from .._startup import _say
from .._startup._imports import when_imported
from ._postmortem import PostMortem

__all__ = ["PostMortem", "last", "retry_on_oom", "status", "watch_oom"]

#: post-mortems written by one process at most (a loop that catches its
#: own out-of-memory errors would otherwise fill a folder)
MAX_POSTMORTEMS = 32

_HOOKS = tuple(f for f in _frameworks.TABLE if f.oom is not None)


class _Watch:
    """The process's one watch: its settings, the frameworks attached, the
    post-mortems made. The hooks call report, or capture then done, and
    note; rescue and rescue_retry are for hooks that can retry."""

    def __init__(self):
        self.on = False
        self.rescue = False
        self.dest: Optional[tuple] = None  # (folder, fixed name or None)
        self.lock = threading.Lock()
        self.tls = threading.local()
        self.count = 0
        self.next_n = 1
        self.said_max = False
        self.registered: set = set()
        self.states: dict = {}  # framework -> "attached" / why not
        self.last: Optional[PostMortem] = None

    # ------------------------------------------------------- the hooks' side

    def note(self, framework: str, text: str) -> None:
        self.states[framework] = text
        _say(f"gpureclaim: watch_oom: {framework}: {text}")

    def capture(self, framework: str, device: Optional[int], nbytes: int, *,
                requested: Optional[int] = None, exact: bool = True,
                error: Optional[BaseException] = None,
                facts: Optional[dict] = None) -> Optional[PostMortem]:
        """The post-mortem of an out-of-memory error now (None when the
        watch is off, or while one is being made on this thread, or when
        it failed: one line says why). Never raises."""
        if not self.on or getattr(self.tls, "busy", False):
            return None
        self.tls.busy = True
        try:
            return PostMortem(_postmortem.build(
                framework, device, nbytes, requested=requested, exact=exact,
                error=error, facts=facts))
        except Exception as e:
            _say(f"gpureclaim: the out-of-memory post-mortem failed: "
                 f"{type(e).__name__}: {e}")
            return None
        finally:
            self.tls.busy = False

    def done(self, pm: Optional[PostMortem]) -> None:
        """Shows and writes pm, or holds it for the @retry_on_oom around
        this call, which adds the retry's outcome first."""
        if pm is None:
            return
        held = getattr(self.tls, "held", None)
        if held:
            held[-1].append(pm)
            return
        self.emit(pm)

    def report(self, framework: str, device: Optional[int], nbytes: int,
               **kw: Any) -> None:
        self.done(self.capture(framework, device, nbytes, **kw))

    def rescue_retry(self, pm: Optional[PostMortem],
                     retry: Callable[[], Any]) -> Any:
        """The rescue inside an allocator: every framework's cache given
        back (release(), without a garbage collection: the allocator's own
        retry just ran one where it does), then retry() once. Its result,
        or None when it failed too (its error is dropped: the program sees
        the first one)."""
        from .. import release

        try:
            released = release(collect=False).bytes
        except Exception as e:
            _postmortem.rescued(pm, "allocator", None, False,
                                f"release() failed: {type(e).__name__}: {e}")
            return None
        try:
            got = retry()
        except Exception as e:
            _postmortem.rescued(pm, "allocator", released, False,
                                f"{type(e).__name__}: {e}")
            return None
        _postmortem.rescued(pm, "allocator", released, True, "")
        return got

    def top_level(self, exc: Optional[BaseException]) -> None:
        """An exception that reached the top (sys.excepthook,
        threading.excepthook, IPython's handler): a post-mortem if it is an
        out-of-memory error no hook saw (JAX's)."""
        try:
            if exc is None or not self.on or getattr(
                    exc, "_gpureclaim_oom_reported", False):
                return
            for f in _HOOKS:
                if f.name != "jax":
                    continue  # Torch's and CuPy's were reported at the time
                req = f.oom.request(exc)
                if req is not None:
                    self.report(f.name, req.device, req.bytes,
                                exact=req.exact, error=exc)
                    return
        except BaseException:
            pass

    # ---------------------------------------------------------- the output

    def emit(self, pm: PostMortem) -> None:
        """The file, then the text on stderr (or the view in a notebook)."""
        try:
            with self.lock:
                self.count += 1
                over = self.count > MAX_POSTMORTEMS
                if over and not self.said_max:
                    self.said_max = True
                    _say(f"gpureclaim: {MAX_POSTMORTEMS} out-of-memory "
                         f"post-mortems written by this process; no more")
                self.last = pm
                if not over and self.dest is not None:
                    try:
                        path, n = _postmortem.write_new(pm, self.dest,
                                                        self.next_n)
                        self.next_n = n + 1
                        pm.path = path
                    except OSError as e:
                        pm.write_error = str(e)
            if not over:
                _postmortem.show(pm)
        except Exception as e:
            _say(f"gpureclaim: the out-of-memory post-mortem could not be "
                 f"shown: {type(e).__name__}: {e}")

    # -------------------------------------------------------- attaching

    def attach(self, f: Any) -> None:
        try:
            why = f.oom.attach(self)
        except Exception as e:
            why = f"{type(e).__name__}: {e}"
        self.states[f.name] = "attached" if why is None else why


_WATCH = _Watch()


def _destination(path: Any) -> tuple:
    """(folder, fixed file name or None) of a watch's path, made absolute
    now: a later chdir of the program does not move it."""
    if path is None:
        return os.getcwd(), None
    p = os.path.expanduser(os.fspath(path))
    if not p:
        raise ValueError("watch_oom(): path must not be empty")
    if p.endswith(os.sep) or os.path.isdir(p):
        folder, name = os.path.abspath(p), None
    else:
        folder, name = os.path.split(os.path.abspath(p))
    if not os.path.isdir(folder):
        raise ValueError(f"watch_oom(): no folder {folder}")
    return folder, name


def watch_oom(path: Union[None, str, os.PathLike] = None,
              rescue: bool = False) -> None:
    """Write a post-mortem whenever Torch, CuPy or JAX runs out of GPU
    memory in this process (idempotent: a second call only changes the
    settings, and re-attaches a hook the program replaced since, such as
    CuPy's allocator).

    Each post-mortem, made in milliseconds without a garbage collection:
    the failed request (framework, bytes, GPU) and the GPU's free and
    total memory then; this process's parts (explain()'s, at that moment)
    and whether the request would fit after release(), by arithmetic on
    those figures; the other processes on that GPU with their driver
    figures; the largest live Torch blocks (with the stacks of their
    allocation when Torch records its allocator history); the tracer's
    live table when the process is traced; and what to do. It goes to
    stderr as a short text (as HTML in a notebook) and to a JSON file:
    ``path`` is a file (the n-th post-mortem of the process is
    ``NAME-n.EXT`` from the second on) or a folder (default: the current
    one) for ``gpureclaim-oom-<pid>-<n>.json``; a file is created with
    mode 0600 and never replaces anything (a name that is taken is
    skipped). ``gpureclaim report FILE`` shows a saved one.

    The program's exception is raised unchanged. ``rescue=True``: where
    the framework's allocator can retry (CuPy), the other frameworks'
    caches are returned to the driver and the allocation tried once more
    inside it, so the program sees no error when it then fits (the
    post-mortem says so). Torch raises after its observer and JAX's
    preallocated pool never shrinks: use :func:`retry_on_oom` there.
    Nothing is imported: a framework is watched once the program imports
    it.
    """
    if not isinstance(rescue, bool):
        raise TypeError(f"watch_oom(): rescue must be True or False, not "
                        f"{rescue!r}")
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"watch_oom(): path must be a str or os.PathLike, "
                        f"not {type(path).__name__}")
    dest = _destination(path)
    w = _WATCH
    with w.lock:
        w.dest, w.rescue, w.on = dest, rescue, True
    for f in _HOOKS:
        if f.name in w.registered:
            if f.oom.module in sys.modules:
                w.attach(f)
            continue
        w.registered.add(f.name)
        when_imported(f.oom.module, lambda module, f=f: w.attach(f))


def stop_watching() -> None:
    """Ends the watch (the hooks stay attached and do nothing)."""
    _WATCH.on = False


def status() -> dict:
    """Whether the watch is on, its destination and rescue, and per
    framework "attached", why not, or "waiting for import"."""
    w = _WATCH
    frameworks = {}
    for f in _HOOKS:
        if f.name in w.states:
            frameworks[f.name] = w.states[f.name]
        elif f.name in w.registered:
            frameworks[f.name] = f"waiting for the import of {f.oom.module}"
    return {"on": w.on, "rescue": w.rescue,
            "folder": w.dest[0] if w.dest else None,
            "file": w.dest[1] if w.dest else None,
            "post_mortems": w.count, "frameworks": frameworks}


def last() -> Optional[PostMortem]:
    """The last post-mortem of this process, or None."""
    return _WATCH.last


def _request(exc: BaseException) -> Any:
    """(framework, Request) when exc is a framework's out-of-memory error."""
    for f in _HOOKS:
        try:
            req = f.oom.request(exc)
        except Exception:
            req = None
        if req is not None:
            return f.name, req
    return None


def retry_on_oom(fn: Optional[Callable] = None, *, tries: int = 2) -> Any:
    """A decorator: when the function raises an out-of-memory error of
    Torch, CuPy or JAX, :func:`gpureclaim.release` runs and the function is
    called again, up to ``tries`` calls in all (the last call's error is
    raised unchanged; any other exception at once)::

        @gpureclaim.retry_on_oom
        def step(batch): ...

        @gpureclaim.retry_on_oom(tries=3)
        def step(batch): ...

    The failed call's frames are dropped before the release (what they
    held is returned too). With :func:`watch_oom` on, the post-mortem of
    each failure is written once the next call is done, and says what the
    release returned and whether that call succeeded.
    """
    if not isinstance(tries, int) or isinstance(tries, bool) or tries < 1:
        raise ValueError(f"retry_on_oom(): tries must be a whole number "
                         f"from 1, not {tries!r}")
    if fn is None:
        return functools.partial(retry_on_oom, tries=tries)
    if not callable(fn):
        raise TypeError(f"retry_on_oom(): {fn!r} is not callable")

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return _retrying(fn, tries, args, kwargs)

    return wrapper


def _retrying(fn: Callable, tries: int, args: tuple, kwargs: dict) -> Any:
    """The calls of a @retry_on_oom function. The post-mortems the hooks
    make during a call are held (the watch's per-thread stack); those of a
    failed call get what the release returned, and the outcome of the call
    after it once it ended."""
    w = _WATCH
    stack = getattr(w.tls, "held", None)
    if stack is None:
        stack = w.tls.held = []
    waiting: list = []  # the post-mortems of the call before this one
    try:
        for attempt in range(1, tries + 1):
            stack.append([])
            try:
                result = fn(*args, **kwargs)
            except BaseException as e:
                mine = stack.pop()
                got = _request(e)
                if got is not None and not mine:
                    _seen_here(w, got, e, mine)
                if got is None or attempt == tries:
                    _outcome(waiting, False)
                    _hand_on(mine)
                    raise
                del e  # the failed call's frames go before the release
            else:
                _outcome(waiting, True)
                _hand_on(stack.pop())
                return result
            _outcome(waiting, False)
            from .. import release

            try:
                released = release().bytes
            except Exception:
                released = None
            for pm in mine:
                pm.call = getattr(fn, "__name__", None)
                _postmortem.rescued(pm, "retry_on_oom", released, None, "")
            waiting = mine
    finally:
        if not stack:
            w.tls.held = None


def _seen_here(w: _Watch, got: tuple, e: BaseException, mine: list) -> None:
    """An out-of-memory error no hook saw (JAX's, caught here before it
    reached the top): its post-mortem, made now. The error is marked, so
    that it is not reported again if it reaches the top."""
    if not w.on:
        return
    pm = w.capture(got[0], got[1].device, got[1].bytes, exact=got[1].exact,
                   error=e)
    if pm is not None:
        mine.append(pm)
        _mark(e)


def _mark(e: BaseException) -> None:
    try:
        e._gpureclaim_oom_reported = True
    except Exception:
        pass


def _outcome(pms: list, ok: bool) -> None:
    """The call after the release of these post-mortems' failure ended:
    it succeeded or not; they are handed on."""
    for pm in pms:
        _postmortem.retried(pm, ok)
    _hand_on(pms)
    pms.clear()


def _hand_on(pms: list) -> None:
    """To the @retry_on_oom around this one, else shown and written."""
    for pm in pms:
        _WATCH.done(pm)


def _start_from_env(value: str) -> None:
    """GPURECLAIM_OOM's value: 1 (true, yes, on) for the default folder,
    anything else a path (gpureclaim/_startup/ leaves 0 and empty
    out)."""
    v = value.strip()
    watch_oom(None if v.lower() in ("1", "true", "yes", "on") else v)
