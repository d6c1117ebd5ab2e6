/*
 * What `reclaim --idle` decided, process by process and GPU by GPU: the
 * layout reclaim_idle.c fills and reclaim_idle_view.c says (text, JSON).
 */
#ifndef GPR_CLI_RECLAIM_IDLE_RESULT_H
#define GPR_CLI_RECLAIM_IDLE_RESULT_H

#include <stddef.h>
#include <stdint.h>

#include "reclaim_idle.h"

#define MAX_GPUS 64

enum decision { D_SUSPENDED, D_WOULD, D_SKIPPED, D_FAILED };

struct idle_proc {
	uint32_t pid;
	int gpu;
	uint64_t bytes; /* its figure on this GPU, before */
	int bytes_known;
	double idle_s;	 /* -1: not known */
	double worked_s; /* since its latest work NVML shows; -1: none */
	char user[64], cmd[256];
	int user_known, cmd_known;
	int decision;
	char why[600];
	/* a suspend: its drop on this GPU, and in all */
	int released_known;
	int64_t released_here, released;
	int host_known;
	int64_t host_bytes;
};

struct idle_gpu {
	int index;
	int err;
	uint64_t total, used_before, used_after;
	int has_target;
	uint64_t target;
};

struct gpr_cli_idle_result {
	struct gpr_cli_idle_opts o;
	struct idle_gpu gpus[MAX_GPUS];
	size_t n_gpus;
	struct idle_proc *procs;
	size_t n, cap;
	int suspended;
	uint64_t released;
	char note[512];
};

#endif /* GPR_CLI_RECLAIM_IDLE_RESULT_H */
