"""How one-shot `ps` and `version` end (cli/util_exit.c), on the simulated
driver: the exit status and output are those of an in-process end
(GPURECLAIM_PS_VARIANT=exit=wait); a reader of the output gets EOF while
the detached process still lives, which holds NVML's device file (the
sim keeps /dev/zero open as NVML keeps /dev/nvidia*) and nothing of the
caller's; that process is never the shell's child, ends on its own with
status 0, and does not exist with --watch, exit=wait, exit=libc, when
clone and fork fail, or in an AddressSanitizer build (exit() there).

Each run goes through end_watch.py, a subreaper that runs the command as
a shell would and reaps what it leaves behind. libexit_hold.so (preloaded)
holds the detached process in its _exit, so it can be looked at."""
import json
import os
import signal
import subprocess
import sys

import pytest

from conftest import BIN, FAKES_BUILD, MiB, asan_build, same_listing

WATCH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     "end_watch.py")
HOLD_LIB = FAKES_BUILD / "libexit_hold.so"
NO_FORK_LIB = FAKES_BUILD / "libno_fork.so"
ASAN = asan_build(BIN)
# a preloaded library without ASan cannot come before the ASan runtime
needs_preload = pytest.mark.skipif(
    ASAN, reason="AddressSanitizer build: ends through exit(), no detach")
DETACHES = not ASAN


@pytest.fixture
def busy(sim):
    """Two GPUs, a process with a context on GPU 0, an extra one on 1."""
    sim.configure(f"gpus=2;context={64 * MiB};extra=1:4000000:3GiB")
    sim.spawn_alloc(0, 5 * MiB)
    return sim


def watch(sim, args, variant=None, preload=None, hold=None):
    """Runs `gpureclaim ARGS` under end_watch.py; its JSON."""
    extra = {}
    if variant is not None:
        extra["GPURECLAIM_PS_VARIANT"] = variant
    env = sim.env(**extra)
    cmd = [str(BIN), *args]
    if preload:
        # for the command alone, not for the Python that watches it
        cmd = ["env", f"LD_PRELOAD={preload}", *cmd]
    if hold:
        os.mkfifo(hold / "fifo")
        cmd = ["env", f"GPR_HOLD_DIR={hold}", *cmd]
    argv = [sys.executable, WATCH]
    if hold:
        argv += ["--hold", str(hold)]
    r = subprocess.run(argv + ["--", *cmd], env=env, capture_output=True,
                       text=True, timeout=200)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert "error" not in got, got
    return got


@needs_preload
@pytest.mark.parametrize("variant", ["", "exit=fork"])
@pytest.mark.parametrize("args", [["ps"], ["ps", "--json"]])
def test_reader_gets_eof_while_the_detached_end_lives(busy, tmp_path,
                                                      variant, args):
    want = watch(busy, args, variant="exit=wait")
    got = watch(busy, args, variant=variant, preload=HOLD_LIB,
                hold=tmp_path)
    assert got["rc"] == want["rc"] == 0, got
    assert same_listing(got["out"], want["out"]), (got, want)
    assert got["err"] == want["err"] == ""
    assert got["eof"], "the reader waited for the detached process"
    held = got["held"]
    assert held, "no detached process"
    assert held["state"] in ("R", "S", "D"), held  # alive after EOF
    # NVML's device file is its to close; the output pipe, the
    # terminal and everything else of the caller's is not
    assert held["fds"] == ["/dev/zero"], held
    assert got["pipe"] not in held["fds"]
    # reparented: to the subreaper, never left to the shell
    assert held["ppid"] == got["reaper_pid"], held
    assert got["left_to_shell"] == []
    assert [(o["pid"], o["status"]) for o in got["orphans"]] == \
        [(held["pid"], 0)], got
    # the listing's own process ended before it did
    assert held["pid"] != got["cmd_pid"]


@pytest.mark.parametrize("args", [["ps"], ["ps", "--json"], ["version"],
                                  ["version", "--json"]])
def test_detached_end_comes_and_goes_on_its_own(busy, args):
    got = watch(busy, args)
    assert got["rc"] == 0 and got["eof"] and got["err"] == "", got
    assert got["left_to_shell"] == []
    if DETACHES:
        assert [o["status"] for o in got["orphans"]] == [0], got
        assert got["orphans"][0]["pid"] != got["cmd_pid"]
    else:
        assert got["orphans"] == [], got
    if args[0] == "ps":
        want = watch(busy, args, variant="exit=wait")
        assert same_listing(got["out"], want["out"])
    else:
        assert got["out"].startswith(
            "gpureclaim " if args == ["version"] else '{"version":')
        assert "580.0-sim" in got["out"]


@needs_preload
@pytest.mark.parametrize("args", [["version"], ["version", "--json"]])
def test_version_leaves_nvml_to_the_detached_end(busy, tmp_path, args):
    got = watch(busy, args, preload=HOLD_LIB, hold=tmp_path)
    assert got["rc"] == 0 and got["eof"], got
    assert "580.0-sim" in got["out"]
    assert got["held"]["fds"] == ["/dev/zero"], got
    assert got["held"]["ppid"] == got["reaper_pid"]


@pytest.mark.parametrize("variant", ["exit=wait", "exit=libc"])
def test_in_process_ends_leave_nothing(busy, variant):
    got = watch(busy, ["ps"], variant=variant)
    assert got["rc"] == 0 and got["eof"] and got["orphans"] == [], got


@pytest.mark.parametrize("config,rc", [
    ("gpus=2;fault=broken:1;extra=0:4000000:1GiB", 1),
    ("gpus=1;fault=nvml-absent", 1),
    ("gpus=1;fault=mig;extra=0:4000000:1GiB", 0),
])
def test_exit_status_and_messages_kept(sim, config, rc):
    sim.configure(config)
    for args in (["ps"], ["ps", "--json"]):
        want = watch(sim, args, variant="exit=wait")
        got = watch(sim, args)
        assert got["rc"] == want["rc"] == rc, got
        assert same_listing(got["out"], want["out"])
        assert got["err"] == want["err"], got
        # a lost GPU is said in the listing; no NVML, on stderr
        assert (got["err"] != "") == ("nvml-absent" in config or
                                      "mig" in config), got
        assert len(got["orphans"]) == (1 if DETACHES else 0), got


@needs_preload
def test_without_clone_or_fork_it_ends_as_before(busy):
    want = watch(busy, ["ps"], variant="exit=wait")
    for variant in ("", "exit=fork"):
        got = watch(busy, ["ps"], variant=variant, preload=NO_FORK_LIB)
        assert got["rc"] == 0 and got["eof"], got
        assert same_listing(got["out"], want["out"])
        assert got["orphans"] == [], got


@needs_preload
def test_watch_never_detaches(busy, tmp_path):
    """--watch ends through exit() on SIGINT: no _exit in another
    process (libexit_hold.so would write its pid and wait)."""
    os.mkfifo(tmp_path / "fifo")
    env = busy.env(LD_PRELOAD=str(HOLD_LIB), GPR_HOLD_DIR=str(tmp_path))
    proc = subprocess.Popen([str(BIN), "ps", "--json", "--watch", "0.1"],
                            env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()  # a round written: it is watching
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    finally:
        if (tmp_path / "pid").exists():  # let a held process go
            os.close(os.open(tmp_path / "fifo", os.O_WRONLY))
    assert proc.returncode == 0, err
    assert first and len((first + out).splitlines()) >= 1
    assert not (tmp_path / "pid").exists()
