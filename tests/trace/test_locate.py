"""Where `gpureclaim trace` finds CUPTI, in order, with fake files in a
virtual environment and a fake CUDA toolkit: $GPURECLAIM_CUPTI_LIBRARY, the
nvidia-cuda-cupti wheel (nvidia/cu13/lib, then nvidia/cuda_cupti/lib), the
one beside Torch's libraries, the environment's lib, the CUDA toolkit
($CUDA_HOME: extras/CUPTI/lib64, then targets/<arch>/lib),
$LD_LIBRARY_PATH; and the error naming every place it tried.

GPR: the command under test (meson test sets it). CMD is `sh -c :` or the
venv's python; neither loads CUDA, so an empty file serves as CUPTI."""
import os
import platform
import subprocess
import sys

import pytest

GPR = os.environ["GPR"]
ARCH = "sbsa-linux" if platform.machine() == "aarch64" else "x86_64-linux"


@pytest.fixture
def tree(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv],
                   check=True)
    (site,) = (venv / "lib").glob("python3*/site-packages")
    cuda, ld = tmp_path / "cuda", tmp_path / "ld"
    files = {
        "cu13": site / "nvidia/cu13/lib/libcupti.so.13",
        "cuda_cupti": site / "nvidia/cuda_cupti/lib/libcupti.so.12",
        "torch": site / "torch/lib/libcupti-0a1b2c3d.so.12",
        "env": venv / "lib/libcupti.so.12",
        "extras": cuda / "extras/CUPTI/lib64/libcupti.so.13",
        "targets": cuda / f"targets/{ARCH}/lib/libcupti.so.13",
        "ld": ld / "libcupti.so.13",
    }
    for f in files.values():
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"")
    (cuda / "empty").mkdir()
    return venv, files, cuda, ld


def trace(cmd, env_extra, cwd):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GPURECLAIM")}
    env.update({k: str(v) for k, v in env_extra.items()})
    # the CUPTI backend, which names where it found CUPTI
    p = subprocess.run([GPR, "trace", "--verbose", "--backend", "cupti", "--",
                        *map(str, cmd)], env=env,
                       capture_output=True, text=True, cwd=cwd, timeout=60)
    return p


def found(p):
    for line in p.stderr.splitlines():
        if line.startswith("gpureclaim trace: CUPTI "):
            path, _, where = line[len("gpureclaim trace: CUPTI "):].partition(
                " (from ")
            return path, where.rstrip(")")
    return None, p.stderr


def test_search_order(tree, tmp_path):
    venv, files, cuda, ld = tree
    env = {"CUDA_HOME": cuda, "LD_LIBRARY_PATH": ld}
    cmd = [venv / "bin/python", "-c", "pass"]
    expect = [
        ("cu13", "the nvidia-cuda-cupti wheel"),
        ("cuda_cupti", "the nvidia-cuda-cupti wheel"),
        ("torch", "Torch's libraries"),
        ("env", "the Python environment"),
        ("extras", "the CUDA toolkit"),
        ("targets", "the CUDA toolkit"),
        ("ld", "LD_LIBRARY_PATH"),
    ]
    for key, where in expect:
        p = trace(cmd, env, tmp_path)
        assert p.returncode == 0, p
        assert found(p) == (str(files[key]), where), (key, p.stderr)
        files[key].unlink()


def test_the_variable_comes_first(tree, tmp_path):
    venv, files, cuda, ld = tree
    mine = tmp_path / "my-libcupti.so"
    mine.write_bytes(b"")
    p = trace([venv / "bin/python", "-c", "pass"],
              {"GPURECLAIM_CUPTI_LIBRARY": mine, "CUDA_HOME": cuda}, tmp_path)
    assert found(p) == (str(mine), "GPURECLAIM_CUPTI_LIBRARY"), p.stderr
    # set but wrong: an error that names it, the command not run
    p = trace(["sh", "-c", "touch ran"],
              {"GPURECLAIM_CUPTI_LIBRARY": tmp_path / "nope.so"}, tmp_path)
    assert p.returncode == 1
    assert f"$GPURECLAIM_CUPTI_LIBRARY ({tmp_path / 'nope.so'})" in p.stderr
    assert not (tmp_path / "ran").exists()


def test_a_command_that_is_not_python_uses_the_python_on_path(tree, tmp_path):
    venv, files, cuda, ld = tree
    env = {"CUDA_HOME": cuda / "empty",
           "PATH": f"{venv / 'bin'}:{os.environ['PATH']}"}
    p = trace(["sh", "-c", ":"], env, tmp_path)
    assert found(p) == (str(files["cu13"]), "the nvidia-cuda-cupti wheel")
    # or the one GPURECLAIM_PYTHON names
    env = {"CUDA_HOME": cuda / "empty", "GPURECLAIM_PYTHON": venv / "bin/python"}
    p = trace(["sh", "-c", ":"], env, tmp_path)
    assert found(p) == (str(files["cu13"]), "the nvidia-cuda-cupti wheel")


def test_cuda_home_replaces_the_usual_toolkits(tree, tmp_path):
    venv, files, cuda, ld = tree
    for key in ("cu13", "cuda_cupti", "torch", "env", "ld"):
        files[key].unlink()
    p = trace([venv / "bin/python", "-c", "pass"],
              {"CUDA_HOME": cuda / "empty"}, tmp_path)
    if p.returncode == 0:
        # a system libcupti: found after every other place
        assert found(p)[1] == "the system library folder", p.stderr
        return
    assert p.returncode == 1
    msg = p.stderr
    assert "no CUPTI library found; looked at:\n" in msg
    site = files["cu13"].parents[3]
    for tried in ("$GPURECLAIM_CUPTI_LIBRARY (not set)",
                  f"{site}/nvidia/cu13/lib", f"{site}/nvidia/cuda_cupti/lib",
                  f"{site}/torch/lib", f"{venv}/lib",
                  f"{cuda / 'empty'}/extras/CUPTI/lib64/libcupti.so*",
                  f"{cuda / 'empty'}/targets/{ARCH}/lib/libcupti.so*"):
        assert f"\n  {tried}\n" in msg, (tried, msg)
    # CUDA_HOME names the toolkit: /usr/local/cuda is not searched
    assert "/usr/local/cuda/" not in msg, msg
    assert "pip install nvidia-cuda-cupti" in msg
