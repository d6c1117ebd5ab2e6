"""Resume on demand in a notebook (docs/suspend.md): a real Jupyter kernel
(ipykernel, driven by jupyter_client) on the simulated driver, holding
fake-Torch memory with the agent (`%load_ext gpureclaim`), suspended from
outside with `gpureclaim suspend`. Its next cell is held until the process
runs again: the agent's pre_run_cell hook asks the watcher through the
process's page, which resumes it at once. The watcher's own look at the
threads is set to an hour, so only the hook can have resumed it within
the test's bounds (a wait, never a measure: the bounds are a minute)."""
import json
import os
import signal

from agentkit import MiB, driver_bytes, gpr, sim_env, wait_for
from test_oom_notebook import execute, kernel

NEVER = 3600  # the watcher's poll interval: it never looks in this test


def text_of(out):
    return "".join(c.get("text", "") for k, c in out if k == "stream")


def ps_row(env, pid):
    r = gpr(env, "ps", "--json")
    assert r.returncode == 0, r.stderr
    for g in json.loads(r.stdout)["gpus"]:
        for p in g["processes"]:
            if p["pid"] == pid:
                return p
    return None


def actions(env):
    path = os.path.join(env["GPURECLAIM_AGENT_DIR"], "suspended",
                        "actions.log")
    with open(path) as f:
        return [json.loads(line) for line in f]


def watcher_gone(pid):
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except ProcessLookupError:
        return True


def test_a_suspended_kernel_is_resumed_before_its_next_cell(tmp_path):
    env = sim_env()
    with kernel(env, tmp_path, now=False) as (km, kc):
        out = execute(kc, "%load_ext gpureclaim\n"
                          "import os, torch\n"
                          "keep = torch.empty(64 << 20, dtype=torch.uint8,"
                          " device='cuda')\n"
                          "print(os.getpid())")
        assert [k for k, _ in out if k == "error"] == [], out
        pid = int(text_of(out).split()[-1])
        figure = driver_bytes(env, pid)[0]

        r = gpr(env, "suspend", "--pid", pid, "--poll", NEVER, "--json")
        assert r.returncode == 0, r.stderr
        s = json.loads(r.stdout)["processes"][0]
        assert s["ok"] and s["released"] == figure, s
        on = s["resume_on_demand"]
        assert on["ok"] and on["watcher"] > 0, on
        assert "is asked by its next driver call at once" in on["said"], on
        row = ps_row(env, pid)
        assert row["state"] == "suspended", row
        assert row["resume_on_demand"]["watcher"] == on["watcher"], row

        # the cell waits for the resume, then runs: its tensor is there
        out = execute(kc, "print(keep.numel())")
        assert [k for k, _ in out if k == "error"] == [], out
        assert text_of(out).split() == [str(64 * MiB)], out
        assert driver_bytes(env, pid)[0] == figure
        resumed = [a for a in actions(env) if a["action"] == "resume"]
        assert len(resumed) == 1 and resumed[0]["ok"], resumed
        assert resumed[0]["cause"] == "on demand: the process asked"
        assert resumed[0]["restored"] == figure
        wait_for(lambda: watcher_gone(on["watcher"]), 60, "the watcher ends")

        # a second suspension of the same kernel: the same once more
        r = gpr(env, "suspend", "--pid", pid, "--poll", NEVER, "--json")
        assert r.returncode == 0, r.stderr
        again = json.loads(r.stdout)["processes"][0]["resume_on_demand"]
        out = execute(kc, "print(keep.numel() + 1)")
        assert text_of(out).split() == [str(64 * MiB + 1)], out
        assert driver_bytes(env, pid)[0] == figure
        wait_for(lambda: watcher_gone(again["watcher"]), 60,
                 "the watcher ends")


def test_a_kernel_that_exits_while_suspended_leaves_nothing(tmp_path):
    env = sim_env()
    with kernel(env, tmp_path) as (km, kc):
        out = execute(kc, "%load_ext gpureclaim\n"
                          "import os, torch\n"
                          "keep = torch.empty(8 << 20, device='cuda')\n"
                          "print(os.getpid())")
        pid = int(text_of(out).split()[-1])
        r = gpr(env, "suspend", "--pid", pid, "--poll", NEVER, "--json")
        assert r.returncode == 0, r.stderr
        watcher = json.loads(r.stdout)["processes"][0][
            "resume_on_demand"]["watcher"]
        os.kill(pid, signal.SIGKILL)
        # the watcher notices within a second or so; a minute is a hang
        wait_for(lambda: watcher_gone(watcher), 60, "the watcher ends")
        folder = os.path.join(env["GPURECLAIM_AGENT_DIR"], "suspended")
        left = [n for n in os.listdir(folder) if n.endswith(".suspended")
                or n.endswith(".lock")]
        assert left == [], left
