"""gpureclaim.cluster.torch with real torch.distributed: 2-3 spawned ranks
on the gloo backend (the CPU torch), GPU figures from the simulated
driver (2 GPUs) through the fake cupy. Each rank allocates and drops known
byte counts; every rank's aggregate must be the sums of the ranks' own
figures, exactly, with a GPU shared by two ranks counted once."""
import json
import os
import socket
import subprocess
import sys
import uuid

from simenv import HERE, GiB, MiB, cupy_only_fakes, remove_state, sim_env

UUID = "GPU-5111a000-0000-4000-8000-00000000000{}".format
CONTEXT = 512 * MiB

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_world(tmp_path, n, steps, pg_timeout=30, kill_after=None):
    """Runs n ranks; {rank: [results...]} and {rank: returncode}."""
    state = "torch-" + uuid.uuid4().hex[:12]
    env = dict(os.environ, **sim_env(state, "gpus=2",
                                     cupy_only_fakes(str(tmp_path / "fakes"))))
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               WORLD_SIZE=str(n), GPR_PG_TIMEOUT=str(pg_timeout))
    procs = [subprocess.Popen(
        [sys.executable, os.path.join(HERE, "torch_rank.py"),
         json.dumps(steps)], env=dict(env, RANK=str(r)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for r in range(n)]
    out, codes = {}, {}
    try:
        for r, p in enumerate(procs):
            timeout = 120 if kill_after is None or r not in kill_after else 5
            try:
                so, se = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                so, se = p.communicate()
            codes[r] = p.returncode
            out[r] = [json.loads(line[7:]) for line in so.splitlines()
                      if line.startswith("RESULT ")]
            if codes[r] not in (0, -9) and kill_after is None:
                raise AssertionError(f"rank {r} failed:\n{so}\n{se}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        remove_state(state)
    return out, codes


def per_rank(d):
    return {w["id"]: w for w in d["workers"]}


def test_all_ranks_get_the_exact_aggregate_and_a_raising_rank_is_listed(tmp_path):
    plan = {"0": [["cupy", 0, 8 * MiB, 64 * MiB]],
            "1": [["cupy", 0, 0, 32 * MiB]],  # shares GPU 0 with rank 0
            "2": [["cupy", 1, 16 * MiB, 48 * MiB]]}
    drops = {0: 64 * MiB, 1: 32 * MiB, 2: 48 * MiB}
    keeps = {0: 8 * MiB, 1: 0, 2: 16 * MiB}
    steps = [["load", plan], ["release", {}], ["explain", {"dst": 1}],
             ["ps", {}],
             ["load", {"0": [["cupy", 0, 0, 16 * MiB]],
                       "2": [["cupy", 1, 0, 8 * MiB]]}],
             ["misbehave", {"1": "raise"}], ["release", {}]]
    out, _ = run_world(tmp_path, 3, steps)
    reports = [out[r][0]["report"] for r in range(3)]
    assert reports[0]["workers"] == reports[1]["workers"] == reports[2]["workers"]
    for r in range(3):
        d = reports[r]
        assert d["engine"] == "torch.distributed" and d["failed"] == []
        assert d["totals"]["released"] == sum(drops.values())
        ranks = per_rank(d)
        for k in range(3):
            w = ranks[f"rank {k}"]
            res = out[k][0]
            assert w["status"] == "ok" and w["pid"] == res["pid"]
            assert w["released"] == drops[k]
            (g,) = w["gpus"]
            dev = str(g["device"])
            assert g["before"] == res["figure_before"][dev]
            assert g["held"] == res["figure_after"][dev] == CONTEXT + keeps[k]
            assert g["before"] - g["held"] == drops[k]
        gpus = {g["uuid"]: g for g in d["gpus"]}
        assert list(gpus) == [UUID(0), UUID(1)]
        assert sorted(gpus[UUID(0)]["workers"]) == ["rank 0", "rank 1"]
        assert gpus[UUID(0)]["released"] == drops[0] + drops[1]
        assert gpus[UUID(0)]["held"] == 2 * CONTEXT + keeps[0]
        assert gpus[UUID(0)]["used"] == gpus[UUID(0)]["held"]
        assert gpus[UUID(1)]["released"] == drops[2]
        assert d["totals"]["total"] == 2 * 80 * GiB
    assert "MiB" in out[0][0]["repr"]
    # explain with dst=1: rank 1 alone gets the report
    assert out[0][1]["report"] is None and out[2][1]["report"] is None
    e = out[1][1]["report"]
    assert e["kind"] == "explain"
    assert e["totals"]["parts"]["live"] == sum(keeps.values())
    assert e["totals"]["parts"]["rest"] == 3 * CONTEXT
    # ps: both GPUs, every rank's bytes
    u = out[2][2]["report"]
    assert [g["uuid"] for g in u["gpus"]] == [UUID(0), UUID(1)]
    assert u["totals"]["held"] == 3 * CONTEXT + sum(keeps.values())
    # rank 1's release raises: it is listed, the others' bytes are exact
    d = out[0][3]["report"]
    ranks = per_rank(d)
    assert ranks["rank 1"]["status"] == "error"
    assert "simulated" in ranks["rank 1"]["reason"]
    assert ranks["rank 0"]["released"] == 16 * MiB
    assert ranks["rank 2"]["released"] == 8 * MiB
    assert d["totals"]["released"] == 24 * MiB and d["failed"] == ["rank 1"]


def test_a_killed_rank_breaks_only_the_gather(tmp_path):
    # rank 2 dies inside its release: the others' all-gather fails, and
    # each returns its own exact record with the others listed
    plan = {"0": [["cupy", 0, 0, 64 * MiB]], "1": [["cupy", 0, 0, 32 * MiB]],
            "2": [["cupy", 1, 0, 16 * MiB]]}
    steps = [["load", plan], ["misbehave", {"2": "kill"}], ["release", {}]]
    out, codes = run_world(tmp_path, 3, steps, pg_timeout=20, kill_after={2})
    assert codes[2] == -9
    for r, drop in ((0, 64 * MiB), (1, 32 * MiB)):
        (res,) = out[r]
        d = res["report"]
        ranks = per_rank(d)
        assert ranks[f"rank {r}"]["status"] == "ok"
        assert ranks[f"rank {r}"]["released"] == drop == d["totals"]["released"]
        failed = sorted(w for w in ranks if w != f"rank {r}")
        assert sorted(d["failed"]) == failed
        assert all("all-gather failed" in ranks[w]["reason"] for w in failed)


def test_a_hanging_rank_is_listed_after_the_process_group_timeout(tmp_path):
    plan = {"0": [["cupy", 0, 0, 64 * MiB]], "1": [["cupy", 1, 0, 32 * MiB]]}
    flag = str(tmp_path / "never")
    steps = [["load", plan], ["misbehave", {"1": "hang:" + flag}],
             ["release", {}]]
    out, codes = run_world(tmp_path, 2, steps, pg_timeout=3, kill_after={1})
    (res,) = out[0]
    d = res["report"]
    ranks = per_rank(d)
    assert ranks["rank 0"]["released"] == 64 * MiB == d["totals"]["released"]
    assert d["failed"] == ["rank 1"] and "Timed out" in ranks["rank 1"]["reason"]
    assert d["seconds"] >= 3
