"""gpureclaim.cluster.ray on a local Ray (2 CPUs, as CI has): actors on
the simulated driver (2 GPUs) with the fake torch and cupy, reached
through their handles and through their placement group (State API)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid

from simenv import HERE, MiB, remove_state, sim_env

UUID = "GPU-5111a000-0000-4000-8000-00000000000{}".format
CONTEXT = 512 * MiB


def test_ray_actors_and_placement_group():
    state = "ray-" + uuid.uuid4().hex[:12]
    env = dict(os.environ, **sim_env(state, "gpus=2"))
    # Ray's socket paths must stay under 108 bytes: a short folder
    tmp = tempfile.mkdtemp(prefix="gpr-ray-")
    env.update(RAY_TMPDIR=tmp, RAY_USAGE_STATS_ENABLED="0",
               RAY_AUTH_MODE="disabled", GPR_RAY_SCRATCH=tmp)
    try:
        p = subprocess.run([sys.executable, os.path.join(HERE, "ray_driver.py")],
                           env=env, capture_output=True, text=True, timeout=300)
    finally:
        remove_state(state)
        shutil.rmtree(tmp, ignore_errors=True)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert p.returncode == 0 and lines, p.stdout[-3000:] + p.stderr[-5000:]
    out = json.loads(lines[0][7:])
    ids = out["actor_ids"]
    drops = [{"0": 64 * MiB}, {"0": 32 * MiB, "1": 48 * MiB}]

    d = out["release"]
    assert d["engine"] == "ray" and d["failed"] == []
    ws = {w["id"]: w for w in d["workers"]}
    assert set(ws) == set(ids)
    for i, aid in enumerate(ids):
        w = ws[aid]
        assert w["pid"] == out["pids"][i]
        assert w["released"] == sum(drops[i].values())
        for g in w["gpus"]:
            dev = str(g["device"])
            assert g["before"] == out["before"][i][dev]
            assert g["held"] == out["after"][i][dev]
            assert g["before"] - g["held"] == drops[i][dev]
    gpus = {g["uuid"]: g for g in d["gpus"]}
    assert list(gpus) == [UUID(0), UUID(1)]
    assert sorted(gpus[UUID(0)]["workers"]) == sorted(ids)  # shared, once
    assert gpus[UUID(0)]["released"] == 96 * MiB
    assert gpus[UUID(0)]["held"] == 2 * CONTEXT + 8 * MiB
    assert d["totals"]["released"] == 144 * MiB
    assert "MiB" in out["repr"]

    e = out["explain"]
    assert e["totals"]["parts"]["live"] == 24 * MiB
    assert e["totals"]["parts"]["rest"] == 3 * CONTEXT

    # the placement group: both named actors answer, the unnamed one is
    # listed (Ray gives no handle for it)
    u = out["pg_ps"]
    answered = {w["id"] for w in u["workers"] if w["status"] == "ok"}
    assert answered == set(ids)
    (unnamed,) = [w for w in u["workers"] if w["status"] != "ok"]
    assert "unnamed actor" in unnamed["reason"]

    f = out["faults"]
    fw = {w["id"]: w for w in f["workers"]}
    assert fw[ids[0]]["status"] == "ok" and fw[ids[0]]["released"] == 16 * MiB
    assert fw[ids[1]]["status"] == "timeout"
    (dead,) = [w for w in f["workers"] if w["id"] not in ids]
    assert dead["status"] == "dead"
    assert f["totals"]["released"] == 16 * MiB
    # the busy actor was waited for its whole timeout; no upper bound:
    # how much longer the rest took depends on the machine
    assert out["faults_seconds"] >= 10
