"""`gpureclaim suspend` and `resume` on a real GPU (GPU machine; skips
without one): the driver's checkpoint API (driver 570+) on Torch, CuPy and
JAX processes that hold known data, docs/suspend.md.

- A Torch process with an agent, holding LIVE GiB of known content
  (checksums) and a CACHE GiB cache, working in a loop: suspended, its
  agent releases the cache first (measured), NVML stops listing it and the
  GPU's used memory falls by exactly what NVML's figure said it held;
  host memory holds the live data (its VmRSS); the memory cgroup that the
  host copy is charged to is the process's own (its memory.current grows
  by it: the claim of docs/suspend.md, checked here); ps lists it
  suspended; resumed, NVML's figure is the same again, every checksum is
  equal and its loop goes on. Twice in a row.
- A CuPy process (live arrays and a pool cache): the same.
- JAX with a pool the host can hold (XLA_PYTHON_CLIENT_MEM_FRACTION
  small): the same, the pool moved whole (JAX cannot release it); and the
  same process refused before anything is locked when the host cannot
  hold it (the host's MemAvailable faked, GPURECLAIM_TEST_MEMINFO, so the
  test never fills the machine: a JAX default pool once did), its loop
  going on.
- Resume on demand (docs/suspend.md): the Torch process, its loop paused,
  suspended with its watcher, then one step called: the watcher sees the
  call waiting in the driver and resumes it (its log says so), every
  checksum equal, NVML's figure back; the same under `gpureclaim run
  --resume-on-demand` with the watcher's own look set to an hour (the
  interposer asks at the call); a notebook kernel with the agent (a real
  Jupyter kernel, when jupyter_client and ipykernel are here) resumed
  before its next cell. Each prints the call's wait.
- The node's policy: `gpureclaim reclaim --idle` with an idle Torch
  process and a busy one (its loop at work): only the idle one suspended
  (NVML's per-process samples say which works), its checksums the same
  once resumed on demand.

Sizes are parameters: GPR_SUSPEND_LIVE_GIB (2), GPR_SUSPEND_CACHE_GIB
(1), GPR_SUSPEND_JAX_FRACTION (0.05 of the GPU). Run with -s to see each
suspend's and resume's report.
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from gpu_machine import GPR, HAVE_GPU, PKG, has

GiB = 1 << 30
LIVE = float(os.environ.get("GPR_SUSPEND_LIVE_GIB", "2"))
CACHE = float(os.environ.get("GPR_SUSPEND_CACHE_GIB", "1"))
JAX_FRACTION = os.environ.get("GPR_SUSPEND_JAX_FRACTION", "0.05")

pytestmark = pytest.mark.skipif(not HAVE_GPU,
                                reason="no NVIDIA GPU (nvidia-smi -L)")

# Each target: holds its data, says {"ready": pid, "sums": [...]} once it
# does, then answers "sums" and "count" (its loop's rounds) on stdin. Its
# loop makes a small CUDA call every 50 ms from a thread of its own: while
# suspended, that call waits.
TORCH = """
import json, os, sys, threading, time
import torch
GiB = 1 << 30
live_b, cache_b = int(float(sys.argv[1]) * GiB), int(float(sys.argv[2]) * GiB)
g = torch.Generator(device="cuda").manual_seed(1234)
live = []
while live_b > 0:
    n = min(live_b, GiB)
    live.append(torch.randint(-2**31, 2**31 - 1, (n // 4,), dtype=torch.int32,
                              device="cuda", generator=g))
    live_b -= n
cache = torch.empty(cache_b, dtype=torch.uint8, device="cuda")
del cache  # cached by Torch
def sums():
    return [int(t.sum(dtype=torch.int64).item()) for t in live]
"""

CUPY = """
import json, os, sys, threading, time
import cupy
GiB = 1 << 30
live_b, cache_b = int(float(sys.argv[1]) * GiB), int(float(sys.argv[2]) * GiB)
rng = cupy.random.default_rng(1234)
live = []
while live_b > 0:
    n = min(live_b, GiB)
    live.append(rng.integers(-2**31, 2**31 - 1, size=n // 4, dtype=cupy.int32))
    live_b -= n
cache = cupy.empty(cache_b, dtype=cupy.uint8)
del cache  # in CuPy's pool
def sums():
    return [int(t.sum(dtype=cupy.int64)) for t in live]
"""

JAX = """
import json, os, sys, threading, time
import jax, jax.numpy as jnp
GiB = 1 << 30
live_b = int(float(sys.argv[1]) * GiB)
key = jax.random.PRNGKey(1234)
live = []
while live_b > 0:
    n = min(live_b, GiB // 4)
    key, sub = jax.random.split(key)
    live.append(jax.random.randint(sub, (n // 4,), -2**31, 2**31 - 1,
                                   dtype=jnp.int32))
    live_b -= n
import numpy as np
def sums():  # on the host: int64 on the GPU needs jax_enable_x64
    return [int(np.asarray(t).astype(np.int64).sum()) for t in live]
"""

LOOP = """
count = 0
going = threading.Event()
going.set()
def loop():
    global count
    while True:
        going.wait()
        step()
        count += 1
        time.sleep(0.05)
threading.Thread(target=loop, daemon=True).start()
print(json.dumps({"ready": os.getpid(), "sums": sums()}), flush=True)
for line in sys.stdin:
    what = line.strip()
    if what == "sums":
        print(json.dumps({"sums": sums()}), flush=True)
    elif what == "count":
        print(json.dumps({"count": count}), flush=True)
    elif what == "pause":  # after the step under way
        going.clear()
        time.sleep(0.2)
        print(json.dumps({"pause": count}), flush=True)
    elif what == "go":
        going.set()
        print(json.dumps({"go": count}), flush=True)
    elif what == "heavy":  # its loop keeps the GPU busy
        step = heavy_step
        print(json.dumps({"heavy": count}), flush=True)
    elif what == "call":  # one step here: it waits while suspended
        t0 = time.time()
        step()
        print(json.dumps({"call": time.time() - t0}), flush=True)
"""

STEPS = {
    "torch": "x = torch.ones(1024, device='cuda')\n"
             "def step():\n    x.mul_(1.0); torch.cuda.synchronize()\n"
             "def heavy_step():  # SM utilization NVML's samples see\n"
             "    w = torch.ones(4096, 4096, device='cuda')\n"
             "    for _ in range(20):\n        w @ w\n"
             "    torch.cuda.synchronize()\n",
    "cupy": "x = cupy.ones(1024)\n"
            "def step():\n    x.__imul__(1.0); cupy.cuda.runtime.deviceSynchronize()\n",
    "jax": "x = jnp.ones(1024)\n"
           "def step():\n    (x * 1.0).block_until_ready()\n",
}


NEVER = 3600  # the watcher's own look: never, within a test
AGENT_DIR = None


def agent_dir():
    """A records folder of this module's own (GPURECLAIM_AGENT_DIR), so
    the actions' log holds only its lines."""
    global AGENT_DIR
    if AGENT_DIR is None:
        AGENT_DIR = tempfile.mkdtemp(prefix="gpr-hw-suspend-")
        os.chmod(AGENT_DIR, 0o700)
    return AGENT_DIR


def env(**extra):
    """The environment of the targets and the commands: the package
    built, and a records folder of this module's own (agent_dir), so that
    ps, the records and the actions' log are the module's only."""
    e = dict(os.environ)
    e["PYTHONPATH"] = PKG + (os.pathsep + e["PYTHONPATH"]
                             if e.get("PYTHONPATH") else "")
    e["GPURECLAIM_AGENT_DIR"] = agent_dir()
    e.update({k: str(v) for k, v in extra.items()})
    return e


class Target:
    """A framework's process started with the agent (gpureclaim run
    --agent), its data held, its loop running."""

    def __init__(self, kind, *args, run_opts=(), **extra):
        src = {"torch": TORCH, "cupy": CUPY, "jax": JAX}[kind]
        src = textwrap.dedent(src) + STEPS[kind] + textwrap.dedent(LOOP)
        self.proc = subprocess.Popen(
            [GPR, "run", "--agent", *run_opts, "--", sys.executable, "-c",
             src, *map(str, args)],
            env=env(**extra), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True)
        line = self.proc.stdout.readline()
        assert line, f"{kind} target died"
        first = json.loads(line)
        self.pid, self.sums = first["ready"], first["sums"]

    def ask(self, what):
        self.proc.stdin.write(what + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())[what]

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except Exception:
            self.proc.kill()
            self.proc.wait()


def gpr(*args, **extra):
    p = subprocess.run([GPR, *args], env=env(**extra), capture_output=True,
                       text=True, timeout=900)
    return p


def as_json(p):
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(p.stdout)
    (one,) = doc["processes"]
    print(json.dumps(one, indent=1))
    return one


def ps_entry(pid):
    p = gpr("ps", "--json")
    assert p.returncode == 0, p.stderr
    for g in json.loads(p.stdout)["gpus"]:
        for q in g.get("processes", []):
            if q["pid"] == pid:
                return g, q
    return None, None


def smi_lists(pid):
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid",
                          "--format=csv,noheader"], capture_output=True,
                         text=True).stdout
    return str(pid) in [x.strip() for x in out.splitlines()]


def memory_current(pid):
    """The process's memory cgroup's usage in bytes, or None."""
    try:
        lines = pathlib.Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, ctl, path = line.split(":", 2)
        if "memory" in ctl.split(","):
            f = pathlib.Path("/sys/fs/cgroup/memory" + path,
                             "memory.usage_in_bytes")
            break
    else:
        path = [x.split(":", 2)[2] for x in lines if x.startswith("0::")][0]
        f = pathlib.Path("/sys/fs/cgroup" + path, "memory.current")
    try:
        return int(f.read_text())
    except (OSError, ValueError):
        return None


def suspend_resume_twice(t, live_bytes, cached_bytes):
    """The proof for one process: see the module's docstring."""
    for round_ in range(2):
        _, before = ps_entry(t.pid)
        assert before and before["state"] == "alive", before
        cg0 = memory_current(t.pid)
        # resumed by hand below: no watcher (its loop would call it back)
        s = as_json(gpr("suspend", "--pid", str(t.pid), "--json",
                        "--resume", "manual"))
        assert s["ok"] and s["state"] == "suspended", s
        cg1 = memory_current(t.pid)
        if round_ == 0 and cached_bytes:
            assert s["agent"] == "released", s
            assert s["cache_released"] >= cached_bytes, s
        (g,) = [x for x in s["gpus"] if x["before"]]
        # NVML no longer lists it; its figure is 0; the GPU's used memory
        # fell by exactly what NVML's figure said it held
        assert g["after"] == 0 and g["listed_after"] is False, g
        assert g["used_before"] - g["used_after"] == g["before"], g
        assert s["released"] == g["before"]
        assert not smi_lists(t.pid)
        # host memory holds at least the live data
        assert s["host_bytes"] >= live_bytes, s
        if cg0 is not None and cg1 is not None:
            print(f"memory cgroup grew {cg1 - cg0} bytes, host_bytes "
                  f"{s['host_bytes']}")
            assert cg1 - cg0 >= 0.9 * s["host_bytes"], (cg0, cg1, s)
        _, during = ps_entry(t.pid)
        assert during["state"] == "suspended" and during["bytes"] == 0
        assert during["host_bytes"] == s["host_bytes"]
        c1 = t.ask("count")
        r = as_json(gpr("resume", "--pid", str(t.pid), "--json"))
        assert r["ok"] and r["state"] == "running", r
        # the same figure back; the same data; its loop goes on
        assert r["restored"] == s["released"], (r, s)
        _, after = ps_entry(t.pid)
        assert after["bytes"] == g["before"], (after, g)
        assert smi_lists(t.pid)
        assert t.ask("sums") == t.sums
        end = time.monotonic() + 60
        while t.ask("count") <= c1 + 2:
            assert time.monotonic() < end, "its loop did not go on"
            time.sleep(0.05)
        print(f"round {round_ + 1}: suspend {s['seconds']['total']:.3f} s "
              f"({s['gib_per_s']} GiB/s), resume {r['seconds']['total']:.3f} s "
              f"({r['gib_per_s']} GiB/s)")


@pytest.mark.skipif(HAVE_GPU and not has("import torch; assert "
                                         "torch.cuda.is_available()"),
                    reason="torch with CUDA needed")
def test_torch_suspended_and_resumed_twice():
    t = Target("torch", LIVE, CACHE)
    try:
        suspend_resume_twice(t, int(LIVE * GiB), int(CACHE * GiB))
    finally:
        t.close()


# -- resume on demand --------------------------------------------------------

def resumes(pid):
    path = pathlib.Path(agent_dir(), "suspended", "actions.log")
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    return [a for a in map(json.loads, lines)
            if a["action"] == "resume" and a["pid"] == pid]


def resumed_on_demand(t, poll, cause):
    """Suspended with its watcher; one step called; resumed by it."""
    t.ask("pause")
    done = len(resumes(t.pid))
    s = as_json(gpr("suspend", "--pid", str(t.pid), "--json", "--poll",
                    str(poll)))
    assert s["ok"] and s["state"] == "suspended", s
    assert s["resume_on_demand"]["ok"], s["resume_on_demand"]
    _, during = ps_entry(t.pid)
    assert during is None or during["bytes"] == 0
    call = t.ask("call")  # waits until its watcher has resumed it
    end = time.monotonic() + 120
    while len(resumes(t.pid)) == done:
        assert time.monotonic() < end, "no resume in the log"
        time.sleep(0.05)
    r = resumes(t.pid)[-1]
    assert r["ok"] and r["cause"].startswith(cause), r
    assert r["restored"] == s["released"], (r, s)
    # its figure back: what the suspend released (its agent released
    # the cache first: that never comes back)
    _, after = ps_entry(t.pid)
    assert after["state"] == "alive" and after["bytes"] == r["restored"]
    assert t.ask("sums") == t.sums
    t.ask("go")
    print(f"resumed on demand ({r['cause']}): the call waited {call:.3f} s, "
          f"the restore and unlock {r['seconds']:.3f} s of it, "
          f"{s['released'] / GiB:.2f} GiB")
    return call, r


@pytest.mark.skipif(HAVE_GPU and not has("import torch; assert "
                                         "torch.cuda.is_available()"),
                    reason="torch with CUDA needed")
def test_torch_resumed_on_demand_by_the_watcher_twice():
    t = Target("torch", LIVE, CACHE)
    try:
        for _ in range(2):
            resumed_on_demand(t, 0.5, "on demand: thread ")
    finally:
        t.close()


@pytest.mark.skipif(HAVE_GPU and not has("import torch; assert "
                                         "torch.cuda.is_available()"),
                    reason="torch with CUDA needed")
def test_torch_under_run_resume_on_demand_asks_at_its_call():
    t = Target("torch", LIVE, CACHE, run_opts=("--resume-on-demand",))
    try:
        for _ in range(2):
            resumed_on_demand(t, NEVER, "on demand: the process asked")
    finally:
        t.close()


@pytest.mark.skipif(HAVE_GPU and not has("import torch, jupyter_client, "
                                         "ipykernel; assert "
                                         "torch.cuda.is_available()"),
                    reason="torch with CUDA, jupyter_client and ipykernel "
                           "needed")
def test_a_notebook_kernel_with_the_agent_resumed_before_its_cell(
        tmp_path):
    import queue

    import jupyter_client

    km = jupyter_client.KernelManager(kernel_name="python3")
    km.start_kernel(env=env(),
                    cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()

    def cell(code):
        msg_id = kc.execute(code)
        text, errors = "", []
        while True:
            msg = kc.get_iopub_msg(timeout=300)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "status" and \
                    msg["content"]["execution_state"] == "idle":
                assert not errors, errors
                return text
            if kind == "stream":
                text += msg["content"]["text"]
            if kind == "error":
                errors.append(msg["content"])

    try:
        kc.wait_for_ready(timeout=120)
        pid = int(cell("%load_ext gpureclaim\n"
                       "import os, torch\n"
                       "g = torch.Generator(device='cuda').manual_seed(7)\n"
                       f"x = torch.randint(0, 1000, ({int(LIVE * GiB) // 4},),"
                       " dtype=torch.int32, device='cuda', generator=g)\n"
                       "print(os.getpid())").split()[-1])
        want = int(cell("print(int(x.sum(dtype=torch.int64)))"))
        s = as_json(gpr("suspend", "--pid", str(pid), "--json", "--poll",
                        str(NEVER)))
        assert s["ok"] and s["resume_on_demand"]["ok"], s
        assert "asked" in s["resume_on_demand"]["said"], s
        t0 = time.time()
        got = int(cell("print(int(x.sum(dtype=torch.int64)))"))
        print(f"the cell waited {time.time() - t0:.3f} s with its run")
        assert got == want
        (r,) = resumes(pid)
        assert r["ok"] and r["cause"] == "on demand: the process asked", r
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.skipif(HAVE_GPU and not has("import torch; assert "
                                         "torch.cuda.is_available()"),
                    reason="torch with CUDA needed")
def test_reclaim_idle_suspends_the_idle_process_only():
    """The first run notes both (the idle one's time is not known yet);
    IDLE seconds later the second suspends the idle one: the busy one's
    samples show work within the last second."""
    idle_s = 5
    idle = Target("torch", min(LIVE, 1), 0)
    busy = Target("torch", min(LIVE, 1), 0)
    try:
        idle.ask("pause")
        busy.ask("heavy")
        p = gpr("reclaim", "--idle", f"{idle_s}s", "--json")
        first = json.loads(p.stdout)["idle"]
        print(json.dumps(first, indent=1))
        assert first["suspended"] == 0, first
        time.sleep(idle_s + 1)
        p = gpr("reclaim", "--idle", f"{idle_s}s", "--json")
        assert p.returncode == 0, p.stdout + p.stderr
        doc = json.loads(p.stdout)["idle"]
        print(json.dumps(doc, indent=1))
        rows = {q["pid"]: q for g in doc["gpus"] for q in g["processes"]}
        assert rows[idle.pid]["decision"] == "suspended", rows[idle.pid]
        assert rows[busy.pid]["decision"] == "skipped", rows[busy.pid]
        assert rows[busy.pid]["why"].startswith("busy: "), rows[busy.pid]
        _, q = ps_entry(idle.pid)
        assert q["state"] == "suspended", q
        _, q = ps_entry(busy.pid)
        assert q["state"] == "alive", q
        # resumed on demand by its watcher, its data the same
        call = idle.ask("call")
        print(f"the idle one's first call after it waited {call:.3f} s")
        assert idle.ask("sums") == idle.sums
    finally:
        idle.close()
        busy.close()


@pytest.mark.skipif(HAVE_GPU and not has("import cupy"),
                    reason="cupy needed")
def test_cupy_suspended_and_resumed_twice():
    t = Target("cupy", LIVE, CACHE)
    try:
        suspend_resume_twice(t, int(LIVE * GiB), int(CACHE * GiB))
    finally:
        t.close()


@pytest.mark.skipif(HAVE_GPU and not has("import jax"), reason="jax needed")
def test_jax_with_a_pool_the_host_can_hold_and_one_it_cannot():
    t = Target("jax", min(LIVE, 1), XLA_PYTHON_CLIENT_MEM_FRACTION=JAX_FRACTION)
    try:
        _, q = ps_entry(t.pid)
        pool = q["bytes"]  # JAX preallocated its pool: all of it moves
        # the host "cannot hold it": MemAvailable faked at half the pool
        with tempfile.NamedTemporaryFile("w", suffix=".meminfo") as f:
            total = int(pathlib.Path("/proc/meminfo").read_text().split()[1])
            f.write(f"MemTotal: {total} kB\nMemAvailable: "
                    f"{pool // 2048} kB\n")
            f.flush()
            p = gpr("suspend", "--pid", str(t.pid),
                    GPURECLAIM_TEST_MEMINFO=f.name)
        print(p.stderr)
        assert p.returncode == 1 and "host memory cannot hold it" in p.stderr
        _, q = ps_entry(t.pid)
        assert q["state"] == "alive" and q["bytes"] == pool  # untouched
        c = t.ask("count")
        end = time.monotonic() + 60
        while t.ask("count") <= c + 2:
            assert time.monotonic() < end, "its loop stopped"
            time.sleep(0.05)
        # a pool the host can hold: suspended and resumed, data unchanged
        suspend_resume_twice(t, int(min(LIVE, 1) * GiB), 0)
    finally:
        t.close()
