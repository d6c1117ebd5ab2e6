"""gpureclaim explain SCRIPT: runs SCRIPT as __main__ (sys.argv = [SCRIPT,
ARGS...]) and prints gpureclaim.explain() when it ends, also when it
raises (the traceback first, then the explanation, exit status 1), and on
SIGUSR1 while it runs. The script's exit status is passed on. (explain
--pid N is the agent's, gpureclaim/_commands/agent.py; explain --dask
the cluster's, gpureclaim/cluster/_cli.py.)
"""
import os
import sys

from . import _usage_error


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
            from .._explain import _parts as _explain

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
