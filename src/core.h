/*
 * The core's handle, and what every file of the core needs with it: the
 * log and error records (log.c) and the lazy opening of the CUDA driver
 * and NVML (ctx.c). Internal (gpr__ prefix). The other shared parts each
 * have their header: sized.h (growable structs), registry.h (releasers),
 * gpu_map.h (CUDA ordinal <-> NVML index), figure.h (this process's
 * figure), gpus.h (NVML's memory figures), devices.h (the GPUs in use),
 * driver_info.h (the driver's version, for the command), report.h (the
 * report object).
 *
 * Locks, from outermost to innermost: release_lock (one release,
 * register or unregister at a time), then reg_lock (the releaser array
 * while it changes, and readers of it outside a release), init_lock (lazy
 * driver and NVML open) or map_lock (CUDA ordinal to NVML index cache);
 * queries take only the inner ones, for microseconds, so they never wait on
 * a release.
 *
 * The files, each calling only those listed after it (no loops):
 *   release.c   one release: visits, passes, collection, accounting
 *   devices.c   which CUDA GPUs this process holds a context on
 *   gpus.c      GPUs as NVML sees them (gpr_gpu_*, memory figures)
 *   figure.c    this process in NVML's lists: the per-process figure
 *   gpu_map.c   CUDA ordinal <-> NVML index, both ways, cached
 *   registry.c  the releasers and the "inside a release" marker
 *   ctx.c       the handle: options, lazy driver and NVML open
 *   log.c       the log callback and gpr_last_error
 *   pool.c      memory pools of the stream-ordered allocator
 *   report.c    the report object;  sized.c  structs that grow;
 *   errors.c    codes, names, messages, version
 */
#ifndef GPR_CORE_H
#define GPR_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

#include "gpureclaim.h"
#include "driver.h"

/* Ordinals whose NVML index is cached; larger ones are looked up each time. */
#define GPR__MAP_CAP 64
#define GPR__MAP_UNKNOWN (-2) /* not looked up yet */

struct gpr__releaser; /* registry.h */

struct gpr_ctx {
	uint64_t
	    id; /* unique for the process's lifetime: keys per-thread slots */
	pid_t
	    pid; /* getpid() at open: a different value means a forked child */
	char *cuda_path; /* gpr__cuda_library's choice, made at open */
	char *nvml_path;
	gpr_log_fn log;
	void *log_user;
	int log_level;

	pthread_mutex_t init_lock;
	atomic_int cuda_ready; /* 1 once cuda is open; then read without lock */
	struct gpr__cuda cuda;
	/* 0 not tried, 1 open, else the GPR_E_* of the failed open (sticky:
	 * a missing NVML is not looked for again, its init costs ~9 ms) */
	atomic_int nvml_state;
	struct gpr__nvml nvml;
	char nvml_error[GPR__ERRLEN];
	/* NVML's load and init, timed under init_lock for a debug log and
	 * logged after it (a log callback may query this handle) */
	int nvml_opening;
	struct gpr__nvml_note {
		char call[sizeof(((struct gpr__nvml *)0)->path) + 8];
		double ms;
		nvmlReturn_t r;
	} nvml_notes[2];
	int n_nvml_notes;

	pthread_mutex_t map_lock;
	int nvml_of[GPR__MAP_CAP]; /* NVML index, -1 unmatched, MAP_UNKNOWN */

	pthread_mutex_t release_lock;
	pthread_mutex_t reg_lock;
	struct gpr__releaser *rel;
	size_t n_rel, cap_rel;
};

/* 1 in a child forked after the handle was opened. */
static inline int gpr__forked(const gpr_ctx *ctx)
{
	return getpid() != ctx->pid;
}

/* ---------------- log.c ---------------- */

/* Records the detail of an error for gpr_last_error in this thread; returns
 * err so callers can `return gpr__fail(ctx, rc, "...")`. */
int gpr__fail(const gpr_ctx *ctx, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Passes a message to the handle's log callback if the level allows. */
void gpr__log(const gpr_ctx *ctx, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* GPR_E_FORKED (recorded for gpr_last_error) in a forked child, else 0. */
int gpr__fork_check(const gpr_ctx *ctx);

/* ---------------- ctx.c ---------------- */

/*
 * Finds libcuda among the loaded libraries (looked up again on each call
 * until found, since a framework may load it after gpr_open; kept after).
 * 0 when loaded, GPR_E_NOT_LOADED, or GPR_E_BAD_LIBRARY (err says why).
 */
int gpr__ensure_cuda(gpr_ctx *ctx, char *err, size_t errlen);

/*
 * gpr__ensure_cuda, then the CUDA device count (0 when not initialised):
 * 0, GPR_E_NOT_LOADED (not recorded: no driver is no failure here), or the
 * error, recorded for gpr_last_error.
 */
int gpr__cuda_count(gpr_ctx *ctx, int *count);

/* Loads and initialises NVML once per handle; 0 or the sticky error. */
int gpr__ensure_nvml(gpr_ctx *ctx, char *err, size_t errlen);

#endif /* GPR_CORE_H */
