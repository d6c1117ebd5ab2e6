"""The PyTorch loops the trace benchmarks time, defined once.

- torch: torch.empty + del of 1 MiB (run it with
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 for a driver call per allocation);
- mlp: one training step of a small MLP (1024-4096-4096-10, AdamW, batch
  256), caching on: no driver allocation per step once warm.

bench/trace_ab.py imports the step factories; bench/trace_bench.py and
bench/trace_variants.sh run this file:

    python3 bench/trace_loops.py torch|mlp N [history]

which builds the loop, optionally turns on
torch.cuda.memory._record_memory_history, warms up (200 iterations, 50 for
mlp), times N iterations and prints
"<microseconds> us/pair". torch is imported only when a loop is built.
"""
import sys
import time

WARMUP = {"torch": 200, "mlp": 50}


def torch_step():
    import torch

    def step():
        x = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
        del x
    return step


def mlp_step():
    import torch
    torch.manual_seed(0)
    m = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
        torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
        torch.nn.Linear(4096, 10)).cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    x = torch.randn(256, 1024, device="cuda")
    y = torch.randint(0, 10, (256,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
    return step


STEPS = {"torch": torch_step, "mlp": mlp_step}


def main():
    if len(sys.argv) not in (3, 4) or sys.argv[1] not in STEPS or \
            (len(sys.argv) == 4 and sys.argv[3] != "history"):
        sys.exit("usage: trace_loops.py torch|mlp N [history]")
    import torch
    loop, n = sys.argv[1], int(sys.argv[2])
    torch.ones(1, device="cuda")
    step = STEPS[loop]()
    if len(sys.argv) == 4:
        torch.cuda.memory._record_memory_history(max_entries=100000)
    for _ in range(WARMUP[loop]):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    torch.cuda.synchronize()
    print("%.3f us/pair" % ((time.perf_counter() - t0) / n * 1e6))


if __name__ == "__main__":
    main()
