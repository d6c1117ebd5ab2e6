"""What the tool says about itself: each command's help is the same text
however it is asked for, the top-level help promises only what the tool
does, -V, and the jq examples in the helps run as written. (The examples
of the docs, docs/ps.md's and docs/trace.md's included, are run by the one
docs runner: tests/docs.)"""
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import BIN, ROOT

COMMANDS = ["ps", "trace", "report", "version"]
# handed to `python3 -m gpureclaim`
PYTHON_COMMANDS = ["explain", "release", "demo", "run", "reclaim", "agent",
                   "exporter"]
SANITIZED = bool(os.environ.get("GPR_SANITIZED"))
SYS_PYTHON = sys.executable


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
    for cmd in listed:  # no help needs Python (help_python.c)
        assert sim.run(cmd, "--help").rc == 0 or cmd == "help", cmd
    # only the process that holds memory gives it back; the help says how
    assert not re.search(r"^See and give back", out, re.M)
    assert "Only the process that holds memory can give it back" in out
    assert "release_cached_memory()" in out and "gpr_release()" in out
    assert "release" in listed  # the Dask form, handed to Python
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


@pytest.mark.parametrize("cmd", PYTHON_COMMANDS)
def test_commands_handed_to_python_speak_as_the_others(sim, cmd):
    """explain, release and demo live in the Python package: their help is
    the C commands' style (USAGE, OPTIONS, Exit status), however asked."""
    ways = [["help", cmd], ["--help", cmd], [cmd, "--help"], [cmd, "-h"]]
    results = [sim.run(*w) for w in ways]
    for w, r in zip(ways, results):
        assert r.rc == 0 and r.err == "", (w, r)
    assert len({r.out for r in results}) == 1, [r.out[:60] for r in results]
    out = results[0].out
    assert out.startswith(f"USAGE: gpureclaim {cmd}"), out
    assert "\nOPTIONS:\n" in out and "\nExit status: " in out, out
    assert "usage:" not in out and "options:" not in out  # argparse's
    if cmd in ("explain", "release"):
        assert "--dask ADDRESS" in out, out


def test_help_of_help(sim):
    want = sim.run("--help")
    for args in (["help", "--help"], ["help", "-h"], ["--help", "--help"]):
        r = sim.run(*args)
        assert (r.rc, r.out, r.err) == (0, want.out, ""), (args, r)


@pytest.mark.parametrize("typo, meant", [("trcae", "trace"), ("ps2", "ps"),
                                         ("reprot", "report"),
                                         ("relase", "release"),
                                         ("hlep", "help")])
def test_a_mistyped_command_gets_a_suggestion(sim, typo, meant):
    for args in ([typo], ["help", typo]):
        r = sim.run(*args)
        assert r.rc == 2 and r.out == "", r
        assert r.err == (f"gpureclaim: unknown command '{typo}' (did you "
                         f"mean '{meant}'?)\nRun 'gpureclaim --help' for the "
                         "commands.\n"), r


def test_no_suggestion_for_what_is_like_nothing(sim):
    r = sim.run("frobnicate")
    assert r.rc == 2 and "did you mean" not in r.err, r


HINT = re.compile(r"^Run 'gpureclaim( [a-z]+)? --help' for the "
                  r"(options|commands)\.$")


@pytest.mark.parametrize("args", [
    ["nosuch"], ["--nosuch"], ["help", "ps", "extra"], ["ps", "--nosuch"],
    ["ps", "extra"], ["report"], ["version", "--nosuch"], ["trace"],
    ["explain"], ["explain", "nosuch.py"], ["demo", "extra"],
    ["release"], ["release", "--dask", "x", "--collect", "maybe"],
    ["ps", "--dask", "x", "--timeout", "0"],
    ["exporter", "--interval", "0"], ["exporter", "--json"],
])
def test_every_usage_error_is_two_lines_with_one_hint(sim, args):
    """A usage error says what is wrong in one line, then the one hint,
    worded the same everywhere; exit status 2, nothing on stdout."""
    if SANITIZED and args[0] in PYTHON_COMMANDS + ["ps"] and \
            (args[0] != "ps" or "--dask" in args):
        pytest.skip("handed to Python")
    r = sim.run(*args)
    assert r.rc == 2 and r.out == "", r
    lines = r.err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("gpureclaim"), r
    assert HINT.match(lines[1]), r


@pytest.mark.skipif(SANITIZED, reason="handed to Python")
def test_explain_of_a_missing_script_is_one_line(sim, tmp_path):
    r = sim.run("explain", str(tmp_path / "nosuch.py"))
    assert r.rc == 2 and r.out == "", r
    assert r.err.startswith("gpureclaim explain: cannot run "), r
    assert "Traceback" not in r.err and "ended" not in r.out


# the help of every form the Python package runs, and the words that pick
# the form (issue 33: none may need Python)
PYTHON_HELPS = [
    (["explain", "--help"], "USAGE: gpureclaim explain [--holders] [--json] SCRIPT"),
    (["explain", "--holders", "-h"], "USAGE: gpureclaim explain [--holders]"),
    (["explain", "--pid", "1", "--help"], "USAGE: gpureclaim explain --pid N"),
    (["explain", "--dask", "x", "-h"], "USAGE: gpureclaim explain --dask"),
    (["release", "--help"], "USAGE: gpureclaim release --pid N"),
    (["release", "--pid", "1", "-h"], "USAGE: gpureclaim release --pid N"),
    (["release", "--dask", "x", "--help"], "USAGE: gpureclaim release --dask"),
    (["ps", "--explain", "--help"], "USAGE: gpureclaim ps --explain"),
    (["ps", "--dask", "x", "--help"], "USAGE: gpureclaim ps --dask"),
    (["reclaim", "--help"], "USAGE: gpureclaim reclaim"),
    (["agent", "--help"], "USAGE: gpureclaim agent start"),
    (["agent", "start", "--pid", "1", "-h"], "USAGE: gpureclaim agent start"),
    (["demo", "--help"], "USAGE: gpureclaim demo"),
    (["run", "--oom", "--help"], "USAGE: gpureclaim run"),
    (["exporter", "--help"], "USAGE: gpureclaim exporter"),
    (["help", "explain"], "USAGE: gpureclaim explain [--holders] [--json] SCRIPT"),
    (["--help", "release"], "USAGE: gpureclaim release --pid N"),
]


@pytest.mark.parametrize("args, head", PYTHON_HELPS,
                         ids=[" ".join(a) for a, _ in PYTHON_HELPS])
def test_the_help_of_what_python_runs_needs_no_python(sim, args, head):
    """The command says it: no Python may be found (a build folder's
    command, a machine without the package), in every build (sanitized
    ones too)."""
    env = sim.env(GPURECLAIM_PYTHON="/nonexistent/python3")
    env.pop("PYTHONPATH", None)
    r = sim.run(*args, env=env)
    assert (r.rc, r.err) == (0, ""), (args, r)
    assert r.out.startswith(head + "\n") or r.out.startswith(head + " "), r
    assert "\nOPTIONS:\n" in r.out and "\nExit status: " in r.out


def test_release_help_names_what_the_dask_form_takes(sim):
    out = sim.run("release", "--help").out
    usage = out.split("\n\n", 1)[0]
    dask = usage[usage.index("gpureclaim release --dask"):]
    for opt in ("--workers", "--collect", "--workspaces", "--timeout",
                "--json"):
        assert opt in dask, (opt, usage)


def test_a_script_s_own_help_option_is_the_script_s(sim, tmp_path):
    """After SCRIPT (explain) or CMD (run), --help is theirs."""
    s = tmp_path / "s.py"
    s.write_text("import sys; print('args', sys.argv[1:])\n")
    env = sim.env()
    env.pop("PYTHONPATH", None)
    for args in (["explain", str(s), "--help"],
                 ["run", "--oom", "--", SYS_PYTHON, str(s), "--help"]):
        if SANITIZED:
            pytest.skip("handed to Python")
        r = sim.run(*args, env=env)
        assert r.rc == 0 and "args ['--help']" in r.out, (args, r)


@pytest.mark.skipif(SANITIZED, reason="handed to Python")
def test_the_build_folder_s_command_runs_the_build_folder_s_package(sim,
                                                                    tmp_path):
    """No PYTHONPATH, from another folder: the build's package is found."""
    s = tmp_path / "s.py"
    s.write_text("import gpureclaim; print('from', gpureclaim.__file__)\n")
    env = sim.env()
    env.pop("PYTHONPATH", None)
    p = subprocess.run([str(BIN), "explain", str(s)], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    where = BIN.parent.parent.resolve() / "python" / "gpureclaim"
    assert f"from {where}/__init__.py" in p.stdout, p.stdout


@pytest.mark.skipif(SANITIZED, reason="python -m gpureclaim cannot import a "
                    "sanitized build's extension")
@pytest.mark.parametrize("args, head", PYTHON_HELPS,
                         ids=[" ".join(a) for a, _ in PYTHON_HELPS])
def test_python_m_gpureclaim_says_the_same_help(sim, args, head):
    """One text, kept in C: `python -m gpureclaim ... --help` prints what the
    command prints (the package keeps none of its own)."""
    env = sim.env(GPURECLAIM_BIN=str(BIN))
    p = subprocess.run([SYS_PYTHON, "-m", "gpureclaim", *args], env=env,
                       capture_output=True, text=True, timeout=60)
    want = sim.run(*args)
    assert (p.returncode, p.stdout, p.stderr) == (0, want.out, ""), args
    # the build folder's package finds the build folder's command itself
    del env["GPURECLAIM_BIN"]
    p = subprocess.run([SYS_PYTHON, "-m", "gpureclaim", *args], env=env,
                       capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stdout) == (0, want.out), (args, p.stderr)


def test_the_package_keeps_no_help_text():
    """The Python side hands every help to the command: no USAGE text of
    its own to drift from the C one (issue 33)."""
    import glob

    pkg = ROOT / "python" / "gpureclaim"
    found = [f for f in glob.glob(str(pkg / "**" / "*.py"), recursive=True)
             if "USAGE: gpureclaim" in open(f).read()]
    assert found == []
