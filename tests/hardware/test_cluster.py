"""gpureclaim.cluster on two GPUs with real Torch and CuPy (GPU machine with
2 or more GPUs; skips with fewer, without Torch/CuPy, or, for Dask, without
distributed: `bash scripts/gpu-check.sh hw-cluster` installs it from .whl/,
which `bash scripts/gpu-wheels.sh` fills where PyPI can be reached).

- Dask: two workers, one per GPU (dask-cuda style: each worker's Nanny sets
  CUDA_VISIBLE_DEVICES, so both see their GPU as cuda:0), the seed scenario
  (a 1 GiB Torch tensor in a reference cycle and a 1 GiB CuPy array,
  dropped) on each; gpureclaim.cluster.dask.release returns each worker's
  own exact figure (2 GiB, the drop its process measures itself) and their
  sum; the two GPUs are told apart by UUID (nvidia-smi's), each once; ps
  lists them with each worker on its own GPU.
- torch.distributed: `torchrun --standalone --nproc-per-node 2` with NCCL,
  the seed scenario on each rank, gpureclaim.cluster.torch.release() on
  every rank: the same checks on both ranks' reports.

Every child runs with NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1
(this machine's NVLink multicast is off limits) and
CUDA_DEVICE_ORDER=PCI_BUS_ID (CUDA ordinals are nvidia-smi's indices).
The package: $GPURECLAIM_PYTHONPATH (default build/python). `pytest -s`
prints the reports.
"""
import json
import logging
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
PKG = os.environ.get("GPURECLAIM_PYTHONPATH", str(ROOT / "build/python"))
GiB = 1 << 30
MiB = 1 << 20
CHILD_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
             "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
for p in (PKG, str(HERE)):  # the Dask workers inherit this sys.path
    if p not in sys.path:
        sys.path.insert(0, p)


def _env():
    env = dict(os.environ, **CHILD_ENV)
    env["PYTHONPATH"] = os.pathsep.join(
        [PKG, str(HERE)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def _has(cmd):
    return subprocess.run([sys.executable, "-c", cmd], env=_env(),
                          capture_output=True).returncode == 0


def smi_gpus():
    """[(index, uuid, total bytes)] from nvidia-smi, [] without one."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,memory.total",
                            "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if r.returncode != 0:
        return []
    out = []
    for line in r.stdout.splitlines():
        i, u, m = (f.strip() for f in line.split(","))
        out.append((int(i), u, int(m) * MiB))
    return out


GPUS = smi_gpus()
pytestmark = [
    pytest.mark.skipif(len(GPUS) < 2, reason=f"needs 2 NVIDIA GPUs, nvidia-smi lists {len(GPUS)}"),
    pytest.mark.skipif(
        len(GPUS) >= 2 and not _has("import torch, cupy; assert torch.cuda.device_count() >= 2"),
        reason="torch with CUDA on 2 GPUs and cupy needed"),
]


def show(title, report_text):
    print(f"\n{title}\n{report_text}")


def check_two_gpus(d, seeds):
    """The checks both engines share. d: the report's to_dict(); seeds:
    {worker id: (seed result, its figure before the call, after)}."""
    assert d["failed"] == [], d["workers"]
    ws = {w["id"]: w for w in d["workers"]}
    assert set(ws) == set(seeds)
    for wid, (s, before, after) in seeds.items():
        w = ws[wid]
        assert w["pid"] == s["pid"] and w["source"] == "driver", w
        assert s["held"] == 2 * GiB, s  # the scenario put 2 GiB on the driver
        (g,) = w["gpus"]
        assert g["before"] == before, (g, before)
        assert w["released"] == g["released"] == 2 * GiB, w
        assert g["before"] - g["held"] == 2 * GiB
        # the object gather after the measurement may leave a Torch block
        assert 0 <= after - g["held"] <= 64 * MiB, (g, after)
    assert d["totals"]["released"] == sum(w["released"] for w in ws.values()) == 4 * GiB
    smi = {u: (i, total) for i, u, total in GPUS}
    uuids = [g["uuid"] for g in d["gpus"]]
    assert len(uuids) == 2 and set(uuids) <= set(smi), (uuids, smi)
    for g in d["gpus"]:
        assert len(g["workers"]) == 1, g
        assert g["released"] == 2 * GiB, g
        # NVML's total, as nvidia-smi rounds it to MiB (v2 memory info may
        # differ by the driver's reserve: 2% covers it)
        smi_total = smi[g["uuid"]][1]
        assert abs(g["total"] - smi_total) <= smi_total // 50, (g, smi_total)
    assert d["totals"]["total"] == sum(g["total"] for g in d["gpus"])


@pytest.mark.skipif(not _has("import distributed"),
                    reason="distributed missing: bash scripts/gpu-check.sh hw-cluster "
                    "installs it from .whl/ (bash scripts/gpu-wheels.sh)")
def test_dask_one_worker_per_gpu():
    from distributed import Client, Nanny, Scheduler, SpecCluster

    import cluster_seed
    import gpureclaim.cluster as gcl

    workers = {f"gpu{i}": {"cls": Nanny, "options": {
        "nthreads": 1, "host": "127.0.0.1",
        "env": dict(CHILD_ENV, CUDA_VISIBLE_DEVICES=str(i))}} for i in range(2)}
    cluster = SpecCluster(
        workers=workers, silence_logs=logging.ERROR,
        scheduler={"cls": Scheduler, "options": {
            "host": "127.0.0.1", "dashboard_address": ":0"}})
    client = Client(cluster, set_as_default=False)
    try:
        client.wait_for_workers(2, timeout=120)
        seeds = client.run(cluster_seed.seed, 0)
        before = client.run(cluster_seed.figure, 0)
        r = gcl.dask.release(client, timeout=120)
        after = client.run(cluster_seed.figure, 0)
        show("Dask, one worker per GPU", r)
        d = r.to_dict()
        check_two_gpus(d, {a: (seeds[a], before[a], after[a]) for a in seeds})
        assert sorted(s["visible"] for s in seeds.values()) == ["0", "1"]
        # each worker sees its GPU as cuda:0; the UUIDs tell them apart
        by_visible = {seeds[w["id"]]["visible"]: w for w in d["workers"]}
        for i, u, _ in GPUS[:2]:
            (g,) = by_visible[str(i)]["gpus"]
            assert g["device"] == 0 and g["uuid"] == u, (i, g)
        u = gcl.dask.ps(client, timeout=120)
        show("Dask ps", u)
        assert u.failed == []
        for i, uuid, _ in GPUS[:2]:
            g = u.gpu(uuid)
            (wid,) = g.workers
            assert seeds[wid]["visible"] == str(i)
            assert g.held == after[wid]
        e = gcl.dask.explain(client, timeout=120)
        show("Dask explain", e)
        assert e.failed == [] and e.held == sum(after.values())
    finally:
        client.close()
        cluster.close(timeout=60)


def test_torchrun_nccl_two_ranks(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone",
         "--nproc-per-node", "2", str(HERE / "cluster_rank.py")],
        env=dict(_env(), GPR_RESULT_DIR=str(tmp_path)), capture_output=True,
        text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-8000:]
    res = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in (0, 1)]
    assert res[0]["report"]["workers"] == res[1]["report"]["workers"]
    show("torchrun, rank 0's report", res[0]["text"])
    seeds = {f"rank {r['rank']}": (r["seed"], r["before"], r["after"]) for r in res}
    for r in res:
        d = r["report"]
        print(f"\ntorchrun rank {r['rank']}: {json.dumps(d['totals'])}")
        check_two_gpus(d, seeds)
    # rank r uses CUDA ordinal r, that is nvidia-smi's index r
    ws = {w["id"]: w for w in res[0]["report"]["workers"]}
    for i, u, _ in GPUS[:2]:
        (g,) = ws[f"rank {i}"]["gpus"]
        assert g["device"] == i and g["uuid"] == u
