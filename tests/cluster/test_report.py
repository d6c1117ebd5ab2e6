"""The cluster reports without an engine: records put together by hand,
and a worker's own record on the simulated driver in a fresh interpreter
that must import no engine (dask, distributed, ray, torch)."""
import json
import os
import subprocess
import sys
import uuid

from simenv import FAKES, GiB, MiB, remove_state, sim_env

from gpureclaim import format_bytes
from gpureclaim.cluster import ClusterExplanation, ClusterRelease
from gpureclaim.cluster._records import Worker, WorkerGPU, WorkerPart, failure


def gpu(uuid, held, before=None, released=None, device=0, parts=()):
    return WorkerGPU(uuid=uuid, name="G", device=device, nvml_index=0,
                     held=held, used=10 * GiB, total=80 * GiB, before=before,
                     released=released, parts=parts)


def worker(id, pid, gpus, finished, host="h1"):
    return Worker(kind="release", id=id, host=host, pid=pid, status="ok",
                  reason="", released=sum(g.released or 0 for g in gpus),
                  source="driver", seconds=0.001, finished=finished,
                  gpus=tuple(gpus), notes=())


def test_figures_are_binary_by_the_one_formatter():
    assert format_bytes(3 * GiB // 2) == "1.5 GiB"
    assert format_bytes(512 * MiB) == "512.0 MiB"
    assert format_bytes(4096) == "4.0 KiB"
    assert format_bytes(12) == "12 B"
    assert format_bytes(-64 * MiB) == "-64.0 MiB"
    assert format_bytes(None) == "-"


def test_one_process_serving_two_workers_counts_once():
    # Dask's processes=False: two workers, one pid; the first release
    # returned 64 MiB, the second found nothing left
    a = worker("w1", 7, [gpu("GPU-a", 600 * MiB, 664 * MiB, 64 * MiB)], 1.0)
    b = worker("w2", 7, [gpu("GPU-a", 600 * MiB, 600 * MiB, 0)], 2.0)
    c = worker("w3", 8, [gpu("GPU-a", 512 * MiB, 576 * MiB, 64 * MiB)], 1.5)
    r = ClusterRelease([a, b, c], engine="test", seconds=0.01)
    (g,) = r.gpus
    assert g.held == 1112 * MiB and g.before == 1240 * MiB
    assert g.released == 128 * MiB == g.before - g.held == r.bytes
    assert g.total == 80 * GiB and r.total == 80 * GiB
    assert any("share one process" in n for n in r.notes)


def test_gpus_without_uuid_are_kept_apart_and_failures_listed():
    a = worker("w1", 7, [gpu(None, 600 * MiB, 664 * MiB, 64 * MiB)], 1.0)
    b = worker("w2", 8, [gpu(None, 600 * MiB, 632 * MiB, 32 * MiB)], 1.0)
    dead = failure("release", "w3", "dead", "the connection broke")
    r = ClusterRelease([dead, a, b], engine="test", seconds=0.01)
    assert [g.key for g in r.gpus] == ["h1/pid 7/cuda:0", "h1/pid 8/cuda:0"]
    assert r.bytes == 96 * MiB and [w.id for w in r.failed] == ["w3"]
    assert [w.id for w in r.workers] == ["w1", "w2", "w3"]
    text = repr(r)
    assert "workers without a report" in text and "the connection broke" in text
    d = json.loads(json.dumps(r.to_dict()))
    assert d["failed"] == ["w3"] and d["totals"]["answered"] == 2
    html = r._repr_html_()
    assert html.count("<table ") == 4 and "<w" not in html


def test_explanation_sums_parts_per_gpu_and_html_escapes():
    parts = (WorkerPart("live", "torch", 8 * MiB, True),
             WorkerPart("releasable", "torch", 4 * MiB, True),
             WorkerPart("workspace", "cuBLAS", 0, False),
             WorkerPart("rest", "context", 512 * MiB, True))
    ws = [Worker(kind="explain", id=f"<w{i}>", host="h", pid=i, status="ok",
                 reason="", released=None, source="driver", seconds=0.0,
                 finished=float(i), notes=("a <note>",),
                 gpus=(gpu("GPU-a", 524 * MiB, parts=parts),))
          for i in range(2)]
    e = ClusterExplanation(ws, engine="test", seconds=0.0)
    assert e.gpu("GPU-a").parts["live"] == 16 * MiB
    assert e.parts["rest"] == 1024 * MiB and e.held == 1048 * MiB
    assert "<w0>: a <note>" in e.notes
    assert "&lt;w0&gt;" in e._repr_html_() and "<w0>" not in e._repr_html_()


def test_a_worker_record_imports_no_engine(tmp_path):
    state = "noimport-" + uuid.uuid4().hex[:8]
    code = """
import sys, json
import gpureclaim
import cupy
keep = cupy.empty(64 << 20, dtype=cupy.uint8)
drop = cupy.empty(32 << 20, dtype=cupy.uint8)
del drop
gc = gpureclaim.cluster  # loaded on first use
from gpureclaim.cluster import _records, _report, dask, ray, torch
recs = [_records.with_id(_records.run(k), "me") for k in ("release", "explain", "ps")]
reps = [_report.build(r.kind, [r], engine="local", seconds=0.0) for r in recs]
text = "".join(repr(r) + r._repr_html_() + json.dumps(r.to_dict()) for r in reps)
try:
    dask.release(object())
except TypeError:
    pass
engines = sorted(m for m in ("dask", "distributed", "ray", "torch") if m in sys.modules)
print(json.dumps({"engines": engines, "released": reps[0].bytes,
                  "kinds": [r.kind for r in recs], "status": [r.status for r in recs]}))
"""
    env = dict(os.environ, **sim_env(state, "gpus=1", FAKES))
    try:
        p = subprocess.run([sys.executable, "-c", code], env=env,
                           capture_output=True, text=True, timeout=120)
    finally:
        remove_state(state)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout.splitlines()[-1])
    assert d["engines"] == []
    assert d["released"] == 32 * MiB
    assert d["status"] == ["ok", "ok", "ok"]
