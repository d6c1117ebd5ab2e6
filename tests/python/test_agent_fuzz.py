"""Fuzzing (hypothesis) what the Python side reads from an agent, which may
be any local user's process (issue 34): the client's checks of an answer
(gpureclaim/agent/ answer_of, result_of), and the exporter's reading of
an explain answer (gpureclaim/metrics/ check_explained, parts_rows,
check_rows, then the exposition prometheus_client writes). The client
either returns a document or raises AgentError (a known kind, one line);
the exporter's checks either pass or raise BadAnswer, and what passes is
written out without an error. The C client's twin is
tests/cli/fuzz_agent_answer.c (libFuzzer).

`make check` runs GPR_FUZZ_EXAMPLES examples each (default 300, the same
ones every time); scripts/fuzz-long.sh sets GPR_FUZZ_SECONDS and runs
fresh examples for that long, printing how many ran."""
import json
import os
import sys
import time

import pytest

from conftest import PY_PATH

hypothesis = pytest.importorskip(
    "hypothesis", reason="hypothesis is not installed (scripts/install-deps"
    ".sh check installs it)")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

sys.path.insert(0, PY_PATH)
from gpureclaim import agent, metrics  # noqa: E402
from gpureclaim.agent import _protocol  # noqa: E402

SECONDS = float(os.environ.get("GPR_FUZZ_SECONDS", "0"))
EXAMPLES = int(os.environ.get("GPR_FUZZ_EXAMPLES", "300"))
UUIDS = {"GPU-a": "0", "GPU-b": "1"}
TOTALS = {"0": 80 << 30, "1": None}

ints = st.one_of(st.integers(-(2 ** 70), 2 ** 70),
                 st.sampled_from([0, 1, -1, 2 ** 63 - 1, 2 ** 63, 2 ** 64,
                                  10 ** 30, 80 << 30, (80 << 30) + 1]))
scalars = st.one_of(st.none(), st.booleans(), ints,
                    st.floats(allow_nan=True, allow_infinity=True),
                    st.text(max_size=16))
values = st.recursive(
    scalars, lambda c: st.one_of(st.lists(c, max_size=4),
                                 st.dictionaries(st.text(max_size=8), c,
                                                 max_size=4)),
    max_leaves=24)


def maybe(s):
    """s, or any JSON value in its place."""
    return st.one_of(s, values)


part = st.fixed_dictionaries({}, optional={
    "kind": maybe(st.sampled_from(metrics.PART_KINDS)),
    "source": maybe(st.sampled_from(["torch", "cupy", "\x1b[2J", ""])),
    "bytes": maybe(ints), "known": maybe(st.booleans())})
gpu = st.fixed_dictionaries({}, optional={
    "device": maybe(st.integers(-1, 3)),
    "uuid": maybe(st.sampled_from(sorted(UUIDS) + ["GPU-x"])),
    "parts": maybe(st.lists(maybe(part), max_size=4)),
    "rest_part": maybe(part)})
explained = st.fixed_dictionaries({}, optional={
    "gpus": maybe(st.lists(maybe(gpu), max_size=3))})
documents = st.fixed_dictionaries(
    {"v": maybe(st.just(1)), "ok": maybe(st.booleans())},
    optional={"pid": values, "result": maybe(explained),
              "error": maybe(st.text(max_size=40)), "kind": values,
              "text": maybe(st.text(max_size=40))})


def deep(n):
    return ("[" * n + "]" * n).encode()


lines = st.one_of(
    st.binary(max_size=120),
    documents.map(lambda d: json.dumps(d).encode()),
    documents.map(lambda d: json.dumps(d, ensure_ascii=False).encode()),
    st.integers(1, 3000).map(
        lambda n: b'{"v":1,"ok":true,"result":' + deep(n) + b"}"),
    st.integers(1, 6000).map(
        lambda n: b'{"v":1,"ok":true,"result":1' + b"0" * n + b"}"))


def fuzz(test):
    """Runs a @given test: EXAMPLES fixed examples, or fresh ones for
    SECONDS (and says how many)."""
    quiet = dict(deadline=None, database=None,
                 suppress_health_check=list(HealthCheck))
    if SECONDS <= 0:
        settings(max_examples=EXAMPLES, derandomize=True, **quiet)(test)()
        return
    run = settings(max_examples=500, **quiet)(test)
    end, n = time.monotonic() + SECONDS, 0
    while time.monotonic() < end:
        run()  # fresh random examples each time
        n += 500
    print(f"\nfuzzed {test.__name__}: {n} examples in {SECONDS:g} s")


def test_the_client_returns_a_document_or_raises_agent_error():
    @given(lines)
    def client(line):
        try:
            doc = agent.result_of(42, agent.answer_of(42, line))
        except agent.AgentError as e:
            assert e.kind in agent.KINDS
            assert "\n" not in str(e)
            return
        assert isinstance(doc, dict) and "result" in doc
    fuzz(client)


class _Reading:
    def __init__(self, rows):
        self.r = metrics.Reading(parts=rows)

    def describe(self):
        return iter(metrics._families(None, None, own=True))

    def collect(self):
        return iter(metrics._families(self.r, None, own=True))


def test_the_exporter_refuses_or_writes_every_explain_answer():
    pytest.importorskip("prometheus_client")

    @given(maybe(explained))
    def exporter(res):
        try:
            metrics.check_explained(res)
            rows = metrics.parts_rows(res, 42, [("0", "GPU-a"),
                                                ("1", "GPU-b")], UUIDS)
            if rows is None:
                return
            metrics.check_rows(rows, TOTALS)
        except metrics.BadAnswer:
            return
        text = metrics.exposition(_Reading(rows)).decode()
        assert text.count("gpureclaim_process_part_bytes{") == len(rows)
    fuzz(exporter)


def test_what_the_commands_print_of_an_agent_is_printable():
    @given(st.text())
    def printable(s):
        out = _protocol.printable(s)
        assert len(out) == len(s) and out.isprintable()
    fuzz(printable)
