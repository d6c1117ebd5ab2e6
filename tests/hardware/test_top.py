"""`gpureclaim top` on a real GPU (GPU machine; skips without a GPU, Torch
or CuPy): three real processes with the agent (Torch holding 2 GiB of
cache, CuPy holding 1 GiB, Torch keeping its GPU busy with matmuls),
started with GPURECLAIM_AGENT=1.

- One reading (stdout not a terminal): every process listed with what its
  agent says a release would give back, the busy one `running N%` once
  NVML's per-process samples show its work, `--json` equal to
  `ps --explain --json` but for the times.
- In a real terminal (tmux, 80x24; skips where tmux or the build's
  terminal view is missing): the screen captured and printed (run with
  -s to see it), the Torch process selected, `r`, the question with its
  releasable bytes, `y`: the bytes the bottom line says were released are the
  drop of NVML's figure for that pid, exactly; the screen after printed.
  And the CuPy process suspended at `z` (its cache released first, the
  rest off the GPU: NVML lists it no more) and resumed at `u`, the bytes
  restored those that left.

The package: $GPURECLAIM_PYTHONPATH (default build/python); the command:
$GPURECLAIM_BIN (default build/cli/gpureclaim).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from gpu_machine import GPR, ROOT, agent_env, needs

sys.path.insert(0, str(ROOT / "tests" / "python"))
from tmuxkit import HANG_S, Tmux  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30

pytestmark = needs("torch, cupy")

#: a process holding cache of one framework (or busy with Torch), the
#: agent on; "ready" once it holds it, exits on stdin's end
TARGETS = {
    "torch": """\
import sys, torch
keep = torch.ones(64 << 20, dtype=torch.uint8, device="cuda")
t = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
del t
print("ready", flush=True)
sys.stdin.read()
""",
    "cupy": """\
import sys, cupy
keep = cupy.ones(64 << 20, dtype=cupy.uint8)
a = cupy.empty(1 << 30, dtype=cupy.uint8)
cupy.cuda.Device().synchronize()
del a
print("ready", flush=True)
sys.stdin.read()
""",
    "busy": """\
import sys, threading, torch
x = torch.randn(4096, 4096, device="cuda")
stop = False
def work():
    while not stop:
        y = x @ x
        torch.cuda.synchronize()
threading.Thread(target=work, daemon=True).start()
print("ready", flush=True)
sys.stdin.read()
stop = True
""",
}


def env():
    e = agent_env()
    e.pop("NO_COLOR", None)
    return e


@pytest.fixture(scope="module")
def procs():
    ps = {}
    for name, code in TARGETS.items():
        p = subprocess.Popen([sys.executable, "-c", code], env=env(),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        line = p.stdout.readline()
        assert line == "ready\n", (name, line, p.stderr.read())
        ps[name] = p
    yield ps
    for p in ps.values():
        p.stdin.close()
        p.wait(60)


def gpr(*args):
    return subprocess.run([GPR, *map(str, args)], capture_output=True,
                          text=True, timeout=120, env=env())


def nvml(pid):
    """NVML's figure for pid on each GPU (bytes), from `gpureclaim ps`."""
    r = gpr("ps", "--json")
    assert r.returncode == 0, r.stderr
    return {g["gpu"]: q["bytes"] for g in json.loads(r.stdout)["gpus"]
            for q in g.get("processes", []) if q["pid"] == pid}


def process(doc, pid):
    return next(q for g in doc["gpus"] for q in g.get("processes", [])
                if q["pid"] == pid)


def test_one_reading_of_three_real_processes(procs):
    pids = {n: p.pid for n, p in procs.items()}
    # the busy one shows its work once the driver has sampled it
    end = time.monotonic() + HANG_S
    while True:
        doc = json.loads(gpr("top", "--json").stdout)
        act = process(doc, pids["busy"])["activity"]
        if act and act["sm_util"]:
            break
        assert time.monotonic() < end, act
        time.sleep(0.5)
    assert act["idle_seconds"] < 3, act
    for n in ("torch", "cupy"):
        q = process(doc, pids[n])
        assert q["agent"]["parts"]["releasable"] >= (1 << 30), (n, q)
    text = gpr("top")
    assert text.returncode == 0, text.stderr
    print("\n" + text.stdout)
    rows = {int(x[2:9]): x for x in text.stdout.splitlines()
            if re.match(r"^\S +\d+ ", x)}
    assert set(pids.values()) <= set(rows), text.stdout
    assert "running " in rows[pids["busy"]], rows[pids["busy"]]
    # --json is ps --explain --json's document
    a = json.loads(gpr("top", "--json").stdout)
    b = json.loads(gpr("ps", "--explain", "--json").stdout)
    for d in (a, b):
        d.pop("time"), d.pop("unix_time")
        for g in d["gpus"]:
            g.pop("used", None), g.pop("free", None)
            for q in g.get("processes", []):
                q.pop("activity", None), q.pop("bytes", None)
                q.pop("share", None)
                if q.get("agent") and "parts" in q["agent"]:
                    q["agent"].pop("driver", None)
                    q["agent"]["parts"].pop("rest", None)
                    q["agent"]["parts"].pop("live", None)
    assert a == b


def started_top(t, pid):
    """Waits until top shows pid's row with its agent's answer (skips
    where this build has no terminal view); the screen then."""
    end = time.monotonic() + HANG_S
    while True:
        screen = t.screen()
        if os.path.exists(os.path.join(t.dir, "rc")):
            err = t.stderr()
            if "built without ncurses" in err:
                pytest.skip("this build has no terminal view: " + err)
            raise AssertionError(err)
        rows = {int(x[2:9]): x for x in screen
                if re.match(r"^\S +\d+ ", x)}
        # its agent answered: its RELEASABLE cell holds bytes
        if pid in rows and rows[pid][34:44].strip() not in (
                "...", "?", "-", ""):
            return screen
        assert time.monotonic() < end, "\n".join(screen)
        time.sleep(0.1)


def select(t, pid):
    t.keys("Escape", "g")
    time.sleep(0.3)
    screen = t.screen()
    for _ in range(len(screen)):
        if screen[-2].startswith(f"{pid} on GPU"):
            return
        t.keys("j")
        time.sleep(0.3)
        screen = t.screen()
    raise AssertionError("\n".join(screen))


def said(lines):
    """The bottom line's message (a long one takes the line above)."""
    if not re.match(r"^\d+ on GPU", lines[-2]) and lines[-2].strip():
        return lines[-2].strip() + " " + lines[-1].strip()
    return lines[-1].strip()


def test_suspend_and_resume_at_their_keys(procs, tmp_path):
    """The CuPy process suspended (its cache released first, the rest to
    host memory: NVML lists it no more) and resumed, at z and u."""
    if not shutil.which("tmux"):
        pytest.skip("tmux is not installed on this machine")
    pid = procs["cupy"].pid
    with Tmux(tmp_path, [GPR, "top"], env()) as t:
        started_top(t, pid)
        select(t, pid)
        before = nvml(pid)
        t.keys("z")
        q = said(t.wait(lambda ls: ls[-1].rstrip().endswith("y/n"),
                        "the question"))
        print("\n" + q)
        assert q.startswith(f"Suspend {pid}: "), q
        t.keys("y")
        out = said(t.wait(lambda ls: f"{pid} suspended:" in said(ls) or
                          f"suspend {pid}:" in said(ls), "the suspend"))
        print(out)
        m = re.search(r"then \S+ \S+ \((\d+) bytes\) off the GPU", out)
        assert m, out
        assert nvml(pid) in ({}, {k: 0 for k in before}), nvml(pid)
        t.wait(lambda ls: any(re.match(rf"^\S +{pid} .*suspended", x)
                              for x in ls), "the row suspended")
        print("\n".join(t.screen()))
        select(t, pid)
        t.keys("u")
        t.wait(lambda ls: ls[-1].rstrip().endswith("y/n"), "the question")
        t.keys("y")
        out = said(t.wait(lambda ls: f"{pid} resumed:" in said(ls),
                          "the resume"))
        print(out)
        assert f"({m[1]} bytes) restored on the GPU" in out, out
        t.keys("q")
        assert t.exit_status() == 0


def test_release_at_a_key_gives_back_nvmls_drop_exactly(procs, tmp_path):
    if not shutil.which("tmux"):
        pytest.skip("tmux is not installed on this machine")
    pid = procs["torch"].pid
    with Tmux(tmp_path, [GPR, "top"], env()) as t:
        print("\n" + "\n".join(started_top(t, pid)))
        select(t, pid)
        before = nvml(pid)
        t.keys("r")
        q = said(t.wait(lambda ls: ls[-1].rstrip().endswith("y/n"),
                        "the question"))
        m = re.search(r"\((\d+) bytes\)", q)
        assert m and int(m[1]) >= 2 * GiB, q
        t.keys("y")
        lines = t.wait(lambda ls: " released " in said(ls), "the release")
        print("\n".join(lines))
        m = re.search(rf"{pid} released \S+ \S+ \((\d+) bytes\)",
                      said(lines))
        assert m, said(lines)
        after = nvml(pid)
        drop = sum(before.values()) - sum(after.values())
        assert int(m[1]) == drop >= 2 * GiB, (m[1], before, after)
        t.keys("q")
        assert t.exit_status() == 0
        assert t.modes_restored() == (True, "0", "1")
