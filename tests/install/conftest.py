"""What a user installs: the wheel (pip wheel / pip install .) into fresh
virtual environments, and the C install (meson install) into a staging
folder. `meson test --suite install` sets:

BUILD_ROOT   the Meson build folder under test
WHEEL_BUILD  a folder for meson-python's build of the wheel (kept between
             runs, so a second run only relinks)
GPR_SIM_DIR  the simulated driver; FAKE_CUPTI the trace tests' fake CUPTI
"""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD_ROOT = pathlib.Path(os.environ["BUILD_ROOT"])
WHEEL_BUILD = pathlib.Path(os.environ["WHEEL_BUILD"])
SIM_DIR = pathlib.Path(os.environ["GPR_SIM_DIR"])
FAKE_CUPTI = pathlib.Path(os.environ["FAKE_CUPTI"])


def run(cmd, check=True, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 600)
    p = subprocess.run([str(c) for c in cmd], **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"{cmd} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def clean_env(**extra):
    """The environment of a user's shell: nothing of the build's."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPURECLAIM", "GPR_", "PYTHON", "MESON",
                                "LD_LIBRARY_PATH"))}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def header_version():
    """MAJOR.MINOR.PATCH from the header's GPR_VERSION_* defines, the one
    place the version lives."""
    text = (ROOT / "include/gpureclaim.h").read_text()
    parts = [re.search(rf"^#define GPR_VERSION_{p} (\d+)$", text, re.M)
             for p in ("MAJOR", "MINOR", "PATCH")]
    assert all(parts), "no GPR_VERSION_MAJOR/MINOR/PATCH in include/gpureclaim.h"
    return ".".join(m.group(1) for m in parts)


@pytest.fixture(scope="session")
def tmp():
    d = pathlib.Path(tempfile.mkdtemp(prefix="gpr-install-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def pip_build(args):
    """pip, offline, with the build tools of this Python (no isolation),
    meson-python's build kept in WHEEL_BUILD."""
    return [sys.executable, "-m", "pip", *args, "--no-build-isolation",
            "--no-deps", "--no-index", "--disable-pip-version-check",
            f"-Cbuild-dir={WHEEL_BUILD}"]


@pytest.fixture(scope="session")
def wheel(tmp):
    """`pip wheel .`: the built wheel's path."""
    out = tmp / "wheelhouse"
    run(pip_build(["wheel", "-q", "-w", out, ROOT]), cwd=tmp,
        env=clean_env(PIP_NO_CACHE_DIR="1"))
    (whl,) = out.glob("gpureclaim-*.whl")
    return whl


def make_venv(path, system_site=False):
    args = [sys.executable, "-m", "venv", "--without-pip"]
    if system_site:
        args.append("--system-site-packages")
    run(args + [path])
    return path


@pytest.fixture(scope="session")
def venv(tmp, wheel):
    """A fresh virtual environment (nothing of this machine's Python)
    with the wheel installed by pip."""
    v = make_venv(tmp / "venv")
    run([sys.executable, "-m", "pip", "--python", v / "bin/python", "install",
         "-q", "--no-index", "--no-deps", "--disable-pip-version-check",
         wheel], env=clean_env())
    return v


@pytest.fixture(scope="session")
def c_install(tmp):
    """`make install PREFIX=...` (the README's command) from a build folder
    of its own: (prefix, libdir, bindir)."""
    # $HOME/.local of a user whose HOME is tmp/home: the docs' recipes run
    # against it as written (test_c_install.py)
    prefix = tmp / "home" / ".local"
    env = {k: v for k, v in clean_env().items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    run(["make", "-C", ROOT, "install", f"PREFIX={prefix}",
         f"BUILD={tmp / 'make-build'}"], env=env)
    (pc,) = prefix.glob("lib*/**/gpureclaim.pc")
    return prefix, pc.parent.parent, prefix / "bin"
