"""`gpureclaim explain SCRIPT` as a newcomer runs it (issue 33): its
options before SCRIPT (--json too), and a failing script's traceback that
shows the script's frames, not gpureclaim's."""
import json
import os

import pytest

from conftest import FAKES_BUILD, ROOT

SANITIZED = bool(os.environ.get("GPR_SANITIZED"))
pytestmark = pytest.mark.skipif(SANITIZED, reason="handed to Python, which "
                                "cannot import a sanitized build's extension")

SCRIPT = """\
import torch
x = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
def train():
    raise ValueError("boom")
train()
"""


def fakes_env(sim):
    return sim.env(PYTHONPATH=os.pathsep.join([
        os.environ.get("PYTHONPATH", ""), str(ROOT / "tests/python/fakes")]),
        GPR_FAKES_BUILD=str(FAKES_BUILD))


def test_explain_json_before_the_script(sim, tmp_path):
    s = tmp_path / "ok.py"
    s.write_text(SCRIPT.replace("train()\n", ""))
    r = sim.run("explain", "--json", str(s), env=fakes_env(sim))
    assert r.rc == 0, r
    doc = json.loads(r.out)  # the whole of stdout: one document
    [g] = doc["gpus"]
    assert {p["kind"] for p in g["parts"]} >= {"live", "rest"}


def test_a_failing_script_s_traceback_is_its_own(sim, tmp_path):
    s = tmp_path / "boom.py"
    s.write_text(SCRIPT)
    for args in (["explain"], ["explain", "--holders"]):
        r = sim.run(*args, str(s), env=fakes_env(sim))
        assert r.rc == 1, r
        tb = r.err[r.err.index("Traceback (most recent call last):"):]
        assert f'File "{s}", line 5, in <module>' in tb, tb
        assert 'in train\n    raise ValueError("boom")' in tb, tb
        assert "gpureclaim" not in tb and "<frozen runpy>" not in tb, tb
        assert tb.rstrip().endswith("ValueError: boom"), tb
