"""One release engine: Metal through the core's releasers, the releaser
list read from the core, the young generations collected first."""

GiB = 1 << 30


def test_releasers_lists_the_frameworks_then_the_users_from_the_core(scenario):
    r = scenario("""
gpureclaim.register("pool-b", lambda d: None)
gpureclaim.register("pool-a", lambda d: None)
gpureclaim.unregister("pool-b")
gpureclaim.register("pool-b", lambda d: None)
out = {}
for name in ("torch", "mps", "nobody"):
    try:
        gpureclaim.unregister(name)
        out[name] = None
    except KeyError as e:
        out[name] = str(e)
emit(dict(rows=[(x.name, x.kind, x.active) for x in gpureclaim.releasers()],
          out=out))
""")
    assert r["rows"] == [
        ["torch", "cuda", False], ["cupy", "cuda", False],
        ["numba", "cuda", False], ["jax", "cuda", False], ["rmm", "cuda", False],
        ["mps", "metal", False], ["mlx", "metal", False],
        ["pool-a", "user", True], ["pool-b", "user", True]]
    # the frameworks' releasers are not the user's to remove
    for name in ("torch", "mps", "nobody"):
        assert "no releaser named" in r["out"][name], r["out"]


def test_metal_rows_come_from_the_core(scenario):
    r = scenario("""
import torch, mlx.core as mx
t = torch.empty(64 << 20, dtype=torch.uint8, device="mps"); del t
m = mx.ones(32 << 20); del m
r = gpureclaim.release()
emit(dict(rows=[(x.name, x.device, x.known, x.released) for x in r.releasers],
          gpus=[(g.device, g.nvml_index, g.free, g.total, g.used)
                for g in r.gpus],
          source=r.source, bytes=r.bytes, collected=r.collected))
""", env={"FAKE_MPS": "1"})
    assert r["source"] == "driver"  # Metal's per-process total
    assert r["bytes"] == 96 << 20
    assert r["collected"] is False  # nothing live
    # one row per Metal framework, the once step; CUDA is not loaded
    assert r["rows"] == [["mps", -1, True, 96 << 20], ["mlx", -1, True, 32 << 20]]
    assert r["gpus"] == [["mps", -1, None, None, None]]


def test_metal_figure_is_read_before_the_collection(scenario):
    # A Metal buffer goes straight back to the driver when its object is
    # collected: a figure read after the collection would miss it.
    r = scenario("""
import weakref
import fakemetal, torch, mlx.core as mx
gc.disable()  # the cycle waits for the release's collection
class Buffer:  # a Metal buffer no cache keeps: freed at collection
    def __init__(self, n):
        self.block = fakemetal.alloc(n)
        weakref.finalize(self, fakemetal.free, self.block)
t = torch.empty(64 << 20, dtype=torch.uint8, device="mps")  # live: makes the gc run
cycle = [t, Buffer(256 << 20)]; cycle.append(cycle)
start = fakemetal.total()
del t, cycle
r = gpureclaim.release()
emit(dict(bytes=r.bytes, collected=r.collected, start=start,
          end=fakemetal.total()))
""", env={"FAKE_MPS": "1"})
    assert r["collected"] is True
    assert r["end"] == r["start"] - (320 << 20)
    assert r["bytes"] == 320 << 20


def test_young_generations_first_then_a_full_collection(scenario):
    r = scenario(r"""
import torch, cupy
gc.disable()  # no automatic collection: only the release's run
runs = []
gc.callbacks.append(lambda phase, info: phase == "start" and runs.append(info["generation"]))
def cycle():
    t = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    c = [t]; c.append(c)
    return c
c = cycle(); del c
young = gpureclaim.release()
young_runs, runs[:] = list(runs), []
c = cycle()
gc.collect(); gc.collect()  # survivors move to the oldest generation
runs[:] = []
del c
old = gpureclaim.release()
emit(dict(young=(young.bytes, young.collected, young_runs),
          old=(old.bytes, old.collected, list(runs))))
""")
    assert r["young"] == [256 << 20, True, [1]]
    assert r["old"] == [256 << 20, True, [1, 2]]


def test_release_in_a_thread_while_another_waits(scenario):
    # the extension has no lock of its own: the core's release lock
    # serializes, and a release waiting on it holds no GIL. The first
    # release waits inside its releaser until the list was read (a list
    # that waited for it would never come: `go` would time out); the
    # order of the releaser's calls shows that the second release waited.
    r = scenario("""
import threading, time, simcuda
simcuda.lib(); simcuda.set_current(0)
inside, go, calls = threading.Event(), threading.Event(), []
def slow(device):
    n = sum(1 for c in calls if c[0] == "in") + 1
    calls.append(("in", n))
    if n == 1:
        inside.set()
        calls.append(("go", go.wait(60)))
        time.sleep(0.3)  # the second release comes meanwhile
    calls.append(("out", n))
gpureclaim.register("slow", slow)
t = threading.Thread(target=gpureclaim.release)
t.start()
inside.wait()
names = [x.name for x in gpureclaim.releasers()]  # lists without waiting
go.set()
r = gpureclaim.release()  # waits for the other release
t.join()
emit(dict(calls=calls, names=names))
""")
    # ("go", True): the list was read while the first release was inside
    assert r["calls"] == [["in", 1], ["go", True], ["out", 1],
                          ["in", 2], ["out", 2]], r["calls"]
    assert "slow" in r["names"]
