"""The wheel, as a user gets it: what it holds, its tags, auditwheel's
verdict, and the installed package and command in a fresh virtual
environment: one version everywhere, `gpureclaim` and `python -m
gpureclaim` one program, ps on the simulator, trace finding the installed
injection library, demo's one-line refusal. The sdist builds the same."""
import email.parser
import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile

from conftest import (FAKE_CUPTI, ROOT, SIM_DIR, clean_env, header_version,
                      make_venv, pip_build, run)

VERSION = header_version()

# Everything the wheel holds, and nothing else (no test, no simulator).
EXPECTED = {
    "gpureclaim-startup.pth",
    "gpureclaim/__init__.py",
    "gpureclaim/__main__.py",
    "gpureclaim/_gpureclaim.abi3.so",
    "gpureclaim/_gpureclaim.pyi",
    "gpureclaim/_ipython.py",
    "gpureclaim/_trace.py",
    "gpureclaim/py.typed",
    "gpureclaim/libgpureclaim_trace.so",
    *(f"gpureclaim/_commands/{m}.py" for m in (
        "__init__", "agent", "cluster", "demo", "explain", "run")),
    *(f"gpureclaim/_explain/{m}.py" for m in (
        "__init__", "_free", "_holders", "_parts", "_views")),
    *(f"gpureclaim/_startup/{m}.py" for m in (
        "__init__", "_imports", "_bootstrap/sitecustomize")),
    *(f"gpureclaim/agent/{m}.py" for m in (
        "__init__", "_cells", "_protocol", "_remote_start", "_server")),
    *(f"gpureclaim/cluster/{m}.py" for m in (
        "__init__", "_dask_plugin", "_records", "_report", "dask", "ray",
        "torch")),
    *(f"gpureclaim/frameworks/{m}.py" for m in (
        "__init__", "_base", "cupy", "jax", "metal", "numba", "rmm",
        "torch")),
    *(f"gpureclaim/metrics/{m}.py" for m in (
        "__init__", "_exporter", "_proc")),
    *(f"gpureclaim/oom/{m}.py" for m in ("__init__", "_postmortem")),
    f"gpureclaim-{VERSION}.data/scripts/gpureclaim",
    f"gpureclaim-{VERSION}.dist-info/METADATA",
    f"gpureclaim-{VERSION}.dist-info/WHEEL",
    f"gpureclaim-{VERSION}.dist-info/RECORD",
}


def sim_env(tmp_path, **extra):
    state = f"install-{os.getpid()}-{tmp_path.name}"
    return clean_env(
        GPURECLAIM_SIM=f"gpus=2;extra=1:4242:3GiB;state={state}",
        GPURECLAIM_NVML_LIBRARY=SIM_DIR / "libnvidia-ml.so.1",
        GPURECLAIM_CUDA_LIBRARY=SIM_DIR / "libcuda.so.1", **extra), state


def drop_state(state):
    for f in os.listdir("/dev/shm"):
        if f.endswith("-" + state) and f.startswith("gpureclaim-sim-"):
            os.unlink(os.path.join("/dev/shm", f))


def test_wheel_holds_the_package_the_command_and_the_tracer_only(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert names == EXPECTED, (sorted(names - EXPECTED),
                               sorted(EXPECTED - names))


def test_wheel_is_abi3_for_3_11_one_per_platform(wheel):
    assert re.fullmatch(rf"gpureclaim-{re.escape(VERSION)}-cp311-abi3-"
                        r"linux_[a-z0-9_]+\.whl", wheel.name), wheel.name
    meta = zipfile.ZipFile(wheel).read(
        f"gpureclaim-{VERSION}.dist-info/WHEEL").decode()
    assert "Root-Is-Purelib: false" in meta
    assert re.search(r"^Tag: cp311-abi3-linux_", meta, re.M), meta


def test_auditwheel_finds_it_manylinux(wheel):
    p = run([sys.executable, "-m", "auditwheel", "show", wheel])
    text = " ".join((p.stdout + p.stderr).split())
    m = re.search(r'consistent with the following platform tag: '
                  r'"(manylinux_\d+_\d+_\w+)"', text)
    assert m, text
    # nothing to graft: every library it needs is the system's (glibc and
    # the compiler's runtime, both in the manylinux policy)
    assert "external shared libraries" not in text, text


def test_one_version_everywhere(venv, wheel):
    meta = email.parser.Parser().parsestr(zipfile.ZipFile(wheel).read(
        f"gpureclaim-{VERSION}.dist-info/METADATA").decode())
    assert meta["Version"] == VERSION
    env = clean_env()
    py = run([venv / "bin/python", "-c",
              "import gpureclaim, gpureclaim._gpureclaim as c;"
              "print(gpureclaim.__version__, c.version())"], env=env)
    assert py.stdout.split() == [VERSION, VERSION]
    for cmd in ([venv / "bin/gpureclaim"],
                [venv / "bin/python", "-m", "gpureclaim"]):
        for flag in ("--version", "-V"):
            p = run(cmd + [flag], env=env)
            assert p.stdout == f"gpureclaim {VERSION}\n", p


def test_import_from_the_venv(venv):
    p = run([venv / "bin/python", "-c",
             "import gpureclaim; print(gpureclaim.__file__)"],
            env=clean_env(), cwd="/")
    assert p.stdout.startswith(str(venv)), p.stdout


STARTED = ("import json, sys; w = sys.modules.get('gpureclaim.oom'); "
           "print(json.dumps(dict(imported='gpureclaim' in sys.modules, "
           "on=bool(w and w.status()['on']))))")


def test_the_startup_pth_starts_the_watch_only_with_its_variable(venv,
                                                                tmp_path):
    (site,) = (venv / "lib").glob("python3*/site-packages")
    assert (site / "gpureclaim-startup.pth").is_file()
    for extra, want in (({}, {"imported": False, "on": False}),
                        ({"GPURECLAIM_OOM": "1"},
                         {"imported": True, "on": True})):
        p = run([venv / "bin/python", "-c", STARTED],
                env=clean_env(**extra), cwd=tmp_path)
        assert json.loads(p.stdout) == want, p
        assert p.stderr == ""


def test_run_starts_it_in_the_venv_too(venv, tmp_path):
    p = run([venv / "bin/gpureclaim", "run", "--oom", "--",
             venv / "bin/python", "-c", STARTED], env=clean_env(),
            cwd=tmp_path)
    assert json.loads(p.stdout) == {"imported": True, "on": True}, p


def untimed(out):
    """ps --json's time of the query ("time", "unix_time") left out: two
    runs differ there and nowhere else."""
    return re.sub(r'"(unix_)?time":("[^"]*"|[0-9.]+),', "", out)


def test_command_and_module_are_one_program(venv, tmp_path):
    env, state = sim_env(tmp_path)
    try:
        for args in (["--help"], [], ["ps", "--json"], ["bogus"],
                     ["help", "ps"], ["ps", "--nope"], ["report"],
                     ["help", "explain"], ["demo", "extra"],
                     # a Dask cluster's reports, in the Python package
                     ["release", "--help"], ["ps", "--dask"],
                     ["ps", "--json", "--dask=tcp://127.0.0.1:9",
                      "--timeout", "0"]):
            a = run([venv / "bin/gpureclaim", *args], check=False, env=env)
            b = run([venv / "bin/python", "-m", "gpureclaim", *args],
                    check=False, env=env)
            assert (a.returncode, untimed(a.stdout), a.stderr) == \
                (b.returncode, untimed(b.stdout), b.stderr), (args, a, b)
    finally:
        drop_state(state)
    a = run([venv / "bin/gpureclaim", "--help"], env=env)
    for sub in ("ps", "top", "trace", "report", "version", "explain",
                "demo"):
        assert re.search(rf"^    {sub} ", a.stdout, re.M), a.stdout


def test_ps_on_the_simulator(venv, tmp_path):
    env, state = sim_env(tmp_path)
    try:
        p = run([venv / "bin/gpureclaim", "ps", "--json"], env=env)
    finally:
        drop_state(state)
    doc = json.loads(p.stdout)
    assert [g["gpu"] for g in doc["gpus"]] == [0, 1]
    (proc,) = doc["gpus"][1]["processes"]
    assert proc["pid"] == 4242 and proc["bytes"] == 3 << 30


def test_top_in_the_venv_has_its_terminal_view_inside(venv, tmp_path):
    """The wheel's command links ncurses statically (cli/meson.build): it
    needs no libncursesw beside it, and without a terminal prints one
    reading."""
    exe = venv / "bin/gpureclaim"
    needed = run(["readelf", "-d", exe]).stdout
    assert "NEEDED" in needed and "ncurses" not in needed \
        and "tinfo" not in needed, needed
    env, state = sim_env(tmp_path)
    try:
        p = run([exe, "top"], env=env)
    finally:
        drop_state(state)
    assert p.stdout.startswith("gpureclaim top  "), p
    assert re.search(r"^\S +4242 .* 3\.0 GiB ", p.stdout, re.M), p.stdout


def test_trace_finds_the_installed_tracer(venv, tmp_path):
    env = clean_env(GPURECLAIM_CUPTI_LIBRARY=FAKE_CUPTI)
    p = run([venv / "bin/gpureclaim", "trace", "-v", "-o",
             tmp_path / "t.trace", "--", "sh", "-c",
             'echo "$LD_PRELOAD"; echo "$CUDA_INJECTION64_PATH"'],
            env=env, cwd=tmp_path)
    (site,) = (venv / "lib").glob("python3*/site-packages")
    tracer = str(site / "gpureclaim/libgpureclaim_trace.so")
    # preloaded (the interposer), and given to the driver (CUPTI fallback)
    assert p.stdout.split() == [tracer, tracer], p.stdout
    assert (f"gpureclaim trace: interposer {tracer}; CUPTI fallback "
            f"{FAKE_CUPTI}") in p.stderr, p.stderr
    # `true` is no CUDA program: nothing logged, and said so
    p = run([venv / "bin/gpureclaim", "trace", "--", "true"], env=env,
            cwd=tmp_path)
    assert "no trace was written" in p.stderr, p.stderr


def test_trace_through_the_module_too(venv, tmp_path):
    env = clean_env(GPURECLAIM_CUPTI_LIBRARY=FAKE_CUPTI)
    p = run([venv / "bin/python", "-m", "gpureclaim", "trace", "-q", "--",
             "sh", "-c", 'echo "$CUDA_INJECTION64_PATH"'], env=env,
            cwd=tmp_path)
    assert p.stdout.strip().endswith(
        "site-packages/gpureclaim/libgpureclaim_trace.so"), p


def test_demo_without_frameworks_says_what_is_missing(venv):
    for cmd in ([venv / "bin/gpureclaim", "demo"],
                [venv / "bin/python", "-m", "gpureclaim", "demo"]):
        p = run(cmd, check=False, env=clean_env())
        assert p.returncode == 1, p
        assert p.stdout == ""
        assert len(p.stderr.splitlines()) == 1, p.stderr
        assert p.stderr.startswith("gpureclaim demo: needs Torch and CuPy"), p
        assert "missing: " in p.stderr and "cupy" in p.stderr
        assert "Traceback" not in p.stderr


def test_explain_runs_through_the_command(venv, tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import sys; print('args', sys.argv[1:]); sys.exit(3)\n")
    p = run([venv / "bin/gpureclaim", "explain", script, "a", "b"],
            check=False, env=clean_env(), cwd=tmp_path)
    assert p.returncode == 3, p
    assert "args ['a', 'b']" in p.stdout
    assert "gpureclaim.explain(): where this process's GPU memory goes" \
        in p.stdout, p.stdout


def test_pip_install_dot_puts_the_command_on_the_path(tmp):
    """`pip install .` itself (offline, the build tools of this Python
    seen through --system-site-packages)."""
    v = make_venv(tmp / "venv-dot", system_site=True)
    run([v / "bin/python", "-m", "pip", "install", "-q", "--no-build-isolation",
         "--no-deps", "--no-index", "--disable-pip-version-check",
         f"-Cbuild-dir={os.environ['WHEEL_BUILD']}", ROOT],
        env=clean_env(PIP_NO_CACHE_DIR="1"), cwd=tmp)
    env = clean_env(PATH=f"{v / 'bin'}:{os.environ['PATH']}")
    p = run(["gpureclaim", "--version"], env=env)
    assert p.stdout == f"gpureclaim {header_version()}\n"
    p = run(["sh", "-c", "command -v gpureclaim"], env=env)
    assert p.stdout.strip() == str(v / "bin/gpureclaim")


def test_the_sdist_builds_the_same_wheel(tmp, wheel):
    sdist_dir = tmp / "sdist"
    run([sys.executable, "-c",
         "import sys, mesonpy; print(mesonpy.build_sdist(sys.argv[1]))",
         sdist_dir], cwd=ROOT, env=clean_env())
    (sdist,) = sdist_dir.glob("gpureclaim-*.tar.gz")
    assert sdist.name == f"gpureclaim-{header_version()}.tar.gz"
    names = tarfile.open(sdist).getnames()
    top = f"gpureclaim-{header_version()}"
    for f in ("meson.build", "pyproject.toml", "include/gpureclaim.h",
              "src/meson.build", "python/gpureclaim/__init__.py"):
        assert f"{top}/{f}" in names, f
    out = tmp / "from-sdist"
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation",
         "--no-deps", "--no-index", "--disable-pip-version-check",
         "-w", out, sdist], env=clean_env(PIP_NO_CACHE_DIR="1"), cwd=tmp)
    (built,) = out.glob("gpureclaim-*.whl")
    assert built.name == wheel.name
    assert set(zipfile.ZipFile(built).namelist()) == \
        set(zipfile.ZipFile(wheel).namelist())
