"""The C install, `make install PREFIX=...`: the header, the shared and
static library, the gpureclaim.pc that builds examples/minimal.c, the
command finding the installed injection library, gpr_version() equal to
the project's version."""
import ctypes
import json
import os
import subprocess
import sys

from conftest import (BUILD_ROOT, FAKE_CUPTI, ROOT, clean_env, header_version,
                      run)


def pkg_env(libdir):
    return clean_env(PKG_CONFIG_PATH=libdir / "pkgconfig")


def test_installs_header_libraries_and_pc(c_install):
    prefix, libdir, bindir = c_install
    v = header_version()
    for h in ("gpureclaim.h", "gpureclaim_trace.h", "gpureclaim_wake.h"):
        assert (prefix / "include" / h).is_file(), h
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


sys.path.insert(0, str(ROOT / "tests" / "docs"))
import docs  # noqa: E402  (the one runner's parser)


def recipe(page):
    """The lines after `make install PREFIX=$HOME/.local` of the page's
    install recipe, as written."""
    [b] = [b for b in docs.blocks(str(ROOT / page))
           if b.body.startswith("make install PREFIX=$HOME/.local\n")]
    return b.body.split("\n", 1)[1]


def run_recipe(page, prefix, tmp_path):
    """Runs the page's recipe as a user whose HOME holds the staged
    install in .local, from a folder that looks like the checkout (its
    examples/), in a shell of nothing but the user's environment."""
    home = prefix.parent
    assert prefix == home / ".local"
    work = tmp_path / "checkout"
    work.mkdir()
    os.symlink(ROOT / "examples", work / "examples")
    env = clean_env(HOME=home)
    env.pop("PKG_CONFIG_PATH", None)
    return run(["bash", "-euo", "pipefail", "-c", recipe(page)], env=env,
               cwd=work)


def test_the_readmes_c_recipe_works_as_written(c_install, tmp_path):
    """README: pkg-config finds the installed .pc, the program finds the
    installed libgpureclaim.so.0 (rpath), and the installed command's
    explain finds the Python package installed with it."""
    prefix, libdir, bindir = c_install
    assert libdir == prefix / "lib"
    p = run_recipe("README.md", prefix, tmp_path)
    assert "released 0 B (0 bytes)" in p.stdout, p.stdout
    assert "USAGE: gpureclaim explain [--holders] [--json] SCRIPT" in \
        p.stdout, p.stdout
    # the help is the command's own (C); a subcommand Python runs finds
    # the package installed with it
    agents = tmp_path / "agents"  # none: this test's own folder of them
    agents.mkdir(mode=0o700)
    p = run([bindir / "gpureclaim", "agent", "list"],
            env=clean_env(HOME=prefix.parent, GPURECLAIM_AGENT_DIR=agents),
            cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.startswith("no agents"), p
    exe = tmp_path / "checkout" / "minimal"
    assert str(libdir / "libgpureclaim.so.0") in run(
        ["ldd", exe], env=clean_env()).stdout


def test_the_c_api_pages_recipe_works_as_written(c_install, tmp_path):
    prefix, libdir, bindir = c_install
    p = run_recipe("docs/c-api.md", prefix, tmp_path)
    assert p.stdout.count("released 0 B (0 bytes)") == 2, p.stdout


def test_the_installed_explain_uses_the_installed_package(c_install,
                                                          tmp_path):
    """bin/gpureclaim explain SCRIPT imports the package of its own
    installation (PREFIX/lib/gpureclaim-python holds a link to it and
    nothing else), with no PYTHONPATH of the user's."""
    prefix, libdir, bindir = c_install
    link = libdir / "gpureclaim-python" / "gpureclaim"
    assert link.is_symlink() and (link / "__main__.py").is_file()
    assert os.listdir(libdir / "gpureclaim-python") == ["gpureclaim"]
    script = tmp_path / "where.py"
    script.write_text("import gpureclaim; print('from', gpureclaim.__file__)\n")
    p = run([bindir / "gpureclaim", "explain", script], env=clean_env(),
            cwd=tmp_path)
    assert f"from {link}/__init__.py" in p.stdout, p.stdout
    assert f"gpureclaim: {script} ended" in p.stdout, p.stdout
