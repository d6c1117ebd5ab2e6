"""The C client (cli/agent_client.c, through tests/cli/agent_replay.c)
against every recorded exchange of tests/agent_protocol/: the request it
writes, byte for byte, and what it makes of the answer, the value or the
failure's kind and line. The Python client replays the same exchanges
(tests/python/test_agent_protocol.py), so the two cannot drift."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "agent_protocol"))
import exchanges  # noqa: E402

REPLAY = os.environ.get("GPR_AGENT_REPLAY", os.path.join(
    os.path.dirname(os.path.dirname(HERE)), "build", "tests", "cli",
    "agent_replay"))
ALL = exchanges.load()


@pytest.mark.parametrize("name", sorted(ALL))
def test_the_c_client_replays(name):
    x = ALL[name]
    ask = x["ask"]
    with exchanges.folder() as d:
        env = dict(os.environ, GPURECLAIM_AGENT_DIR=d)
        with exchanges.serve(name, d, env) as (pid, request):
            p = subprocess.run([REPLAY, str(pid), ask["op"],
                                exchanges.args_members(x),
                                str(ask["timeout"])],
                               env=env, capture_output=True, timeout=120)
            assert p.returncode == 0 and p.stderr == b"", p.stderr
            assert exchanges.normal(request()) == x["request"].encode()
    out = p.stdout.decode()
    assert out.endswith("\n") and out.count("\n") == 1, out[:200]
    what, _, rest = out[:-1].partition(" ")
    got = ("ok", json.loads(rest)) if what == "ok" else \
        (what, *rest.partition("\t")[::2])
    exchanges.check(x, pid, got)
