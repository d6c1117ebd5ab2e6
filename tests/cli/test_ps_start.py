"""How one-shot `ps` starts (cli/ps_start.c), on the simulated driver:
every GPURECLAIM_PS_VARIANT lists exactly what the default lists, and
GPURECLAIM_PS_PROFILE times each step on stderr without changing stdout.
bench/ps_profile.sh, which sums those steps, runs here too (its figures
are the sim's, so only its shape is checked). How it ends:
test_ps_exit.py."""
import os
import re
import subprocess
import time

import pytest

from conftest import BIN, MiB, ROOT, same_listing

CTX = 64 * MiB
VARIANTS = ["start=thread,exit=detach,gpu=whole",
            "start=serial", "exit=wait", "exit=fork", "exit=libc",
            "gpu=split", "start=serial,exit=libc,gpu=split"]
def profile_lines(err):
    lines = [line for line in err.splitlines() if line.startswith("ps-")]
    assert all(line.startswith("ps-profile ") for line in lines), err
    return lines


def steps(err):
    """{(thread, step): ms} of the profile's timed steps (summed)."""
    out = {}
    for line in profile_lines(err):
        if line.startswith("ps-profile #"):
            continue
        m = re.match(r"ps-profile +([0-9.]+) (\S+) +(.*)$", line)
        assert m, line
        assert float(m.group(1)) >= 0
        t = re.match(r"(.*): ([0-9.]+) ms(, .*)?$", m.group(3))
        if t:
            key = (m.group(2), t.group(1))
            out[key] = out.get(key, 0.0) + float(t.group(2))
    return out


def notes(err):
    return [line for line in profile_lines(err) if not line.endswith(" ms")]


@pytest.fixture
def busy(sim):
    """Two GPUs, a process with a context on GPU 0, an extra one on 1."""
    sim.configure(f"gpus=2;context={CTX};extra=1:4000000:3GiB")
    return sim


@pytest.mark.parametrize("fmt", [[], ["--json"]])
@pytest.mark.parametrize("variant", VARIANTS)
def test_variants_list_the_same(busy, variant, fmt):
    child = busy.spawn_alloc(0, 5 * MiB)
    want = busy.run("ps", *fmt)
    assert want.rc == 0 and str(child.pid) in want.out, want
    got = busy.run("ps", *fmt,
                   env=busy.env(GPURECLAIM_PS_VARIANT=variant))
    assert got.rc == 0, got
    assert same_listing(got.out, want.out), (got, want)
    assert got.err == want.err == ""


@pytest.mark.parametrize("fmt", [[], ["--json"]])
@pytest.mark.parametrize("variant", ["gpu=split", "start=serial,gpu=split",
                                     "exit=wait"])
def test_broken_gpu_under_variants(sim, variant, fmt):
    """A lost GPU fails once with its facts and its processes read apart:
    the same error line and exit status as without the variant."""
    sim.configure(f"gpus=3;context={CTX};fault=broken:1;"
                  "extra=1:4000000:1GiB,2:4000001:2GiB")
    want = sim.run("ps", *fmt)
    assert want.rc == 1 and "GPU_IS_LOST" in want.out, want
    got = sim.run("ps", *fmt, env=sim.env(GPURECLAIM_PS_VARIANT=variant,
                                          GPURECLAIM_PS_PROFILE="1"))
    assert got.rc == 1, got
    assert same_listing(got.out, want.out), (got, want)
    assert [line for line in got.err.splitlines()
            if not line.startswith("ps-profile ")] == \
        want.err.splitlines()
    if "split" in variant:
        threads = {who for who, _ in steps(got.err)}
        assert {"gpu1", "gpu1p", "gpu2p"} <= threads, threads


@pytest.mark.parametrize("value", [
    "bogus", "start", "start=", "start=maybe", "start=parallel", "gpu=2",
    "exit=wait,", "exit=wait,,start=serial", "exit=quick", "exit=",
    "nvml=noattach", "nvml=attach", "x" * 300])
def test_bad_variant_is_usage(sim, value):
    r = sim.run("ps", env=sim.env(GPURECLAIM_PS_VARIANT=value))
    assert r.rc == 2, r
    assert r.out == ""
    assert r.err.startswith("gpureclaim ps: GPURECLAIM_PS_VARIANT is a "
                            "list of start=thread|serial, "
                            "exit=detach|wait|fork|libc, "
                            "gpu=whole|split"), r


def test_empty_variant_is_the_default(busy):
    r = busy.run("ps", env=busy.env(GPURECLAIM_PS_VARIANT=""))
    assert r.rc == 0 and r.err == "", r


@pytest.mark.parametrize("fmt", [[], ["--json"]])
def test_profile_times_each_step(busy, fmt):
    child = busy.spawn_alloc(0, 5 * MiB)
    want = busy.run("ps", *fmt)
    start = time.time()
    t0 = f"{start:.6f}"
    got = busy.run("ps", *fmt, env=busy.env(GPURECLAIM_PS_PROFILE=t0))
    ended = time.time()
    assert got.rc == 0, got
    assert same_listing(got.out, want.out)
    head = profile_lines(got.err)[0]
    m = re.search(r"([0-9.]+) ms of CPU before main; "
                  r"main_after_given_ms=([0-9.]+)$", head)
    assert m, head
    # main began after the time given and before the run ended: bounds
    # the run itself sets, however fast or slow the machine is
    assert 0 < float(m.group(2)) <= (ended - float(t0)) * 1e3 + 1
    got_steps = steps(got.err)
    named = {step for _, step in got_steps}
    for step in ["options, handle", "NVML nvmlInit_v2",
                 "NVML nvmlDeviceGetHandleByIndex_v2 GPU 0",
                 "NVML nvmlDeviceGetHandleByIndex_v2 GPU 1",
                 "NVML nvmlDeviceGetMigMode GPU 1",
                 "NVML nvmlDeviceGetComputeRunningProcesses GPU 0",
                 "GPU 0 users (stat, getpwuid_r)",
                 "GPU 1 pid states (kill, /proc/PID/stat)",
                 "warm-up: pid namespace, NSS (getpwuid_r)",
                 "waited for NVML's start",
                 "every GPU read (a thread each)", "write stdout",
                 "render JSON" if fmt else "render text"]:
        assert step in named, (step, got.err)
    # each GPU is read on a thread of its own, NVML started on another
    assert ("gpu1", "GPU 1 gpr_gpu_info") in got_steps
    assert ("nvml", "NVML nvmlInit_v2") in got_steps
    assert any("CUDA look-up of" in s and "not loaded" in s
               for s in got.err.splitlines())
    assert notes(got.err)[-1].endswith("profile printed (the process "
                                       "exits next)")
    if fmt:
        assert "driver version (--json)" in named
        # the version comes from the handle's own NVML, loaded once:
        # its call is one of the handle's steps, its init the only one
        assert "NVML nvmlSystemGetDriverVersion" in named, got.err
    assert sum(1 for _, step in got_steps
               if step == "NVML nvmlInit_v2") == 1, got.err


@pytest.mark.parametrize("value", ["", "0"])
def test_profile_off(busy, value):
    r = busy.run("ps", env=busy.env(GPURECLAIM_PS_PROFILE=value))
    assert r.rc == 0 and r.err == "", r


def test_profile_serial_start_on_main(busy):
    r = busy.run("ps", env=busy.env(GPURECLAIM_PS_PROFILE="1",
                                    GPURECLAIM_PS_VARIANT="start=serial"))
    assert r.rc == 0, r
    got = steps(r.err)
    assert ("main", "NVML nvmlInit_v2") in got
    assert not any(step.startswith("warm-up") for _, step in got)


@pytest.mark.parametrize("variant", ["", "exit=wait", "exit=fork"])
def test_quick_exit_writes_everything_to_a_file(busy, tmp_path, variant):
    """_exit skips stdio's flush at exit: the listing must be out first."""
    want = busy.run("ps")
    path = tmp_path / "out.txt"
    with open(path, "w") as f:
        rc = subprocess.run([str(BIN), "ps"], stdout=f,
                            env=busy.env(GPURECLAIM_PS_VARIANT=variant),
                            stderr=subprocess.PIPE, timeout=30).returncode
    assert rc == 0
    assert path.read_text() == want.out


def test_ps_profile_script_on_the_sim(busy):
    busy.spawn_alloc(0, 5 * MiB)
    env = busy.env(GPURECLAIM_PS_PROFILE_ANY="1")
    r = subprocess.run(["bash", str(ROOT / "bench/ps_profile.sh"), str(BIN),
                        "3", "--json"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("ps_profile: 3 runs of 'gpureclaim ps "
                               "--json'")
    rows = {}
    for line in lines[2:-1]:
        # the figures are this machine's times and are not looked at: the
        # shell's clock against the command's can even make "exit" come
        # out below 0 on a loaded machine
        m = re.match(r" *(-?[0-9.]+) +(-?[0-9.]+|-) +(\S+) +(.*)$", line)
        assert m, line
        rows[(m.group(3), m.group(4))] = m.group(2)
    assert ("shell", "exec to main (fork, exec, loading)") in rows
    assert ("nvml", "NVML nvmlInit_v2") in rows
    assert ("gpu0", "GPU 0 users (stat, getpwuid_r)") in rows
    assert any(k[1].startswith("exit (after the last step") for k in rows)
    assert lines[-1].startswith("CPU time before main: ")


def test_ps_profile_script_skips_without_a_driver(sim):
    env = dict(os.environ, PATH="/nonexistent")
    r = subprocess.run(["/bin/bash", str(ROOT / "bench/ps_profile.sh"),
                        str(BIN)], env=env, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "skipped: no NVIDIA driver\n"


def test_ps_bench_script_on_the_sim(busy, tmp_path):
    """bench/ps_bench.sh, the GPU run's judge, runs through on the sim with
    a stand-in nvidia-smi: every row is timed and every variant lists what
    the default lists (the figures, the sim's, are not looked at)."""
    busy.spawn_alloc(0, 5 * MiB)
    smi = tmp_path / "nvidia-smi"
    smi.write_text('#!/bin/sh\nif [ "$1" = -L ]; then '
                   'echo "GPU 0: stand-in"; else '
                   'echo "pid, used_memory [MiB]"; fi\n')
    smi.chmod(0o755)
    env = busy.env(PATH=f"{tmp_path}:{os.environ['PATH']}")
    r = subprocess.run(["bash", str(ROOT / "bench/ps_bench.sh"), str(BIN),
                        "7"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[2].endswith("the variants list the same as gpureclaim "
                             "ps: yes"), r.stdout
    rows = lines[4:-1]
    labels = [re.split(r" {2,}[0-9.]+ ms", row)[0].strip() for row in rows]
    for want in ["gpureclaim ps", "gpureclaim ps --json",
                 "ps, exit=wait (_exit, NVML's release waited for)",
                 "ps, exit=fork (the detached end made by fork())",
                 "ps; ps (two back to back, both; no pause between)"]:
        assert want in labels, (want, labels)
    assert all(re.search(r" [0-9.]+ ms +[0-9.]+ ms +[0-9.]+x \([0-9.]+x\)$",
                         row) for row in rows), rows
    assert lines[-1].startswith("target: gpureclaim ps <= 0.75x "
                                "nvidia-smi (medians): ")
