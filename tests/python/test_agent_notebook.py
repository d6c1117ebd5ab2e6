"""The agent in a notebook: a real Jupyter kernel (ipykernel, driven by
jupyter_client, both from PyPI: scripts/install-deps.sh) on the simulated
driver, holding fake-Torch cache after `%load_ext gpureclaim`, explained
and released from outside with `gpureclaim explain --pid` and `gpureclaim
release --pid`; the released bytes are the drop in the driver's figure
for the kernel's process, as `gpureclaim ps` reads it."""
import json
import os

from agentkit import GiB, driver_bytes, gpr, sim_env
from test_oom_notebook import execute, kernel


def test_a_kernels_cache_is_released_from_outside(tmp_path):
    env = sim_env()
    with kernel(env, tmp_path, now=False) as (km, kc):
        out = execute(kc, "%load_ext gpureclaim\n"
                          "import os, torch\n"
                          "t = torch.empty(3 << 30, dtype=torch.uint8, device='cuda')\n"
                          "keep = torch.empty(1 << 28, dtype=torch.uint8, device='cuda')\n"
                          "del t\n"
                          "print(os.getpid())")
        assert [k for k, _ in out if k == "error"] == [], out
        text = "".join(c.get("text", "") for k, c in out if k == "stream")
        pid = int(text.split()[-1])

        r = gpr(env, "explain", "--pid", pid)
        assert r.returncode == 0, r.stderr
        assert "cached, releasable  torch" in r.stdout

        before = driver_bytes(env, pid)[0]
        r = gpr(env, "release", "--pid", pid, "--json")
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout)
        after = driver_bytes(env, pid)[0]
        assert got["bytes"] == before - after == 3 * GiB

        # the kernel goes on: its tensor is there, its cache empty
        out = execute(kc, "print(keep.numel(), torch.cuda.memory_reserved())")
        text = "".join(c.get("text", "") for k, c in out if k == "stream")
        assert text.split()[0] == str(1 << 28)
        sock = os.path.join(env["GPURECLAIM_AGENT_DIR"], f"{pid}.sock")
        assert os.path.exists(sock)  # %load_ext started it
