"""scripts/install-deps.sh: `make demo` installs what the demo uses and
nothing more; `make check` what the tests use (issue 20). Run dry
(INSTALL_DEPS_DRY_RUN=1: it says what it would install) on a machine that
has almost nothing: a PATH of a few basic commands, and a Python that sees
no site-packages (python3 -S)."""
import os
import shutil
import subprocess

from conftest import ROOT

# What only the tests use: the demo must never install these.
CHECK_ONLY = ["clang", "clang-format", "pkg-config", "git", "jq",
              "libcmocka-dev", "libclang-rt-14-dev", "util-linux", "pytest",
              "meson-python", "auditwheel", "distributed", "torch", "ray",
              "prometheus", "prometheus_client", "patchelf",
              "libncurses-dev", "tmux"]


def bare_machine(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for c in ("cc", "make", "bash", "sh", "env", "cat", "ls", "id",
              "basename", "dirname"):
        path = shutil.which(c)
        if path:
            os.symlink(path, bin_dir / c)
    py = bin_dir / "python-bare"
    py.write_text(f"#!/bin/sh\nexec {shutil.which('python3')} -S \"$@\"\n")
    py.chmod(0o755)
    return dict(PATH=str(bin_dir), PYTHON=str(py), INSTALL_DEPS_DRY_RUN="1",
                HOME=str(tmp_path))


def would_install(tmp_path, what):
    p = subprocess.run([shutil.which("bash"), str(ROOT / "scripts/install-deps.sh"),
                        what], env=bare_machine(tmp_path), capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    words = p.stdout.replace("install-deps: would apt-get install", "") \
        .replace("install-deps: would pip install", "").split()
    return {w.split("=")[0].split(">")[0].split("[")[0] for w in words}


def test_the_demo_installs_only_the_build_tools(tmp_path):
    got = would_install(tmp_path, "demo")
    # g++: the fake torch's stand-in libtorch_cuda.so, which every build
    # makes (docs/sim.md's environment after `make demo`)
    assert {"meson", "ninja", "g++"} <= got, got
    assert not got & set(CHECK_ONLY), got & set(CHECK_ONLY)


def test_the_check_installs_what_the_tests_use(tmp_path):
    got = would_install(tmp_path, "check")
    # what the bare machine lacks, the headers aside (found or not)
    want = set(CHECK_ONLY) - {"libcmocka-dev", "libclang-rt-14-dev",
                              "libncurses-dev"}
    assert want <= got, want - got


def test_an_unknown_set_is_refused(tmp_path):
    p = subprocess.run(["bash", str(ROOT / "scripts/install-deps.sh"), "all"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "check or demo" in p.stderr, p


def test_make_demo_asks_for_the_demo_set():
    text = (ROOT / "Makefile").read_text()
    assert "demo: deps-demo all" in text
    assert "install-deps.sh demo" in text
