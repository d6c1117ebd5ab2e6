"""Out-of-memory post-mortems and the rescue (docs/oom.md), on the simulated
driver with 8 GiB GPUs (its `memory=` makes OOM reachable) and the fakes,
which raise each framework's own error as the framework does: Torch's
allocator returns its cache, retries, calls its observers with its lock
released and raises torch.OutOfMemoryError; CuPy's pool empties itself,
collects, retries twice and raises cupy.cuda.memory.OutOfMemoryError;
JAX raises JaxRuntimeError("RESOURCE_EXHAUSTED: ...") beyond its pool."""
import json
import os
import re
import stat
import sys

import pytest

GiB = 1 << 30
MiB = 1 << 20
CONTEXT = 512 * MiB
SIM = "gpus=1;memory=8GiB"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# CuPy caches 5 GiB of dropped arrays; Torch then asks for 4 GiB: 2.5 GiB
# free (8 - 0.5 context - 5), release() would return the 5 GiB.
CUPY_STARVES_TORCH = """
import torch, cupy
a = cupy.empty(5 << 30, dtype=cupy.uint8); del a
"""


def pm_of(r, d):
    """The one post-mortem file of a scenario in folder d, parsed."""
    files = sorted(f for f in os.listdir(d) if f.endswith(".json"))
    assert len(files) == 1, files
    path = os.path.join(d, files[0])
    raw = open(path).read()
    return path, raw, json.loads(raw)


def test_torch_oom_post_mortem_has_the_exact_figures(scenario, tmp_path):
    r = scenario(CUPY_STARVES_TORCH + """
import gc, stat
import gpureclaim.oom._postmortem as pm_mod
# without the watch: Torch's own error, to compare with
try:
    torch.empty(4 << 30, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError as e:
    plain = (type(e).__name__, str(e))
a = cupy.empty(5 << 30, dtype=cupy.uint8); del a
seen = []
builder = pm_mod._build
collections = []
gc.callbacks.append(lambda phase, info: collections.append(phase))

def spy(*args):
    seen.append(gc.isenabled())
    n = len(collections)
    out = builder(*args)
    seen.append(len(collections) - n)
    return out

pm_mod._build = spy
gc.set_threshold(1)  # a collection at nearly every allocation, if enabled
gpureclaim.watch_oom(os.environ["OUT"])
gpureclaim.watch_oom(os.environ["OUT"])  # idempotent: one observer
observed = list(torch._C.oom_observers)
try:
    torch.empty(4 << 30, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError as e:
    watched = (type(e).__name__, str(e))
gc.set_threshold(700)
pm = gpureclaim.oom.last()
# the advice, followed: release(), and the same allocation succeeds
r = gpureclaim.release()
t = torch.empty(4 << 30, dtype=torch.uint8, device="cuda")
emit(dict(plain=plain, watched=watched, seen=seen, observers=len(observed),
          doc=pm.to_dict(), path=pm.path, released=r.bytes,
          mode=stat.S_IMODE(os.stat(pm.path).st_mode), short=pm.short(),
          gc_enabled=gc.isenabled()))
""", sim=SIM, env={"OUT": str(tmp_path)})
    assert r["watched"] == r["plain"]  # the user's exception, unchanged
    assert r["watched"][0] == "OutOfMemoryError"
    assert r["observers"] == 1
    assert r["seen"] == [False, 0]  # no collection while it was made
    assert r["gc_enabled"] is True
    d = r["doc"]
    assert d["format"] == "gpureclaim-oom" and d["version"] == 1
    assert d["framework"] == "torch"
    assert d["request"] == {"bytes": 4 * GiB, "exact": True, "device": 0,
                            "requested": None}
    free = 8 * GiB - CONTEXT - 5 * GiB
    assert d["framework_figures"] == {"device_total": 8 * GiB,
                                      "device_free": free}
    assert d["gpu"]["total"] == 8 * GiB and d["gpu"]["free"] == free
    assert d["gpu"]["used"] == CONTEXT + 5 * GiB
    p = d["process"]
    assert p["driver"] == CONTEXT + 5 * GiB and p["source"] == "driver"
    parts = {(x["kind"], x["source"]): x["bytes"] for x in p["parts"]
             if x["known"] and x["bytes"]}
    assert parts == {("releasable", "cupy"): 5 * GiB,
                     ("rest", "context, modules, unreported"): CONTEXT}
    assert sum(x["bytes"] for x in p["parts"] if x["known"]) == p["driver"]
    rel = d["release"]
    # releasable, and its key before beside it (docs/naming.md)
    assert rel["releasable"] == rel["returnable"] == 5 * GiB
    assert rel["by"] == [{"source": "cupy", "bytes": 5 * GiB}]
    assert rel["free_after"] == free + 5 * GiB and rel["fits"] is True
    assert rel["short"] == 0
    assert [a["key"] for a in d["advice"]] == ["release"]
    assert d["others"] == [] and d["unlisted"] == 0
    assert d["rescue"] == [] and d["trace"] is None
    assert "release() would release 5.0 GiB (CuPy's cache); 4.0 GiB would " \
           "then fit (7.5 GiB free)" in r["short"]
    assert r["released"] == 5 * GiB  # and then the allocation succeeded
    # the file: exact bytes, private, named gpureclaim-oom-<pid>-1.json
    path, raw, doc = pm_of(r, tmp_path)
    assert path == r["path"]
    assert re.fullmatch(r"gpureclaim-oom-\d+-1\.json", os.path.basename(path))
    assert raw.startswith('{\n "format": "gpureclaim-oom",')
    assert doc == d
    assert r["mode"] == 0o600
    # one screen
    assert len(r["short"].splitlines()) <= 24


# Torch caches 5 GiB (a dropped tensor); CuPy then asks for 4 GiB.
TORCH_STARVES_CUPY = """
import torch, cupy
t = torch.empty(5 << 30, dtype=torch.uint8, device="cuda"); del t
calls = []
pool_malloc = cupy.get_default_memory_pool().malloc

def counting(size):  # the program's own allocator, under the guard
    calls.append(size)
    return pool_malloc(size)

cupy.cuda.set_allocator(counting)
"""


def test_cupy_oom_is_caught_and_raised_unchanged(scenario, tmp_path):
    r = scenario(TORCH_STARVES_CUPY + """
gpureclaim.watch_oom(os.environ["OUT"])
try:
    cupy.empty(4 << 30, dtype=cupy.uint8)
except cupy.cuda.memory.OutOfMemoryError as e:
    err = (type(e).__module__, type(e).__name__, str(e))
pm = gpureclaim.oom.last()
emit(dict(err=err, doc=pm.to_dict(), calls=len(calls)))
""", sim=SIM, env={"OUT": str(tmp_path)})
    assert r["err"] == ["cupy.cuda.memory", "OutOfMemoryError",
                        "Out of memory allocating 4,294,967,296 bytes "
                        "(allocated so far: 0 bytes)."]
    assert r["calls"] == 1  # no rescue: the allocator ran once
    d = r["doc"]
    assert d["framework"] == "cupy"
    assert d["request"] == {"bytes": 4 * GiB, "exact": True, "device": 0,
                            "requested": 4 * GiB}
    assert d["error"].startswith("OutOfMemoryError: Out of memory allocating")
    rel = d["release"]
    assert rel["by"] == [{"source": "torch", "bytes": 5 * GiB}]
    assert rel["fits"] is True
    assert [a["key"] for a in d["advice"]] == ["release"]
    assert "watch_oom(rescue=True)" in d["advice"][0]["text"]
    assert pm_of(r, tmp_path)[2] == d


def test_cupy_rescue_retries_once_and_the_program_sees_no_error(
        scenario, tmp_path):
    r = scenario(TORCH_STARVES_CUPY + """
gpureclaim.watch_oom(os.environ["OUT"], rescue=True)
a = cupy.empty(4 << 30, dtype=cupy.uint8)  # no error
ok = dict(calls=len(calls), doc=gpureclaim.oom.last().to_dict(),
          nvml=gpureclaim.process_memory()[0])
# too large for any release: the retry fails, the first error is raised
calls.clear()
try:
    cupy.empty(9 << 30, dtype=cupy.uint8)
except cupy.cuda.memory.OutOfMemoryError as e:
    err = str(e)
emit(dict(ok=ok, err=err, calls=len(calls), doc=gpureclaim.oom.last().to_dict()))
""", sim=SIM, env={"OUT": str(tmp_path)})
    ok = r["ok"]
    assert ok["calls"] == 2  # the failed call and one retry
    # the rescued one in a line; the one it could not rescue in full
    lines = r.stderr.splitlines()
    assert lines[0].startswith(
        "gpureclaim: cupy ran out of GPU memory; watch_oom(rescue=True) "
        "released 5.0 GiB and the allocation succeeded on its second try "
        f"(post-mortem: {tmp_path}/"), lines
    assert lines[1] == "gpureclaim: out of memory", lines
    assert ok["doc"]["rescue"] == [{"how": "allocator", "released": 5 * GiB,
                                    "ok": True, "why": ""}]
    assert ok["nvml"] == CONTEXT + 4 * GiB
    assert r["calls"] == 2
    assert r["err"].startswith("Out of memory allocating 9,663,676,416 bytes")
    [resc] = r["doc"]["rescue"]
    assert resc["how"] == "allocator" and resc["ok"] is False
    assert resc["why"].startswith("OutOfMemoryError: Out of memory")
    assert [a["key"] for a in r["doc"]["advice"]] == ["free_arrays",
                                                      "too_large"]
    assert len([f for f in os.listdir(tmp_path) if f.endswith(".json")]) == 2


def test_explain_and_release_still_see_cupy_under_the_guard(scenario, tmp_path):
    """The guard wraps CuPy's allocator: the frameworks' module reads the
    allocator inside it (the stream-ordered pool is still found)."""
    r = scenario("""
import cupy
cupy.cuda.set_allocator(cupy.cuda.MemoryAsyncPool().malloc)
gpureclaim.watch_oom(os.environ['OUT'])
guarded = cupy.cuda.get_allocator().__name__
a = cupy.empty(128 << 20, dtype=cupy.uint8)
e = gpureclaim.explain()
parts = {p.kind + ":" + p.source: p.bytes for p in e.gpus[0].parts}
del a
r = gpureclaim.release()
emit(dict(guarded=guarded, parts=parts, trims=list(cupy.cuda.runtime.trims),
          bytes=r.bytes))
""", env={"OUT": str(tmp_path)})
    assert r["guarded"] == "gpureclaim_oom_guard"
    assert r["parts"]["live:cupy (async pool)"] == 128 * MiB
    assert r["trims"] == [[0, 0]] and r["bytes"] == 128 * MiB


def test_watch_oom_again_wraps_an_allocator_set_since(scenario, tmp_path):
    r = scenario("""
import cupy
gpureclaim.watch_oom(os.environ['OUT'])
first = cupy.cuda.get_allocator().__name__
cupy.cuda.set_allocator(cupy.get_default_memory_pool().malloc)
gpureclaim.watch_oom(os.environ['OUT'])
second = cupy.cuda.get_allocator()
gpureclaim.watch_oom(os.environ['OUT'])
emit(dict(first=first, second=second.__name__,
          same=cupy.cuda.get_allocator() is second))
""", env={"OUT": str(tmp_path)})
    assert r.data == {"first": "gpureclaim_oom_guard",
                 "second": "gpureclaim_oom_guard", "same": True}


def test_jax_resource_exhausted_reaching_the_top(scenario, tmp_path):
    r = scenario("""
import jax
gpureclaim.watch_oom(os.environ["OUT"])
jax.numpy_ones(512 << 20)
jax.numpy_ones(1 << 30)  # beyond the pool: uncaught
""", sim=SIM, env={"OUT": str(tmp_path), "FAKE_JAX_POOL": str(GiB)},
        expect_ok=False)
    assert r.returncode == 1
    err = r.stderr
    # the traceback first, then the post-mortem
    assert err.index("JaxRuntimeError: RESOURCE_EXHAUSTED") < \
        err.index("gpureclaim: out of memory")
    _, _, d = pm_of(r, tmp_path)
    assert d["framework"] == "jax"
    assert d["request"]["bytes"] == GiB and d["request"]["exact"] is True
    assert d["request"]["device"] == 0
    assert d["release"]["limited_by"] == "jax pool"
    assert d["release"]["pool_free"] == 512 * MiB
    assert d["release"]["fits"] is False
    assert [a["key"] for a in d["advice"]] == ["jax_pool"]


def test_jax_oom_in_a_thread(scenario, tmp_path):
    r = scenario("""
import threading, jax
gpureclaim.watch_oom(os.environ["OUT"])
jax.devices()
t = threading.Thread(target=jax.numpy_ones, args=(2 << 30,))
t.start(); t.join()
emit(dict(pm=gpureclaim.oom.last().framework))
""", sim=SIM, env={"OUT": str(tmp_path), "FAKE_JAX_POOL": str(GiB)})
    assert r["pm"] == "jax"
    assert "Exception in thread" in r.stderr
    assert pm_of(r, tmp_path)[2]["request"]["bytes"] == 2 * GiB


JAX_STARVES_TORCH = """
import jax, torch
jax.numpy_ones(256 << 20)
try:
    torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    ok = True
except torch.OutOfMemoryError:
    ok = False
pm = gpureclaim.oom.last()
emit(dict(ok=ok, doc=pm.to_dict() if pm else None))
"""


def test_jax_preallocated_starves_torch_and_the_hint_works(scenario,
                                                          tmp_path):
    r = scenario("gpureclaim.watch_oom(os.environ['OUT'])\n"
                 + JAX_STARVES_TORCH, sim=SIM,
                 env={"OUT": str(tmp_path), "FAKE_JAX_POOL": str(6 * GiB)})
    assert r["ok"] is False
    d = r["doc"]
    parts = {(x["kind"], x["source"]): x["bytes"]
             for x in d["process"]["parts"] if x["known"] and x["bytes"]}
    assert parts[("pool", "jax")] == 6 * GiB - 256 * MiB
    assert parts[("live", "jax")] == 256 * MiB
    rel = d["release"]
    assert rel["limited_by"] == "gpu" and rel["fits"] is False
    assert rel["free_after"] == 8 * GiB - CONTEXT - 6 * GiB
    keys = [a["key"] for a in d["advice"]]
    assert keys[0] == "xla_preallocate"
    assert "XLA_PYTHON_CLIENT_PREALLOCATE=false" in d["advice"][0]["text"]
    assert "without the preallocation 2.0 GiB would fit" in \
        d["advice"][0]["text"]
    # the hint, followed: the same program, JAX told not to preallocate
    r = scenario(JAX_STARVES_TORCH, sim=SIM,
                 env={"FAKE_JAX_POOL": str(6 * GiB),
                      "XLA_PYTHON_CLIENT_PREALLOCATE": "false"})
    assert r["ok"] is True


def test_retry_on_oom_releases_drops_the_frames_and_calls_again(
        scenario, tmp_path):
    r = scenario(CUPY_STARVES_TORCH + """
import weakref
gpureclaim.watch_oom(os.environ["OUT"])
calls, frames_gone = [], []
ref = [None]

class Marker:
    pass

gpureclaim.register("probe", lambda d: frames_gone.append(
    ref[0] is not None and ref[0]() is None))

@gpureclaim.retry_on_oom
def step():
    calls.append(1)
    marker = Marker()  # a local of the failed call
    ref[0] = weakref.ref(marker)
    return torch.empty(4 << 30, dtype=torch.uint8, device="cuda")

t = step()
files_after = sorted(os.listdir(os.environ["OUT"]))
emit(dict(calls=len(calls), frames_gone=frames_gone[:1],
          doc=gpureclaim.oom.last().to_dict(), files=files_after,
          name=step.__name__))
""", sim=SIM, env={"OUT": str(tmp_path)})
    assert r["calls"] == 2 and r["name"] == "step"
    assert r["frames_gone"] == [True]
    # rescued: one line that says so, not the post-mortem's "out of
    # memory" and its advice to decorate what is decorated (issue 33)
    [line] = r.stderr.splitlines()
    assert line.startswith("gpureclaim: step() ran out of GPU memory; "
                           "@retry_on_oom released 5.0 GiB and the next "
                           "call succeeded (post-mortem: "), line
    assert "decorate" not in r.stderr
    [resc] = r["doc"]["rescue"]
    assert resc == {"how": "retry_on_oom", "released": 5 * GiB, "ok": True,
                    "why": ""}
    assert len(r["files"]) == 1
    assert pm_of(r, tmp_path)[2]["rescue"] == [resc]


def test_retry_on_oom_gives_up_and_lets_other_errors_through(scenario):
    r = scenario("""
import torch
n = []

@gpureclaim.retry_on_oom(tries=3)
def too_big():
    n.append(1)
    torch.empty(9 << 30, dtype=torch.uint8, device="cuda")

@gpureclaim.retry_on_oom
def other():
    n.append(1)
    raise KeyError("x")

try:
    too_big()
except torch.OutOfMemoryError:
    big = len(n)
n.clear()
try:
    other()
except KeyError:
    oth = len(n)
try:
    gpureclaim.retry_on_oom(tries=0)
except ValueError as e:
    bad = str(e)
emit(dict(big=big, other=oth, bad=bad, pm=gpureclaim.oom.last()))
""", sim=SIM)
    assert r["big"] == 3 and r["other"] == 1
    assert r["bad"] == "retry_on_oom(): tries must be a whole number from 1, not 0"
    assert r["pm"] is None  # no watch: no post-mortem


def test_retry_on_oom_reports_what_no_hook_saw(scenario, tmp_path):
    """JAX's error caught by the decorator never reaches the top: the
    decorator makes its post-mortem, with the retry's outcome."""
    r = scenario("""
import jax
gpureclaim.watch_oom(os.environ["OUT"])
n = []

@gpureclaim.retry_on_oom
def step():
    n.append(1)
    jax.numpy_ones(2 << 30)

try:
    step()
except jax.errors.JaxRuntimeError:
    pass
emit(dict(n=len(n), files=sorted(os.listdir(os.environ["OUT"]))))
""", sim=SIM, env={"OUT": str(tmp_path), "FAKE_JAX_POOL": str(GiB)})
    assert r["n"] == 2 and len(r["files"]) == 2
    docs = [json.load(open(os.path.join(tmp_path, f))) for f in r["files"]]
    assert {d["framework"] for d in docs} == {"jax"}
    outcomes = sorted(json.dumps(d["rescue"]) for d in docs)
    assert json.loads(outcomes[0]) == []  # the last call's own
    assert json.loads(outcomes[1]) == [{"how": "retry_on_oom", "released": 0,
                                        "ok": False, "why": ""}]


def test_largest_blocks_carry_their_stacks_when_history_is_on(scenario, tmp_path):
    r = scenario("""
import torch
keep = [torch.empty(n << 20, dtype=torch.uint8, device="cuda") for n in (64, 256, 8, 128)]
torch.cuda.memory._record_memory_history()
big = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
gpureclaim.watch_oom(os.environ['OUT'])
try:
    torch.empty(8 << 30, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError:
    pass
pm = gpureclaim.oom.last()
emit(dict(blocks=pm.to_dict()["blocks"], text=str(pm)))
""", sim=SIM, env={"OUT": str(tmp_path)})
    sizes = [b["size"] for b in r["blocks"]]
    assert sizes == [512 * MiB, 256 * MiB, 128 * MiB, 64 * MiB, 8 * MiB]
    assert r["blocks"][0]["frames"] == [{"filename": "user.py", "line": 1,
                                         "name": "<module>"}]
    assert r["blocks"][1]["frames"] == []
    assert "user.py:1 <module>" in r["text"]


def test_a_traced_process_shows_the_tracers_live_rows(scenario, tmp_path):
    tracer = os.path.join(os.environ.get("GPR_FAKES_BUILD", ""),
                          "libfake_tracer.so")
    r = scenario("""
import ctypes, torch
_tracer = ctypes.CDLL(os.environ["TRACER"], mode=ctypes.RTLD_GLOBAL)
gpureclaim.watch_oom(os.environ['OUT'])
try:
    torch.empty(9 << 30, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError:
    pass
emit(dict(trace=gpureclaim.oom.last().to_dict()["trace"]))
""", sim=SIM, env={"OUT": str(tmp_path), "TRACER": tracer,
                   "FAKE_TRACE_ROWS": "0:2:nvidia/nccl/lib/libnccl.so.2:"
                                      "6291456:3;0:0:libcudnn.so.9:2097152:1;"
                                      "1:0:libcudnn.so.9:4096:1"})
    assert r["trace"] == {"log": None, "rows": [
        {"library": "nvidia/nccl/lib/libnccl.so.2", "kind": "VMM physical",
         "bytes": 6291456, "allocations": 3},
        {"library": "libcudnn.so.9", "kind": "device", "bytes": 2097152,
         "allocations": 1}]}


def test_other_processes_are_listed_with_their_driver_figures(scenario, tmp_path):
    r = scenario("""
import torch
gpureclaim.watch_oom(os.environ['OUT'])
try:
    torch.empty(5 << 30, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError:
    pass
emit(dict(doc=gpureclaim.oom.last().to_dict()))
""", sim=SIM + ";extra=0:1:3GiB", env={"OUT": str(tmp_path)})
    d = r["doc"]
    assert d["others"] == [{"pid": 1, "bytes": 3 * GiB,
                            "user": d["others"][0]["user"],
                            "command": d["others"][0]["command"]}]
    assert d["gpu"]["free"] == 8 * GiB - 3 * GiB - CONTEXT
    assert d["release"]["fits"] is False
    keys = [a["key"] for a in d["advice"]]
    assert keys == ["others"]
    assert "without them 5.0 GiB would fit" in d["advice"][0]["text"]


# ------------------------------------------------------------------ files

def test_a_planted_link_or_file_is_never_written_through(scenario, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    out = tmp_path / "out"
    out.mkdir()
    r = scenario(CUPY_STARVES_TORCH + """
pid = os.getpid()
out = os.environ["OUT"]
os.symlink(os.environ["VICTIM"], f"{out}/gpureclaim-oom-{pid}-1.json")
open(f"{out}/gpureclaim-oom-{pid}-2.json", "w").write("theirs")
os.mkfifo(f"{out}/gpureclaim-oom-{pid}-3.json")
gpureclaim.watch_oom(out)
for _ in range(2):
    try:
        torch.empty(4 << 30, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError:
        pass
emit(dict(pid=pid, path=gpureclaim.oom.last().path))
""", sim=SIM, env={"OUT": str(out), "VICTIM": str(victim)})
    pid = r["pid"]
    assert victim.read_text() == "keep"
    assert (out / f"gpureclaim-oom-{pid}-2.json").read_text() == "theirs"
    assert os.path.islink(out / f"gpureclaim-oom-{pid}-1.json")
    assert (out / f"gpureclaim-oom-{pid}-4.json").exists()
    assert r["path"] == str(out / f"gpureclaim-oom-{pid}-5.json")


def test_a_named_file_is_never_replaced(scenario, tmp_path):
    (tmp_path / "oom.json").write_text("an earlier run's")
    r = scenario("""
import torch
gpureclaim.watch_oom(os.path.join(os.environ["OUT"], "oom.json"))
try:
    torch.empty(9 << 30, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError:
    pass
emit(dict(path=gpureclaim.oom.last().path))
""", sim=SIM, env={"OUT": str(tmp_path)})
    assert (tmp_path / "oom.json").read_text() == "an earlier run's"
    assert r["path"] == str(tmp_path / "oom-2.json")


def test_a_hostile_folder_is_refused_and_a_sticky_one_is_safe(scenario,
                                                              tmp_path):
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    r = scenario("""
import stat, torch
os.umask(0)
res = {}
for name in ("OPEN", "STICKY"):
    gpureclaim.watch_oom(os.environ[name])
    try:
        torch.empty(9 << 30, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError:
        pass
    pm = gpureclaim.oom.last()
    res[name] = dict(path=pm.path, error=pm.write_error, short=pm.short(),
                     mode=pm.path and stat.S_IMODE(os.stat(pm.path).st_mode))
emit(res)
""", sim=SIM, env={"OPEN": str(open_dir), "STICKY": str(sticky)})
    o = r["OPEN"]
    assert o["path"] is None and os.listdir(open_dir) == []
    assert "is writable by every user and not sticky" in o["error"]
    assert "post-mortem not written" in o["short"]
    s = r["STICKY"]
    assert s["path"].startswith(str(sticky)) and s["mode"] == 0o600


def test_watch_oom_checks_its_arguments(scenario):
    r = scenario("""
out = {}
for args in ((1,), (None, "yes"), ("/nonexistent-folder/x/oom.json",)):
    try:
        gpureclaim.watch_oom(*args)
    except (TypeError, ValueError) as e:
        out[repr(args)] = f"{type(e).__name__}: {e}"
emit(dict(out=out, on=gpureclaim.oom.status()["on"]))
""")
    assert r["out"] == {
        "(1,)": "TypeError: watch_oom(): path must be a str or os.PathLike, "
                "not int",
        "(None, 'yes')": "TypeError: watch_oom(): rescue must be True or "
                         "False, not 'yes'",
        "('/nonexistent-folder/x/oom.json',)":
            "ValueError: watch_oom(): no folder /nonexistent-folder/x",
    }
    assert r["on"] is False


# ------------------------------------------------------ nothing imported

def test_watching_imports_nothing_and_attaches_on_import(scenario, tmp_path):
    r = scenario("""
import gpureclaim._startup._imports as imports
gpureclaim.watch_oom(os.environ['OUT'])
before = dict(modules=[m for m in ("torch", "cupy", "jax") if m in sys.modules],
              mapped=libcuda_mapped(), waiting=imports.waiting(),
              finder=imports._FINDER in sys.meta_path)
import torch
after_import = dict(init=torch.cuda.is_initialized(), mapped=libcuda_mapped(),
                    observers=len(torch._C.oom_observers),
                    queued=len(torch.cuda._queued_calls),
                    loader=type(torch.__spec__.loader).__name__)
t = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")  # CUDA starts: the observer attaches
attached = len(torch._C.oom_observers)
import cupy, jax
emit(dict(before=before, after_import=after_import, attached=attached,
          finder=imports._FINDER in sys.meta_path, status=gpureclaim.oom.status(),
          init_calls=sim().gprsim_init_calls()))
""", env={"OUT": str(tmp_path)})
    assert r["before"] == {"modules": [], "mapped": False,
                           "waiting": ["cupy", "jax", "torch"], "finder": True}
    a = r["after_import"]
    assert a["init"] is False and a["mapped"] is False
    assert a["observers"] == 0 and a["queued"] == 1
    assert a["loader"] == "SourceFileLoader"  # its own loader, put back
    assert r["attached"] == 1
    assert r["finder"] is False  # nothing awaited: the finder is gone
    assert r["status"]["frameworks"] == {"torch": "attached",
                                         "cupy": "attached",
                                         "jax": "attached"}
    assert r["init_calls"] == 1


def test_torch_already_running_is_attached_at_once(scenario, tmp_path):
    r = scenario("""
import torch
t = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
gpureclaim.watch_oom(os.environ['OUT'])
emit(dict(n=len(torch._C.oom_observers)))
""", env={"OUT": str(tmp_path)})
    assert r["n"] == 1


def test_the_post_mortem_cli_report(scenario, tmp_path):
    scenario(CUPY_STARVES_TORCH + """
gpureclaim.watch_oom(os.environ["OUT"])
try:
    torch.empty(4 << 30, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError:
    pass
emit({})
""", sim=SIM, env={"OUT": str(tmp_path)})
    path, raw, doc = pm_of(None, tmp_path)
    import subprocess

    gpr = os.environ["GPURECLAIM_BIN"]
    env = dict(os.environ, PYTHONPATH=os.environ.get("GPR_PY_PATH", ""))

    def report(*args):
        return subprocess.run([gpr, "report", *args], capture_output=True,
                              text=True, env=env, cwd=tmp_path)

    p = report(path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("gpureclaim: out-of-memory post-mortem\n")
    assert "torch asked for 4.0 GiB (4294967296 bytes) on GPU 0" in p.stdout
    assert "release() would release 5.0 GiB (CuPy's cache)" in p.stdout
    p = report(path, "--json")
    assert p.returncode == 0 and json.loads(p.stdout) == doc
    p = report(path, "--html", "page.html")
    assert p.returncode == 0, p.stderr
    # as a trace's exports: the file it wrote said, the report printed
    # only when asked (issue 33)
    assert p.stdout == "" and p.stderr == (
        "gpureclaim report: wrote page.html (the post-mortem as a page)\n")
    p = report(path, "--html", "page.html", "--text")
    assert p.stdout.startswith("gpureclaim: out-of-memory post-mortem\n")
    p = report(path, "--html", "page.html", "--json")
    assert json.loads(p.stdout) == doc
    page = (tmp_path / "page.html").read_text()
    assert page.startswith("<!DOCTYPE html>\n<!-- gpureclaim -->\n")
    assert f"{5 * GiB} bytes" in page
    # an earlier page is replaced; any other file only with --force
    assert report(path, "--html", "page.html").returncode == 0
    (tmp_path / "notes.txt").write_text("mine")
    p = report(path, "--html", "notes.txt")
    assert p.returncode == 1
    assert "notes.txt exists and is not a page of gpureclaim" in p.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine"
    os.symlink("notes.txt", tmp_path / "link.html")
    p = report(path, "--html", "link.html")
    assert p.returncode == 1 and "is a symbolic link" in p.stderr
    assert report(path, "--html", "notes.txt", "--force").returncode == 0
    assert (tmp_path / "notes.txt").read_text().startswith("<!DOCTYPE html>")
    p = report(path, "--chrome", "t.json")
    assert p.returncode == 2 and "is for trace logs" in p.stderr
    # a broken one: one line, exit 1
    bad = tmp_path / "bad.json"
    bad.write_text('{\n "format": "gpureclaim-oom", "version": 1, "x": [')
    p = report(str(bad))
    assert p.returncode == 1 and p.stderr.count("\n") == 1
    assert "not valid JSON" in p.stderr
    # python -m gpureclaim is the same program
    p = subprocess.run([sys.executable, "-m", "gpureclaim", "report", path],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0 and "CuPy's cache" in p.stdout


def test_the_command_and_the_package_check_the_same_first_bytes():
    sys.path.insert(0, os.environ.get("GPR_PY_PATH", "build/python"))
    try:
        from gpureclaim.oom._postmortem import SIGNATURE
    finally:
        sys.path.pop(0)
    src = open(os.path.join(ROOT, "cli", "cmd_report.c")).read()
    m = re.search(r'static const char sig\[\] = "(.*)";', src)
    assert m and m[1].encode().decode("unicode_escape") == SIGNATURE
