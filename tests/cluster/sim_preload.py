"""Dask worker preload for the tests: multiprocessing's spawn gives a
worker its parent's sys.path and ignores its PYTHONPATH; put PYTHONPATH's
folders first again, so that the fake frameworks shadow installed ones."""
import os
import sys

for _p in reversed(os.environ.get("PYTHONPATH", "").split(os.pathsep)):
    if _p:
        if _p in sys.path:
            sys.path.remove(_p)
        sys.path.insert(0, _p)
