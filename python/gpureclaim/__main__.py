"""python -m gpureclaim demo | explain SCRIPT [ARGS]
       python -m gpureclaim {ps,release,explain} --dask ADDRESS (a Dask
       cluster's report: gpureclaim/cluster/_cli.py, docs/cluster.md)

explain: runs SCRIPT as __main__ (sys.argv = [SCRIPT, ARGS...]) and prints
gpureclaim.explain() when it ends, also when it raises (the traceback
first, then the explanation, exit status 1), and on SIGUSR1 while it runs.
The script's exit status is passed on.

demo: the design record's scenario, before and after.

Torch and CuPy started, a 1 GiB Torch tensor put in a list that contains
itself (a reference cycle), a 1 GiB CuPy array, all names deleted; then one
of two calls, each in a fresh interpreter:

- torch.cuda.empty_cache() + CuPy's free_all_blocks() (the usual call),
- gpureclaim.release().

The table shows the driver's per-process figure after allocating, what the
call returned, and what is still held. With GPURECLAIM_SIM set (no GPU:
the simulated driver and the test suite's fake torch/cupy) the table says
"simulated".
"""
import json
import os
import subprocess
import sys
import time

GiB = 1 << 30


def _run(kind):
    import gc

    import cupy
    import torch

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


def _demo():
    from gpureclaim import format_bytes

    simulated = bool(os.environ.get("GPURECLAIM_SIM"))
    rows = []
    for kind, label in (("floor", "torch.cuda.empty_cache() + free_all_blocks()"),
                        ("ours", "gpureclaim.release_cached_memory()")):
        p = subprocess.run([sys.executable, "-m", "gpureclaim", "_demo-run", kind],
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.stderr.write(p.stdout + p.stderr)
            return 1
        rows.append((label, json.loads(p.stdout.strip().splitlines()[-1])))
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


def _explain(argv):
    import runpy
    import signal
    import traceback

    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m gpureclaim explain SCRIPT [ARGS...]",
              file=sys.stderr)
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


def main(argv):
    if argv[:1] in (["ps"], ["release"]) or (
            argv[:1] == ["explain"] and argv[1:2]
            and argv[1].startswith("--dask")):
        from gpureclaim.cluster._cli import main as cluster_main

        return cluster_main(argv[0], argv[1:])
    if argv[:1] == ["explain"]:
        return _explain(argv[1:])
    if len(argv) >= 2 and argv[0] == "_demo-run":
        _run(argv[1])
        return 0
    if argv[:1] == ["demo"]:
        return _demo()
    print("usage: python -m gpureclaim demo | explain SCRIPT [ARGS...]\n"
          "       python -m gpureclaim {ps,release,explain} --dask ADDRESS "
          "[--json] [--help]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
