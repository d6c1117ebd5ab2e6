"""Renders every notebook view on the simulated driver into a folder (the
release, explain(), free_plan() and free(), an out-of-memory post-mortem,
the cluster reports, the trace report): for
each view its HTML (as a notebook shows it), a page wrapping it, and the
exact bytes its bars must show (expect.json). tests/views/test_views.py
checks them, scripts/render-views.sh photographs the pages for the docs.

Usage: python3 views.py OUT_DIR   with the environment of docs/sim.md
(GPURECLAIM_SIM, GPURECLAIM_CUDA_LIBRARY, GPURECLAIM_NVML_LIBRARY) and
PYTHONPATH holding the built package and the fake frameworks; the command
and the trace reader's sample writer in GPURECLAIM_BIN and GPR_TRACE_SAMPLE.
Each scenario runs in a fresh interpreter, as the sim reads its
configuration once.
"""
import base64
import json
import os
import pickle
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MiB = 1 << 20
GiB = 1 << 30

PAGE = ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>{title}</title></head>"
        '<body style="margin:16px;background:#fff;color:#111">\n{body}'
        "</body></html>\n")

# A Release on two GPUs, a process outside this one holding memory on GPU 0.
RELEASE = """
import torch, cupy, gpureclaim
keep = torch.empty(768 << 20, dtype=torch.uint8, device="cuda:0")
a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda:0")
cycle = [a]; cycle.append(cycle)
b = cupy.empty(1 << 30, dtype=cupy.uint8)
c = torch.empty(96 << 20, dtype=torch.uint8, device="cuda:1")
del a, b, c, cycle
r = gpureclaim.release()
d = r.to_dict()
parts = []
for g in d["gpus"]:
    # this process at its own scale, then the GPU as the table has it
    parts.append([g["after"], g["released"]])
    parts.append([g["after"], g["used"] - g["after"], g["free"]])
OUT = dict(html=r._repr_html_(), text=repr(r), parts=parts)
"""

# An explanation with every kind of part, small ones beside big ones.
EXPLAIN = """
import torch, cupy, jax, gpureclaim
t = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
big = torch.empty(64 << 20, dtype=torch.uint8, device="cuda"); del big
small = [torch.empty(16 << 20, dtype=torch.uint8, device="cuda") for _ in range(4)]
del small[2], small[0]
gpureclaim.release()
a = torch.empty(64 << 20, dtype=torch.uint8, device="cuda"); c = torch.addmm(None, a, a); del a, c  # cuBLAS, cuBLASLt
x = torch.empty(48 << 20, dtype=torch.uint8, device="cuda"); del x
ca = cupy.empty(128 << 20, dtype=cupy.uint8)
cb = cupy.empty(8 << 20, dtype=cupy.uint8); del cb
f = cupy.fft.fft2(cupy.empty(16 << 20, dtype=cupy.uint8)); del f
jax.numpy_ones(1000)
e = gpureclaim.explain()
parts = [[p.bytes for p in g.parts if p.known and p.bytes > 0] for g in e.gpus]
OUT = dict(html=e._repr_html_(), text=str(e), parts=parts)
"""

# explain(holders=True) in a notebook (IPython's shell in this process,
# as docs/explain.md's worked example): a global, an Out entry, a traceback.
EXPLAIN_HOLDERS = """
from IPython.core.interactiveshell import InteractiveShell
nb = InteractiveShell.instance(colors="NoColor")
for cell in [
    "import torch, gpureclaim",
    "weights = {'embed': torch.empty(512 << 20, dtype=torch.uint8, device='cuda')}",
    "torch.empty(256 << 20, dtype=torch.uint8, device='cuda')",
    "def train(batch):\\n    raise RuntimeError('loss is nan')",
    "train(torch.empty(128 << 20, dtype=torch.uint8, device='cuda'))",
    "e = gpureclaim.explain(holders=True)",
]:
    nb.run_cell(cell, store_history=True)
e = nb.user_ns["e"]
parts = [[p.bytes for p in g.parts if p.known and p.bytes > 0] for g in e.gpus]
OUT = dict(html=e._repr_html_(), text=str(e), parts=parts)
"""

# free_plan() and free() in a notebook (docs/explain.md, "Free it for me"):
# a loop's autograd history, a .grad, an Out entry and a traceback; the
# plan, then its report. No bar: a table of statements.
FREE = """
from IPython.core.interactiveshell import InteractiveShell
nb = InteractiveShell.instance(colors="NoColor")
for cell in [
    "import torch, gpureclaim",
    "%load_ext gpureclaim",
    "lin = torch.nn.Linear(4096, 4096, bias=False, device='cuda')",
    "opt = torch.optim.SGD(lin.parameters(), lr=0.1)",
    "x = torch.randn(2048, 4096, device='cuda')",
    "torch.relu(lin(x)).pow(2).sum().backward()",
    "total = 0\\nfor _ in range(6):\\n    total = total + torch.relu(lin(x)).pow(2).sum()",
    "torch.randn(1024, 4096, device='cuda')",
    "def train(batch):\\n    raise RuntimeError('loss is nan')",
    "train(torch.randn(512, 4096, device='cuda'))",
    "plan = %gpureclaim free",
    "report = %gpureclaim free --yes",
]:
    nb.run_cell(cell, store_history=True)
OUT = {k: dict(html=nb.user_ns[k]._repr_html_(), text=str(nb.user_ns[k]),
               parts=[], photo=False) for k in ("plan", "report")}
"""

# An out-of-memory post-mortem as a notebook shows it: CuPy's dropped
# arrays starve Torch on an 8 GiB GPU that another process shares, with
# Torch's allocator history on (its largest blocks carry their stacks).
OOM = """
import os, torch, cupy, gpureclaim
torch.cuda.memory._record_memory_history()
weights = torch.empty(1536 << 20, dtype=torch.uint8, device="cuda")
a = cupy.empty(3 << 30, dtype=cupy.uint8); del a
os.makedirs("oom", exist_ok=True)
gpureclaim.watch_oom("oom")
try:
    torch.empty(5 << 29, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError:
    pass
pm = gpureclaim.oom.last()
parts = [[b for _, b, _ in pm_bar[2] if b > 0]
         for pm_bar in [gpureclaim.oom._postmortem._bar(pm.doc)]]
OUT = dict(html=pm._repr_html_(), text=str(pm), parts=parts)
"""

# One worker of a cluster: its records of a release, an explanation and
# ps, as the engines send them (gpureclaim.cluster._records).
WORKER = """
import base64, os, pickle, sys, time, torch, cupy
from gpureclaim.cluster import _records
n, meet = int(sys.argv[1]), sys.argv[2]


def together(step):
    # both workers alive and at the same step: their readings see each other
    open(os.path.join(meet, f"{step}-{n}"), "w").close()
    while not all(os.path.exists(os.path.join(meet, f"{step}-{k}"))
                  for k in (1, 2)):
        time.sleep(0.01)


keep = torch.empty((256 + 128 * n) << 20, dtype=torch.uint8, device="cuda:0")
drop = torch.empty((64 << n) << 20, dtype=torch.uint8, device="cuda:0"); del drop
if n == 1:
    on1 = torch.empty(512 << 20, dtype=torch.uint8, device="cuda:1")
    gone = cupy.empty(32 << 20, dtype=cupy.uint8); del gone
together("allocated")
recs = [_records.with_id(_records.run(k), f"worker-{n}")
        for k in ("explain", "release", "ps")]
together("measured")
OUT = dict(records=base64.b64encode(pickle.dumps(recs)).decode())
"""


def run(code, argv=(), env=None, script=None):
    """Runs a scenario in a fresh interpreter; its OUT dict. script: a
    folder to run it from as `python3 train.py` (what a view shows of the
    process's command and its files is then what a user's run shows, not
    this machine's paths)."""
    src = code + "\nimport json, sys\nprint('VIEW ' + json.dumps(OUT))\n"
    cmd, cwd = [sys.executable, "-c", src, *argv], None
    if script:
        with open(os.path.join(script, "train.py"), "w") as f:
            f.write(src)
        cmd, cwd = ["python3", "train.py", *argv], script
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, **(env or {})), cwd=cwd,
                       executable=sys.executable)
    if p.returncode != 0:
        sys.exit(f"views: a scenario failed:\n{p.stdout}\n{p.stderr}")
    [line] = [ln for ln in p.stdout.splitlines() if ln.startswith("VIEW ")]
    return json.loads(line[5:])


def cluster(out):
    """The three cluster reports of two worker processes on the sim."""
    from gpureclaim.cluster import _report

    # the workers run at once: their GPUs are shared, their memory alive
    meet = os.path.join(out, "meet")
    os.makedirs(meet, exist_ok=True)
    for f in os.listdir(meet):
        os.unlink(os.path.join(meet, f))
    env = dict(os.environ, GPURECLAIM_SIM=os.environ.get("GPURECLAIM_SIM", "")
               + ";gpus=2;extra=0:1:3GiB")
    procs = [subprocess.Popen(
        [sys.executable, "-c", WORKER + "\nimport json\nprint('VIEW ' + "
         "json.dumps(OUT))\n", str(n), meet],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for n in (1, 2)]
    recs = []
    for p in procs:
        so, se = p.communicate(timeout=300)
        if p.returncode != 0:
            sys.exit(f"views: a worker failed:\n{so}\n{se}")
        [line] = [ln for ln in so.splitlines() if ln.startswith("VIEW ")]
        recs.append(pickle.loads(base64.b64decode(
            json.loads(line[5:])["records"])))
    views = {}
    for i, kind in enumerate(("explain", "release", "ps")):
        rep = _report.build(kind, [r[i] for r in recs],
                            engine="2 local processes", seconds=0.0123)
        bars = [[b for _, b, _ in parts if b > 0]
                for _, parts in rep._bars()]
        views[f"cluster-{kind}"] = dict(html=rep._repr_html_(),
                                        text=repr(rep), parts=bars)
    return views


def _trace_bars(d):
    """What the trace view's bars must show, from its JSON: the bytes each
    library allocated (9 by name, the rest as one part), and on the same
    scale what each held at the end and the rest, freed; with one library
    one bar, what it held at the end and what it freed, when it did both
    (a bar of one part would say only what the headline says)."""
    libs = [x["allocated_bytes"] for x in d["libraries"]]
    held = [x["held_at_end_bytes"] for x in d["libraries"]]
    freed = sum(libs) - sum(held)
    if sum(1 for b in libs if b) == 1:
        return [[sum(held), freed]] if sum(held) and freed else []
    return [[b for b in libs[:9] if b] + ([sum(libs[9:])] if sum(libs[9:]) else []),
            [b for b in held[:9] if b] + ([sum(held[9:])] if sum(held[9:]) else [])
            + ([freed] if freed else [])]


def _trace_view(out, log):
    """`report --html` of a log (a page) and the view inside it."""
    page = os.path.join(out, log + ".html")
    if os.path.exists(page):
        os.unlink(page)
    subprocess.run([os.environ["GPURECLAIM_BIN"], "report", log, "--html",
                    page], check=True, stderr=subprocess.DEVNULL, cwd=out)
    js = subprocess.run([os.environ["GPURECLAIM_BIN"], "report", log,
                         "--json"], check=True, capture_output=True,
                        text=True, cwd=out).stdout
    html = open(page, encoding="utf-8").read()
    body = html[html.index('<div class="gpr">'):html.rindex("</body>")]
    return dict(html=body, page=html, parts=_trace_bars(json.loads(js)),
                text="")


def trace(out):
    """The trace report of the design record's scenario as the interposer
    traced it on the sim with the fake torch and cupy (docs/sim.md,
    "Tracing on the simulated driver"; make demo's part 2), kept in the
    fuzz corpus: memory that rises and falls over time, photographed for
    the docs (a kept log, so its page is the same every run). And the
    reader's sample log (several libraries, two GPUs, every kind of note),
    checked only (no page: render-views.sh photographs pages)."""
    shutil.copyfile(os.path.join(ROOT, "tests", "trace", "corpus",
                                 "seed-scenario.gprtrace"),
                    os.path.join(out, "seed.trace"))
    subprocess.run([os.environ["GPR_TRACE_SAMPLE"], "--sample",
                    "sample.trace"], check=True, cwd=out)
    sample = _trace_view(out, "sample.trace")
    sample["photo"] = False
    return {"trace": _trace_view(out, "seed.trace"), "trace-sample": sample}


def main(out):
    os.makedirs(out, exist_ok=True)
    sim = os.environ.get("GPURECLAIM_SIM", "")
    views = {
        "release": run(RELEASE, env={"GPURECLAIM_SIM":
                                     sim + ";gpus=2;extra=0:1:6GiB"}),
        "explain": run(EXPLAIN, env={"FAKE_JAX_POOL": str(2 * GiB)}),
        "explain-holders": run(EXPLAIN_HOLDERS),
    }
    # the other process on the GPU: a server as a user starts it
    serve = os.path.join(out, "oom-run")
    os.makedirs(serve, exist_ok=True)
    with open(os.path.join(serve, "serve.py"), "w") as f:
        f.write("import sys\nsys.stdin.read()\n")
    other = subprocess.Popen(["python3", "serve.py"], cwd=serve,
                             executable=sys.executable,
                             stdin=subprocess.PIPE)
    try:
        views["oom"] = run(OOM, script=serve, env={
            "GPURECLAIM_SIM": sim + f";gpus=1;memory=8GiB;extra=0:"
                                    f"{other.pid}:1GiB"})
    finally:
        other.stdin.close()
        other.wait()
    free = run(FREE)
    views.update({"free-plan": free["plan"], "free-report": free["report"]})
    views.update(cluster(out))
    views.update(trace(out))
    expect = {}
    for name, v in views.items():
        with open(os.path.join(out, name + ".html"), "w") as f:
            f.write(v["html"])
        with open(os.path.join(out, name + ".txt"), "w") as f:
            f.write(v["text"])
        page = v.get("page") or PAGE.format(title=name, body=v["html"])
        if v.get("photo", True):  # render-views.sh photographs the pages
            with open(os.path.join(out, name + "-page.html"), "w") as f:
                f.write(page)
        expect[name] = v["parts"]
    with open(os.path.join(out, "expect.json"), "w") as f:
        json.dump(expect, f, indent=1)
    print(f"views: {', '.join(views)} in {out}")


if __name__ == "__main__":
    main(sys.argv[1])
