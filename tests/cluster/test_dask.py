"""gpureclaim.cluster.dask on a real distributed.LocalCluster (4 worker
processes) on the simulated driver (2 GPUs of 80 GiB, and a foreign
process, pid 1, holding 3 GiB on GPU 0), with the fake torch and cupy.

Each worker allocates known byte counts, keeps some and drops the rest;
the cluster's figures must be the sums of the workers' own, exactly, per
worker and per GPU, with a GPU shared by three workers counted once.
"""
import asyncio
import json
import logging
import os
import subprocess
import sys
import time
import urllib.request

import distributed
import pytest
import workload
from simenv import (HERE, PY_PATH, GiB, MiB, patched_environ, remove_state,
                    sim_env)
from simenv import sim_state  # noqa: F401  (a fixture)

import gpureclaim.cluster as gcl

SIM = "gpus=2;extra=0:1:3GiB"
UUID = "GPU-5111a000-0000-4000-8000-00000000000{}".format
CONTEXT = 512 * MiB  # the sim's default context size

# Per worker (sorted by address): (framework, device, kept, dropped).
PLANS = [
    [("torch", 0, 24 * MiB, 64 * MiB)],  # not 32 MiB: explain takes a
    # live 32 MiB Torch block for the cuBLAS workspace (Hopper)
    [("cupy", 0, 0, 32 * MiB)],  # shares GPU 0 with workers 0 and 3
    [("cupy", 1, 16 * MiB, 96 * MiB)],
    [("torch", 0, 0, 16 * MiB), ("cupy", 1, 8 * MiB, 48 * MiB)],
]


def start_cluster(state, n=4):
    with patched_environ(sim_env(state, SIM)):
        cluster = distributed.LocalCluster(
            n_workers=n, threads_per_worker=1, processes=True,
            dashboard_address=":0", silence_logs=logging.ERROR,
            preload=[os.path.join(HERE, "sim_preload.py")])
    return cluster, distributed.Client(cluster, set_as_default=False)


@pytest.fixture(scope="module")
def dask_cluster(sim_state):  # noqa: F811
    cluster, client = start_cluster(sim_state)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def addresses(client):
    return sorted(client.nthreads())


def load(client, plans):
    """Runs the plans, one per worker; {address: load() result}."""
    out = {}
    for addr, plan in zip(addresses(client), plans):
        out[addr] = client.run(workload.load, plan, workers=[addr])[addr]
    return out


def dropped(plan, device=None):
    return sum(d for _, dev, _, d in plan if device in (None, dev))


def kept(plan, device=None):
    return sum(k for _, dev, k, _ in plan if device in (None, dev))


@pytest.fixture(scope="module")
def loaded(dask_cluster):
    """The workers after load(PLANS): {address: (plan, figure before)}."""
    got = load(dask_cluster, PLANS)
    return {a: (p, got[a]["figure"]) for a, p in
            zip(addresses(dask_cluster), PLANS)}


def test_release_adds_up_exactly_per_worker_and_per_gpu(dask_cluster, loaded):
    r = gcl.dask.release(dask_cluster)
    assert isinstance(r, gcl.ClusterRelease)
    assert r.failed == [] and len(r.workers) == 4
    after = dask_cluster.run(workload.figure)
    for addr, (plan, before) in loaded.items():
        w = r.worker(addr)
        assert w.status == "ok" and w.source == "driver"
        assert w.released == dropped(plan)
        assert w.pid == dask_cluster.run(workload.pid, workers=[addr])[addr]
        by_dev = {g.device: g for g in w.gpus}
        assert set(by_dev) == set(before)
        for dev, g in by_dev.items():
            assert g.uuid == UUID(dev)
            assert g.before == before[dev]
            assert g.released == dropped(plan, dev)
            assert g.held == before[dev] - dropped(plan, dev) == after[addr][dev]
            assert g.held == CONTEXT + kept(plan, dev)
            assert g.total == 80 * GiB
    assert r.bytes == sum(dropped(p) for p in PLANS)
    # two GPUs, each once, though five (worker, GPU) pairs hold them
    assert [g.uuid for g in r.gpus] == [UUID(0), UUID(1)]
    w = addresses(dask_cluster)
    g0, g1 = r.gpu(UUID(0)), r.gpu(UUID(1))
    assert set(g0.workers) == {w[0], w[1], w[3]} and set(g1.workers) == {w[2], w[3]}
    assert g0.released == sum(dropped(p, 0) for p in PLANS)
    assert g1.released == sum(dropped(p, 1) for p in PLANS)
    for g, dev, users in ((g0, 0, 3), (g1, 1, 2)):
        assert g.held == sum(after[a].get(dev, 0) for a in w)
        assert g.held == users * CONTEXT + sum(kept(p, dev) for p in PLANS)
        assert g.before - g.held == g.released
        assert g.total == 80 * GiB
    # pid 1's 3 GiB counted once. `used` is one reading: the last worker
    # to finish made it at the end of its own release, and the workers
    # release at once, so on a loaded machine another's release may not
    # have landed yet (64 MiB more once, in two make checks side by side)
    for g, dev in ((g0, 0), (g1, 1)):
        extra = 3 * GiB if dev == 0 else 0
        assert g.held + extra <= g.used <= \
            g.held + extra + sum(dropped(p, dev) for p in PLANS)
    assert r.total == 2 * 80 * GiB and r.used == g0.used + g1.used
    (h,) = r.hosts
    assert h.released == r.bytes and h.total == 160 * GiB and len(h.workers) == 4

    d = json.loads(json.dumps(r.to_dict()))
    assert d["totals"]["released"] == r.bytes
    assert d["totals"]["total"] == 160 * GiB
    assert [g["uuid"] for g in d["gpus"]] == [UUID(0), UUID(1)]
    assert sum(x["released"] for x in d["workers"]) == r.bytes
    text = repr(r)
    assert "GiB" in text and "MiB" in text and " GB" not in text
    for a in w:
        assert a in text
    assert '<table class="gpr-tab">' in r._repr_html_()


def test_release_answers_while_tasks_hold_every_worker(dask_cluster, loaded,
                                                       tmp_path):
    # each worker's one thread is held by a task until the flag exists:
    # the release answers meanwhile, and no task can have ended
    flag = str(tmp_path / "go")
    started = [str(tmp_path / f"started-{i}")
               for i in range(len(addresses(dask_cluster)))]
    futures = [dask_cluster.submit(workload.hold, s, flag, workers=[a],
                                   pure=False)
               for s, a in zip(started, addresses(dask_cluster))]
    try:
        assert workload.wait_for_files(started), "the tasks never ran"
        r = gcl.dask.release(dask_cluster)
        held = [not f.done() for f in futures]
    finally:
        open(flag, "w").close()
    dask_cluster.gather(futures)
    assert r.failed == [] and all(held), (r.failed, held)


def test_explain_splits_each_worker_and_sums_per_gpu(dask_cluster, loaded):
    e = gcl.dask.explain(dask_cluster)
    assert isinstance(e, gcl.ClusterExplanation) and e.failed == []
    for addr, (plan, _) in loaded.items():
        w = e.worker(addr)
        for g in w.gpus:
            parts = {p.kind: 0 for p in g.parts}
            for p in g.parts:
                parts[p.kind] += p.bytes
            assert sum(parts.values()) == g.held  # the split is exact
            assert parts["live"] == kept(plan, g.device)
            assert parts["rest"] == CONTEXT
    g0 = e.gpu(UUID(0))
    assert g0.parts["live"] == sum(kept(p, 0) for p in PLANS)
    assert g0.parts["rest"] == 3 * CONTEXT
    assert sum(e.parts.values()) == e.held
    assert e.parts["live"] == sum(kept(p) for p in PLANS)
    assert "cached, releasable" in repr(e)


def test_ps_lists_every_gpu_once_and_the_foreign_process(dask_cluster, loaded):
    u = gcl.dask.ps(dask_cluster)
    assert isinstance(u, gcl.ClusterUsage) and u.failed == []
    assert [g.uuid for g in u.gpus] == [UUID(0), UUID(1)]
    figures = dask_cluster.run(workload.figure)
    for addr, w in ((a, u.worker(a)) for a in addresses(dask_cluster)):
        held = {g.device: g.held for g in w.gpus if g.held}
        assert held == figures[addr]
    g0 = u.gpu(UUID(0))
    assert g0.others == ((1, 3 * GiB),)
    assert g0.used == g0.held + 3 * GiB
    assert u.gpu(UUID(1)).others == ()
    assert u.total == 160 * GiB
    assert "other processes" in repr(u)


def test_workers_argument_and_bad_arguments(dask_cluster, loaded):
    a = addresses(dask_cluster)
    r = gcl.dask.release(dask_cluster, workers=[a[2]], timeout=10)
    assert [w.id for w in r.workers] == [a[2]] and r.bytes == 0
    assert [g.uuid for g in r.gpus] == [UUID(1)]
    r = gcl.dask.release(dask_cluster, workers=a[1])
    assert [w.id for w in r.workers] == [a[1]]
    r = gcl.dask.ps(dask_cluster, workers=[a[0], a[0]])
    assert [w.id for w in r.workers] == [a[0]]
    with pytest.raises(ValueError, match="timeout"):
        gcl.dask.release(dask_cluster, timeout=0)
    with pytest.raises(TypeError, match="worker addresses"):
        gcl.dask.release(dask_cluster, workers=[1])
    with pytest.raises(TypeError, match="distributed.Client"):
        gcl.dask.release(object())
    # a bad value for the release reaches each worker, which says so
    r = gcl.dask.release(dask_cluster, collect="sometimes", workers=a[:2])
    assert [w.status for w in r.workers] == ["error", "error"]
    assert all("collect must be" in w.reason for w in r.workers)


def test_an_asynchronous_client_gets_an_awaitable(dask_cluster, loaded):
    async def go():
        async with distributed.Client(dask_cluster.scheduler.address,
                                      asynchronous=True) as client:
            return await gcl.dask.ps(client, timeout=30)

    u = asyncio.run(go())
    assert isinstance(u, gcl.ClusterUsage) and len(u.ok_workers) == 4
    assert u.held == gcl.dask.ps(dask_cluster).held


def test_metrics_plugin_reports_each_process_own_bytes(dask_cluster, loaded):
    dask_cluster.register_plugin(gcl.dask.GPUMetricsPlugin())
    figures = dask_cluster.run(workload.figure)
    deadline = time.monotonic() + 120  # a hang guard: heartbeats bring them
    while True:
        info = dask_cluster.scheduler_info()["workers"]
        got = {a: info[a]["metrics"].get("gpureclaim_gpus") for a in figures}
        if all(g is not None for g in got.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for addr, fig in figures.items():
        m = info[addr]["metrics"]
        assert m["gpureclaim_gpus"] == {UUID(d): b for d, b in fig.items()}
        assert m["gpureclaim_gpu_bytes"] == sum(fig.values())
    # the sum over workers counts no GPU twice: it is the sim's own total
    # of the workers' processes (pid 1's 3 GiB is not a worker's)
    u = gcl.dask.ps(dask_cluster)
    assert sum(info[a]["metrics"]["gpureclaim_gpu_bytes"] for a in figures) == u.held
    # each worker's own /metrics (distributed's Prometheus route) has the
    # exporter's names for its process: its driver bytes per GPU, and its
    # parts, which add up to them
    from prometheus_client.parser import text_string_to_metric_families

    ports = dask_cluster.run(lambda dask_worker: (
        os.getpid(), dask_worker.http_server.port))
    for addr, fig in figures.items():
        pid, port = ports[addr]
        host = addr.split("://")[1].rsplit(":", 1)[0]
        with urllib.request.urlopen(f"http://{host}:{port}/metrics",
                                    timeout=30) as r:
            text = r.read().decode()
        samples = [s for f in text_string_to_metric_families(text)
                   for s in f.samples if s.name.startswith("gpureclaim_")]
        held = {s.labels["uuid"]: s.value for s in samples
                if s.name == "gpureclaim_process_memory_bytes"}
        assert held == {UUID(d): b for d, b in fig.items()}
        assert {s.labels["pid"] for s in samples} == {str(pid)}
        for uuid, b in held.items():
            assert sum(s.value for s in samples if s.labels["uuid"] == uuid
                       and s.name == "gpureclaim_process_part_bytes") == b
    dask_cluster.unregister_worker_plugin(gcl.dask.GPUMetricsPlugin.name)


def cli(*args, timeout=120):
    env = dict(os.environ, PYTHONPATH=PY_PATH)
    return subprocess.run([sys.executable, "-m", "gpureclaim", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_command_line_ps_and_release(dask_cluster, loaded):
    addr = dask_cluster.scheduler.address
    p = cli("ps", "--dask", addr, "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["kind"] == "ps" and d["failed"] == []
    assert [g["uuid"] for g in d["gpus"]] == [UUID(0), UUID(1)]
    assert d["totals"]["total"] == 160 * GiB
    assert d["totals"]["held"] == gcl.dask.ps(dask_cluster).held
    p = cli("ps", "--dask", addr)
    assert p.returncode == 0 and UUID(0) in p.stdout and "GiB" in p.stdout
    p = cli("release", "--dask", addr, "--collect", "never", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["totals"]["answered"] == 4
    p = cli("explain", "--dask", addr, "--workers", addresses(dask_cluster)[0])
    assert p.returncode == 0 and "live" in p.stdout
    p = cli("ps", "--dask", "tcp://127.0.0.1:9", "--timeout", "1")
    assert p.returncode == 1 and "cannot reach the Dask scheduler" in p.stderr
    # release's forms: --pid (an agent's process, docs/agent.md) and --dask
    p = cli("release")
    assert p.returncode == 2 and "--dask" in p.stderr and "--pid" in p.stderr
    p = cli("release", "--help")
    assert p.returncode == 0 and "EXAMPLES:" in p.stdout
    assert p.stdout.startswith("USAGE: gpureclaim release --pid N")
    assert "\n       gpureclaim release --dask ADDRESS" in p.stdout


def test_failed_timed_out_and_killed_workers_never_hide_the_others(tmp_path):
    state = "cluster-fail-" + os.urandom(6).hex()
    flag = str(tmp_path / "unblock")
    cluster, client = start_cluster(state)
    try:
        a = addresses(client)
        load(client, [[("cupy", 0, 0, 64 * MiB)], [("cupy", 0, 0, 32 * MiB)],
                      [("cupy", 1, 0, 32 * MiB)], [("torch", 1, 0, 32 * MiB)]])
        client.run(workload.make_release_raise, workers=[a[1]])
        client.run(workload.make_release_hang, flag, workers=[a[2]])
        client.run(workload.make_release_kill, workers=[a[3]])
        # the hanging worker is waited for 10 s (the others answer within
        # that time on any machine this suite runs on); it waits for a
        # flag set only at the end, so its "timeout" is certain
        t0 = time.monotonic()
        r = gcl.dask.release(client, timeout=10)
        took = time.monotonic() - t0
        assert took >= 10  # the timeout was waited for, no more is looked at
        st = {w.id: w for w in r.workers}
        assert st[a[0]].status == "ok" and st[a[0]].released == 64 * MiB
        assert st[a[1]].status == "error" and "simulated" in st[a[1]].reason
        assert st[a[2]].status == "timeout" and "10 s" in st[a[2]].reason
        assert st[a[3]].status == "dead" and "connection" in st[a[3]].reason
        assert r.bytes == 64 * MiB
        assert {w.id for w in r.failed} == set(a[1:])
        assert [g.uuid for g in r.gpus] == [UUID(0)]
        assert r.gpu(UUID(0)).released == 64 * MiB
        text = repr(r)
        assert "workers without a report" in text and "timeout" in text
        # the killed worker's old address, asked for by name
        deadline = time.monotonic() + 30
        while a[3] in client.nthreads() and time.monotonic() < deadline:
            time.sleep(0.2)
        r = gcl.dask.release(client, workers=[a[0], a[3]], timeout=30)
        assert r.worker(a[0]).status == "ok"
        assert r.worker(a[3]).status == "dead"
        assert "not a worker of this scheduler" in r.worker(a[3]).reason
        # a worker where gpureclaim cannot be imported: the call fails while
        # the worker unpickles it, and says so
        client.run(workload.hide_module, "gpureclaim.cluster._records",
                   workers=[a[0]])
        r = gcl.dask.release(client, workers=[a[0]], timeout=10)
        assert r.worker(a[0]).status == "error"
        assert "gpureclaim.cluster._records" in r.worker(a[0]).reason
    finally:
        open(flag, "w").close()
        client.close()
        cluster.close(timeout=20)
        remove_state(state)
