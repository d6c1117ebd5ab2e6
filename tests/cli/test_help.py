"""What the tool says about itself: each command's help is the same text
however it is asked for, the top-level help promises only what the tool
does, -V, and the jq examples in the helps run as written."""
import os
import re
import shlex
import shutil
import signal
import subprocess

import pytest

from conftest import BIN, ROOT

COMMANDS = ["ps", "trace", "report", "version"]
SANITIZED = bool(os.environ.get("GPR_SANITIZED"))


@pytest.mark.parametrize("cmd", COMMANDS)
def test_every_way_to_ask_gives_the_same_help(sim, cmd):
    ways = [["help", cmd], ["--help", cmd], ["-h", cmd], [cmd, "--help"],
            [cmd, "-h"]]
    results = [sim.run(*w) for w in ways]
    for w, r in zip(ways, results):
        assert r.rc == 0 and r.err == "", (w, r)
    assert len({r.out for r in results}) == 1, [r.out[:60] for r in results]
    assert results[0].out.startswith(f"USAGE: gpureclaim {cmd}")


@pytest.mark.parametrize("args", [["help", "nosuch"], ["--help", "nosuch"],
                                  ["help", "ps", "extra"]])
def test_help_of_what_is_not_a_command(sim, args):
    r = sim.run(*args)
    assert r.rc == 2 and r.out == "", r


def test_top_level_help(sim):
    out = sim.run("--help").out
    assert sim.run("help").out == out == sim.run("help", "help").out
    # it lists every command, and each one answers
    section = out.split("COMMANDS:\n", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"^    (\w+) +\S", section, re.M)
    assert set(COMMANDS) <= set(listed), listed
    for cmd in listed:
        if SANITIZED and cmd in ("explain", "demo"):
            continue  # handed to Python: a plain python3 cannot import
            # the extension of a sanitized build (the gcc build runs them)
        assert sim.run(cmd, "--help").rc == 0 or cmd == "help", cmd
    # no command gives memory back; the help says where that lives
    assert not re.search(r"^See and give back", out, re.M)
    assert "No command gives memory back" in out
    assert "release_cached_memory()" in out and "gpr_release()" in out
    # every option it names works
    for opt in re.findall(r"^    (-\w), (--\w+)", out, re.M):
        for o in opt:
            assert sim.run(o).rc == 0, o


def test_version_flags(sim):
    want = sim.run("--version")
    assert want.rc == 0 and re.fullmatch(r"gpureclaim \d+\.\d+\.\d+\n",
                                         want.out)
    assert sim.run("-V").out == want.out


def jq_examples(help_text):
    """(command, jq filter) for each `gpureclaim ... | jq ...` example."""
    found = []
    for line in help_text.splitlines():
        m = re.match(r"^\s+(gpureclaim .*?)\s*\|\s*(jq .*?)\s*(#.*)?$", line)
        if m:
            found.append((shlex.split(m.group(1)), shlex.split(m.group(2))))
    return found


@pytest.mark.parametrize("cmd", ["ps", "report", "version"])
def test_jq_examples_in_the_helps_run(sim, cmd, tmp_path):
    """Each `... | jq FILTER` example prints something other than null."""
    if not shutil.which("jq"):
        pytest.fail("jq is not installed (scripts/install-deps.sh does it)")
    sim.configure("gpus=2;extra=0:1:1GiB")
    examples = jq_examples(sim.run(cmd, "--help").out)
    assert examples, f"{cmd} --help has no jq example"
    sample = BIN.parent.parent / "tests/trace/test_trace_log"  # <build>/cli/gpureclaim
    for argv, jq in examples:
        if cmd == "report":
            # the example's log, made from the synthetic run
            trace = tmp_path / argv[2]
            subprocess.run([str(sample), "--sample", str(trace)], check=True)
            argv[2] = str(trace)
        produced = subprocess.run([str(BIN), *argv[1:]], env=sim.env(),
                                  capture_output=True, timeout=30)
        assert produced.returncode == 0, produced
        # -e: exit 1 when the last value is null or false
        r = subprocess.run([*jq[:1], "-e", *jq[1:]], input=produced.stdout,
                           capture_output=True, timeout=30)
        assert r.returncode == 0 and r.stdout.strip(), (argv, jq, r)


DOCS = ROOT / "docs"


def doc_block(page, heading):
    """The first ```sh block under `heading` in docs/<page>."""
    text = (DOCS / page).read_text()
    section = text.split(heading + "\n", 1)[1]
    return section.split("```sh\n", 1)[1].split("```", 1)[0]


def test_export_rules_run_as_documented(sim, tmp_path):
    """docs/trace.md's "Exports" example, line by line: what each comment
    says happens does."""
    sample = BIN.parent.parent / "tests/trace/test_trace_log"  # <build>/cli/gpureclaim
    subprocess.run([str(sample), "--sample", str(tmp_path / "run.trace")],
                   check=True)
    (tmp_path / "notes.txt").write_text("mine\n")
    lines = [l for l in doc_block("trace.md", "### Exports").splitlines()
             if l.strip()]
    assert len(lines) >= 5, lines
    for line in lines:
        cmd, comment = line.split("#", 1)
        argv = shlex.split(cmd)
        assert argv[0] == "gpureclaim"
        r = subprocess.run([str(BIN), *argv[1:]], cwd=tmp_path,
                           env=sim.env(), capture_output=True, text=True,
                           timeout=30)
        refused = "refused" in comment
        assert r.returncode == (1 if refused else 0), (line, r.stderr)
        if refused:
            assert r.stdout == "", line
    assert (tmp_path / "notes.txt").read_text().startswith("<?xml")
    assert oct((tmp_path / "mem.svg").stat().st_mode & 0o777) in \
        ("0o600", "0o400")


def test_jsonl_example_of_ps_md(sim, tmp_path):
    """docs/ps.md's JSON Lines example: the watch writes a time series
    and the jq line reads it as the page says."""
    text = (DOCS / "ps.md").read_text()
    (jq_line,) = [l[2:] for l in text.splitlines()
                  if l.startswith("$ jq ") and "gpu.jsonl" in l]
    sim.configure("extra=0:1:1GiB")
    proc = subprocess.Popen([str(BIN), "ps", "--json", "--watch", "0.1"],
                            env=sim.env(), stdout=subprocess.PIPE, text=True)
    try:
        lines = [proc.stdout.readline() for _ in range(3)]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=10)
    (tmp_path / "gpu.jsonl").write_text("".join(lines))
    r = subprocess.run(jq_line, shell=True, cwd=tmp_path,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    rows = [l.split("\t") for l in r.stdout.splitlines()]
    assert len(rows) == 3 and all(row[1:] == ["1", str(1 << 30)]
                                  for row in rows), rows
    assert rows[0][0].endswith("Z")
