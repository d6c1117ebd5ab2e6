"""The startup hook (gpureclaim/_startup/) and `gpureclaim run`: the .pth
the wheel installs, the bootstrap sitecustomize `run` puts on PYTHONPATH,
both inert without their variable; `run` in a build tree, beside the
user's own sitecustomize, and into a child that could not import the
package otherwise."""
import ast
import os
import re
import shutil
import subprocess
import sys
import textwrap
import uuid

import pytest

from conftest import FAKES, PY_PATH, SAN_PRELOAD, SIM_DIR

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PTH = os.path.join(ROOT, "python", "gpureclaim-startup.pth")
BOOT = os.path.join(PY_PATH, "gpureclaim", "_startup", "_bootstrap")
GPR = os.environ.get("GPURECLAIM_BIN",
                     os.path.join(ROOT, "build", "cli", "gpureclaim"))


def starters():
    """_STARTERS' variables, read from the source (not imported here)."""
    src = open(os.path.join(ROOT, "python", "gpureclaim", "_startup",
                            "__init__.py")).read()
    node = next(n for n in ast.parse(src).body if isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", "") == "_STARTERS")
    return [row.elts[0].value for row in node.value.elts]


def env(**extra):
    """A clean environment on the simulated driver, nothing of ours set
    unless asked."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("GPURECLAIM_", "PYTHON"))}
    state = "startup-" + uuid.uuid4().hex[:10]
    e.update(GPURECLAIM_SIM=f"gpus=1;memory=8GiB;state={state}",
             GPURECLAIM_CUDA_LIBRARY=os.path.join(SIM_DIR, "libcuda.so.1"),
             GPURECLAIM_NVML_LIBRARY=os.path.join(SIM_DIR,
                                                  "libnvidia-ml.so.1"),
             PYTHONDONTWRITEBYTECODE="1")
    if SAN_PRELOAD:
        e["LD_PRELOAD"] = SAN_PRELOAD
    e.update({k: str(v) for k, v in extra.items()})
    return e


def run(args, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 120)
    return subprocess.run([str(a) for a in args], **kw)


def test_the_pth_and_the_bootstrap_test_the_starters_variables():
    line = open(PTH).read()
    assert line.count("\n") == 1 and line.startswith("import os;")
    assert re.findall(r"'(GPURECLAIM_[A-Z_]+)' ?in os\.environ", line) == \
        starters()
    src = open(os.path.join(ROOT, "python", "gpureclaim", "_startup",
                            "_bootstrap", "sitecustomize.py")).read()
    node = next(n for n in ast.parse(src).body if isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", "") == "VARIABLES")
    assert list(ast.literal_eval(node.value)) == starters()


SITE = """
import os, sys, site
sys.path.insert(0, {py!r})
site.addsitedir(sys.argv[1])   # processes the .pth there, as at start-up
import json
w = sys.modules.get("gpureclaim.oom")
print(json.dumps(dict(
    imported=sorted(m for m in sys.modules if m.split(".")[0] in
                    ("gpureclaim", "torch", "cupy", "jax")),
    on=bool(w and w.status()["on"]))))
"""


@pytest.mark.parametrize("value,imported,on", [
    (None, False, False), ("1", True, True), ("0", True, False)])
def test_the_pth_is_inert_without_its_variable(tmp_path, value, imported, on):
    shutil.copy(PTH, tmp_path)
    extra = {} if value is None else {"GPURECLAIM_OOM": value}
    p = run([sys.executable, "-S", "-c", SITE.format(py=PY_PATH), tmp_path],
            env=env(**extra), cwd=tmp_path)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    got = __import__("json").loads(p.stdout)
    assert bool(got["imported"]) is imported, got
    assert not [m for m in got["imported"] if not m.startswith("gpureclaim")]
    assert got["on"] is on


def test_a_starter_that_fails_is_one_line_and_the_program_runs(tmp_path):
    shutil.copy(PTH, tmp_path)
    p = run([sys.executable, "-S", "-c",
             SITE.format(py=PY_PATH) + "print('ran')", tmp_path],
            env=env(GPURECLAIM_OOM="/nonexistent-folder/oom.json"))
    assert p.returncode == 0 and p.stdout.endswith("ran\n")
    assert p.stderr == ("gpureclaim: GPURECLAIM_OOM=/nonexistent-folder/"
                        "oom.json: ValueError: watch_oom(): no folder "
                        "/nonexistent-folder; not started\n")


USER_SITE = """\
import os
os.environ["USER_SITECUSTOMIZE"] = "ran"
MARK = "the user's"
"""

PROBE = """
import json, os, sys
import sitecustomize
w = sys.modules.get("gpureclaim.oom")
print(json.dumps(dict(user=os.environ.get("USER_SITECUSTOMIZE"),
                      mark=getattr(sitecustomize, "MARK", None),
                      boot_on_path=any(p.endswith("_bootstrap") for p in sys.path),
                      on=bool(w and w.status()["on"]),
                      package=(sys.modules["gpureclaim"].__file__
                               if "gpureclaim" in sys.modules else None))))
"""


def test_the_bootstrap_starts_the_hook_then_the_users_sitecustomize(
        tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    (user / "sitecustomize.py").write_text(USER_SITE)
    path = os.pathsep.join([BOOT, PY_PATH, str(user)])
    for value, on in ((None, False), ("1", True)):
        extra = {"PYTHONPATH": path}
        if value:
            extra["GPURECLAIM_OOM"] = value
        p = run([sys.executable, "-c", PROBE], env=env(**extra), cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        got = __import__("json").loads(p.stdout)
        assert got["user"] == "ran" and got["mark"] == "the user's"
        assert got["boot_on_path"] is False
        assert got["on"] is on
        assert (got["package"] is not None) is on  # inert: nothing imported


SCRIPT = """
import sys, torch, cupy
a = cupy.empty(5 << 30, dtype=cupy.uint8); del a
torch.empty(4 << 30, dtype=torch.uint8, device="cuda")
"""


def test_gpureclaim_run_in_a_build_tree(tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    (user / "sitecustomize.py").write_text(USER_SITE)
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "train.py").write_text(SCRIPT + "\n")
    e = env(PYTHONPATH=os.pathsep.join([PY_PATH, FAKES, str(user)]))
    p = run([GPR, "run", f"--oom={out}", "--", sys.executable, "train.py"],
            env=e, cwd=tmp_path)
    assert p.returncode == 1  # the script's: its OutOfMemoryError
    assert "gpureclaim: out of memory" in p.stderr
    assert "torch.OutOfMemoryError: CUDA out of memory" in p.stderr
    [f] = os.listdir(out)
    assert re.fullmatch(r"gpureclaim-oom-\d+-1\.json", f)
    # the user's sitecustomize ran in the child too
    p = run([GPR, "run", "--oom", "--", sys.executable, "-c", PROBE], env=e,
            cwd=tmp_path)
    got = __import__("json").loads(p.stdout)
    assert got["user"] == "ran" and got["on"] is True, p.stderr


def test_the_variable_in_a_build_tree_starts_at_import(tmp_path):
    """GPURECLAIM_OOM=1 python3 train.py where no startup hook is installed
    (a build tree: PYTHONPATH=build/python): the watch starts when the
    program imports gpureclaim, from then on (issue 33)."""
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "train.py").write_text("import gpureclaim\n" + SCRIPT)
    e = env(PYTHONPATH=os.pathsep.join([PY_PATH, FAKES]),
            GPURECLAIM_OOM=str(out))
    p = run([sys.executable, "train.py"], env=e, cwd=tmp_path)
    assert p.returncode == 1, p.stderr  # the script's OutOfMemoryError
    assert "gpureclaim: out of memory" in p.stderr
    assert len(os.listdir(out)) == 1


def test_run_of_a_script_without_its_x_bit_says_so(tmp_path):
    """`gpureclaim run --oom -- ./train.py` of a Python script that cannot
    be executed: the real reason, not "not a Python program" (issue 33)."""
    script = tmp_path / "train.py"
    script.write_text("#!/usr/bin/env python3\nprint('ran')\n")
    script.chmod(0o644)
    p = run([GPR, "run", "--oom", "--", "./train.py"], env=env(
        PYTHONPATH=PY_PATH), cwd=tmp_path)
    assert p.returncode == 126, p
    assert p.stderr == ("gpureclaim run: ./train.py is not executable "
                        "(chmod +x ./train.py, or run it with its "
                        "interpreter: gpureclaim run --oom -- python3 "
                        "./train.py)\n"), p.stderr


def test_run_makes_its_package_importable_in_the_child(tmp_path):
    """A child whose PYTHONPATH does not hold the package (only the
    bootstrap `run` adds): the bootstrap finds the package it belongs to."""
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {PY_PATH!r})
        from gpureclaim.__main__ import main
        sys.exit(main(["run", "--oom", "--", sys.executable, "-c", {PROBE!r}]))
    """)
    p = run([sys.executable, "-c", code], env=env(), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    got = __import__("json").loads(p.stdout)
    assert got["on"] is True
    assert got["package"] == os.path.join(PY_PATH, "gpureclaim", "__init__.py")


def test_run_says_what_it_cannot_do(tmp_path):
    e = env(PYTHONPATH=PY_PATH)
    p = run([GPR, "run", "--oom", "--", "true"], env=e)
    assert p.returncode == 0
    assert p.stderr == ("gpureclaim run: true is not a Python program: "
                        "GPURECLAIM_OOM reaches only the Python processes it "
                        "starts\n")
    p = run([GPR, "run", "--oom", "--agent", "--", "true"], env=e)
    assert p.stderr == ("gpureclaim run: true is not a Python program: "
                        "GPURECLAIM_OOM and GPURECLAIM_AGENT reach only the "
                        "Python processes it starts\n")
    p = run([GPR, "run", "--", sys.executable, "-c", "pass"], env=e)
    assert p.returncode == 2
    assert p.stderr.startswith("gpureclaim run: nothing to start: give "
                               "--oom, --agent or --resume-on-demand\n")
    p = run([GPR, "run", "--oom", "--", "no-such-command-here"], env=e)
    assert p.returncode == 127
    assert p.stderr == ("gpureclaim run: no-such-command-here: command not "
                        "found\n")
    p = run([GPR, "run", "--bogus", "--", "true"], env=e)
    assert p.returncode == 2 and "unknown option '--bogus'" in p.stderr
    p = run([GPR, "run", "--oom", "--", sys.executable, "-c",
             "import sys; sys.exit(7)"], env=e)
    assert p.returncode == 7
    p = run([GPR, "help", "run"], env=e)
    assert p.returncode == 0 and p.stdout.startswith(
        "USAGE: gpureclaim run [--oom[=PATH]] [--agent] [--resume-on-demand]\n"
        "                      -- CMD [ARGS...]")
