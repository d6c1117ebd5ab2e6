"""`gpureclaim ps` as users see it (issue 12): JSON records that make a
time series, processes that exited or lie outside this pid namespace,
--watch fitted to the terminal, colours, and hostile command lines."""
import datetime
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import BIN, GiB, MiB

SGR = re.compile(r"\x1b\[[0-9;]*m")
CLEAR = "\x1b[H\x1b[2J"


def gpu_of(doc, index):
    (gpu,) = [g for g in doc["gpus"] if g["gpu"] == index]
    return gpu


def proc_of(gpu, pid):
    (p,) = [p for p in gpu["processes"] if p["pid"] == pid]
    return p


def frames(screen):
    """The rounds a --watch on a terminal drew, each as its lines, the
    colours taken out (the last frame may be cut short by SIGINT)."""
    parts = screen.split(CLEAR)[1:]
    return [SGR.sub("", p).replace("\r", "").split("\n") for p in parts]


def frames_begun(n):
    """For run_on_tty: n frames begun on the terminal (n - 1 of them
    whole)."""
    return lambda out: out.count(CLEAR.encode()) >= n


# ------------------------------------------------------------- JSON series


def test_json_carries_time_host_and_driver(sim):
    sim.configure("gpus=1;extra=0:1:1GiB")
    before = time.time()
    doc = sim.run("ps", "--json").json()
    after = time.time()
    assert before - 0.01 <= doc["unix_time"] <= after + 0.01, doc
    when = datetime.datetime.strptime(doc["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
    when = when.replace(tzinfo=datetime.timezone.utc).timestamp()
    assert abs(when - doc["unix_time"]) < 0.001, doc
    assert doc["host"] == socket.gethostname()
    assert doc["driver_version"] == "580.0-sim"  # the sim's NVML
    assert list(doc)[:4] == ["time", "unix_time", "host", "driver_version"]


def test_json_watch_is_a_time_series(sim):
    sim.configure("extra=0:1:1GiB")
    proc = subprocess.Popen([str(BIN), "ps", "--json", "--watch", "0.1"],
                            env=sim.env(), stdout=subprocess.PIPE, text=True)
    try:
        docs = [json.loads(proc.stdout.readline()) for _ in range(4)]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=10)
    times = [d["unix_time"] for d in docs]
    assert times == sorted(times) and len(set(times)) == 4, times
    # the rounds are 0.1 s apart at least (the waits between them); how
    # much more depends on the machine, and is not looked at
    assert all(b - a > 0.05 for a, b in zip(times, times[1:])), times
    assert {d["host"] for d in docs} == {socket.gethostname()}
    assert {d["driver_version"] for d in docs} == {"580.0-sim"}


# ------------------------------------------------------------- markers


@pytest.fixture
def zombie():
    """A child that has exited and is not reaped yet: a zombie."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    # waits for the exit without reaping: a zombie from then on
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    yield pid
    os.waitpid(pid, 0)


def test_exited_holders_are_marked(sim, zombie):
    # a zombie still counted by the driver, and a pid gone altogether
    sim.configure(f"gpus=1;extra=0:{zombie}:2GiB,0:4000000:1GiB,0:1:1MiB")
    doc = sim.run("ps", "--json").json()
    gpu = gpu_of(doc, 0)
    z, gone, alive = (proc_of(gpu, p) for p in (zombie, 4000000, 1))
    assert (z["state"], gone["state"], alive["state"]) == \
        ("exited", "exited", "alive")
    assert z["user"] is not None and z["command"].startswith("[")
    assert gone["user"] is None and gone["command"] is None
    assert z["bytes"] == 2 * GiB  # the memory is still counted

    r = sim.run("ps", "--color=never")
    assert r.rc == 0, r
    rows = {line.split()[0]: line for line in r.out.splitlines()
            if line.strip()[:1].isdigit()}
    assert re.search(r"2\.0 GiB +2\.5% +<exited> \[python", rows[str(zombie)])
    assert rows["4000000"].rstrip().endswith("<exited>")
    # 1 MiB of 80 GiB: a share too small for one decimal, and no marker
    assert "<0.1%" in rows["1"] and "<exited>" not in rows["1"]


def in_new_pid_namespace(sim, *args):
    """Runs the tool in a new user and pid namespace (with its own /proc):
    a container's view, where the host's pids do not exist."""
    if not shutil.which("unshare"):
        pytest.skip("no unshare(1)")
    probe = subprocess.run(["unshare", "-U", "-r", "-p", "-f",
                            "--mount-proc", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a pid namespace here: {probe.stderr!r}")
    return subprocess.run(["unshare", "-U", "-r", "-p", "-f", "--mount-proc",
                           str(BIN), *args], env=sim.env(),
                          capture_output=True, text=True, timeout=30)


def test_pids_outside_this_namespace_are_marked(sim):
    # 4000000 exists in no namespace; this test's own pid exists on the
    # host, not in the new namespace: both are not in it
    me = os.getpid()
    sim.configure(f"gpus=1;extra=0:4000000:1GiB,0:{me}:2GiB")
    r = in_new_pid_namespace(sim, "ps", "--json")
    assert r.returncode == 0, r.stderr
    gpu = gpu_of(json.loads(r.stdout), 0)
    for pid in (4000000, me):
        p = proc_of(gpu, pid)
        assert p["state"] == "not_in_namespace", p
        assert p["user"] is None and p["command"] is None, p
    r = in_new_pid_namespace(sim, "ps")
    assert r.returncode == 0, r.stderr
    row = [line for line in r.stdout.splitlines() if "4000000" in line][0]
    assert row.split()[1] == "-"
    assert row.rstrip().endswith("<not in this pid namespace>"), row


def test_foreign_pid_fault_is_marked(sim):
    """The sim's foreign-pid fault: NVML lists host pids this machine does
    not have. Seen from the host's namespace they have exited."""
    sim.configure("context=64MiB;fault=foreign-pid")
    child = sim.spawn_alloc(0, 2 * MiB)
    (p,) = gpu_of(sim.run("ps", "--json").json(), 0)["processes"]
    assert p["pid"] == child.pid + 1000000 and p["state"] == "exited"


# ------------------------------------------------------------- terminal


def many(gpus, per_gpu):
    """A sim config: `gpus` GPUs with a long name, each with `per_gpu`
    processes that exist only in the sim's tables."""
    extra = ",".join(f"{g}:{4000000 + g * 100 + i}:{i + 1}MiB"
                     for g in range(gpus) for i in range(per_gpu))
    return (f"gpus={gpus};name=NVIDIA H200 NVL Simulated Long Name;"
            f"memory=141GiB;extra={extra}")


def test_watch_fits_a_60x20_terminal(sim):
    sim.configure(many(2, 30))
    # three frames begun: the first two are whole
    rc, screen, err = sim.run_on_tty("ps", "--watch", "0.2", cols=60,
                                     rows=20, until=frames_begun(3))
    assert rc == 0, err
    shown = [f for f in frames(screen) if len(f) > 3]
    assert len(shown) >= 2, screen
    for lines in shown[:-1]:
        assert lines[-1] == ""  # the last row stays empty: no scroll
        lines = lines[:-1]
        assert len(lines) <= 19, lines
        assert all(len(line) <= 60 for line in lines), lines
        # a header with the time and the interval
        assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d .*every 0\.2 s",
                        lines[0]), lines[0]
        gpu_lines = [line for line in lines if line.startswith("GPU ")]
        assert [line[:6] for line in gpu_lines] == ["GPU 0:", "GPU 1:"]
        # the GPU lines keep their figures; the long name gives way
        assert all(line.endswith("free") and "..." in line
                   for line in gpu_lines), gpu_lines
        more = [int(m) for m in re.findall(r"^  \+(\d+) more processes$",
                                           "\n".join(lines), re.M)]
        rows = [line for line in lines if re.match(r"^ +40\d\d\d\d\d ", line)]
        assert len(more) == 2 and sum(more) + len(rows) == 60, lines
        # the largest figures are the ones shown, on both GPUs
        assert {"4000029", "4000129"} <= {r.split()[0] for r in rows}


def test_watch_with_more_gpus_than_rows(sim):
    sim.configure(many(8, 3))
    rc, screen, err = sim.run_on_tty("ps", "--watch", "0.2", cols=80,
                                     rows=10, until=frames_begun(2))
    assert rc == 0, err
    lines = frames(screen)[0][:-1]
    assert len(lines) <= 9 and lines[1].startswith("GPU 0:"), lines
    assert re.match(r"^  \+\d+ more GPUs \(-i INDEX", lines[-1]), lines


def test_one_shot_on_a_terminal_cuts_lines_not_rows(sim):
    sim.configure(many(1, 30))
    rc, screen, err = sim.run_on_tty("ps", cols=50, rows=10)
    assert rc == 0, err
    lines = SGR.sub("", screen).replace("\r", "").splitlines()
    assert len(lines) == 32 and all(len(line) <= 50 for line in lines)
    assert CLEAR not in screen and "every" not in screen


def test_watch_text_not_on_a_terminal_has_a_header(sim):
    sim.configure("extra=0:1:1GiB")
    rc, out, err = sim.watch(["--watch", "0.1"],
                             lambda out: out.count("GPU 0: ") >= 3,
                             env=sim.env(TZ="UTC"))
    assert rc == 0, err
    heads = re.findall(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC, every 0\.1 s, "
                       r"(\S+) \(Ctrl-C stops\)$", out, re.M)
    assert len(heads) >= 3 and heads[0][1] == socket.gethostname(), out
    assert out.count("GPU 0: ") == len(heads)
    assert "\x1b" not in out


# ------------------------------------------------------------- colour


@pytest.mark.parametrize("args, env, tty, coloured", [
    ([], {}, True, True),
    ([], {"NO_COLOR": "1"}, True, False),
    ([], {"NO_COLOR": ""}, True, True),    # set but empty: no-color.org
    ([], {"TERM": "dumb"}, True, False),
    (["--color=never"], {}, True, False),
    (["--color", "never"], {}, True, False),   # the value as its own word
    (["--color", "always"], {}, False, True),
    (["--color=auto"], {}, False, False),
    (["--color"], {}, False, True),
    (["--color=always"], {"NO_COLOR": "1"}, False, True),
    (["--json"], {}, True, False),
])
def test_colour(sim, args, env, tty, coloured):
    sim.configure("gpus=2;fault=broken:1;extra=0:1:1GiB,0:4000000:1GiB")
    if tty:
        rc, out, err = sim.run_on_tty("ps", *args, env=sim.env(**env))
    else:
        r = sim.run("ps", *args, env=sim.env(**env))
        rc, out = r.rc, r.out
    assert rc == 1  # GPU 1 is broken
    assert bool(SGR.search(out)) == coloured, out
    if coloured:
        assert "\x1b[1mGPU 0: " in out          # bold GPU line
        assert "\x1b[31mGPU 1: error: " in out  # red error
        assert "\x1b[33m<exited>\x1b[0m" in out  # yellow marker
    plain = SGR.sub("", out).replace("\r", "")
    assert "GPU 1: error: " in plain or args == ["--json"]


def test_colour_bad_value(sim):
    r = sim.run("ps", "--color=sometimes")
    assert r.rc == 2 and r.out == "" and "--color" in r.err, r
    # a word after --color that is no WHEN is not taken as its value
    r = sim.run("ps", "--color", "sometimes")
    assert r.rc == 2 and r.err.startswith(
        "gpureclaim ps: unexpected argument 'sometimes'\n"), r


# ------------------------------------------------------------- hostile text


def test_bidi_override_in_a_command_line(sim):
    """U+202E (RIGHT-TO-LEFT OVERRIDE) in another user's command line
    would make a terminal show the rest reversed: shown as '?', and
    escaped in JSON."""
    child = sim.spawn_sleeper("evil\u202efdp.exe", "\u2066iso\u2069",
                              "\u05d0ok")
    sim.configure(f"gpus=1;extra=0:{child.pid}:1GiB")
    r = subprocess.run([str(BIN), "ps"], env=sim.env(),
                       capture_output=True, timeout=30)
    out = r.stdout.decode()
    assert "\u202e" not in out and "\u2066" not in out, out
    assert "evil?fdp.exe ?iso? \u05d0ok" in out, out
    r = subprocess.run([str(BIN), "ps", "--json"], env=sim.env(),
                       capture_output=True, timeout=30)
    assert b"\xe2\x80\xae" not in r.stdout
    assert b"evil\\u202efdp.exe \\u2066iso\\u2069" in r.stdout
    cmd = proc_of(gpu_of(json.loads(r.stdout), 0), child.pid)["command"]
    assert cmd.endswith("evil\u202efdp.exe \u2066iso\u2069 \u05d0ok")
