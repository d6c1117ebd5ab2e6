"""One torchrun rank of tests/hardware/test_cluster.py: NCCL, one GPU per
rank, the seed scenario, then gpureclaim.cluster.torch.release() on every
rank. Writes $GPR_RESULT_DIR/rank-N.json: the rank's own figures and the
report (a file each: two ranks' long lines on one pipe could interleave)."""
import json
import os

import torch
import torch.distributed as dist
from cluster_seed import figure, seed

import gpureclaim.cluster as gcl

local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)  # torch asks it of object collectives
dist.init_process_group("nccl")
world = dist.get_world_size()
# NCCL's buffers and the object collectives' staging exist before the
# measurement, so the release's figures hold the scenario alone
x = torch.ones(1, device="cuda")
dist.all_reduce(x)
dist.all_gather_object([None] * world, local)
torch.cuda.synchronize()
s = seed(local)
before = figure(local)
report = gcl.torch.release()
after = figure(local)
rank = dist.get_rank()
with open(os.path.join(os.environ["GPR_RESULT_DIR"], f"rank-{rank}.json"), "w") as f:
    json.dump({"rank": rank, "seed": s, "before": before, "after": after,
               "report": report.to_dict(), "text": repr(report)}, f)
dist.barrier()
dist.destroy_process_group()
