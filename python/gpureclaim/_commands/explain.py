"""gpureclaim explain SCRIPT: runs SCRIPT as __main__ (sys.argv = [SCRIPT,
ARGS...]) and prints gpureclaim.explain() when it ends, also when it
raises (the script's traceback first, from its own frames, then the
explanation, exit status 1), and on SIGUSR1 while it runs; with --json the
explanation's JSON document, one line. The script's exit status is passed
on. (explain --pid N is the agent's, gpureclaim/_commands/agent.py;
explain --dask the cluster's, cluster.py; the help is the
C command's, cli/help_python.c.)
"""
import os
import sys

from . import _usage_error


def _print_explanation(header, raw=False, holders=None, as_json=False):
    """Prints the explanation to stdout (as_json: its JSON document, one
    line, without the header). raw: from a signal handler, which may run
    while the main thread is inside sys.stdout.write (a nested write would
    raise "reentrant call"): flush what can be flushed, then write the
    bytes straight to the file descriptor. holders: None, or the script's
    globals once it ended (a namespace the holders' walk names as
    __main__'s: the script's module is gone from sys.modules by then)."""
    import json

    import gpureclaim

    try:
        if holders is None:
            e = gpureclaim.explain()
        else:
            from .._explain import _parts as _explain

            ns = [holders] if isinstance(holders, dict) else []
            e = gpureclaim.Explanation(_explain.explain(
                holders={"budget_s": 1.0, "namespaces": ns}))
        text = (json.dumps(e.to_dict(), separators=(",", ":")) if as_json
                else str(e))
    except Exception as e:  # never let the report hide the script's result
        text = f"gpureclaim.explain() failed: {type(e).__name__}: {e}"
        if as_json:
            text = json.dumps({"error": text})
    out = f"{text}\n" if as_json else f"{header}\n{text}\n"
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


def _explain(argv):
    import runpy
    import signal
    import traceback

    # its options, before SCRIPT (whose own follow it)
    argv = list(argv)
    opts = set()
    while argv and argv[0] in ("--holders", "--json"):
        opts.add(argv.pop(0))
    holders, as_json = "--holders" in opts, "--json" in opts
    if not argv:
        return _usage_error("explain", "no script given (gpureclaim explain "
                            "[--holders] [--json] SCRIPT [ARGS...])")
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
            _print_explanation("gpureclaim: SIGUSR1 received", raw=True,
                               as_json=as_json)
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
        # the script's traceback, from its own first frame: not this
        # module's nor runpy's, which it never called
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != script:
            tb = tb.tb_next
        e.__traceback__ = tb
        traceback.print_exception(type(e), e, tb)
        code = 1
        # as the interactive interpreter keeps an uncaught exception: the
        # holders' walk names its frames "sys.last_traceback: ..."
        sys.last_type, sys.last_value = type(e), e
        sys.last_traceback = tb
    _print_explanation(f"gpureclaim: {script} ended",
                       holders=(keep if isinstance(keep, dict) else True)
                       if holders else None, as_json=as_json)
    del keep
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
