/*
 * The handle and what the core's files share about it. Internal (gpr__
 * prefix). Locks, from outermost to innermost: release_lock (one release,
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
#ifndef GPR_CTX_H
#define GPR_CTX_H

#include <pthread.h>
#include <stdarg.h>
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

struct gpr__releaser {
	char *name;
	char *device_name;     /* NULL: a CUDA releaser */
	struct gpr_releaser r; /* r.name, r.device_name point to the above */
};

struct gpr_ctx {
	uint64_t
	    id; /* unique for the process's lifetime: keys per-thread slots */
	pid_t
	    pid; /* getpid() at open: a different value means a forked child */
	char *cuda_path; /* NULL: the driver layer's default ($ENV, soname) */
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

/* ---------------- sized.c ---------------- */

/*
 * Copies a caller's input struct of size `src_sz` into `dst` of our size:
 * a shorter struct leaves the later fields zero, a longer one is accepted
 * only if the fields we do not know are zero (libbpf's rule).
 */
int gpr__opts_copy(void *dst, size_t dst_sz, const void *src, size_t src_sz);

/*
 * Copies our output struct `src` (src_sz bytes) to the caller's `dst` of
 * *dst_sz bytes: the common part, the caller's unknown tail zeroed; *dst_sz
 * becomes the bytes filled. GPR_E_INVAL for a NULL or zero size.
 */
int gpr__out_copy(void *dst, size_t *dst_sz, const void *src, size_t src_sz);

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

/* ---------------- registry.c ---------------- */

/* Per-thread marker of the releases in progress on this thread. */
struct gpr__release_frame {
	uint64_t ctx_id;
	struct gpr__release_frame *prev;
};
void gpr__release_enter(const gpr_ctx *ctx, struct gpr__release_frame *f);
void gpr__release_leave(struct gpr__release_frame *f);
/* 1 if this thread is inside a release of ctx (a releaser callback). */
int gpr__in_release(const gpr_ctx *ctx);

/* Calls every releaser's destroy and empties the registry (gpr_close). */
void gpr__registry_clear(gpr_ctx *ctx);

/* ---------------- gpu_map.c ---------------- */

/*
 * The NVML index of CUDA ordinal `ordinal` (UUID first, then PCI bus id),
 * -1 if no NVML GPU matches. Needs CUDA and NVML open.
 */
int gpr__nvml_index_of(gpr_ctx *ctx, int ordinal, int *index, char *err,
		       size_t errlen);

/* The CUDA ordinal (of `count`) whose NVML index is `index`, -1 if none.
 * Needs CUDA and NVML open. */
int gpr__ordinal_of(gpr_ctx *ctx, int count, int index);

/* Checks that CUDA is usable and `device` is one of its ordinals; records
 * the failure for gpr_last_error. */
int gpr__check_ordinal(gpr_ctx *ctx, int device);

/* ---------------- figure.c ---------------- */

/* Our pid's entry in one GPU's NVML process list, as one read found it. */
struct gpr__mine {
	int read;   /* the list was read (rc 0) */
	int found;  /* our pid is in it */
	int hidden; /* listed without a figure */
	uint64_t bytes;
};

/* Reads NVML GPU `index`'s process list and keeps our pid's entry. */
int gpr__read_mine(gpr_ctx *ctx, int index, struct gpr__mine *m, char *err,
		   size_t errlen);

/* The driver's figure for this process on one device. */
enum gpr__figure_state {
	GPR__FIG_KNOWN,	 /* bytes is the driver's per-process figure */
	GPR__FIG_ERROR,	 /* NVML missing or failing: rc says which */
	GPR__FIG_ABSENT, /* our pid is not in the list */
	GPR__FIG_HIDDEN	 /* listed without a figure (MIG) */
};
struct gpr__figure {
	int known; /* state == GPR__FIG_KNOWN */
	int state;
	int rc; /* GPR_E_* for GPR__FIG_ERROR */
	uint64_t bytes;
	int nvml_index;		    /* -1 if unmatched */
	char why[GPR__ERRLEN + 64]; /* why not known */
};
/*
 * The figure of CUDA ordinal `ordinal`. `mine` (n_mine entries by NVML
 * index, may be NULL) is a scan already made: where it read the GPU's list,
 * NVML is not asked again (a release reuses the scan that found its GPUs as
 * the "before" figure: ~0.35 ms a GPU on an H200).
 */
void gpr__process_figure(gpr_ctx *ctx, int ordinal, struct gpr__figure *f,
			 const struct gpr__mine *mine, int n_mine);

/* ---------------- gpus.c ---------------- */

/* NVML's memory figures of NVML GPU `index` (used, free, total), 0 or a
 * GPR_E_* code. */
int gpr__gpu_memory(gpr_ctx *ctx, int index, struct gpr__nvml_gpu *out);

/* ---------------- devices.c ---------------- */

/*
 * The CUDA ordinals on which this process holds a context (*devs malloc'ed,
 * *n entries, *count the CUDA device count). GPR_E_NOT_LOADED when libcuda
 * is not loaded; 0 with *n = 0 when it is not initialised. GPUs that cannot
 * be queried are skipped, each with a note in `notes` (may be NULL).
 * With `mine` non-NULL, *mine gets the scan of every NVML index
 * (malloc'ed, *n_mine entries; NULL and 0 where NVML is unavailable).
 */
int gpr__devices_in_use(gpr_ctx *ctx, int **devs, int *n, int *count,
			gpr_report *notes, struct gpr__mine **mine,
			int *n_mine);

#endif /* GPR_CTX_H */
