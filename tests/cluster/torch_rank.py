"""One rank of the torch.distributed tests (gloo on the CPU, GPU figures
from the simulated driver through the fake cupy).

    python torch_rank.py STEPS_JSON     (RANK, WORLD_SIZE, MASTER_ADDR,
                                          MASTER_PORT, GPR_PG_TIMEOUT set)

STEPS_JSON: a list of steps, run in order by every rank:
  ["load", {rank: [[fw, dev, keep, drop], ...]}]   workload.load
  ["misbehave", {rank: "raise" | "kill" | "hang:FLAG"}]
  ["release" | "explain" | "ps", {kwargs}]          the collective
Prints one line per collective: RESULT {"rank", "pid", "report": to_dict()
or None, "repr", "figure_before", "figure_after"}.
"""
import datetime
import json
import os
import sys

import torch.distributed as dist
import workload

import gpureclaim.cluster as gcl


def main():
    steps = json.loads(sys.argv[1])
    rank = int(os.environ["RANK"])
    timeout = float(os.environ.get("GPR_PG_TIMEOUT", "30"))
    dist.init_process_group(
        "gloo", timeout=datetime.timedelta(seconds=timeout))
    for kind, arg in steps:
        if kind == "load":
            workload.load([tuple(p) for p in arg.get(str(rank), [])])
        elif kind == "misbehave":
            bad = arg.get(str(rank), "")
            if bad == "raise":
                workload.make_release_raise()
            elif bad == "kill":
                workload.make_release_kill()
            elif bad.startswith("hang:"):
                workload.make_release_hang(bad[5:])
        else:
            before = workload.figure()
            r = getattr(gcl.torch, kind)(**arg)
            print("RESULT " + json.dumps({
                "rank": rank, "pid": os.getpid(),
                "report": None if r is None else r.to_dict(),
                "repr": None if r is None else repr(r),
                "figure_before": before, "figure_after": workload.figure()}),
                flush=True)
    try:
        dist.destroy_process_group()
    except Exception:
        pass


if __name__ == "__main__":
    main()
