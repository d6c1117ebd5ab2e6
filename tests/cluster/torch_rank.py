"""One rank of the torch.distributed tests (gloo on the CPU, GPU figures
from the simulated driver through the fake cupy).

    python torch_rank.py STEPS_JSON     (RANK, WORLD_SIZE, MASTER_ADDR,
                                          MASTER_PORT, GPR_PG_TIMEOUT set)

STEPS_JSON: {"plan": {rank: [[fw, dev, keep, drop], ...]},
             "misbehave": {rank: "raise" | "kill" | "hang:FLAG"},
             "calls": [["release" | "explain" | "ps", {kwargs}], ...]}
Prints one line per call: RESULT {"call": i, "report": to_dict() or None,
"figure_before": {...}, "figure_after": {...}}.
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
    plan = [tuple(p) for p in steps["plan"].get(str(rank), [])]
    loaded = workload.load(plan)
    bad = steps.get("misbehave", {}).get(str(rank), "")
    if bad == "raise":
        workload.make_release_raise()
    elif bad == "kill":
        workload.make_release_kill()
    elif bad.startswith("hang:"):
        workload.make_release_hang(bad[5:])
    for i, (kind, kw) in enumerate(steps["calls"]):
        before = workload.figure()
        r = getattr(gcl.torch, kind)(**kw)
        after = workload.figure()
        print("RESULT " + json.dumps({
            "call": i, "rank": rank, "pid": loaded["pid"],
            "report": None if r is None else r.to_dict(),
            "repr": None if r is None else repr(r),
            "figure_before": before, "figure_after": after}), flush=True)
    try:
        dist.destroy_process_group()
    except Exception:
        pass


if __name__ == "__main__":
    main()
