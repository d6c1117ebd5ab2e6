"""python -m gpureclaim demo: the design record's scenario, before and after.

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
    if hasattr(torch, "uint8") and hasattr(torch, "zeros"):
        t = torch.empty(GiB, dtype=torch.uint8, device="cuda")
        a = cupy.empty(GiB, dtype=cupy.uint8)
    else:  # the fakes take a byte count
        t = torch.empty(GiB, device="cuda")
        a = cupy.empty(GiB)
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
    print("Figures: this process's driver memory (NVML per-process).")
    print()
    print("| backend | call | held after allocating | returned value | "
          "still held after the call | time |")
    print("|---|---|---|---|---|---|")
    for label, r in rows:
        print(f"| {'simulated' if simulated else 'CUDA'} | `{label}` | "
              f"{r['held'] / GiB:.3f} GiB | {r['returned']!r} | "
              f"{r['still'] / GiB:.3f} GiB | {r['ms']:.1f} ms |")
    return 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "_demo-run":
        _run(argv[1])
        return 0
    if argv[:1] == ["demo"]:
        return _demo()
    print("usage: python -m gpureclaim demo", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
