"""gpureclaim run's bootstrap (the way ddtrace-run starts itself): `run`
puts this folder first on the child's PYTHONPATH, so Python's ``site``
imports this file as ``sitecustomize`` at start, in a build tree or an
environment whose site-packages has no gpureclaim-startup.pth.

When one of the startup hook's variables is set, it makes the gpureclaim
package it belongs to importable (its folder is appended to sys.path when
no gpureclaim can be found) and calls ``gpureclaim._startup.start()``
(idempotent: the .pth of an installed wheel may have called it already);
in any case it takes this folder off sys.path, and
then runs the program's own sitecustomize, the next one on sys.path (a
virtual environment's, Debian's), as ``sitecustomize``: nothing of theirs
is lost. A failure of ours is one line on stderr.
"""


#: the startup hook's variables, as gpureclaim-startup.pth tests them
#: (tests/python/test_startup.py checks both against _startup._STARTERS)
VARIABLES = ("GPURECLAIM_OOM", "GPURECLAIM_AGENT")


def _boot():
    import importlib.machinery
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    if any(v in os.environ for v in VARIABLES):
        if importlib.util.find_spec("gpureclaim") is None:
            sys.path.append(os.path.dirname(os.path.dirname(
                os.path.dirname(here))))
        try:
            from gpureclaim import _startup

            _startup.start()
        except Exception as e:
            if sys.stderr is not None:
                sys.stderr.write(f"gpureclaim: the startup hook failed: "
                                 f"{type(e).__name__}: {e}; not started\n")
    sys.path[:] = [p for p in sys.path
                   if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize",
                                                    sys.path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_boot()
del _boot
