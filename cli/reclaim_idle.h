/*
 * `gpureclaim reclaim --idle DURATION`, its second part (reclaim_idle.c;
 * docs/suspend.md, "The node's policy"): after every cache is released
 * (cli/cmd_reclaim.c), the processes idle for at least DURATION are
 * suspended, on each GPU the largest first, only as far as --target asks.
 *
 * Idle: no GPU work in NVML's per-process samples (the core's
 * gpr__gpu_work, through cli/ps_work.c: the latest sample that showed
 * work). Where the driver keeps no sample of a process, how long it has
 * been idle is what gpureclaim itself has seen: a note of each process's
 * latest work, or of when it was first seen idle, kept across runs in
 * the records folder (`idle`), so a run from cron every few minutes sees
 * idle times grow past the driver's own history.
 */
#ifndef GPR_CLI_RECLAIM_IDLE_H
#define GPR_CLI_RECLAIM_IDLE_H

#include <stddef.h>
#include <stdint.h>

#include "gpureclaim.h"
#include "out/buf.h"
#include "out/json.h"

struct gpr_cli_idle_opts {
	double idle_s; /* --idle DURATION */
	int target;    /* 0: none; 1: bytes; 2: percent of the GPU */
	uint64_t target_bytes;
	double target_percent;
	int gpu; /* --gpu INDEX, -1: every GPU */
	int dry_run;
	/* with the dry run: what the caches' release would give back on
	 * each GPU (NVML index), counted before the targets are met */
	long long cache_releasable[64];
};

struct gpr_cli_idle_result;

/*
 * Reads the GPUs, decides and (unless a dry run) suspends; every
 * decision in the result (NULL only when out of memory). *failed is set
 * when a suspend was tried and failed.
 */
struct gpr_cli_idle_result *
gpr_cli_reclaim_idle(gpr_ctx *ctx, const struct gpr_cli_idle_opts *o,
		     int *failed);
void gpr_cli_idle_free(struct gpr_cli_idle_result *r);

/* What was done and why, for people; and as the "idle" member of the
 * reclaim's JSON (its value). */
void gpr_cli_idle_text(struct gpr__buf *b, const struct gpr_cli_idle_result *r);
void gpr_cli_idle_json(struct gpr__json *j,
		       const struct gpr_cli_idle_result *r);

#endif /* GPR_CLI_RECLAIM_IDLE_H */
