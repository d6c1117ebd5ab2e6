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

    keep = (torch.zeros(1, device="cuda") if hasattr(torch, "zeros")
            else torch.empty(1, device="cuda"), cupy.empty(1))
    gpureclaim.release()  # a clean start: nothing cached before the scenario
    dev = torch.cuda.current_device()
    start = gpureclaim.process_memory().get(dev) or 0
    t = torch.empty(GiB, dtype=torch.uint8, device="cuda")
    a = cupy.empty(GiB, dtype=cupy.uint8)
    cycle = [t]
    cycle.append(cycle)
    held = (gpureclaim.process_memory().get(dev) or 0) - start
    del t, a, cycle
    t0 = time.perf_counter()
    if kind == "floor":
        torch.cuda.empty_cache()
        cupy.get_default_memory_pool().free_all_blocks()
        after = gpureclaim.process_memory().get(dev) or 0
        returned = (start + held - after) / 1e9
    else:
        returned = gpureclaim.release_cached_memory()
        after = gpureclaim.process_memory().get(dev) or 0
    ms = (time.perf_counter() - t0) * 1e3
    gc.collect()
    del keep
    print(json.dumps(dict(held=held, returned=returned,
                          still=after - start, ms=ms)))
    return 0


_DEMO_USAGE = """\
USAGE: gpureclaim demo

Drop a 1 GiB Torch tensor held in a reference cycle and a 1 GiB CuPy array,
then compare torch.cuda.empty_cache() + CuPy's free_all_blocks() with
gpureclaim.release_cached_memory(): what each gives back to the driver.
Needs Torch and CuPy on a CUDA GPU (`make demo` in a source checkout runs it
on the simulated driver).

Exit status: 0 ok, 1 something missing or failed (one line says what), 2 bad
usage.
"""


def _demo(argv):
    if argv[:1] in (["-h"], ["--help"]):
        sys.stdout.write(_DEMO_USAGE)
        return 0
    if argv:
        sys.stderr.write(f"gpureclaim demo: unexpected argument '{argv[0]}'\n"
                         "Run 'gpureclaim demo --help' for the usage.\n")
        return 2
    missing = [m for m in ("torch", "cupy") if importlib.util.find_spec(m) is None]
    if missing:
        return _fail(f"needs Torch and CuPy on a CUDA GPU; missing: "
                     f"{', '.join(missing)} (`make demo` in a source "
                     "checkout runs the scenario on the simulated driver)")
    from gpureclaim import format_bytes

    simulated = bool(os.environ.get("GPURECLAIM_SIM"))
    rows = []
    for kind, label in (("floor", "torch.cuda.empty_cache() + free_all_blocks()"),
                        ("ours", "gpureclaim.release_cached_memory()")):
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
        rows.append((label, json.loads(lines[-1])))
    where = ("simulated driver, fake torch and cupy (no GPU here)"
             if simulated else "CUDA")
    print(f"gpureclaim demo ({where}): a 1 GiB Torch tensor in a reference "
          "cycle and a 1 GiB CuPy array, all names deleted, then the call.")
    print("Figures: this process's driver memory (NVML per-process), in "
          "binary units;")
    print("the returned value is release_cached_memory()'s, in units of "
          "1e9 bytes (the design record's).")
    print()
    print("| backend | call | held after allocating | returned value "
          "(1e9 bytes) | still held after the call | time |")
    print("|---|---|---|---|---|---|")
    for label, r in rows:
        print(f"| {'simulated' if simulated else 'CUDA'} | `{label}` | "
              f"{format_bytes(r['held'])} | {r['returned']!r} | "
              f"{format_bytes(r['still'])} | {r['ms']:.1f} ms |")
    return 0


def _print_explanation(header, raw=False):
    """Prints the explanation to stdout. raw: from a signal handler, which
    may run while the main thread is inside sys.stdout.write (a nested
    write would raise "reentrant call"): flush what can be flushed, then
    write the bytes straight to the file descriptor."""
    import gpureclaim

    try:
        text = str(gpureclaim.explain())
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
USAGE: gpureclaim explain SCRIPT [ARGS...]

Run the Python script SCRIPT (sys.argv = [SCRIPT, ARGS...]) and print
gpureclaim.explain() when it ends (also after an exception) and on SIGUSR1
while it runs: where this process's GPU memory goes.

EXAMPLES:
    gpureclaim explain train.py --epochs 1
    kill -USR1 <pid>            # an explanation now, the script goes on

Exit status: the script's (1 if it raised), 2 bad usage.
"""


def _explain(argv):
    import runpy
    import signal
    import traceback

    if not argv or argv[0] in ("-h", "--help"):
        print(_EXPLAIN_USAGE, end="", file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    script = argv[0]
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
    _print_explanation(f"gpureclaim: {script} ended")
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
    """A Dask cluster's report: release (it has no other form), ps given
    --dask, explain whose first argument is --dask (else it names a
    script). cli/main.c hands the same to this module."""
    if argv[:1] == ["release"]:
        return True
    if argv[:1] == ["ps"]:
        opts = argv[1:argv.index("--")] if "--" in argv else argv[1:]
        return any(a.startswith("--dask") for a in opts)
    return argv[:1] == ["explain"] and argv[1:2] != [] and \
        argv[1].startswith("--dask")


def main(argv):
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
    if argv[:1] == ["report"] and _postmortem_named(argv[1:]):
        from gpureclaim._postmortem import main as report_main

        return report_main(argv[1:])
    return _exec_command(argv)


def _postmortem_named(args):
    """`report` of an out-of-memory post-mortem: a FILE that begins with
    its signature (the command checks the same bytes and hands it here;
    a trace log goes to the command)."""
    from gpureclaim._postmortem import is_postmortem

    return any(is_postmortem(a) for a in args if not a.startswith("-"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
