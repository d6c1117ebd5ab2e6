"""The gpureclaim tool against the simulated driver: what `ps` lists, every
sim fault, bad usage, --watch, `version`, and each command's --help."""
import json
import os
import pwd
import re
import signal
import subprocess

import pytest

from conftest import BIN, GiB, MiB, SIM_DIR

CTX = 64 * MiB  # the context size the tests configure
ME = pwd.getpwuid(os.getuid()).pw_name


def round2m(n):
    return -(-n // (2 * MiB)) * (2 * MiB)


def gpu_of(doc, index):
    (gpu,) = [g for g in doc["gpus"] if g["gpu"] == index]
    return gpu


def proc_of(gpu, pid):
    found = [p for p in gpu["processes"] if p["pid"] == pid]
    assert len(found) == 1, gpu
    return found[0]


# ---------------------------------------------------------------- ps


def test_ps_lists_a_process_that_allocated(sim):
    sim.configure(f"gpus=1;memory=16GiB;context={CTX}")
    child = sim.spawn_alloc(0, 3 * MiB + 1, 100 * MiB)
    expect = CTX + round2m(3 * MiB + 1) + round2m(100 * MiB)

    r = sim.run("ps", "--json")
    assert r.rc == 0, r
    gpu = gpu_of(r.json(), 0)
    assert gpu["total"] == 16 * GiB
    assert gpu["used"] == expect
    assert gpu["free"] == 16 * GiB - expect
    # the tool itself never opened a context: the child is alone
    assert [p["pid"] for p in gpu["processes"]] == [child.pid]
    p = gpu["processes"][0]
    assert p["bytes"] == expect
    assert p["bytes_known"] is True
    assert p["user"] == ME
    assert "sim_alloc.py" in p["command"]
    assert p["compute"] is True
    assert p["share"] == pytest.approx(100 * expect / (16 * GiB), abs=1e-3)

    r = sim.run("ps")
    assert r.rc == 0, r
    assert "GPU 0: Simulated GPU, 168.0 MiB / 16.0 GiB used" in r.out
    (row,) = [line for line in r.out.splitlines()
              if line.split()[:1] == [str(child.pid)]]
    assert row.split()[1] == ME
    assert "168.0 MiB" in row and "1.0%" in row and "sim_alloc.py" in row
    assert r.err == ""


def test_ps_puts_each_process_on_its_gpu(sim):
    sim.configure(f"gpus=2;context={CTX}")
    a = sim.spawn_alloc(1, 10 * MiB)
    b = sim.spawn_alloc(0, 2 * MiB)
    doc = sim.run("ps", "--json").json()
    assert [g["gpu"] for g in doc["gpus"]] == [0, 1]
    # "index", the key of the release before, beside it (docs/naming.md)
    assert [g["index"] for g in doc["gpus"]] == [0, 1]
    assert [p["pid"] for p in gpu_of(doc, 0)["processes"]] == [b.pid]
    assert [p["pid"] for p in gpu_of(doc, 1)["processes"]] == [a.pid]
    assert proc_of(gpu_of(doc, 1), a.pid)["bytes"] == CTX + 10 * MiB
    assert proc_of(gpu_of(doc, 0), b.pid)["bytes"] == CTX + 2 * MiB


def test_ps_extra_processes_sorted_by_bytes(sim):
    # pid 1 in both lists: NVML gives the process's figure in each
    sim.configure("gpus=1;extra=0:1:1GiB,0:4000000:3GiB,0:1g:1GiB,"
                  "0:4000002g:512MiB")
    r = sim.run("ps", "--json")
    assert r.rc == 0, r
    gpu = gpu_of(r.json(), 0)
    assert [(p["pid"], p["bytes"], p["compute"], p["graphics"])
            for p in gpu["processes"]] == [
        (4000000, 3 * GiB, True, False), (1, GiB, True, True),
        (4000002, 512 * MiB, False, True)]
    init = proc_of(gpu, 1)
    assert init["user"] is not None and init["command"]
    ghost = proc_of(gpu, 4000000)  # no such pid on this machine
    assert ghost["user"] is None and ghost["command"] is None

    text = sim.run("ps").out
    (row,) = [line for line in text.splitlines() if "4000000" in line]
    # gone from this (the host's) pid namespace: exited, memory held
    assert row.split() == ["4000000", "-", "3.0", "GiB", "3.8%", "<exited>"]
    assert ghost["state"] == "exited" and init["state"] == "alive"


def test_ps_shows_a_hostile_command_line_safely(sim):
    """Another user's command line may hold terminal controls: the text
    shows each as '?' (C0, C1 in UTF-8, a raw 0x9b), --json escapes them."""
    child = sim.spawn_sleeper(b"\x1b[2J", b"\xc2\x9b31m", b"\x9bX",
                              "caf\u00e9")
    sim.configure(f"gpus=1;extra=0:{child.pid}:1GiB")
    r = subprocess.run([str(BIN), "ps"], env=sim.env(),
                       capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    (row,) = [line for line in r.stdout.splitlines()
              if str(child.pid).encode() in line]
    assert b"\x1b" not in r.stdout and b"\x9b" not in r.stdout, row
    assert row.endswith(b" ?[2J ?31m ?X caf\xc3\xa9"), row
    r = subprocess.run([str(BIN), "ps", "--json"], env=sim.env(),
                       capture_output=True, timeout=30)
    doc = json.loads(r.stdout.decode("utf-8"))
    cmd = proc_of(gpu_of(doc, 0), child.pid)["command"]
    assert cmd.endswith(" \x1b[2J \x9b31m \ufffdX caf\u00e9"), cmd


def test_a_newline_inside_an_argument_stays_visible(sim):
    """/proc/PID/cmdline separates arguments with NULs (shown as spaces);
    a newline inside one is a control like any other: '?' in the text,
    \\n in JSON (docs/ps.md), never a space that hides it."""
    child = sim.spawn_sleeper("two\nlines", "next")
    sim.configure(f"gpus=1;extra=0:{child.pid}:1GiB")
    r = sim.run("ps")
    assert r.rc == 0, r
    (row,) = [line for line in r.out.splitlines() if str(child.pid) in line]
    assert row.endswith(" two?lines next"), row
    doc = sim.run("ps", "--json").json()
    cmd = proc_of(gpu_of(doc, 0), child.pid)["command"]
    assert cmd.endswith(" two\nlines next"), cmd


def test_ps_json_is_one_complete_document(sim):
    sim.configure("gpus=3;name=Test GPU \"x\";memory=40GiB;extra=2:1:2MiB")
    r = sim.run("ps", "--json")
    assert r.rc == 0 and r.out.endswith("\n") and r.out.count("\n") == 1
    doc = r.json()
    assert set(doc) == {"time", "unix_time", "host", "driver_version", "gpus"}
    for i, gpu in enumerate(doc["gpus"]):
        assert gpu["gpu"] == i
        assert gpu["name"] == 'Test GPU "x"'
        assert re.fullmatch(r"GPU-[0-9a-f-]{36}", gpu["uuid"]), gpu
        assert gpu["pci_bus_id"]
        assert gpu["total"] == 40 * GiB
        assert gpu["used"] + gpu["free"] == gpu["total"]
        assert gpu["mig"] is False
        assert gpu["memory_info"] == "v2"
    assert gpu_of(doc, 0)["processes"] == []
    assert len(gpu_of(doc, 2)["processes"]) == 1
    # the uuids differ
    assert len({g["uuid"] for g in doc["gpus"]}) == 3


def test_ps_text_without_processes(sim):
    sim.configure("gpus=2")
    r = sim.run("ps")
    assert r.rc == 0, r
    assert r.out.count("no processes") == 2
    assert "GPU 1: Simulated GPU, 0 B / 80.0 GiB used, 80.0 GiB free" in r.out


@pytest.mark.parametrize("args, expect", [
    (["-i", "2"], [2]),
    (["--gpu", "0,2"], [0, 2]),
    (["-i", "2", "-i", "0"], [0, 2]),
    (["-i", "1,1", "--gpu=1"], [1]),
])
def test_ps_gpu_filter(sim, args, expect):
    sim.configure("gpus=3")
    r = sim.run("ps", "--json", *args)
    assert r.rc == 0, r
    assert [g["gpu"] for g in r.json()["gpus"]] == expect
    text = sim.run("ps", *args).out
    assert re.findall(r"^GPU (\d+):", text, re.M) == [str(i) for i in expect]


def test_ps_memory_v1_path(sim):
    sim.configure("fault=memory-v1;extra=0:1:1GiB")
    r = sim.run("ps", "--json")
    assert r.rc == 0, r
    gpu = gpu_of(r.json(), 0)
    assert gpu["memory_info"] == "v1"
    assert gpu["used"] == GiB


# ---------------------------------------------------------------- faults


def assert_runtime_error(r, *words):
    assert r.rc == 1, r
    assert r.out == "", r  # never a partial document
    assert r.err.startswith("gpureclaim: "), r
    for w in words:
        assert w in r.err, r
    assert "Traceback" not in r.err and "AddressSanitizer" not in r.err


@pytest.mark.parametrize("fmt", [[], ["--json"]])
def test_fault_nvml_absent(sim, fmt):
    sim.configure("fault=nvml-absent")
    assert_runtime_error(sim.run("ps", *fmt), "NVIDIA driver not found")


@pytest.mark.parametrize("fmt", [[], ["--json"]])
def test_nvml_path_is_not_nvml(sim, fmt):
    env = sim.env(GPURECLAIM_NVML_LIBRARY="libm.so.6")
    r = sim.run("ps", *fmt, env=env)
    assert_runtime_error(r, "not an NVIDIA NVML library", "libm.so.6")


def test_nvml_path_missing(sim):
    env = sim.env(GPURECLAIM_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1")
    r = sim.run("ps", "--json", env=env)
    assert_runtime_error(r, "NVIDIA driver not found",
                         "/nonexistent/libnvidia-ml.so.1")
    # every message names a path once (issue 16 item 12)
    assert r.err.count("/nonexistent/libnvidia-ml.so.1") == 1, r
    r = sim.run("version", env=env)
    assert r.out.count("/nonexistent/libnvidia-ml.so.1") == 1, r


def test_no_driver_at_all(sim):
    env = sim.env()
    del env["GPURECLAIM_NVML_LIBRARY"]
    env.pop("LD_LIBRARY_PATH", None)
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("this machine has an NVIDIA driver")
    r = sim.run("ps", env=env)
    assert_runtime_error(r, "NVIDIA driver not found", "libnvidia-ml.so.1")
    # a build folder's command names its simulated driver, which `make
    # demo` ran on, and how to run ps on it (issue 33); from /, whole paths
    build = BIN.parent.parent.resolve()
    r = subprocess.run([str(BIN), "ps"], env=env, capture_output=True,
                       text=True, timeout=60, cwd="/")
    first, hint, *rest = r.stderr.splitlines()
    assert rest == [] and hint.startswith(
        "gpureclaim: no GPU driver here; this build's simulated driver "
        "(the one make demo runs on) lists its GPUs with: "), r.stderr
    assert hint.endswith(" (docs/sim.md)")
    cmd = hint.split("with: ", 1)[1][:-len(" (docs/sim.md)")]
    assert f"LD_LIBRARY_PATH={build}/sim {build}/cli/gpureclaim ps" in cmd
    p = subprocess.run(["bash", "-c", cmd.replace(
        "GPURECLAIM_SIM='", f"GPURECLAIM_SIM='state={sim.state};")],
        env=env, capture_output=True, text=True, timeout=60, cwd="/")
    assert p.returncode == 0 and p.stdout.startswith(
        "GPU 0: Simulated GPU, "), (p.stdout, p.stderr)
    # a library named by the user: no guess about what was meant
    r = sim.run("ps", env=dict(env, GPURECLAIM_NVML_LIBRARY="/nonexistent/"
                               "libnvidia-ml.so.1"))
    assert len(r.err.splitlines()) == 1, r.err


def test_malformed_sim_config(sim):
    sim.configure("gpus=two")
    r = sim.run("ps", "--json")
    assert r.rc == 1, r
    assert r.out == ""
    assert "gpureclaim: " in r.err


def test_fault_broken_gpu_lists_the_others(sim):
    sim.configure(f"gpus=3;context={CTX};fault=broken:1")
    child = sim.spawn_alloc(2, 4 * MiB)
    r = sim.run("ps", "--json")
    assert r.rc == 1, r
    doc = r.json()  # complete, with the broken GPU as an error entry
    assert [g["gpu"] for g in doc["gpus"]] == [0, 1, 2]
    assert set(gpu_of(doc, 1)) == {"gpu", "index", "error"}
    assert "GPU_IS_LOST" in gpu_of(doc, 1)["error"]
    assert proc_of(gpu_of(doc, 2), child.pid)["bytes"] == CTX + 4 * MiB
    # the error is said once, where the GPU is listed: not on stderr too
    assert r.err == "", r

    r = sim.run("ps")
    assert r.rc == 1, r
    assert len(re.findall(r"^GPU 1: error: .*GPU_IS_LOST", r.out, re.M)) == 1
    assert "GPU 0: Simulated GPU" in r.out and str(child.pid) in r.out
    assert r.err == "", r

    r = sim.run("ps", "-i", "2")  # the broken GPU not asked for
    assert r.rc == 0, r


@pytest.mark.parametrize("fmt", [[], ["--json"]])
def test_fault_mig_lists_pids_without_bytes(sim, fmt):
    sim.configure(f"context={CTX};fault=mig")
    child = sim.spawn_alloc(0, 4 * MiB)
    r = sim.run("ps", *fmt)
    assert r.rc == 0, r
    assert "NVML has no per-process figures on MIG" in r.err
    if fmt:
        gpu = gpu_of(r.json(), 0)
        assert gpu["mig"] is True
        p = proc_of(gpu, child.pid)
        assert p["bytes"] is None and p["bytes_known"] is False
        assert p["share"] is None
        assert p["user"] == ME
    else:
        assert "(MIG)" in r.out
        (row,) = [line for line in r.out.splitlines()
                  if line.split()[:1] == [str(child.pid)]]
        assert row.split()[1:4] == [ME, "n/a", "n/a"]


@pytest.mark.parametrize("fault", ["stride32", "insufficient-once",
                                   "procs-v2", "stride32,insufficient-once"])
def test_fault_process_list_quirks(sim, fault):
    sim.configure(f"gpus=2;context={CTX};fault={fault};"
                  "extra=1:1:1GiB,1:4000001g:2GiB")
    a = sim.spawn_alloc(1, 6 * MiB)
    b = sim.spawn_alloc(0, 2 * MiB)
    r = sim.run("ps", "--json")
    assert r.rc == 0, r
    doc = r.json()
    got = {g["gpu"]: {p["pid"]: p["bytes"] for p in g["processes"]}
           for g in doc["gpus"]}
    assert got == {
        0: {b.pid: CTX + 2 * MiB},
        1: {a.pid: CTX + 6 * MiB, 1: GiB, 4000001: 2 * GiB},
    }


def test_fault_foreign_pid(sim):
    sim.configure(f"context={CTX};fault=foreign-pid")
    child = sim.spawn_alloc(0, 2 * MiB)
    r = sim.run("ps", "--json")
    assert r.rc == 0, r
    (p,) = gpu_of(r.json(), 0)["processes"]
    assert p["pid"] == child.pid + 1000000
    assert p["bytes"] == CTX + 2 * MiB


# ---------------------------------------------------------------- usage


@pytest.mark.parametrize("args, words", [
    (["ps", "--bogus"], ["unknown option", "--bogus"]),
    (["ps", "-x"], ["unknown option", "-x"]),
    (["ps", "--watch", "0"], ["--watch"]),
    (["ps", "--watch", "abc"], ["--watch", "abc"]),
    (["ps", "--watch", "-1"], ["--watch"]),
    (["ps", "--watch", "nan"], ["--watch"]),
    # decimal only, from 0.1 s: no hex, blank, sign, exponent, or less
    (["ps", "--watch", "0x10"], ["--watch", "0x10", "0.1"]),
    (["ps", "--watch", " 1"], ["--watch", "' 1'"]),
    (["ps", "--watch", "1 "], ["--watch"]),
    (["ps", "--watch", "+1"], ["--watch"]),
    (["ps", "--watch", "1e-300"], ["--watch", "1e-300"]),
    (["ps", "--watch", "1e2"], ["--watch"]),
    (["ps", "--watch", "0.05"], ["--watch", "0.1"]),
    (["ps", "--watch", "1."], ["--watch"]),
    (["ps", "--watch", ".5"], ["--watch"]),
    (["ps", "--watch", "inf"], ["--watch"]),
    (["ps", "--watch", "86400.5"], ["--watch", "86400"]),
    (["ps", "--watch"], ["needs a value"]),
    (["ps", "-i", "abc"], ["-i", "abc"]),
    (["ps", "-i", "-1"], ["-i"]),
    (["ps", "-i", "0,"], ["-i"]),
    (["ps", "-i", "99"], ["no GPU 99"]),
    (["ps", "-i", "0", "-i", "2"], ["no GPU 2"]),
    (["ps", "extra"], ["unexpected argument"]),
    (["version", "--bogus"], ["unknown option"]),
    (["nosuchcommand"], ["unknown command"]),
    (["--bogus"], ["unknown option"]),
    (["help", "nosuchcommand"], ["unknown command"]),
    ([], ["USAGE"]),
])
def test_bad_usage(sim, args, words):
    sim.configure("gpus=2")
    r = sim.run(*args)
    assert r.rc == 2, r
    assert r.out == "", r
    for w in words:
        assert w in r.err, r


# ---------------------------------------------------------------- watch


def lines_at_least(n):
    return lambda out: len(out.splitlines()) >= n


def test_watch_json_lines_until_sigint(sim):
    sim.configure("extra=0:1:1GiB")
    rc, out, err = sim.watch(["--json", "--watch", "0.1"], lines_at_least(4))
    assert rc == 0, err
    lines = out.splitlines()
    # SIGINT ends the watch at its next wait: the round in progress, if
    # any, is the last
    assert 4 <= len(lines) <= 5, out
    for line in lines:
        doc = json.loads(line)
        assert gpu_of(doc, 0)["processes"][0]["bytes"] == GiB


@pytest.mark.parametrize("interval", ["0.1", "2", "10.25", "86400"])
def test_watch_decimal_intervals_accepted(sim, interval):
    # SIGINT ends the wait between rounds, however long it is
    rc, out, err = sim.watch(["--json", "--watch", interval],
                             lines_at_least(1))
    assert rc == 0, err
    assert len(out.splitlines()) in (1, 2) and err == "", (out, err)


def test_watch_reader_leaves_exits_0(sim):
    """`ps --json --watch 0.1 | head -1`: once the reader is gone the
    watch ends quietly with 0, not killed by SIGPIPE."""
    sim.configure("extra=0:1:1GiB")
    proc = subprocess.Popen([str(BIN), "ps", "--json", "--watch", "0.1"],
                            env=sim.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    json.loads(proc.stdout.readline())
    proc.stdout.close()
    try:
        rc = proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read()
    proc.stderr.close()
    assert rc == 0, (rc, err)
    assert err == "", err


def test_watch_text_not_a_tty_has_no_escapes(sim):
    sim.configure("extra=0:1:1GiB")
    rc, out, err = sim.watch(["--watch", "0.1"],
                             lambda out: out.count("GPU 0: ") >= 3)
    assert rc == 0, err
    assert "\033" not in out
    assert out.count("GPU 0: ") >= 3


def test_watch_on_a_terminal_clears_and_fits_the_width(sim):
    sim.configure("extra=0:1:1GiB")
    rc, text, err = sim.run_on_tty(
        "ps", "--watch", "0.1", cols=50, rows=24,
        until=lambda out: out.count(b"\033[H\033[2J") >= 3)
    assert rc == 0, err
    assert text.count("\033[H\033[2J") >= 3, text
    rows = [line for line in text.replace("\033[H\033[2J", "").splitlines()
            if line.strip().startswith("1 ")]
    assert rows and all(len(line.rstrip("\r")) <= 50 for line in rows), rows


def test_watch_sees_a_process_come_and_go(sim):
    sim.configure(f"context={CTX}")
    proc = subprocess.Popen([str(BIN), "ps", "--json", "--watch", "0.1"],
                            env=sim.env(), stdout=subprocess.PIPE, text=True)
    try:
        first = json.loads(proc.stdout.readline())
        assert gpu_of(first, 0)["processes"] == []
        child = sim.spawn_alloc(0, 2 * MiB)
        for _ in range(200):
            doc = json.loads(proc.stdout.readline())
            if gpu_of(doc, 0)["processes"]:
                break
        assert gpu_of(doc, 0)["processes"][0]["pid"] == child.pid
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=10)
    assert proc.returncode == 0


# ---------------------------------------------------------------- version


def test_version_with_the_sim(sim):
    sim.configure("gpus=2")
    r = sim.run("version")
    assert r.rc == 0, r
    lines = r.out.splitlines()
    assert re.fullmatch(r"gpureclaim \d+\.\d+\.\d+", lines[0])
    assert lines[1].startswith("NVIDIA driver: ") and "2 GPUs" in lines[1]
    assert lines[2].startswith("CUDA driver API: ")

    r = sim.run("version", "--json")
    assert r.rc == 0, r
    doc = r.json()
    assert doc["version"] == lines[0].split()[1]
    assert doc["nvml"]["available"] is True and doc["nvml"]["gpus"] == 2
    assert doc["nvml"]["version"]
    assert doc["cuda"]["available"] is True
    assert doc["cuda"]["driver_api"] > 0

    r = sim.run("--version")
    assert r.rc == 0 and r.out == lines[0] + "\n"


def test_version_without_a_driver(sim):
    env = sim.env(GPURECLAIM_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1",
                  GPURECLAIM_CUDA_LIBRARY="libm.so.6")
    r = sim.run("version", "--json", env=env)
    assert r.rc == 0, r
    doc = r.json()
    assert doc["nvml"]["available"] is False
    assert "/nonexistent/libnvidia-ml.so.1" in doc["nvml"]["error"]
    assert doc["cuda"]["available"] is False
    assert "cuDriverGetVersion" in doc["cuda"]["error"]
    r = sim.run("version", env=env)
    assert r.rc == 0 and "NVIDIA driver: not found" in r.out


def test_version_nvml_absent(sim):
    sim.configure("fault=nvml-absent")
    r = sim.run("version", "--json")
    assert r.rc == 0, r
    nvml = r.json()["nvml"]
    assert nvml["available"] is False and "nvmlInit_v2" in nvml["error"]


def test_version_of_an_nvml_that_leaves_its_strings_unterminated(sim):
    """A hostile NVML fills the version buffer with no NUL (the sim's
    `unterminated` fault: 95 Zs and a control byte): the version is the
    buffer's text and nothing read past it, shown terminal-safe."""
    sim.configure("fault=unterminated")
    doc = sim.run("version", "--json").json()
    assert doc["nvml"]["available"] is True, doc
    assert doc["nvml"]["version"] == "Z" * 95, doc
    r = sim.run("version")
    assert r.rc == 0, r
    line = r.out.splitlines()[1]
    assert re.fullmatch("NVIDIA driver: " + "Z" * 95 +
                        r" \(NVML \S+libnvidia-ml\.so\.1, 1 GPU\)", line), line
    # ps names the GPU from the same kind of buffer
    r = sim.run("ps")
    assert r.rc == 0 and "\x03" not in r.out, r
    assert r.out.startswith("GPU 0: " + "Z" * 95 + ", "), r.out


def test_garbage_bytes_keep_the_share_column(sim):
    """An NVML answering more bytes than the GPU has (the sim's
    `garbage-bytes`): the SHARE column says >100% in its width instead of
    15 digits, and the row's columns stay under their headers."""
    sim.configure("fault=garbage-bytes;extra=0:1:1GiB")
    r = sim.run("ps", "--color=never")
    assert r.rc == 0, r
    head, row = r.out.splitlines()[1:3]
    assert row.split()[2:5] == ["1.0", "EiB", ">100%"], row
    assert row.index(">100%") + len(">100%") == \
        head.index("SHARE") + len("SHARE"), (head, row)


# ---------------------------------------------------------------- help


@pytest.mark.parametrize("args", [
    ["--help"], ["-h"], ["help"],
    ["ps", "--help"], ["ps", "-h"], ["help", "ps"],
    ["version", "--help"], ["help", "version"],
    ["trace", "--help"], ["report", "--help"],
])
def test_help(sim, args):
    r = sim.run(*args)
    assert r.rc == 0, r
    assert "USAGE" in r.out and "EXAMPLES" in r.out, r


def test_top_level_help_lists_every_command(sim):
    out = sim.run("--help").out
    for cmd in ("ps", "trace", "report", "version"):
        assert re.search(rf"^\s+{cmd}\s+\S", out, re.M), out


def test_ps_flags_a_stray_context_with_the_advice(sim):
    """A rank without torch.cuda.set_device: about a context on GPU 0
    while it works on GPU 1 (pytorch#135279). The same pid with much on
    both, or a small figure alone, is not flagged."""
    me = os.getpid()
    sim.configure(f"gpus=3;memory=40GiB;extra=0:{me}:600MiB,1:{me}:8GiB,"
                  f"0:1:6GiB,2:1:5GiB,2:{me}:1GiB")
    doc = sim.run("ps", "--json").json()
    assert proc_of(gpu_of(doc, 0), me)["stray_context"] == {"works_on": 1}
    assert proc_of(gpu_of(doc, 2), me)["stray_context"] == {"works_on": 1}
    assert proc_of(gpu_of(doc, 1), me)["stray_context"] is None
    assert proc_of(gpu_of(doc, 0), 1)["stray_context"] is None
    assert proc_of(gpu_of(doc, 2), 1)["stray_context"] is None
    out = sim.run("ps", "--color=never").out
    (row,) = [line for line in out.split("GPU 1:")[0].splitlines()
              if line.lstrip().startswith(f"{me} ")]
    assert "<stray context: works on GPU 1> " in row, row
    assert out.rstrip("\n").splitlines()[-1] == (
        "<stray context>: about a CUDA context on a GPU the process does not "
        "work on, the missing torch.cuda.set_device(local_rank) before the "
        "first CUDA call (pytorch#135279); call it first in each rank")
    # -i 0 alone: GPU 1 is not read, nothing to compare with
    doc = sim.run("ps", "--json", "-i", "0").json()
    assert proc_of(gpu_of(doc, 0), me)["stray_context"] is None
