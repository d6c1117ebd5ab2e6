"""python -m gpureclaim: the `gpureclaim` command.

`python -m gpureclaim ARGS` and `gpureclaim ARGS` are one program: ps,
trace, report, version and the help are the command's own (C, installed
beside the interpreter's scripts: this module runs it), and the command
hands explain and demo to this module. So the help, the output and the exit
status are the same either way. $GPURECLAIM_BIN names the command where it
is not installed (a build folder).
A Dask cluster's reports (ps --dask, explain --dask, release --dask:
gpureclaim/cluster/_cli.py, docs/cluster.md) are this module's too.

explain: runs SCRIPT as __main__ (sys.argv = [SCRIPT, ARGS...]) and prints
gpureclaim.explain() when it ends, also when it raises (the traceback
first, then the explanation, exit status 1), and on SIGUSR1 while it runs.
The script's exit status is passed on.

demo: the design record's scenario, before and after.

run: CMD with the startup hook's features on (gpureclaim/_run.py).
exporter: Prometheus metrics of the host's GPU memory
(gpureclaim/_exporter.py, docs/metrics.md).
report of an out-of-memory post-mortem (gpureclaim/_postmortem.py): the
command hands it here, as the file's first bytes say.

Torch and CuPy started, a 1 GiB Torch tensor put in a list that contains
itself (a reference cycle), a 1 GiB CuPy array, all names deleted; then one
of two calls, each in a fresh interpreter:

- torch.cuda.empty_cache() + CuPy's free_all_blocks() (the usual call),
- gpureclaim.release().

The table shows the driver's per-process figure after allocating, what the
call returned, and what is still held. With GPURECLAIM_SIM set (no GPU:
the simulated driver and the test suite's fake torch/cupy) the table says
"simulated". Without Torch, CuPy or a GPU it says in one line what is
missing (exit status 1).
"""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time

GiB = 1 << 30


def _fail(msg):
    """The one line a demo failure prints (stderr), exit status 1."""
    print(f"gpureclaim demo: {msg}", file=sys.stderr)
    return 1


def _run(kind):
    import gc

    try:
        import cupy
        import torch
    except ImportError as e:
        return _fail(f"cannot import {e.name or e}")
    if not torch.cuda.is_available():
        return _fail("Torch sees no CUDA GPU (torch.cuda.is_available() is "
                     "False); `make demo` in a source checkout runs the "
                     "scenario on the simulated driver")

    import gpureclaim

    # CUDA started by both frameworks (one tiny array each, dropped), then
    # everything cached given back: what the driver holds now is the
    # process's own part, the context, before the scenario begins
    small = (torch.empty(1, device="cuda"), cupy.empty(1))
    del small
    gpureclaim.release()
    dev = torch.cuda.current_device()
    start = gpureclaim.process_memory().get(dev) or 0
    t = torch.empty(GiB, dtype=torch.uint8, device="cuda") \
        if hasattr(torch, "uint8") else torch.empty(GiB, device="cuda")
    a = cupy.empty(GiB, dtype=cupy.uint8) if hasattr(cupy, "uint8") \
        else cupy.empty(GiB)
    cycle = [t]
    cycle.append(cycle)
    before = gpureclaim.process_memory().get(dev) or 0
    del t, a, cycle
    t0 = time.perf_counter()
    returned = None
    if kind == "floor":
        torch.cuda.empty_cache()
        cupy.get_default_memory_pool().free_all_blocks()
    else:
        returned = gpureclaim.release_cached_memory()
    seconds = time.perf_counter() - t0
    after = gpureclaim.process_memory().get(dev) or 0
    gc.collect()
    print(json.dumps(dict(start=start, before=before, after=after,
                          returned=returned, seconds=seconds)))
    return 0


_DEMO_USAGE = """\
USAGE: gpureclaim demo

Drop a 1 GiB Torch tensor held in a reference cycle and a 1 GiB CuPy array,
then compare torch.cuda.empty_cache() + CuPy's free_all_blocks() with
gpureclaim.release_cached_memory(): what each gives back to the driver.
Needs Torch and CuPy on a CUDA GPU (`make demo` in a source checkout runs it
on the simulated driver).

OPTIONS:
    -h, --help          show this help

Exit status: 0 ok, 1 something missing or failed (one line says what), 2 bad
usage.
"""

_FLOOR = "torch.cuda.empty_cache() + free_all_blocks()"
_OURS = "gpureclaim.release_cached_memory()"


def _para(text, indent=""):
    """A paragraph as view lines of at most 78 columns (a "p" block is one
    line: the terminal-safe rule shows a newline as '?')."""
    import textwrap

    return [("p", line) for line in textwrap.wrap(
        text, 78, initial_indent=indent, subsequent_indent=indent)] or \
        [("p", "")]


def _demo_text(rows, simulated):
    """What the demo says, from the two runs' figures: a table of the
    driver's per-process figure, then what the figures mean."""
    from gpureclaim import _gpureclaim as _c
    from gpureclaim import format_bytes as fb

    floor, ours = rows[_FLOOR], rows[_OURS]
    where = ("the simulated driver, with the test suite's fake Torch and "
             "CuPy (no GPU here)" if simulated else "this machine's GPU")
    table = [(label, r["before"], r["after"], r["before"] - r["after"],
              r["seconds"]) for label, r in rows.items()]
    kept = floor["after"] - floor["start"]
    blocks = [
        *_para(f"On {where}: a 1 GiB Torch tensor held in a reference cycle "
               "and a 1 GiB CuPy array, all names deleted, then one call, "
               "each in a fresh process. The figures are what the driver "
               "holds for the process, as nvidia-smi lists it."),
        ("p", ""),
        ("table", None, [("call", "text"), ("held before", "bytes"),
                         ("held after", "bytes"), ("given back", "bytes"),
                         ("time", "secs")], table),
        ("p", ""),
        *_para(f"empty_cache() and free_all_blocks() give back cached blocks "
               f"only: the tensor in the cycle is alive until the garbage "
               f"collector runs, so {fb(kept)} of the scenario stays held."),
        ("p", ""),
        *_para(f"release_cached_memory() collects it first, gives back "
               f"{fb(ours['before'] - ours['after'])} and returns "
               f"{ours['returned']!r}: its figure is in units of 1e9 bytes "
               f"(GB), for code that expects the GB figure of the function "
               f"it stands in for; release() gives the full report."),
        ("p", ""),
        *_para(f"What stays held, {fb(ours['after'])}, is what the process "
               f"held before the scenario: the CUDA context, the driver's own "
               f"memory for the process, which no call gives back; it goes "
               f"when the process ends."),
    ]
    return _c.render(("", blocks), "text").strip("\n") + "\n"


def _demo(argv):
    if argv[:1] in (["-h"], ["--help"]):
        sys.stdout.write(_DEMO_USAGE)
        return 0
    if argv:
        return _usage_error("demo", f"unexpected argument '{argv[0]}'")
    missing = [m for m in ("torch", "cupy") if importlib.util.find_spec(m) is None]
    if missing:
        return _fail(f"needs Torch and CuPy on a CUDA GPU; missing: "
                     f"{', '.join(missing)} (`make demo` in a source "
                     "checkout runs the scenario on the simulated driver)")
    simulated = bool(os.environ.get("GPURECLAIM_SIM"))
    rows = {}
    for kind, label in (("floor", _FLOOR), ("ours", _OURS)):
        p = subprocess.run([sys.executable, "-m", "gpureclaim", "_demo-run", kind],
                           capture_output=True, text=True)
        lines = p.stdout.strip().splitlines()
        if p.returncode != 0 or not lines:
            err = p.stderr.strip().splitlines()
            demo_lines = [x for x in err if x.startswith("gpureclaim demo: ")]
            if demo_lines:  # the child said what is wrong
                sys.stderr.write(demo_lines[-1] + "\n")
                return 1
            last = err[-1] if err else f"exit status {p.returncode}"
            return _fail(f"the {kind} run failed: {last}")
        rows[label] = json.loads(lines[-1])
    sys.stdout.write(_demo_text(rows, simulated))
    return 0


def _demo_trace(argv):
    """`make demo`'s part 2: what the trace of examples/seed_scenario.py
    saw, in words (scripts/demo.sh runs it). argv: LOG REPORT_COMMAND."""
    from gpureclaim import _gpureclaim as _c
    from gpureclaim import format_bytes as fb

    log, report_cmd = argv
    p = subprocess.run([_command() or "gpureclaim", "report", log, "--json"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return _fail(f"cannot read the trace: {p.stderr.strip()}")
    r = json.loads(p.stdout)
    libs = r.get("libraries", [])
    allocs = sum(x["allocs"] for x in libs)
    frees = sum(x["frees"] for x in libs)
    allocated = sum(x["allocated_bytes"] for x in libs)
    freed = sum(x["freed_bytes"] for x in libs)

    def n(k, one, many):
        return f"{k} {one if k == 1 else many}"

    blocks = [
        *_para("What the trace saw, every allocation and free the driver was "
               "asked for:"),
        *_para(f"{n(allocs, 'allocation', 'allocations')} ({fb(allocated)}) "
               f"and {n(frees, 'free', 'frees')} ({fb(freed)}) in "
               f"{_c.format_seconds(r['duration_ns'] / 1e9)}; at most "
               f"{fb(r['peak_bytes'])} allocated at once, "
               f"{_c.format_seconds(r['peak_at_ns'] / 1e9)} after the start; "
               f"allocated and not freed at the end: "
               f"{fb(r['held_at_end_bytes'])}.", "  "),
        ("p", ""),
        *_para("The driver's figure above never falls below the CUDA "
               "context: the driver makes it when CUDA starts, not through "
               "an allocation, so the trace does not count it."),
        ("p", ""),
        ("p", "Every call, by library and device:"),
        ("p", f"  {report_cmd}"),
    ]
    sys.stdout.write(_c.render(("", blocks), "text").strip("\n") + "\n")
    return 0


def _print_explanation(header, raw=False, holders=None):
    """Prints the explanation to stdout. raw: from a signal handler, which
    may run while the main thread is inside sys.stdout.write (a nested
    write would raise "reentrant call"): flush what can be flushed, then
    write the bytes straight to the file descriptor. holders: None, or the
    script's globals once it ended (a namespace the holders' walk names as
    __main__'s: the script's module is gone from sys.modules by then)."""
    import gpureclaim

    try:
        if holders is None:
            text = str(gpureclaim.explain())
        else:
            from . import _explain

            ns = [holders] if isinstance(holders, dict) else []
            text = str(gpureclaim.Explanation(_explain.explain(
                holders={"budget_s": 1.0, "namespaces": ns})))
    except Exception as e:  # never let the report hide the script's result
        text = f"gpureclaim.explain() failed: {type(e).__name__}: {e}"
    out = f"{header}\n{text}\n"
    if not raw:
        sys.stdout.write(out)
        sys.stdout.flush()
        return
    try:
        sys.stdout.flush()
    except (RuntimeError, OSError, ValueError):
        pass
    try:
        data, fd = out.encode(), sys.stdout.fileno()
        while data:
            data = data[os.write(fd, data):]
    except (OSError, ValueError, AttributeError):
        pass


_EXPLAIN_USAGE = """\
USAGE: gpureclaim explain [--holders] SCRIPT [ARGS...]
       gpureclaim explain --pid N [--json] [--holders] [--timeout SECONDS]
       gpureclaim explain --dask ADDRESS [--workers ADDR...]
                          [--timeout SECONDS] [--json]

Run the Python script SCRIPT (sys.argv = [SCRIPT, ARGS...]) and print
gpureclaim.explain() when it ends (also after an exception) and on SIGUSR1
while it runs: where this process's GPU memory goes. With --pid, ask
running process N's agent instead (docs/agent.md; `gpureclaim explain
--pid N --help`); with --dask, every worker of a Dask cluster, each about
its own process (docs/cluster.md).

OPTIONS:
    --holders           also name who holds the largest live arrays
                        (explain(holders=True): the script's globals,
                        its traceback's frames, threads)
    --pid N             a process running the agent (with it: --json,
                        --holders, --timeout)
    --dask ADDRESS      a Dask scheduler, e.g. tcp://host:8786 (with it:
                        --workers, --timeout and --json, as for
                        `gpureclaim release --dask`)
    -h, --help          show this help

EXAMPLES:
    gpureclaim explain train.py --epochs 1
    gpureclaim explain --holders train.py
    kill -USR1 <pid>            # an explanation now, the script goes on
    gpureclaim explain --pid 4242
    gpureclaim explain --dask tcp://10.0.0.5:8786 --timeout 10

Exit status: the script's (1 if it raised), 2 bad usage (a SCRIPT that
cannot be read included).
"""


def _usage_error(command, message):
    """The two lines of every usage error, exit status 2."""
    sys.stderr.write(f"gpureclaim {command}: {message}\n"
                     f"Run 'gpureclaim {command} --help' for the options.\n")
    return 2


def _explain(argv):
    import runpy
    import signal
    import traceback

    if not argv:
        return _usage_error("explain", "no script given (gpureclaim explain "
                            "SCRIPT [ARGS...])")
    if argv[0] in ("-h", "--help"):
        sys.stdout.write(_EXPLAIN_USAGE)
        return 0
    holders = argv[0] == "--holders"
    if holders:
        argv = argv[1:]
        if not argv:
            return _usage_error("explain", "no script given (gpureclaim "
                                "explain --holders SCRIPT [ARGS...])")
        if argv[0] in ("-h", "--help"):
            sys.stdout.write(_EXPLAIN_USAGE)
            return 0
    script = argv[0]
    # a script that cannot be run is the caller's mistake, said in one line
    # (as `memray run` does), not a traceback of ours and an explanation
    if not os.path.exists(script):
        return _usage_error("explain", f"cannot run {script!r}: no such file")
    if not os.access(script, os.R_OK):
        return _usage_error("explain", f"cannot run {script!r}: not readable")
    busy = []

    # Python runs signal handlers in the main thread between bytecodes, so
    # the report is taken from a consistent interpreter; a signal that
    # arrives while one is being printed is dropped, not nested.
    def on_usr1(signum, frame):
        if busy:
            return
        busy.append(1)
        try:
            _print_explanation("gpureclaim: SIGUSR1 received", raw=True)
        finally:
            busy.pop()

    signal.signal(signal.SIGUSR1, on_usr1)
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    code, keep = 0, None
    # The script's globals (and, after an exception, its frames) are kept
    # until the explanation is printed: what they hold shows as live.
    try:
        keep = runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        keep, code = e, e.code
    except BaseException as e:
        keep = e
        traceback.print_exc()
        code = 1
        # as the interactive interpreter keeps an uncaught exception: the
        # holders' walk names its frames "sys.last_traceback: ..."
        sys.last_type, sys.last_value = type(e), e
        sys.last_traceback = e.__traceback__
    _print_explanation(f"gpureclaim: {script} ended",
                       holders=(keep if isinstance(keep, dict) else True)
                       if holders else None)
    del keep
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _command():
    """The installed `gpureclaim` command: $GPURECLAIM_BIN, else the scripts
    folder of the installation scheme this package lies in (a virtual
    environment's bin, ~/.local/bin, /usr/local/bin), else bin/ beside the
    package (pip install --target), else the PATH."""
    env = os.environ.get("GPURECLAIM_BIN")
    if env:
        return env
    site = os.path.realpath(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    dirs = []
    for scheme in sysconfig.get_scheme_names():
        try:
            paths = sysconfig.get_paths(scheme)
        except (KeyError, ValueError):
            continue
        if site in (os.path.realpath(paths.get("platlib", "")),
                    os.path.realpath(paths.get("purelib", ""))):
            dirs.append(paths["scripts"])
    dirs.append(os.path.join(site, "bin"))
    for d in dirs:
        p = os.path.join(d, "gpureclaim")
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return shutil.which("gpureclaim")


def _exec_command(argv):
    cmd = _command()
    if not cmd:
        print("gpureclaim: the gpureclaim command is not installed beside "
              "this package (pip install . installs both); set "
              "GPURECLAIM_BIN to its path", file=sys.stderr)
        return 1
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(cmd, [cmd, *argv])
    except OSError as e:
        print(f"gpureclaim: cannot run {cmd}: {e.strerror}", file=sys.stderr)
        return 1


def _for_cluster(argv):
    """A Dask cluster's report: ps given --dask, explain whose first
    argument is --dask (else it names a script). release goes to
    gpureclaim/_agent_cli.py, which hands --dask on. cli/main.c hands the
    same to this module."""
    if argv[:1] == ["ps"]:
        opts = argv[1:argv.index("--")] if "--" in argv else argv[1:]
        return any(a.startswith("--dask") for a in opts)
    return argv[:1] == ["explain"] and argv[1:2] != [] and \
        argv[1].startswith("--dask")


def _ps_explain(argv):
    """`ps` given --explain (before any --): the agents' parts."""
    opts = argv[1:argv.index("--")] if "--" in argv else argv[1:]
    return argv[:1] == ["ps"] and "--explain" in opts


def _agent_client(argv):
    """`release --pid N` and `explain --pid N` (not their help): the
    command's own, in C (cli/cmd_agent.c), where it is installed."""
    opts = argv[1:argv.index("--")] if "--" in argv else argv[1:]
    return (argv[:1] in (["release"], ["explain"])
            and any(a == "--pid" or a.startswith("--pid=") for a in opts)
            and not any(a in ("-h", "--help") for a in opts)
            and _command() is not None)


def main(argv):
    if _agent_client(argv):
        return _exec_command(argv)
    if argv[:1] == ["release"]:
        from gpureclaim._agent_cli import release_entry

        return release_entry(argv[1:])
    if argv[:1] == ["explain"] and argv[1:2] and \
            argv[1].startswith("--pid"):
        from gpureclaim._agent_cli import explain_main

        return explain_main(argv[1:])
    if _ps_explain(argv) or argv[:1] == ["reclaim"]:
        # the command's own (cli/ps_explain.c, cli/cmd_reclaim.c); their
        # help is said here
        opts = argv[1:argv.index("--")] if "--" in argv else argv[1:]
        if any(a in ("-h", "--help") for a in opts):
            from gpureclaim._agent_cli import help_main

            return help_main(argv[0])
        return _exec_command(argv)
    if argv[:1] == ["agent"]:
        from gpureclaim._agent_cli import agent_main

        return agent_main(argv[1:])
    if _for_cluster(argv):
        from gpureclaim.cluster._cli import main as cluster_main

        return cluster_main(argv[0], argv[1:])
    if argv[:1] == ["explain"]:
        return _explain(argv[1:])
    if len(argv) >= 2 and argv[0] == "_demo-run":
        try:
            return _run(argv[1])
        except Exception as e:  # one line, no traceback
            return _fail(f"{type(e).__name__}: {e}")
    if argv[:1] == ["demo"]:
        return _demo(argv[1:])
    if argv[:1] == ["run"]:
        from gpureclaim._run import main as run_main

        return run_main(argv[1:])
    if argv[:1] == ["exporter"]:
        from gpureclaim._exporter import main as exporter_main

        return exporter_main(argv[1:])
    if argv[:1] == ["report"] and _postmortem_named(argv[1:]):
        from gpureclaim._postmortem import main as report_main

        return report_main(argv[1:])
    if len(argv) == 3 and argv[0] == "_demo-trace":
        return _demo_trace(argv[1:])
    return _exec_command(argv)


def _postmortem_named(args):
    """`report` of an out-of-memory post-mortem: a FILE that begins with
    its signature (the command checks the same bytes and hands it here;
    a trace log goes to the command)."""
    from gpureclaim._postmortem import is_postmortem

    return any(is_postmortem(a) for a in args if not a.startswith("-"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
