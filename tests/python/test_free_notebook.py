"""free_plan() and free() in a notebook: a real Jupyter kernel (ipykernel,
driven by jupyter_client) on the simulated driver. A tensor shown as a
cell's output (Out[3], _3, _, the display hook, user_ns_hidden) and one in
the frame of the last traceback (sys.last_*, IPython's InteractiveTB and
last execution result) are freed with one call, %gpureclaim free --yes;
%gpureclaim free shows the plan as HTML first."""
from test_oom_notebook import execute, kernel, kernel_env

MiB = 1 << 20


def test_out_and_the_last_traceback_freed_with_one_call(tmp_path):
    with kernel(kernel_env(tmp_path), tmp_path) as (km, kc):
        for code in ("import torch, gpureclaim", "%load_ext gpureclaim",
                     "torch.randn(2048, 4096, device='cuda')",  # Out[3]
                     "def train(batch):\n    raise RuntimeError('nan')"):
            out = execute(kc, code)
            assert [k for k, _ in out if k == "error"] == [], out
        out = execute(kc, "train(torch.randn(1024, 4096, device='cuda'))")
        assert [c["ename"] for k, c in out if k == "error"] == \
            ["RuntimeError"]
        plan = execute(kc, "%gpureclaim free")
        [shown] = [c for k, c in plan if k == "execute_result"]
        html = shown["data"]["text/html"]
        assert "gpureclaim.free_plan()" in html and "<table" in html
        text = shown["data"]["text/plain"]
        assert "would release 48.0 MiB to the driver" in text, text
        assert "%reset -f out" in text
        assert "get_ipython().InteractiveTB.tb = None" in text
        done = execute(kc, "%gpureclaim free --yes")
        [rep] = [c for k, c in done if k == "execute_result"]
        text = rep["data"]["text/plain"]
        assert ("released 48.0 MiB (the drop of the driver's per-process "
                "figure), promised 48.0 MiB") in text, text
        assert "failed" not in text, text
        left = execute(kc, "print(torch.cuda.memory_allocated())")
        assert [c["text"] for k, c in left if k == "stream"] == ["0\n"], left
