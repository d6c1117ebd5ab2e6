/*
 * gpureclaim_wake.h: resume on demand from inside a process
 * (docs/suspend.md, "Resume on demand"): the page a process shares with
 * the watcher of its suspension, and the functions of the tracer,
 * libgpureclaim_trace.so, that keep it.
 *
 * A process that wants to be resumed as soon as it calls the driver again
 * (the interposer under `gpureclaim run --resume-on-demand`, a notebook's
 * agent before a cell) keeps one page of shared memory: a memfd named
 * GPURECLAIM_WAKE_NAME, mapped once and left open (MFD_CLOEXEC; a forked
 * child makes its own). The watcher that `gpureclaim suspend` starts
 * finds it in /proc/PID/fd, which only the process's user (the process
 * dumpable) and root may open, maps it and sets `state` to SUSPENDED.
 * Before a driver call the process reads `state` (one load: ~1 ns); when
 * it is not RUNNING it asks: SUSPENDED becomes ASKED and the watcher,
 * waiting on that word (a futex), is woken at once and resumes it; then
 * `answer` grows by one and `state` is RUNNING (resumed) or SUSPENDED
 * again (the resume failed: the call goes on into the driver, whose lock
 * makes it wait as it would without gpureclaim). Nothing else may ask: no
 * socket, nothing on disk, gone with the process.
 *
 * Layout (little-endian, natural alignment, one 4096-byte page); words
 * marked atomic are read and written with 32-bit atomic operations and
 * are futex words (shared, not FUTEX_PRIVATE):
 */
#ifndef GPURECLAIM_WAKE_H
#define GPURECLAIM_WAKE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPURECLAIM_WAKE_NAME "gpureclaim-wake"
#define GPURECLAIM_WAKE_MAGIC 0x3145414b57525047ULL /* "GPRWKAE1" */
#define GPURECLAIM_WAKE_VERSION 1
#define GPURECLAIM_WAKE_SIZE 4096

enum gpureclaim_wake_state {
	GPURECLAIM_WAKE_RUNNING = 0,   /* nothing to do (no watcher) */
	GPURECLAIM_WAKE_SUSPENDED = 1, /* a watcher waits to be asked */
	GPURECLAIM_WAKE_ASKED = 2,     /* a call waits to be resumed */
};

struct gpureclaim_wake_page {
	uint64_t magic;	  /* GPURECLAIM_WAKE_MAGIC */
	uint32_t version; /* GPURECLAIM_WAKE_VERSION */
	int32_t pid;	  /* the process that made it */
	uint64_t start;	  /* its start time (/proc/PID/stat, field 22) */
	uint32_t state;	  /* atomic: enum gpureclaim_wake_state */
	uint32_t answer;  /* atomic: answers given so far */
	int32_t watcher;  /* atomic: the watcher's pid while it watches */
	uint32_t asks;	  /* atomic: times the process asked */
	uint32_t resumed; /* atomic: times it was resumed that way */
	uint32_t reserved[9];
};

/*
 * The tracer's functions (exported by libgpureclaim_trace.so; look them
 * up with dlsym(RTLD_DEFAULT, name): a process without the tracer has
 * none). Any thread may call them; none allocates after the page exists.
 *
 * gpureclaim_wake_start: makes this process's page (once; again in a
 *   forked child). 0, or a negative errno.
 * gpureclaim_wake_state: the page's state now (RUNNING without a page).
 * gpureclaim_wake_ask: when a watcher holds this process suspended, asks
 *   it to resume and waits for its answer (at most max_seconds; <= 0:
 *   until the answer, or until the watcher is gone): 1 resumed, 0 nothing
 *   to do, -1 not resumed (the caller's driver call will wait).
 */
typedef int gpureclaim_wake_start_fn(void);
typedef int gpureclaim_wake_state_fn(void);
typedef int gpureclaim_wake_ask_fn(double max_seconds);

#ifdef __cplusplus
}
#endif

#endif /* GPURECLAIM_WAKE_H */
