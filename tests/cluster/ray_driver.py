"""The Ray driver of tests/cluster/test_ray.py: a local Ray (2 CPUs, the
dashboard on for the State API), actors on the simulated driver with the
fake frameworks. Prints one line: RESULT {json}."""
import json
import os
import sys
import time

import ray
import workload
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

import gpureclaim.cluster as gcl

MiB = 1 << 20


@ray.remote(num_cpus=0)
class Trainer:
    def load(self, plan):
        return workload.load([tuple(p) for p in plan])

    def figure(self):
        return workload.figure()

    def hold(self, started, flag):
        return workload.hold(started, flag)


def main():
    ray.init(num_cpus=2, include_dashboard=True, dashboard_port=0,
             log_to_driver=False, configure_logging=False)
    out = {}
    pg = placement_group([{"CPU": 1}, {"CPU": 1}])
    ray.get(pg.ready(), timeout=60)
    in_pg = [Trainer.options(
        name=f"trainer{i}", num_cpus=1,
        scheduling_strategy=PlacementGroupSchedulingStrategy(
            pg, placement_group_bundle_index=i)).remote() for i in range(2)]
    unnamed = Trainer.options(
        scheduling_strategy=PlacementGroupSchedulingStrategy(pg)).remote()
    plans = [[["torch", 0, 8 * MiB, 64 * MiB]],
             [["cupy", 0, 0, 32 * MiB], ["cupy", 1, 16 * MiB, 48 * MiB]]]
    loaded = ray.get([a.load.remote(p) for a, p in zip(in_pg, plans)])
    ray.get(unnamed.figure.remote())
    out["pids"] = [x["pid"] for x in loaded]
    out["before"] = [x["figure"] for x in loaded]
    out["actor_ids"] = [a._actor_id.hex() for a in in_pg]

    r = gcl.ray.release(in_pg, timeout=60)
    out["release"] = r.to_dict()
    out["repr"] = repr(r)
    out["after"] = ray.get([a.figure.remote() for a in in_pg])
    out["explain"] = gcl.ray.explain(in_pg).to_dict()
    out["pg_ps"] = gcl.ray.ps(placement_group=pg).to_dict()

    # a busy actor times out; a killed one is dead; the others stay exact.
    # The busy one is held until a flag set at the end (its "timeout" is
    # certain); the killed one is waited for until its calls fail.
    ray.get(in_pg[0].load.remote([["torch", 0, 0, 16 * MiB]]))
    scratch = os.environ["GPR_RAY_SCRATCH"]
    started, flag = (os.path.join(scratch, n) for n in ("started", "go"))
    in_pg[1].hold.remote(started, flag)
    spare = Trainer.remote()
    ray.get(spare.load.remote([["cupy", 1, 0, 8 * MiB]]))
    ray.kill(spare)
    while True:
        try:
            ray.get(spare.figure.remote())
        except ray.exceptions.RayActorError:
            break
    try:
        assert workload.wait_for_files([started]), "the hold never began"
        t0 = time.monotonic()
        r = gcl.ray.release(in_pg + [spare], timeout=10)
        out["faults_seconds"] = time.monotonic() - t0
    finally:
        open(flag, "w").close()
    out["faults"] = r.to_dict()
    print("RESULT " + json.dumps(out), flush=True)
    ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
