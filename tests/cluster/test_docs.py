"""The cluster examples of the docs (docs/cluster.md, the README's cluster
section): the blocks that the one docs runner (tests/docs/docs.py) marks
`<!-- cluster -->` run here, as written, on real engines whose workers sit
on the simulated driver: the Dask ones on a LocalCluster, the torch one
under torchrun (gloo on the CPU), the Ray one on a local Ray that is told
it has 2 GPUs. The runner finds the blocks; this file gives each its
engine."""
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid

import distributed
import pytest
from simenv import (FAKES, HERE, PY_PATH, ROOT, cupy_only_fakes,
                      patched_environ, remove_state, sim_env)

ADDRESS = "tcp://10.0.0.5:8786"  # the address the examples show


sys.path.insert(0, os.path.join(ROOT, "tests", "docs"))
import docs  # noqa: E402  (the one runner's parser)


def examples(page):
    """{name: code} of the page's cluster blocks (`# example: NAME`)."""
    return {re.match(r"# example: ([\w-]+)", b.body).group(1): b.body + "\n"
            for b in docs.blocks(os.path.join(ROOT, page))
            if b.where == "cluster"}


DOCS = examples("docs/cluster.md")
README = examples("README.md")

# What docs/sim.md tells a user to change for the cluster examples, read
# from the page so the tests do what it says.
SIM_MD = open(os.path.join(ROOT, "docs", "sim.md")).read()
RAY_GPUS = re.search(r"RAY_OVERRIDE_RESOURCES='([^']*)'", SIM_MD).group(1)
CUPY_ONLY = re.search(r"ln -sf (.*) fakes-cupy-only/", SIM_MD).group(1).split()


def test_the_examples_are_found():
    assert set(DOCS) == {"dask", "dask-cli", "torch", "ray"}
    assert set(README) == {"readme-dask"}


@pytest.fixture
def state():
    s = "docs-" + uuid.uuid4().hex[:12]
    yield s
    remove_state(s)


def run(code, env, tmp_path, argv=(), timeout=180):
    path = tmp_path / "example.py"
    path.write_text(code)
    p = subprocess.run([sys.executable, *argv, str(path)], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-6000:]
    return p.stdout


@pytest.mark.parametrize("src,name", [(DOCS, "dask"), (README, "readme-dask")])
def test_dask_examples(src, name, state, tmp_path):
    out = run(src[name], dict(os.environ, **sim_env(state, "gpus=1")), tmp_path)
    # 1 GiB of float32 cached in each worker, as real Torch would
    assert "<ClusterRelease (dask): 2.0 GiB released by 2 of 2 workers" in out
    if name == "dask":
        assert "<ClusterExplanation (dask)" in out and "<ClusterUsage (dask)" in out
        metrics = [ln.split()[-1] for ln in out.splitlines() if ln.startswith("tcp://")]
        assert len(metrics) == 2 and all(m.isdigit() and int(m) > 0 for m in metrics)


def test_dask_cli_example(state):
    with patched_environ(sim_env(state, "gpus=1")):
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, dashboard_address=":0",
            silence_logs=logging.ERROR,
            preload=[os.path.join(HERE, "sim_preload.py")])
    try:
        env = dict(os.environ, PYTHONPATH=PY_PATH)
        for line in DOCS["dask-cli"].splitlines()[1:]:
            cmd = line.replace(ADDRESS, cluster.scheduler_address)
            cmd = cmd.replace("python ", f"{sys.executable} ", 1)
            p = subprocess.run(cmd, shell=True, env=env, capture_output=True,
                               text=True, timeout=120)
            assert p.returncode == 0, (line, p.stdout, p.stderr)
            assert "2 of 2 workers" in p.stdout or '"answered": 2' in p.stdout
    finally:
        cluster.close()


def test_the_cluster_changes_are_those_sim_md_gives():
    assert RAY_GPUS == '{"GPU": 2}'
    # the folder the page makes holds what cupy_only_fakes links
    assert [os.path.basename(p) for p in CUPY_ONLY] == ["cupy", "simcuda.py"]


def test_torch_example(state, tmp_path):
    env = dict(os.environ, **sim_env(state, "gpus=1",
                                     cupy_only_fakes(str(tmp_path / "fakes"))))
    out = run(DOCS["torch"], env, tmp_path,
              argv=("-m", "torch.distributed.run", "--standalone",
                    "--nproc-per-node", "2"))
    assert "epoch 1: 0 bytes released by 2 ranks" in out
    assert "<ClusterRelease (torch.distributed)" in out


def test_ray_example(state, tmp_path):
    env = dict(os.environ, **sim_env(state, "gpus=1", FAKES))
    tmp = tempfile.mkdtemp(prefix="gpr-ray-")  # Ray's socket paths are short
    env.update(RAY_OVERRIDE_RESOURCES=RAY_GPUS, RAY_TMPDIR=tmp,
               RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
    try:
        out = run(DOCS["ray"], env, tmp_path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert "<ClusterRelease (ray): 2.0 GiB released by 2 of 2 workers" in out
    assert "<ClusterUsage (ray): 2 of 2 workers" in out
