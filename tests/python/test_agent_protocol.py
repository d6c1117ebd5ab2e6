"""The Python client (gpureclaim/agent/) against every recorded exchange
of tests/agent_protocol/: the request it writes, byte for byte, and what
it makes of the answer, the value or the failure's kind and line. The C
client replays the same exchanges (tests/cli/test_agent_protocol.py)."""
import os
import sys

import pytest

from conftest import PY_PATH

sys.path.insert(0, PY_PATH)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "agent_protocol"))
import exchanges  # noqa: E402

from gpureclaim import agent  # noqa: E402

ALL = exchanges.load()


def test_the_exchanges_show_every_kind_and_are_the_protocols():
    kinds = {x["expect"].get("kind") for x in ALL.values()}
    assert set(exchanges.KINDS) <= kinds
    assert set(exchanges.KINDS) == set(agent.KINDS)
    for name, x in ALL.items():
        assert x["request"] in ("", exchanges.request_line(x)), name
        assert x["expect"].get("kind", "error") in agent.KINDS, name


@pytest.fixture
def folder(monkeypatch):
    with exchanges.folder() as d:
        monkeypatch.setenv("GPURECLAIM_AGENT_DIR", d)
        yield d


@pytest.mark.parametrize("name", sorted(ALL))
def test_the_python_client_replays(name, folder):
    x = ALL[name]
    ask = x["ask"]
    with exchanges.serve(name, folder) as (pid, request):
        try:
            got = ("ok", agent.ask(pid, ask["op"], timeout=ask["timeout"],
                                   **ask["args"]))
        except agent.AgentError as e:
            got = ("fail", e.kind, str(e))
        assert exchanges.normal(request()) == x["request"].encode()
    exchanges.check(x, pid, got)
