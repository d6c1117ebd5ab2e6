"""gpureclaim's metrics without a Prometheus server: the labels of hostile
processes, containers from cgroup paths, the exporter's options and its
one-line errors, its figures against `gpureclaim ps --json`, the parts of
processes with agents, and gpureclaim.metrics.register() in a process."""
import getpass
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
from metricsenv import (BIN, HANG_S, PY_PATH, MiB, parse_exposition,
                        read_line, series, sim)  # noqa: F401 (sim: a fixture)

sys.path.insert(0, PY_PATH)
from gpureclaim import metrics  # noqa: E402
from gpureclaim.metrics import _exporter, _proc  # noqa: E402

HOSTILE = ['line\nbreak', 'quote"}', 'back\\slash', '"} 1\nfake_metric 1',
           '\x1b[31mred\x07', 'sep\u2028x', 'x' * 500]


@pytest.mark.parametrize("text", HOSTILE + [b"\xff\xfe".decode("utf-8", "replace")])
def test_label_values_print_and_are_bounded(text):
    v = _proc.label_value(text)
    assert len(v) <= _proc.COMMAND_CHARS
    assert all(c.isprintable() for c in v), v
    if len(text) > _proc.COMMAND_CHARS:
        assert v.endswith("...")


POD = "0f4c2a3e-1b2d-4c5e-8f90-123456789abc"
CID = "4f1c" * 16


@pytest.mark.parametrize("cgroup,want", [
    # Kubernetes, systemd cgroup driver, containerd (cgroup v2)
    (f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
     f"{POD.replace('-', '_')}.slice/cri-containerd-{CID}.scope\n", (CID, POD)),
    # Kubernetes, cgroupfs driver (cgroup v1: the memory controller's line)
    (f"12:cpuset:/\n4:memory:/kubepods/besteffort/pod{POD}/{CID}\n"
     f"1:name=systemd:/kubepods/besteffort/pod{POD}/{CID}\n", (CID, POD)),
    # CRI-O
    (f"0::/kubepods.slice/kubepods-pod{POD.replace('-', '_')}.slice/"
     f"crio-{CID}.scope\n", (CID, POD)),
    # Docker (systemd and cgroupfs), Podman
    (f"0::/system.slice/docker-{CID}.scope\n", (CID, "")),
    (f"0::/docker/{CID}\n", (CID, "")),
    (f"0::/machine.slice/libpod-{CID}.scope/container\n", (CID, "")),
    # not in a container
    ("0::/user.slice/user-1000.slice/session-2.scope\n", ("", "")),
    ("0::/\n", ("", "")),
    ("", ("", "")),
    ("garbage\n\0\n:::\n", ("", "")),
])
def test_container_and_pod_from_the_cgroup(cgroup, want):
    assert _proc.container_of(cgroup) == want


def test_own_process_facts():
    f = _proc.ProcCache().facts(os.getpid())
    assert f.user == getpass.getuser()
    assert f.command and len(f.command) <= _proc.COMMAND_CHARS
    assert _proc.ProcCache().facts(2 ** 22 + 7) == ("", "", "", "")


@pytest.mark.parametrize("text,want", [
    ("127.0.0.1:9835", ("127.0.0.1", 9835)),
    ("0.0.0.0:0", ("0.0.0.0", 0)),
    ("[::1]:9835", ("::1", 9835)),
    ("localhost:80", ("localhost", 80)),
])
def test_listen_addresses(text, want):
    assert _exporter.parse_listen(text) == want


@pytest.mark.parametrize("text", ["9835", ":9835", "::1:9835", "[::1]9835",
                                  "host:port", "host:70000", "h:"])
def test_bad_listen_addresses(text):
    with pytest.raises(ValueError):
        _exporter.parse_listen(text)


def test_loopback():
    assert _exporter.is_loopback("127.0.0.1") and _exporter.is_loopback("::1")
    assert _exporter.is_loopback("localhost")
    assert not _exporter.is_loopback("0.0.0.0")
    assert not _exporter.is_loopback("10.1.2.3")


def explained(*gpus):
    """explain().to_dict()'s shape: (device, {kind: bytes}) per GPU."""
    return {"gpus": [{"device": d, "parts": [
        {"kind": k, "source": "torch", "bytes": b, "known": True}
        for k, b in parts.items()]} for d, parts in gpus]}


UUIDS = {"GPU-a": "0", "GPU-b": "1", "GPU-c": "2"}


def test_parts_are_matched_to_nvml_gpus():
    # a process on NVML GPUs 1 and 2: its ordinals 0 and 1, in order
    rows = metrics.parts_rows(explained((0, {"releasable": 5}),
                                        (1, {"releasable": 7})),
                              42, [("2", "GPU-c"), ("1", "GPU-b")], UUIDS)
    assert {(r["gpu"], r["bytes"]) for r in rows} == {("1", 5), ("2", 7)}
    # CUDA_VISIBLE_DEVICES=2,1 numbers them the other way round
    rows = metrics.parts_rows(explained((0, {"releasable": 5}),
                                        (1, {"releasable": 7})),
                              42, [("2", "GPU-c"), ("1", "GPU-b")], UUIDS,
                              visible=["2", "GPU-b"])
    assert {(r["gpu"], r["bytes"]) for r in rows} == {("2", 5), ("1", 7)}
    # one GPU in explain, two where NVML lists it, no CUDA_VISIBLE_DEVICES
    assert metrics.parts_rows(explained((1, {"live": 1})), 42,
                              [("1", "GPU-b"), ("2", "GPU-c")], UUIDS) is None
    # the same kind and source twice: one series, summed; unknown parts
    # and garbage left out
    e = explained((0, {"live": 3}))
    e["gpus"][0]["parts"] += [
        {"kind": "live", "source": "torch", "bytes": 4, "known": True},
        {"kind": "pool", "source": "jax", "bytes": 9, "known": False},
        {"kind": "pool", "source": "jax", "bytes": "9"}, "junk", None]
    rows = metrics.parts_rows(e, 42, [("0", "GPU-a")], UUIDS)
    assert rows == [{"gpu": "0", "uuid": "GPU-a", "pid": 42, "kind": "live",
                     "source": "torch", "bytes": 7}]
    assert metrics.parts_rows({"gpus": "junk"}, 1, [], UUIDS) == []
    # two entries for one GPU (a hostile agent): nothing, never a series
    # twice (Prometheus would refuse the whole scrape)
    twice = {"gpus": [dict(e["gpus"][0], uuid="GPU-a")] * 2}
    assert metrics.parts_rows(twice, 42, [("0", "GPU-a")], UUIDS) is None


def exporter(sim, *args, **kw):  # noqa: F811
    return sim.run("exporter", *args, **kw)


def test_options_and_usage_errors(sim):  # noqa: F811
    for bad in (["--interval", "0"], ["--interval=-1"], ["--interval", "x"],
                ["--agent-timeout", "nan"], ["--listen", "9835"],
                ["--json"], ["--bogus"], ["extra"], ["--listen"]):
        p = exporter(sim, *bad)
        assert p.returncode == 2 and p.stdout == "", (bad, p)
        lines = p.stderr.splitlines()
        assert len(lines) == 2 and lines[0].startswith("gpureclaim exporter: ")
    h = exporter(sim, "--help")
    assert h.returncode == 0 and h.stdout.startswith("USAGE: gpureclaim exporter")
    assert "pip install 'gpureclaim[prometheus]'" in h.stdout


def test_without_prometheus_client_one_line(sim, tmp_path):  # noqa: F811
    stub = tmp_path / "prometheus_client"
    stub.mkdir()
    (stub / "__init__.py").write_text(
        "raise ImportError('No module named prometheus_client')\n")
    env = dict(sim.env, PYTHONPATH=f"{tmp_path}:{sim.env['PYTHONPATH']}")
    p = subprocess.run([BIN, "exporter", "--once"], env=env,
                       capture_output=True, text=True, timeout=HANG_S)
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.splitlines() == [
        "gpureclaim exporter: gpureclaim's metrics need prometheus_client: "
        "pip install 'gpureclaim[prometheus]'"]


def test_figures_are_the_drivers_and_hostile_commands_are_harmless(sim):  # noqa: F811
    hostile = [*HOSTILE, b"\xff\xfe"]
    procs = [sim.workload(0, 64, 32), sim.workload(1, 16, 0, argv=hostile),
             sim.workload(1, 8, 8)]
    p = exporter(sim, "--once")
    assert p.returncode == 0, p.stderr
    assert "fake_metric" not in [line.split("{")[0] for line in
                                 p.stdout.splitlines()]
    got = parse_exposition(p.stdout)
    ps = json.loads(sim.run("ps", "--json").stdout)
    for g in ps["gpus"]:
        lab = {"gpu": str(g["gpu"]), "uuid": g["uuid"], "name": g["name"]}
        for key in ("total", "used", "free"):
            (s, v), = series(got, f"gpureclaim_gpu_memory_{key}_bytes", **lab)
            assert v == g[key] and s == lab
        for pr in g["processes"]:
            (s, v), = series(got, "gpureclaim_process_memory_bytes",
                             pid=str(pr["pid"]), gpu=str(g["gpu"]))
            assert v == pr["bytes"]
            assert s["user"] == pr["user"] == getpass.getuser()
            assert s["container"] == "" or len(s["container"]) >= 12
    mine = {r["pid"]: r for _, r in procs}
    for pid, r in mine.items():
        (s, v), = series(got, "gpureclaim_process_memory_bytes", pid=str(pid))
        assert v == r["driver"]
    (s, _), = series(got, "gpureclaim_process_memory_bytes",
                     pid=str(procs[1][1]["pid"]))
    cmd = s["command"]
    assert len(cmd) == 64 and cmd.endswith("...") and "\n" not in cmd
    # the interpreter by its name, not its path
    assert cmd.startswith(os.path.basename(sys.executable) + " ")
    # no agents here: no parts, none asked
    assert series(got, "gpureclaim_process_part_bytes") == []
    assert series(got, "gpureclaim_exporter_agents", state="answered")[0][1] == 0
    assert series(got, "gpureclaim_exporter_readings_total")[0][1] == 1
    assert series(got, "gpureclaim_exporter_nvml_errors_total")[0][1] == 0
    # the JSON of the same reading
    j = json.loads(exporter(sim, "--once", "--json").stdout)
    assert {p["pid"] for p in j["processes"]} >= set(mine)
    assert j["nvml_error"] is None and len(j["gpus"]) == 2
    # the words of every JSON output (docs/naming.md): a GPU's index an
    # integer, the time "time" (ISO, UTC) and "unix_time"; "at" of the
    # release before beside them
    assert [g["gpu"] for g in j["gpus"]] == [0, 1]
    assert {p["gpu"] for p in j["processes"]} <= {0, 1}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z",
                        j["time"]), j["time"]
    assert j["at"] == j["unix_time"] > 0


def test_nvml_absent_is_counted_not_fatal(tmp_path):
    from metricsenv import Sim

    s = Sim("gpus=2;fault=nvml-absent")
    try:
        p = s.run("exporter", "--once")
    finally:
        s.close()
    assert p.returncode == 0, p.stderr
    got = parse_exposition(p.stdout)
    assert series(got, "gpureclaim_exporter_nvml_errors_total")[0][1] == 1
    assert series(got, "gpureclaim_gpu_memory_total_bytes") == []


def serve(sim, *args):  # noqa: F811
    p = subprocess.Popen([BIN, "exporter", *args], env=sim.env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    sim.procs.append(p)
    return p, read_line(p, "gpureclaim exporter: serving ")


def test_loopback_by_default_and_another_address_said(sim):  # noqa: F811
    p, line = serve(sim, "--listen", "127.0.0.1:0")
    assert "(loopback: this machine only)" in line
    p.terminate()
    assert p.wait(HANG_S) == 0
    p, line = serve(sim, "--listen", "0.0.0.0:0")
    assert "non-loopback address, as asked" in line
    p.terminate()
    assert p.wait(HANG_S) == 0
    q = subprocess.run([BIN, "exporter", "--help"], env=sim.env,
                       capture_output=True, text=True)
    assert "default 127.0.0.1:9835" in q.stdout


def test_a_busy_port_is_one_line(sim):  # noqa: F811
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    try:
        p = exporter(sim, "--listen", f"127.0.0.1:{s.getsockname()[1]}")
    finally:
        s.close()
    assert p.returncode == 1
    assert p.stderr.count("\n") == 1 and "cannot listen on" in p.stderr


REGISTER = """\
import json, sys
import torch, gpureclaim, gpureclaim.metrics as m
from prometheus_client import CollectorRegistry, generate_latest
MiB = 1 << 20
keep = torch.empty(48 * MiB, dtype=torch.uint8, device="cuda:1")
d = torch.empty(80 * MiB, dtype=torch.uint8, device="cuda:1"); del d
reg = CollectorRegistry()
c = m.register(reg)
assert m.register(reg) is c
text = generate_latest(reg).decode()
rel = gpureclaim.release()
print(json.dumps({"text": text, "released": rel.to_dict()["bytes"],
                  "after": generate_latest(reg).decode()}))
"""


def test_register_in_a_process(sim):  # noqa: F811
    p = subprocess.run([sys.executable, "-c", REGISTER], env=sim.env,
                       capture_output=True, text=True, timeout=HANG_S)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    got = parse_exposition(d["text"])
    # this process's own names only: no GPU-wide or exporter metrics
    assert {n for n, _ in got} == {"gpureclaim_process_memory_bytes",
                                   "gpureclaim_process_part_bytes"}
    (s, v), = series(got, "gpureclaim_process_part_bytes", kind="releasable")
    assert v == d["released"] == 80 * MiB
    assert s["gpu"] == "1" and s["source"] == "torch"
    assert s["uuid"] == "GPU-5111a000-0000-4000-8000-000000000001"
    (_, live), = series(got, "gpureclaim_process_part_bytes", kind="live")
    assert live == 48 * MiB
    # the parts add up to the driver's figure (the rest included)
    (s, drv), = series(got, "gpureclaim_process_memory_bytes")
    assert sum(v for _, v in series(got, "gpureclaim_process_part_bytes")) == drv
    assert s["user"] == getpass.getuser()
    after = parse_exposition(d["after"])
    assert series(after, "gpureclaim_process_part_bytes",
                  kind="releasable")[0][1] == 0


def test_parts_of_the_processes_with_agents(sim):  # noqa: F811
    a = sim.workload(0, 64, 96, agent=True)[1]
    b = sim.workload(1, 32, 48, agent=True)[1]
    c = sim.workload(1, 16, 16)[1]  # no agent: its driver bytes only
    p = exporter(sim, "--once")
    assert p.returncode == 0, p.stderr
    got = parse_exposition(p.stdout)
    for r, gpu in ((a, "0"), (b, "1")):
        parts = series(got, "gpureclaim_process_part_bytes", pid=str(r["pid"]))
        assert {s["gpu"] for s, _ in parts} == {gpu}
        kinds = {s["kind"]: v for s, v in parts if s["source"] == "torch"}
        assert kinds["releasable"] == r["releasable"]
        assert kinds["live"] == r["live"]
        # the parts, the rest included, are the driver's figure exactly
        assert sum(v for _, v in parts) == r["driver"]
    assert series(got, "gpureclaim_process_part_bytes", pid=str(c["pid"])) == []
    assert series(got, "gpureclaim_exporter_agents", state="answered")[0][1] == 2
    assert series(got, "gpureclaim_exporter_agents", state="failed")[0][1] == 0


def test_agents_that_do_not_answer_are_counted(sim):  # noqa: F811
    ok = sim.workload(0, 8, 8, agent=True)[1]
    silent = sim.workload(0, 8, 8, agent=2)[1]
    garbage = sim.workload(1, 8, 8, agent=3)[1]
    p = exporter(sim, "--once", "--agent-timeout", "0.5")
    assert p.returncode == 0, p.stderr
    got = parse_exposition(p.stdout)
    assert series(got, "gpureclaim_exporter_agents", state="answered")[0][1] == 1
    assert series(got, "gpureclaim_exporter_agents", state="failed")[0][1] == 2
    fails = {s["reason"]: v for s, v in
             series(got, "gpureclaim_exporter_agent_failures_total")}
    assert fails["timeout"] == 1 and fails["bad_answer"] == 1
    assert sum(fails.values()) == 2
    assert series(got, "gpureclaim_process_part_bytes", pid=str(ok["pid"]))
    for r in (silent, garbage):
        assert series(got, "gpureclaim_process_part_bytes",
                      pid=str(r["pid"])) == []
        # still listed with the driver's figure
        assert series(got, "gpureclaim_process_memory_bytes", pid=str(r["pid"]))


def test_a_hostile_agents_parts_are_bounded():
    """An agent speaks only for its own process, which may be hostile:
    its labels are made printable and cut, its series capped."""
    g = {"device": 0, "parts": [
        {"kind": "live\n", "source": "s" * 500, "bytes": 1, "known": True},
        *({"kind": "pool", "source": f"lib{i}", "bytes": 2, "known": True}
          for i in range(1000)),
        {"kind": "rest", "source": "x", "bytes": True, "known": True},
        {"kind": "rest", "source": "x", "bytes": 5, "known": "yes"}]}
    sums = metrics.part_sums(g)
    assert len(sums) == metrics.MAX_PARTS
    (kind, source), = [k for k in sums if k[0].startswith("live")]
    assert kind == "live?" and len(source) == 64 and source.endswith("...")
    assert metrics.part_sums({"parts": "junk", "rest_part": 3}) == {}


def test_a_hostile_agents_answer_is_its_bad_answer_never_the_exporters_end(
        sim):  # noqa: F811
    """Any local user's process may answer as an agent: "gpus": 5 (a
    TypeError in the parts' rows) or a part of 10**400 bytes (an
    OverflowError in prometheus_client) ended root's exporter at its next
    reading, or before it first served. Every field is checked (type,
    range: 0 <= bytes <= the GPU's total); a bad one is that agent's
    bad_answer."""
    def explain_answer(gpus):
        return json.dumps({"v": 1, "ok": True, "pid": 1,
                           "result": {"gpus": gpus}}).replace(
            '"BIG"', "1" + "0" * 400)

    def part(b, **kw):
        return [{"device": 0, "parts": [dict({"kind": "live", "source":
                                              "torch", "bytes": b,
                                              "known": True}, **kw)]}]
    answers = [explain_answer(5), explain_answer(part("BIG")),
               explain_answer(part(-5)), explain_answer(part(1 << 62)),
               explain_answer(part(7, known="yes")),
               explain_answer(part(7, kind=["x"])),
               explain_answer([{"device": 0, "parts": 3}]),
               explain_answer([7])]
    good = sim.workload(0, 8, 8, agent=True)[1]
    for a in answers:
        sim.workload(0, 8, 0, answer=a)
    p = exporter(sim, "--once")
    assert p.returncode == 0, p.stderr
    got = parse_exposition(p.stdout)
    fails = {s["reason"]: v for s, v in
             series(got, "gpureclaim_exporter_agent_failures_total")}
    assert fails["bad_answer"] == len(answers), fails
    assert series(got, "gpureclaim_exporter_agents", state="answered")[0][1] == 1
    assert series(got, "gpureclaim_process_part_bytes", pid=str(good["pid"]))
    p = exporter(sim, "--once", "--json")
    assert p.returncode == 0, p.stderr
    # and served: the first reading does not end it
    q, line = serve(sim, "--listen", "127.0.0.1:0", "--interval", "0.2")
    url = line.split("serving ", 1)[1].split()[0]
    import urllib.request
    with urllib.request.urlopen(url, timeout=HANG_S) as r:
        assert b"gpureclaim_exporter_agent_failures_total" in r.read()
    assert q.poll() is None
    q.terminate()
    assert q.wait(HANG_S) == 0


def test_suspended_processes_with_their_state_and_host_bytes(sim, tmp_path):  # noqa: F811
    # the records of `gpureclaim suspend` in a folder of the test's own
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    os.chmod(run_dir, 0o700)
    sim.env["GPURECLAIM_AGENT_DIR"] = str(run_dir)
    p, r = sim.workload(1, 64, 0)
    before = parse_exposition(exporter(sim, "--once").stdout)
    assert series(before, "gpureclaim_process_suspended_bytes") == []
    assert series(before, "gpureclaim_process_host_bytes") == []
    s = sim.run("suspend", "--pid", str(r["pid"]), "--json")
    assert s.returncode == 0, s.stderr
    (done,) = json.loads(s.stdout)["processes"]
    got = parse_exposition(exporter(sim, "--once").stdout)
    # NVML lists it no more; the records and the driver say what it is
    assert series(got, "gpureclaim_process_memory_bytes",
                  pid=str(r["pid"])) == []
    (lab, v), = series(got, "gpureclaim_process_suspended_bytes",
                       pid=str(r["pid"]))
    assert v == done["released"] == r["driver"]
    assert (lab["gpu"], lab["state"]) == ("1", "suspended")
    assert lab["user"] == getpass.getuser() and lab["uuid"].startswith("GPU-")
    (lab, v), = series(got, "gpureclaim_process_host_bytes",
                       pid=str(r["pid"]))
    assert v == done["host_bytes"] and lab["state"] == "suspended"
    j = json.loads(exporter(sim, "--once", "--json").stdout)
    assert [x["pid"] for x in j["host"]] == [r["pid"]]
    s = sim.run("resume", "--pid", str(r["pid"]))
    assert s.returncode == 0, s.stderr
    after = parse_exposition(exporter(sim, "--once").stdout)
    assert series(after, "gpureclaim_process_suspended_bytes") == []
    (_, v), = series(after, "gpureclaim_process_memory_bytes",
                     pid=str(r["pid"]))
    assert v == r["driver"]
