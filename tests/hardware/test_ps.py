"""`gpureclaim ps` on a real GPU (run on the GPU machine; skips without one).

- A process holding 1 GiB through torch is listed with the bytes nvidia-smi
  shows for it (nvidia-smi prints MiB: bytes == MiB * 2**20), on the GPU of
  the same UUID.
- A process that never used the GPU is absent, and so is gpureclaim itself
  after many queries (it never opens a context).
- NVML's v2 memory-info path is the one taken on a real driver.
- Every GPURECLAIM_PS_VARIANT lists what the default lists, and
  GPURECLAIM_PS_PROFILE times the real NVML's steps.
- A one-shot `ps` (and `version`) returns once its output is written: the
  reader gets EOF while the detached process it leaves still holds NVML's
  device files (/dev/nvidia*), and nothing else; that process ends on its
  own. Run through tests/cli/end_watch.py (a subreaper), with
  libexit_hold.so from the build (GPURECLAIM_BIN's build folder, tests/fixtures/) to hold
  the detached process while it is looked at.

The tool: $GPURECLAIM_BIN (default build/cli/gpureclaim).
"""
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest
from gpu_machine import HAVE_GPU

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("GPURECLAIM_BIN", str(ROOT / "build/cli/gpureclaim"))
MiB = 1 << 20


pytestmark = pytest.mark.skipif(not HAVE_GPU,
                                reason="no NVIDIA GPU (nvidia-smi -L)")

HOLDER = """
import sys, torch
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda:0")
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.read()
"""


def ps_json(*args):
    r = subprocess.run([BIN, "ps", "--json", *args], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def smi_apps():
    """{pid: (gpu_uuid, bytes)} from nvidia-smi's compute-apps query."""
    r = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,gpu_uuid,used_memory",
         "--format=csv,noheader,nounits"],
        capture_output=True, text=True, timeout=60, check=True)
    apps = {}
    for line in r.stdout.splitlines():
        if not line.strip():
            continue
        pid, uuid, mib = (f.strip() for f in line.split(","))
        apps[int(pid)] = (uuid, int(mib) * MiB if mib.isdigit() else None)
    return apps


def listed(doc):
    """{pid: (gpu uuid, bytes)} from a `ps --json` document."""
    return {p["pid"]: (g["uuid"], p["bytes"])
            for g in doc["gpus"] for p in g.get("processes", [])}


@pytest.fixture(scope="module")
def holder():
    try:
        import torch  # noqa: F401
    except ImportError:
        pytest.skip("torch is not installed")
    child = subprocess.Popen([sys.executable, "-c", HOLDER],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    line = child.stdout.readline().strip()
    if line != "ready":
        child.kill()
        child.wait()
        pytest.fail(f"torch child did not allocate: {line!r}")
    yield child
    child.stdin.close()
    child.wait(timeout=60)


def test_ps_bytes_match_nvidia_smi(holder):
    doc = ps_json()
    apps = smi_apps()
    ours = listed(doc)
    assert holder.pid in ours, doc
    assert holder.pid in apps, apps
    uuid, got = ours[holder.pid]
    smi_uuid, smi_bytes = apps[holder.pid]
    assert uuid == smi_uuid
    assert got == smi_bytes, (got, smi_bytes)
    assert got >= 1 << 30  # the tensor, plus the context
    (p,) = [p for g in doc["gpus"] for p in g.get("processes", [])
            if p["pid"] == holder.pid]
    assert p["bytes_known"] is True
    assert "python" in p["command"]
    assert p["user"]
    # every process both tools see has the same figure
    for pid, (smi_uuid, smi_bytes) in apps.items():
        if pid in ours and smi_bytes is not None:
            assert ours[pid] == (smi_uuid, smi_bytes), pid


def test_ps_text_lists_the_holder(holder):
    r = subprocess.run([BIN, "ps", "-i", "0"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert any(line.split()[:1] == [str(holder.pid)]
               for line in r.stdout.splitlines()), r.stdout


def test_process_that_never_used_the_gpu_is_absent(holder):
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        assert sleeper.pid not in listed(ps_json())
        assert sleeper.pid not in smi_apps()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_gpureclaim_itself_never_appears():
    watcher = subprocess.Popen([BIN, "ps", "--json", "--watch", "0.1"],
                               stdout=subprocess.PIPE, text=True)
    try:
        docs = [json.loads(watcher.stdout.readline()) for _ in range(10)]
        assert watcher.pid not in smi_apps()
    finally:
        watcher.send_signal(signal.SIGINT)
        watcher.communicate(timeout=30)
    assert watcher.returncode == 0
    for doc in docs:
        assert watcher.pid not in listed(doc)


def test_json_carries_the_driver_and_marks_the_holder_alive(holder):
    """The driver version is nvidia-smi's; the holder, a process of this
    machine, is alive (not exited, not outside the pid namespace)."""
    doc = ps_json()
    r = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                        "--format=csv,noheader"], capture_output=True,
                       text=True, timeout=60, check=True)
    assert doc["driver_version"] == r.stdout.splitlines()[0].strip(), doc
    (p,) = [p for g in doc["gpus"] for p in g.get("processes", [])
            if p["pid"] == holder.pid]
    assert p["state"] == "alive", p


def test_version_reads_the_real_driver_through_the_core_loader():
    """`version` loads NVML and libcuda through the core's driver layer
    (issue 22): the driver's version and GPU count are nvidia-smi's, the
    CUDA driver API version is read (cuDriverGetVersion, no cuInit)."""
    r = subprocess.run([BIN, "version", "--json"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                          "--format=csv,noheader"], capture_output=True,
                         text=True, timeout=60, check=True).stdout.split("\n")
    smi = [x.strip() for x in smi if x.strip()]
    assert doc["nvml"]["available"] and doc["nvml"]["version"] == smi[0], doc
    assert doc["nvml"]["gpus"] == len(smi), doc
    assert doc["cuda"]["available"] and doc["cuda"]["driver_api"] >= 12000, doc
    print(json.dumps(doc))


def test_ps_json_loads_nvml_once():
    """ps --json asks its own handle for the driver's version: one
    nvmlInit_v2 in the profile, and the version call among its steps."""
    env = dict(os.environ, GPURECLAIM_PS_PROFILE="1")
    r = subprocess.run([BIN, "ps", "--json"], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode in (0, 1), r.stderr
    steps = [ln for ln in r.stderr.splitlines() if ln.startswith("ps-profile")]
    assert sum(" NVML nvmlInit_v2: " in ln for ln in steps) == 1, steps
    assert any(" NVML nvmlSystemGetDriverVersion: " in ln
               for ln in steps), steps


def test_memory_info_v2_path_is_taken():
    doc = ps_json()
    assert doc["gpus"], doc
    for g in doc["gpus"]:
        assert "error" not in g, g
        assert g["memory_info"] == "v2", g
        assert 0 < g["used"] + g["free"] <= g["total"], g


JSON_CLOCK = re.compile(r'"time":"[^"]*","unix_time":[0-9.]+,')


def run_ps(*args, **env):
    r = subprocess.run([BIN, "ps", *args], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, **env))
    return r


@pytest.mark.parametrize("variant", [
    "start=serial", "exit=wait", "exit=fork", "exit=libc", "gpu=split",
    "start=serial,exit=libc,gpu=split"])
def test_variants_list_the_same(holder, variant):
    for fmt in ([], ["--json"]):
        want = run_ps(*fmt)
        got = run_ps(*fmt, GPURECLAIM_PS_VARIANT=variant)
        assert got.returncode == want.returncode == 0, got.stderr
        assert JSON_CLOCK.sub("", got.stdout) == \
            JSON_CLOCK.sub("", want.stdout), (variant, fmt)
        assert got.stderr == want.stderr


@pytest.mark.parametrize("variant", ["", "exit=wait"])
def test_profile_times_the_real_nvml(holder, variant):
    """Prints (for the run's log) what NVML did, and how long it took."""
    want = run_ps()
    r = run_ps(GPURECLAIM_PS_PROFILE="1", GPURECLAIM_PS_VARIANT=variant)
    assert r.returncode == 0, r.stderr
    assert r.stdout == want.stdout
    lines = r.stderr.splitlines()
    assert lines and all(line.startswith("ps-profile ") for line in lines)
    print("\n".join(lines))
    text = r.stderr
    n = len(ps_json()["gpus"])
    for i in range(n):
        assert re.search(
            rf"NVML nvmlDeviceGetHandleByIndex_v2 GPU {i}: [0-9.]+ ms", text)


WATCH = ROOT / "tests/cli/end_watch.py"
HOLD_LIB = pathlib.Path(BIN).parents[1] / "tests/fixtures/libexit_hold.so"


def end_watch(args, hold=None, **env):
    cmd = [BIN, *args]
    if hold:
        os.mkfifo(hold / "fifo")
        cmd = ["env", f"LD_PRELOAD={HOLD_LIB}", f"GPR_HOLD_DIR={hold}", *cmd]
    argv = [sys.executable, str(WATCH)] + (["--hold", str(hold)] if hold
                                          else [])
    r = subprocess.run(argv + ["--", *cmd], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, **env))
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert "error" not in got, got
    return got


@pytest.mark.parametrize("args", [["ps"], ["ps", "--json"], ["version"]])
def test_detached_end_holds_nvmls_files(holder, tmp_path, args):
    """Prints, for the run's log, what the detached process holds and when
    EOF, the command's end and the detached one's came."""
    if not HOLD_LIB.exists():
        pytest.skip(f"{HOLD_LIB} not built")
    got = end_watch(args, hold=tmp_path)
    print(json.dumps({k: got[k] for k in ("eof_ms", "exit_ms", "held",
                                           "orphans")}))
    assert got["rc"] == 0 and got["eof"], got
    held = got["held"]
    assert held and held["ppid"] == got["reaper_pid"], got
    assert "/dev/nvidiactl" in held["fds"], held
    assert all(f.startswith("/dev/") for f in held["fds"]), held
    assert got["left_to_shell"] == []
    assert [o["status"] for o in got["orphans"]] == [0]


def test_detached_end_ends_on_its_own(holder):
    """Ten runs: each leaves one process, which ends with status 0; the
    times (ms after the start: EOF, the command's end, the detached
    end's) go to the log."""
    for _ in range(10):
        got = end_watch(["ps"])
        want = run_ps(GPURECLAIM_PS_VARIANT="exit=wait")
        assert got["rc"] == 0 and got["eof"], got
        assert got["out"] == want.stdout
        (o,) = got["orphans"]
        assert o["status"] == 0, got
        print(f"eof {got['eof_ms']:.2f} ms, ps reaped {got['exit_ms']:.2f}"
              f" ms, detached end reaped {o['ms']:.2f} ms")
