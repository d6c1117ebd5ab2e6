/*
 * gpureclaim_trace.h: what a program may call in the tracer,
 * libgpureclaim_trace.so (docs/trace.md, "From inside the program").
 *
 * The tracer is not linked. `gpureclaim trace` puts it in the process
 * (LD_PRELOAD, or the CUDA driver loads it at cuInit from
 * $CUDA_INJECTION64_PATH), and it then makes its functions visible to
 * every look-up; a running program that was not started that way may load
 * it itself (dlopen of its path, RTLD_GLOBAL) to start a session. Find a
 * function without loading anything:
 *
 *	#include <dlfcn.h>
 *	#include "gpureclaim_trace.h"
 *
 *	gpureclaim_trace_pause_fn *trace_pause = NULL;
 *	*(void **)&trace_pause = dlsym(RTLD_DEFAULT, "gpureclaim_trace_pause");
 *	if (trace_pause)
 *		trace_pause();
 *
 * Not traced (no tracer loaded), the pointers stay NULL: a program calls
 * nothing and runs as it would.
 *
 * Threads: every function here may be called from any thread; the tracer
 * serialises them. None is async-signal-safe.
 *
 * Results: 0 (or 1 where said) for success, else one of the negative
 * GPURECLAIM_TRACE_E_* codes of the table below, each below -20000: never
 * a negated errno (-1..-4095) nor one of the core's GPR_E_* codes (below
 * -10000). The tracer of gpureclaim 0.2.0 and before used -1..-5, and
 * bare -1 and -2 in pause, resume, stop, status and live: the names
 * stay, the numbers changed (compare with the names, or with < 0).
 */
#ifndef GPURECLAIM_TRACE_H
#define GPURECLAIM_TRACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * What the functions return, X(name, value, message): the names, the
 * values and gpureclaim_trace_strerror's messages, from one table.
 */
#define GPURECLAIM_TRACE_RESULTS(X)                                            \
	X(GPURECLAIM_TRACE_OK, 0, "success")                                   \
	X(GPURECLAIM_TRACE_E_ACTIVE, -20001, "a session is recording already") \
	X(GPURECLAIM_TRACE_E_UNAVAILABLE, -20002,                              \
	  "nothing can see the driver calls here (CUPTI held by another "      \
	  "tool or not found, the interposer not preloaded)")                  \
	X(GPURECLAIM_TRACE_E_LOG, -20003, "the log cannot be created")         \
	X(GPURECLAIM_TRACE_E_FORKED, -20004,                                   \
	  "a child forked while its parent recorded is not traced")            \
	X(GPURECLAIM_TRACE_E_ARGS, -20005, "invalid argument")                 \
	X(GPURECLAIM_TRACE_E_NOT_TRACED, -20006,                               \
	  "this process is not being traced")

enum gpureclaim_trace_result {
#define GPURECLAIM_TRACE_X_ENUM(name, value, msg) name = value,
	GPURECLAIM_TRACE_RESULTS(GPURECLAIM_TRACE_X_ENUM)
#undef GPURECLAIM_TRACE_X_ENUM
};
/*
 * The meanings of the codes, as gpureclaim_trace_start uses them:
 *   E_ACTIVE       a session is recording already (why names its log)
 *   E_UNAVAILABLE  no way to see the driver calls here: CUPTI is held by
 *                  another tool or cannot be loaded, the interposer is
 *                  not preloaded; the other tool is left alone and
 *                  nothing is recorded
 *   E_LOG          the log cannot be created (it exists, a directory is
 *                  missing...)
 *   E_FORKED       a child forked while its parent recorded: not traced
 *   E_ARGS         opts NULL, its sz too small, a field this tracer does
 *                  not know set (a newer caller's), or no path
 *   E_NOT_TRACED   no session in this process (pause, resume, stop, live)
 */

/* The name of a code ("GPURECLAIM_TRACE_E_LOG"), NULL for another value:
 * header-only, the tracer being found at run time. */
static inline const char *gpureclaim_trace_errname(int rc)
{
	switch (rc) {
#define GPURECLAIM_TRACE_X_NAME(name, value, msg)                              \
	case value:                                                            \
		return #name;
		GPURECLAIM_TRACE_RESULTS(GPURECLAIM_TRACE_X_NAME)
#undef GPURECLAIM_TRACE_X_NAME
	}
	return (const char *)0;
}

/* Its message ("unknown result" for another value). */
static inline const char *gpureclaim_trace_strerror(int rc)
{
	switch (rc) {
#define GPURECLAIM_TRACE_X_MSG(name, value, msg)                               \
	case value:                                                            \
		return msg;
		GPURECLAIM_TRACE_RESULTS(GPURECLAIM_TRACE_X_MSG)
#undef GPURECLAIM_TRACE_X_MSG
	}
	return "unknown result";
}

/*
 * Stops recording for a while; the session (its log) stays open. With
 * the interposer the wrappers pass calls straight on; with CUPTI the
 * tracer turns its callbacks off and unsubscribes, so another CUPTI tool
 * (a profiler) may subscribe meanwhile. Returns 0 when paused now, 1 when
 * it already was, GPURECLAIM_TRACE_E_NOT_TRACED when this process is not
 * being traced (no session, or it has stopped: a failed write of the
 * log, its descriptor closed by the program, a forked child).
 *
 * A driver call in flight on another thread at the moment of pausing may
 * go unrecorded. A free made while paused is missing from the log:
 * memory allocated before the pause and freed during it reads as "never
 * freed" unless its address is allocated again later.
 */
int gpureclaim_trace_pause(void);

/*
 * Records again. Returns 0 when resumed now, 1 when it was not paused,
 * GPURECLAIM_TRACE_E_NOT_TRACED when this process is not being traced,
 * GPURECLAIM_TRACE_E_UNAVAILABLE when CUPTI could not be taken back
 * (another tool holds it, or a CUPTI call failed): the tracer says why in
 * one "gpureclaim-trace: ..." line on stderr and stays paused; a later
 * call may succeed.
 */
int gpureclaim_trace_resume(void);

/* ---- sessions started by the program ---- */

/* What sees the driver calls. */
enum gpureclaim_trace_backend {
	/* the interposer when it is in the process, else CUPTI */
	GPURECLAIM_TRACE_AUTO = 0,
	/* wrappers of the driver's entry points: needs the library
	 * preloaded (`gpureclaim trace --dormant -- CMD`) */
	GPURECLAIM_TRACE_INTERPOSE = 1,
	/* CUPTI callbacks, subscribed now: one subscriber per process */
	GPURECLAIM_TRACE_CUPTI = 2
};

/*
 * Structs that grow start with `size_t sz`, the caller's sizeof: a
 * shorter struct (an older caller) leaves the later fields at their
 * defaults, a longer one (a newer caller) is accepted when the fields
 * this tracer does not know are zero, else GPURECLAIM_TRACE_E_ARGS.
 */
struct gpureclaim_trace_start_opts {
	size_t sz;	  /* sizeof(struct gpureclaim_trace_start_opts) */
	const char *path; /* the log to create: it must not exist */
	int backend;	  /* enum gpureclaim_trace_backend */
	/* CUPTI only: the libcupti to load; NULL: the one already in the
	 * process, else $GPURECLAIM_CUPTI_LIBRARY, else libcupti.so* */
	const char *cupti;
	/* receives one line saying why, when the result is not OK (may be
	 * NULL); the tracer prints nothing for this call */
	char *why;
	size_t why_len;
};

/*
 * Starts a session: from now on every driver allocation and free of this
 * process (every thread) goes into a new log at opts->path, until
 * gpureclaim_trace_stop or exit. What was allocated before is not in it:
 * its frees show as frees of unknown memory. Returns an enum
 * gpureclaim_trace_result. The caller keeps opts; nothing in it is kept.
 */
int gpureclaim_trace_start(const struct gpureclaim_trace_start_opts *opts);

/*
 * Ends the session, whoever started it (a program under `gpureclaim
 * trace` ends that trace early): recording stops, what was recorded is
 * written, the log is closed and complete. Its path goes into path (len
 * bytes, may be NULL). Returns 0, or GPURECLAIM_TRACE_E_NOT_TRACED when
 * no session is open in this process.
 */
int gpureclaim_trace_stop(char *path, size_t len);

struct gpureclaim_trace_status {
	size_t sz;	/* caller sets sizeof(struct gpureclaim_trace_status) */
	int session;	/* 0 none, 1 recording, 2 paused */
	int backend;	/* the session's: GPURECLAIM_TRACE_INTERPOSE / _CUPTI */
	int interposer; /* 1: the interposer is preloaded in this process */
	int wait;	/* waiting time: 0 not measured, 1 perf-gated
			   schedstat, 2 getrusage-gated schedstat */
	char path[4096]; /* the session's log, "" without one */
};

/* Fills *st (the first st->sz bytes). 0, or GPURECLAIM_TRACE_E_ARGS when
 * st is NULL or its sz smaller than the first two fields. */
int gpureclaim_trace_status(struct gpureclaim_trace_status *st);

/* ---- what is held now (for gpureclaim.explain) ---- */

/*
 * One row of the live query: the memory allocated during the session and
 * not freed yet, summed per device, kind and calling library.
 */
struct gpureclaim_trace_live {
	size_t sz;  /* caller sets sizeof(struct gpureclaim_trace_live) */
	int device; /* CUDA ordinal, -1 host */
	int kind;   /* 0 device, 1 host pinned, 2 VMM physical (cuMemCreate),
		       3 async pool (cuMemAlloc*Async) */
	const char *library; /* the calling library's short name as the
				report shows it; valid while the tracer is
				loaded */
	uint64_t bytes;	     /* allocated, not yet freed */
	uint64_t count;	     /* allocations */
};

/*
 * Fills up to cap rows, largest first; the stride between rows is
 * rows[0].sz, which the caller sets (a smaller struct of an older header
 * gets its fields only). *n receives the number of rows available (more
 * than cap when they did not fit). Returns 0, or
 * GPURECLAIM_TRACE_E_NOT_TRACED when no session is recording (nothing is
 * known then), GPURECLAIM_TRACE_E_ARGS when n is NULL, or cap > 0 and
 * rows is NULL or rows[0].sz is smaller than the fields up to `kind`.
 *
 * cuMemCreate memory at a host location (NCCL's host buffers) is counted
 * as host memory, device -1, kind 2. Allocations made before the session
 * started are not known. Costs a scan of the tracer's size maps (a
 * millisecond or two); the calls recorded meanwhile on other threads may
 * or may not be counted.
 */
int gpureclaim_trace_live(struct gpureclaim_trace_live *rows, size_t cap,
			  size_t *n);

/* The functions' types, for pointers found with dlsym. */
typedef int gpureclaim_trace_pause_fn(void);
typedef int gpureclaim_trace_resume_fn(void);
typedef int
gpureclaim_trace_start_fn(const struct gpureclaim_trace_start_opts *opts);
typedef int gpureclaim_trace_stop_fn(char *path, size_t len);
typedef int gpureclaim_trace_status_fn(struct gpureclaim_trace_status *st);
typedef int gpureclaim_trace_live_fn(struct gpureclaim_trace_live *rows,
				     size_t cap, size_t *n);

#ifdef __cplusplus
}
#endif

#endif /* GPURECLAIM_TRACE_H */
