"""Builds gpureclaim._gpureclaim: the extension's C files (python/src) and
the core library's (src, src/driver, src/out) compiled into one abi3 module for the
limited API of Python 3.11, so nothing else must be found at run time.
Metadata lives in pyproject.toml; the version in the C header, its one
place."""
import glob
import re

from setuptools import Extension, setup

try:
    from wheel.bdist_wheel import bdist_wheel as _bdist_wheel
except ImportError:  # wheel not installed: plain installs still work
    _bdist_wheel = None

cmdclass = {}
if _bdist_wheel is not None:

    class bdist_wheel(_bdist_wheel):
        """Tags the wheel cp311-abi3: one wheel for Python 3.11 and later."""

        def get_tag(self):
            python, abi, plat = super().get_tag()
            if python.startswith("cp"):
                return "cp311", "abi3", plat
            return python, abi, plat

    cmdclass["bdist_wheel"] = bdist_wheel



def header_version(path="include/gpureclaim.h"):
    """MAJOR.MINOR.PATCH from the header's GPR_VERSION_* defines."""
    with open(path) as f:
        text = f.read()
    return ".".join(
        re.search(rf"^#define GPR_VERSION_{part} (\d+)$", text, re.M).group(1)
        for part in ("MAJOR", "MINOR", "PATCH"))


sources = sorted(
    glob.glob("python/src/*.c") + glob.glob("src/*.c") + glob.glob("src/driver/*.c")
    + glob.glob("src/out/*.c")
)

ext = Extension(
    "gpureclaim._gpureclaim",
    sources=sources,
    include_dirs=["include", "src", "src/driver", "python/src"],
    define_macros=[("Py_LIMITED_API", "0x030B0000")],
    py_limited_api=True,
    extra_compile_args=["-std=c11", "-D_GNU_SOURCE", "-fvisibility=hidden"],
    extra_link_args=["-Wl,--version-script=python/src/ext.map"],
    libraries=["dl", "pthread"],
    depends=sorted(glob.glob("include/*.h") + glob.glob("src/*.h")
                   + glob.glob("src/driver/*.h") + glob.glob("src/out/*.h")
                   + glob.glob("python/src/*.h")),
)

setup(version=header_version(), ext_modules=[ext], cmdclass=cmdclass)
