"""gpureclaim demo: the design record's scenario, before and after.

Torch and CuPy started, a 1 GiB Torch tensor put in a list that contains
itself (a reference cycle), a 1 GiB CuPy array, all names deleted; then one
of two calls, each in a fresh interpreter:

- torch.cuda.empty_cache() + CuPy's free_all_blocks() (the usual call),
- gpureclaim.release().

The table shows the driver's per-process figure after allocating, what the
call returned, and what is still held. With GPURECLAIM_SIM set (no GPU:
the simulated driver and the test suite's fake torch/cupy) the table says
"simulated". Without Torch, CuPy or a GPU it says in one line what is
missing (exit status 1). `make demo`'s second part (_demo_trace) says in
words what the trace of its scenario saw.
"""
import importlib.util
import json
import os
import subprocess
import sys
import time

from . import _command, _usage_error

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
    # everything cached released: what the driver holds now is the
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
                         ("held after", "bytes"), ("released", "bytes"),
                         ("time", "secs")], table),
        ("p", ""),
        *_para(f"empty_cache() and free_all_blocks() release cached blocks "
               f"only: the tensor in the cycle is alive until the garbage "
               f"collector runs, so {fb(kept)} of the scenario stays held."),
        ("p", ""),
        *_para(f"release_cached_memory() collects it first, releases "
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
