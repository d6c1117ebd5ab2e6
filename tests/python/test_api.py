"""Arguments, the report's types, leaks, and Metal (with fakes)."""
import pytest

from conftest import SANITIZED

GiB = 1 << 30


def test_bad_arguments_raise_clear_errors(scenario):
    r = scenario("""
cases = {
    "collect='yes'": lambda: gpureclaim.release(collect="yes"),
    "collect=1": lambda: gpureclaim.release(collect=1),
    "collect=None": lambda: gpureclaim.release(collect=None),
    "devices=[-1]": lambda: gpureclaim.release(devices=[-1]),
    "devices=[2**40]": lambda: gpureclaim.release(devices=[2**40]),
    "devices=['0']": lambda: gpureclaim.release(devices=["0"]),
    "devices=[True]": lambda: gpureclaim.release(devices=[True]),
    "devices=0": lambda: gpureclaim.release(devices=0),
    "devices='01'": lambda: gpureclaim.release(devices="01"),
    "devices=1.5": lambda: gpureclaim.release(devices=1.5),
    "verbose='x'": lambda: gpureclaim.release(verbose="x"),
    "rcm verbose=1": lambda: gpureclaim.release_cached_memory(verbose=1),
    "rcm verbose='yes'": lambda: gpureclaim.release_cached_memory(verbose="yes"),
    "explain measure_context": lambda: gpureclaim.explain(measure_context="yes"),
    "workspaces=1": lambda: gpureclaim.release(workspaces=1),
    "positional": lambda: gpureclaim.release([0]),
    "unknown kw": lambda: gpureclaim.release(device=[0]),
    "register ''": lambda: gpureclaim.register("", lambda d: None),
    "register 5": lambda: gpureclaim.register("x", 5),
    "register held": lambda: gpureclaim.register("x", print, held=3),
    "register torch": lambda: gpureclaim.register("torch", print),
    "unregister none": lambda: gpureclaim.unregister("nobody"),
    "unregister 3": lambda: gpureclaim.unregister(3),
}
out = {}
for name, fn in cases.items():
    try:
        fn()
        out[name] = None
    except Exception as e:
        out[name] = [type(e).__name__, str(e)]
ok = gpureclaim.release(devices=(), collect=False)
ok2 = gpureclaim.release(devices=iter([0, 0]), collect=True, workspaces=True)
emit(dict(out=out, ok=ok.bytes, ok2=ok2.bytes))
""")
    out = r["out"]
    want = {
        "collect='yes'": ("ValueError", 'collect must be "auto", True or False'),
        "collect=1": ("TypeError", 'collect must be "auto", True or False'),
        "collect=None": ("TypeError", "collect must be"),
        "devices=[-1]": ("ValueError", "non-negative int"),
        "devices=[2**40]": ("ValueError", "non-negative int"),
        "devices=['0']": ("TypeError", "devices must contain ints"),
        "devices=[True]": ("TypeError", "devices must contain ints"),
        "devices=0": ("TypeError", "devices must be an iterable"),
        "devices='01'": ("TypeError", "not a string"),
        "devices=1.5": ("TypeError", "devices must be an iterable"),
        # every message names the function it came from
        "verbose='x'": ("TypeError", "release(): verbose must be True or False"),
        "rcm verbose=1": ("TypeError",
                          "release_cached_memory(): verbose must be True or False"),
        "rcm verbose='yes'": ("TypeError", "release_cached_memory(): verbose "
                                           "must be True or False, not 'yes'"),
        "explain measure_context": ("TypeError", "explain(): measure_context "
                                                 "must be True or False"),
        "workspaces=1": ("TypeError", "release(): workspaces must be True or False"),
        "positional": ("TypeError", ""),
        "unknown kw": ("TypeError", "device"),
        "register ''": ("ValueError", "name must be"),
        "register 5": ("TypeError", "release must be callable"),
        "register held": ("TypeError", "held must be callable"),
        "register torch": ("ValueError", "already registered"),
        "unregister none": ("KeyError", "nobody"),
        "unregister 3": ("TypeError", ""),
    }
    for name, (etype, text) in want.items():
        assert out[name] is not None, f"{name}: no exception"
        assert out[name][0] == etype, (name, out[name])
        assert text in out[name][1], (name, out[name])
    assert r["ok"] == 0 and r["ok2"] == 0


@pytest.mark.skipif(SANITIZED, reason="RSS under ASan is its quarantine of "
                    "freed memory; the plain build runs it")
def test_ten_thousand_calls_keep_rss_flat(scenario):
    r = scenario("""
import torch, cupy
t = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
a = cupy.empty(4 << 20, dtype=cupy.uint8)
gpureclaim.register("mine", lambda d: None, held=lambda d: 0, live=lambda d: 0)
def one(i):
    x = cupy.empty(2 << 20, dtype=cupy.uint8); del x
    r = gpureclaim.release(collect=False)
    repr(r); r.to_dict(); r._repr_html_()
    gpureclaim.format_bytes(i << 20)
    if i % 10 == 0:
        e = gpureclaim.explain()
        str(e); e._repr_html_()
    gpureclaim.devices_in_use(); gpureclaim.process_memory()
    gpureclaim.releasers()
    if i % 100 == 0:
        gpureclaim.register("tmp", lambda d: None)
        gpureclaim.unregister("tmp")
        try:
            gpureclaim.release(devices=[-1])
        except ValueError:
            pass
        try:  # a view the renderer refuses, halfway through
            gpureclaim._c.render(("t", [("p", "x"), ("table", None,
                                  [("a", "bytes")], [[1], [1.5]])]),
                                 "html")
        except TypeError:
            pass
for i in range(1000):
    one(i)
gc.collect()
start = rss_bytes()
for i in range(10000):
    one(i)
gc.collect()
emit(dict(start=start, end=rss_bytes(), live=(t.nbytes, a.nbytes)))
""", timeout=300)
    grown = r["end"] - r["start"]
    assert grown < 1 << 20, f"RSS grew by {grown} bytes over 10,000 calls"


def test_metal_cycle_scenario_with_fake_torch_mps_and_mlx(scenario):
    r = scenario("""
import io, contextlib
import torch, mlx.core as mx
gc.disable()  # the cycle waits for the release's collection
t = torch.empty(1 << 30, dtype=torch.uint8, device="mps")
cycle = [t]; cycle.append(cycle)
m = mx.ones(1 << 30)
start = torch.mps.driver_allocated_memory()
del t, cycle, m
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    r = gpureclaim.release(verbose=True)
emit(dict(r.to_dict(), out=buf.getvalue(), start=start,
          end=torch.mps.driver_allocated_memory(),
          mps_calls=list(torch.mps.calls), mlx_calls=list(mx.calls),
          active={x.name: x.active for x in gpureclaim.releasers()}))
""", env={"FAKE_MPS": "1"})
    assert r["bytes"] == 2 * GiB
    assert r["source"] == "driver"  # Metal's per-process total
    assert r["collected"] is True
    assert r["end"] == r["start"] - 2 * GiB
    assert r["out"] == (
        "GPU mps: released 2.0 GiB, 1.4 MiB held by this process\n"
        "released 2.0 GiB (2147483648 bytes)\n")
    assert r["active"]["mps"] and r["active"]["mlx"]
    assert not r["active"]["torch"]
    rows = {x["name"]: x for x in r["releasers"]}
    mlx = rows["mlx"]
    assert sum(mlx["before"].values()) - sum(mlx["after"].values()) == GiB
    # Torch's counter only saw the live tensor; the driver got 2 GiB back
    assert rows["mps"]["before"]["live"] == GiB


def test_metal_nothing_live_skips_gc_and_mlx_alone_uses_its_counters(scenario):
    r = scenario("""
import mlx.core as mx
m = mx.ones(1 << 30)
del m
r = gpureclaim.release()
emit(dict(bytes=r.bytes, source=r.source, collected=r.collected, notes=r.notes))
""")
    assert r["bytes"] == GiB
    assert r["source"] == "allocators"
    assert r["collected"] is False
    assert any("MLX" in n for n in r["notes"])


def test_report_types(scenario):
    r = scenario("""
import torch
x = torch.empty(2 << 20, dtype=torch.uint8, device="cuda"); del x
r = gpureclaim.release()
g = r.gpus[0]
emit(dict(types=[type(r.bytes).__name__, type(r.gb).__name__, type(r.seconds).__name__,
                 type(r.collected).__name__, type(r.notes).__name__],
          gpu=[g.device, g.known, g.released], version=gpureclaim.__version__,
          rows=[(x.name, x.device) for x in r.releasers]))
""")
    assert r["types"] == ["int", "float", "float", "bool", "list"]
    assert r["gpu"] == [0, True, 2 << 20]
    assert r["version"] == "0.2.0"
    names = {tuple(x) for x in r["rows"]}
    assert ("torch", 0) in names and ("torch", -1) in names


def test_render_refuses_a_bad_view_with_a_type_error(scenario):
    r = scenario("""
bad = {
    "not a pair": 5,
    "unknown block": ("t", [("video", "x")]),
    "unknown column kind": ("t", [("table", None, [("a", "colour")], [])]),
    "row of the wrong length": ("t", [("table", None, [("a", "text")], [["x", "y", "z"]])]),
    "float in a bytes column": ("t", [("table", None, [("a", "bytes")], [[1.5]])]),
}
out = {}
for name, view in bad.items():
    try:
        gpureclaim._c.render(view, "text")
        out[name] = None
    except Exception as e:
        out[name] = type(e).__name__
try:
    gpureclaim._c.render(("t", []), "pdf")
except ValueError as e:
    out["form"] = str(e)
ok = gpureclaim._c.render(("t", [("table", "c", [("n", "text"), ("b", "bytes"), ("s", "share")],
                                   [["x", 1536, 0.5, ["under"]], ["y", None, None]])]), "text")
emit(dict(out=out, ok=ok))
""")
    assert r["out"]["form"].startswith("render(): form is text, html or document")
    assert all(v == "TypeError" for k, v in r["out"].items() if k != "form"), r["out"]
    assert r["ok"] == ("t\nc:\n  n        b      s\n  x  1.5 KiB  50.0%\n"
                       "      under\n  y        -      -")


def test_the_documented_submodules_are_attributes_of_the_package(scenario):
    """`import gpureclaim; gpureclaim.agent.start()` as docs/agent.md writes
    it (issue 33): each documented submodule is an attribute of the
    package, loaded on first use (not by `import gpureclaim`, which stays
    quick), and loading it imports no framework; so are the names of
    theirs the package offers (watch_oom, retry_on_oom, IPython's
    load_ipython_extension)."""
    r = scenario("""
OTHERS = ("torch", "cupy", "jax", "numba", "mlx", "rmm", "prometheus_client",
          "distributed", "dask", "ray", "IPython")
loaded = lambda: sorted(m for m in sys.modules if m.startswith("gpureclaim."))
before = loaded()
mods = {n: getattr(gpureclaim, n).__name__
        for n in ("agent", "oom", "metrics", "cluster", "frameworks")}
names = dict(
    start=gpureclaim.agent.start.__module__,
    last=gpureclaim.oom.last.__module__,
    register=gpureclaim.metrics.register.__module__,
    dask=gpureclaim.cluster.dask.__name__,
    watch=gpureclaim.watch_oom is gpureclaim.oom.watch_oom,
    retry=gpureclaim.retry_on_oom is gpureclaim.oom.retry_on_oom,
    ipython=gpureclaim.load_ipython_extension.__name__)
try:
    gpureclaim.no_such_thing
    missing = None
except AttributeError as e:
    missing = str(e)
emit(dict(before=before, mods=mods, names=names, missing=missing,
          listed=[n for n in ("agent", "oom", "metrics", "cluster",
                              "watch_oom") if n in dir(gpureclaim)],
          others=[m for m in OTHERS if m in sys.modules]))
""")
    for m in ("agent", "oom", "metrics", "cluster"):
        assert not [x for x in r["before"]
                    if x == f"gpureclaim.{m}" or
                    x.startswith(f"gpureclaim.{m}.")], r["before"]
    assert r["mods"] == {n: f"gpureclaim.{n}" for n in (
        "agent", "oom", "metrics", "cluster", "frameworks")}
    assert r["names"] == dict(
        start="gpureclaim.agent", last="gpureclaim.oom",
        register="gpureclaim.metrics", dask="gpureclaim.cluster.dask",
        watch=True, retry=True, ipython="load_ipython_extension")
    assert r["missing"] == ("module 'gpureclaim' has no attribute "
                            "'no_such_thing'")
    assert r["listed"] == ["agent", "oom", "metrics", "cluster", "watch_oom"]
    assert r["others"] == []
