"""RMM (a fake rmm with the 26.10 API, on the simulated driver's memory
pools): explain() shows the resource, release() trims a CUDA async pool to
its live bytes (exact, through the driver) and reports a pool resource as
not releasable; nothing inserts a resource for a GPU the program left
alone."""
MiB = 1 << 20
CONTEXT = 512 * MiB

HELPERS = """
from scenario import parts, check
"""


def run(scenario, code, **kw):
    return scenario(HELPERS + code, **kw)


def test_async_resource_trimmed_to_its_live_bytes(scenario):
    r = run(scenario, """
import rmm, torch
t = torch.empty(2 << 20, dtype=torch.uint8, device="cuda:1")    # a context on GPU 1, no RMM there
rmm._cuda.gpu.setDevice(0)
rmm.mr.set_per_device_resource(0, rmm.mr.CudaAsyncMemoryResource())
bufs = [rmm.DeviceBuffer(64 << 20) for _ in range(3)]
del bufs[2], bufs[0]
before = check(gpureclaim.explain())
b_rel = [(p.source, p.known, p.advice_key, p.how) for p in before.gpus[0].parts
         if p.kind == "releasable" and p.source.startswith("rmm")]
rel = gpureclaim.release(collect=False)
after = check(gpureclaim.explain())
again = gpureclaim.release(collect=False)
# known from the second release on: the first found the pool
row = [dict(name=x.name, device=x.device, known=x.known, bl=x.before.live,
            bc=x.before.cached, al=x.after.live, ac=x.after.cached)
       for x in again.releasers if x.name == "rmm" and x.device == 0]
emit(dict(b=parts(before), b_rel=b_rel, a=parts(after), bytes=rel.bytes,
          gpu0=[g.released for g in rel.gpus if g.device == 0], row=row,
          notes=rel.notes, again=again.bytes, inserted=rmm.mr.inserted[0],
          keys=sorted(rmm.mr._per_device_mrs), chain=[p.detail for p in after.gpus[0].parts
                                                      if p.source == "rmm"][0]["chain"],
          adv=[(p.kind, p.source, p.advice_key) for p in after.gpus[0].parts
               if p.advice_key and p.bytes]))
""", sim="gpus=2")
    # before any release the pool's reserve is unknown (Python hides its
    # handle): it stays in the rest, with the advice that measures it
    assert r["b_rel"][0][:3] == ["rmm (CUDA async pool)", False, "release"]
    assert r["b"]["rest:context, modules, unreported"] == CONTEXT + 192 * MiB
    # the trim returns exactly the two freed chunks
    assert r["gpu0"] == [128 * MiB]
    assert r["a"]["live:rmm"] == 64 * MiB
    assert r["a"]["not_releasable:rmm (CUDA async pool)"] == 0
    assert r["a"]["rest:context, modules, unreported"] == CONTEXT
    [row] = r["row"]
    assert row["known"] and row["ac"] == 0 and row["al"] == 64 * MiB
    assert r["again"] == 0
    assert not any(a[1].startswith("rmm") and a[2] == "release" for a in r["adv"])
    # no default resource was inserted for GPU 1
    assert r["inserted"] == 0 and r["keys"] == [0]
    assert r["chain"] == ["CudaAsyncMemoryResource"]


def test_pool_resource_reported_not_released(scenario):
    r = run(scenario, """
import rmm
up = rmm.mr.CudaMemoryResource()
pool = rmm.mr.PoolMemoryResource(up, initial_pool_size=256 << 20)
rmm.mr.set_current_device_resource(rmm.mr.StatisticsResourceAdaptor(pool))
buf = rmm.DeviceBuffer(64 << 20)
e = check(gpureclaim.explain())
[p] = [p for p in e.gpus[0].parts if p.kind == "pool"]
rel = gpureclaim.release(collect=False)
after = check(gpureclaim.explain())
emit(dict(p=parts(e), after=parts(after), hint=p.hint, advice=p.advice, how=p.how,
          released=rel.bytes, notes=rel.notes, text=str(e),
          chain=[x.detail for x in e.gpus[0].parts if x.kind == "live"
                 and x.source == "rmm"][0]["chain"]))
""")
    assert r["p"]["live:rmm"] == 64 * MiB
    assert r["p"]["pool:rmm"] == 192 * MiB
    assert r["p"]["rest:context, modules, unreported"] == CONTEXT
    assert r["advice"] == "" and "maximum_pool_size" in r["hint"]
    assert "never returns memory" in r["how"]
    assert r["released"] == 0 and r["after"] == r["p"]
    assert any("PoolMemoryResource of 268435456 bytes" in n and "never shrink" in n
               for n in r["notes"]), r["notes"]
    assert r["chain"] == ["StatisticsResourceAdaptor", "PoolMemoryResource",
                          "CudaMemoryResource"]


def test_rmm_without_a_resource_set_is_left_alone(scenario):
    r = run(scenario, """
import rmm, torch
t = torch.empty(2 << 20, dtype=torch.uint8, device="cuda")
e = check(gpureclaim.explain())
gpureclaim.release()
emit(dict(p=parts(e), inserted=rmm.mr.inserted[0], keys=list(rmm.mr._per_device_mrs),
          active=[s.active for s in gpureclaim.releasers() if s.name == "rmm"]))
""")
    assert not any(k.endswith(":rmm") for k in r["p"])
    assert r["inserted"] == 0 and r["keys"] == []
    assert r["active"] == [True]
