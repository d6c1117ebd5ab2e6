"""What every hardware test asks first: is there an NVIDIA GPU, can this
Python import what the test needs, and where the build under test is.
Imported by the tests of this folder (pytest puts it on sys.path).

$GPURECLAIM_PYTHONPATH: the built package (default build/python);
$GPURECLAIM_BIN: the command (default build/cli/gpureclaim)."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PKG = os.environ.get("GPURECLAIM_PYTHONPATH", str(ROOT / "build/python"))
GPR = os.environ.get("GPURECLAIM_BIN", str(ROOT / "build/cli/gpureclaim"))


def has(code):
    """Whether `python -c code` succeeds here (an import, an assert)."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True)
    return r.returncode == 0


def _has_gpu():
    if not shutil.which("nvidia-smi"):
        return False
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                           timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and b"GPU" in r.stdout


HAVE_GPU = _has_gpu()


def needs(modules):
    """The marks of a test module that needs a GPU and, with CUDA, Torch
    and the other modules named ("torch" or "torch, cupy")."""
    return [
        pytest.mark.skipif(not HAVE_GPU,
                           reason="no NVIDIA GPU (nvidia-smi -L)"),
        pytest.mark.skipif(
            HAVE_GPU and not has(f"import {modules}; "
                                 "assert torch.cuda.is_available()"),
            reason=f"{modules.replace(', ', ' and ')} with CUDA needed"),
    ]


def agent_env():
    """The environment of a process that runs the agent (started by the
    built package's startup hook, GPURECLAIM_AGENT=1) and of the command
    asking it."""
    e = dict(os.environ)
    boot = os.path.join(PKG, "gpureclaim", "_startup", "_bootstrap")
    e["PYTHONPATH"] = os.pathsep.join(
        [boot, PKG] + ([e["PYTHONPATH"]] if e.get("PYTHONPATH") else []))
    e["GPURECLAIM_AGENT"] = "1"
    e["GPURECLAIM_BIN"] = GPR
    return e
