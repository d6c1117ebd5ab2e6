"""The C install, `make install PREFIX=...`: the header, the shared and
static library, the gpureclaim.pc that builds examples/minimal.c, the
command finding the installed injection library, gpr_version() equal to
the project's version."""
import ctypes
import json
import os
import subprocess

from conftest import (BUILD_ROOT, FAKE_CUPTI, ROOT, clean_env, header_version,
                      run)


def pkg_env(libdir):
    return clean_env(PKG_CONFIG_PATH=libdir / "pkgconfig")


def test_installs_header_libraries_and_pc(c_install):
    prefix, libdir, bindir = c_install
    v = header_version()
    assert (prefix / "include/gpureclaim.h").is_file()
    assert (libdir / "libgpureclaim.a").is_file()
    assert (libdir / f"libgpureclaim.so.{v}").is_file()
    assert os.readlink(libdir / f"libgpureclaim.so.{v.split('.')[0]}") == \
        f"libgpureclaim.so.{v}"
    assert (libdir / "libgpureclaim.so").is_symlink()
    assert (libdir / "pkgconfig/gpureclaim.pc").is_file()
    assert (libdir / "libgpureclaim_trace.so").is_file()
    assert os.access(bindir / "gpureclaim", os.X_OK)
    soname = run(["objdump", "-p", libdir / f"libgpureclaim.so.{v}"]).stdout
    assert f"SONAME               libgpureclaim.so.{v.split('.')[0]}" in soname


def test_pkg_config_builds_minimal(c_install, tmp_path):
    prefix, libdir, bindir = c_install
    env = pkg_env(libdir)
    assert run(["pkg-config", "--modversion", "gpureclaim"],
               env=env).stdout.strip() == header_version()
    flags = run(["pkg-config", "--cflags", "--libs", "gpureclaim"],
                env=env).stdout.split()
    exe = tmp_path / "minimal"
    run(["cc", "-std=c11", ROOT / "examples/minimal.c", *flags, "-o", exe],
        env=env)
    p = run([exe], env=clean_env(LD_LIBRARY_PATH=libdir))
    assert "released 0 B (0 bytes)" in p.stdout, p.stdout
    # linked against the installed shared library, not a copy
    assert str(libdir / "libgpureclaim.so.0") in run(
        ["ldd", exe], env=clean_env(LD_LIBRARY_PATH=libdir)).stdout


def test_pkg_config_static_link(c_install, tmp_path):
    prefix, libdir, bindir = c_install
    env = pkg_env(libdir)
    cflags = run(["pkg-config", "--cflags", "gpureclaim"], env=env).stdout.split()
    libs = run(["pkg-config", "--libs-only-l", "--static", "gpureclaim"],
               env=env).stdout.split()
    libs = [x for x in libs if x != "-lgpureclaim"]
    exe = tmp_path / "minimal-static"
    run(["cc", "-std=c11", ROOT / "examples/minimal.c", *cflags,
         libdir / "libgpureclaim.a", *libs, "-o", exe])
    assert "libgpureclaim" not in run(["ldd", exe]).stdout
    assert "released 0 B (0 bytes)" in run([exe], env=clean_env()).stdout


def test_gpr_version_is_the_projects(c_install):
    prefix, libdir, bindir = c_install
    lib = ctypes.CDLL(str(libdir / "libgpureclaim.so.0"))
    lib.gpr_version.restype = ctypes.c_char_p
    project = json.loads(run(["meson", "introspect", "--projectinfo",
                              BUILD_ROOT]).stdout)["version"]
    assert lib.gpr_version().decode() == project == header_version()
    p = run([bindir / "gpureclaim", "--version"], env=clean_env())
    assert p.stdout == f"gpureclaim {project}\n"


def test_installed_command_finds_the_installed_tracer(c_install, tmp_path):
    prefix, libdir, bindir = c_install
    p = run([bindir / "gpureclaim", "trace", "-q", "--", "sh", "-c",
             'echo "$CUDA_INJECTION64_PATH"'],
            env=clean_env(GPURECLAIM_CUPTI_LIBRARY=FAKE_CUPTI), cwd=tmp_path)
    assert p.stdout.strip() == str(libdir / "libgpureclaim_trace.so")
