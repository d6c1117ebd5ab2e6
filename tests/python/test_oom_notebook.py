"""The post-mortem in a notebook: a real Jupyter kernel (ipykernel, driven
by jupyter_client, both from PyPI: scripts/install-deps.sh) on the
simulated driver. An out-of-memory error in a cell shows the post-mortem
as HTML in that cell's output, then the error as the kernel reports it;
JAX's, which reaches only IPython's exception handler, too."""
import atexit
import contextlib
import json
import os
import queue
import uuid

import jupyter_client
from jupyter_client.kernelspec import KernelSpecManager

from agentkit import remove_state
from conftest import FAKES, PY_PATH, SAN_PRELOAD, SIM_DIR

GiB = 1 << 30
TIMEOUT = 60


def kernel_env(tmp_path):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("GPURECLAIM_", "PYTHON"))}
    state = f"nb-{uuid.uuid4().hex[:10]}"
    atexit.register(remove_state, state)  # a killed kernel leaves its rows
    e.update(GPURECLAIM_SIM=f"gpus=1;memory=8GiB;state={state}",
             GPURECLAIM_CUDA_LIBRARY=os.path.join(SIM_DIR, "libcuda.so.1"),
             GPURECLAIM_NVML_LIBRARY=os.path.join(SIM_DIR, "libnvidia-ml.so.1"),
             PYTHONPATH=os.pathsep.join([PY_PATH, FAKES]),
             PYTHONDONTWRITEBYTECODE="1", FAKE_JAX_POOL=str(GiB),
             OUT=str(tmp_path))
    if SAN_PRELOAD:
        e["LD_PRELOAD"] = SAN_PRELOAD
    return e


@contextlib.contextmanager
def kernel(env, cwd, argv=None, now=True):
    """(manager, client) of a started kernel, ready, shut down after: the
    python3 kernel, or one that runs argv ({connection_file} in it)."""
    if argv is None:
        km = jupyter_client.KernelManager(kernel_name="python3")
    else:
        spec = os.path.join(str(cwd), "kernels", "argv")
        os.makedirs(spec)
        with open(os.path.join(spec, "kernel.json"), "w") as f:
            json.dump({"argv": argv, "display_name": "argv",
                       "language": "python"}, f)
        km = jupyter_client.KernelManager(
            kernel_name="argv", kernel_spec_manager=KernelSpecManager(
                kernel_dirs=[os.path.dirname(spec)]))
    km.start_kernel(env=env, cwd=str(cwd))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=TIMEOUT)
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=now)


def execute(kc, code):
    """The iopub messages of one cell, up to its idle status."""
    msg_id = kc.execute(code)
    out = []
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=TIMEOUT)
        except queue.Empty:
            raise AssertionError(f"no answer from the kernel to {code!r}; "
                                 f"so far: {out}") from None
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind = msg["msg_type"]
        if kind == "status" and msg["content"]["execution_state"] == "idle":
            return out
        if kind in ("display_data", "error", "stream", "execute_result"):
            out.append((kind, msg["content"]))


def test_a_cells_out_of_memory_shows_the_post_mortem_in_the_cell(tmp_path):
    with kernel(kernel_env(tmp_path), tmp_path) as (km, kc):
        setup = execute(kc, "import os, torch, cupy, gpureclaim\n"
                            "gpureclaim.watch_oom(os.environ['OUT'])")
        assert [k for k, _ in setup if k == "error"] == [], setup
        cell = execute(kc, "a = cupy.empty(5 << 30, dtype=cupy.uint8); del a\n"
                           "t = torch.empty(4 << 30, dtype=torch.uint8, device='cuda')")
        kinds = [k for k, _ in cell]
        assert "display_data" in kinds and "error" in kinds, cell
        assert kinds.index("display_data") < kinds.index("error")
        [shown] = [c for k, c in cell if k == "display_data"]
        html = shown["data"]["text/html"]
        assert html.startswith('<div class="gpr"><style>')
        assert "gpureclaim: out-of-memory post-mortem" in html
        assert f"{5 * GiB} bytes" in html  # CuPy's cache, exact, in the bar
        assert "release() would release 5.0 GiB (CuPy&#39;s cache)" in html or \
            "release() would release 5.0 GiB (CuPy's cache)" in html
        assert shown["data"]["text/plain"].startswith(
            "gpureclaim: out of memory\n")
        [err] = [c for k, c in cell if k == "error"]
        assert err["ename"] == "OutOfMemoryError"
        streams = "".join(c.get("text", "") for k, c in cell if k == "stream")
        assert "gpureclaim: out of memory" not in streams  # HTML, not text
        files = [f for f in os.listdir(tmp_path) if f.endswith(".json")]
        assert len(files) == 1
        # JAX's error reaches only IPython's handler
        cell = execute(kc, "import jax\njax.numpy_ones(2 << 30)")
        kinds = [k for k, _ in cell]
        assert "display_data" in kinds and "error" in kinds, [
            (k, c.get("text", c.get("ename"))) for k, c in cell]
        assert kinds.index("error") < kinds.index("display_data")
        [shown] = [c for k, c in cell if k == "display_data"]
        assert "jax asked for 2.0 GiB" in shown["data"]["text/html"]
        [err] = [c for k, c in cell if k == "error"]
        assert err["ename"] == "JaxRuntimeError"
        assert "RESOURCE_EXHAUSTED" in err["evalue"]
        assert len([f for f in os.listdir(tmp_path)
                    if f.endswith(".json")]) == 2

