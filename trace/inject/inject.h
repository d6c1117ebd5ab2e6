/*
 * Internals of the injection library (libgpureclaim_trace.so), shared by
 * its files: the shared state, per-thread state and rings, the address
 * maps, call sites and the writer. Nothing here is exported from the
 * library (its exports are declared in include/gpureclaim_trace.h).
 */
#ifndef GPR_TRACE_INJECT_H
#define GPR_TRACE_INJECT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../format/trace_format.h"
#include "../format/trace_ops.h"

/*
 * The state every file of the library reads, defined in one place
 * (inject_state.c). Who writes what, and when:
 *   active   set by the writer (inject_writer.c) once the log is open;
 *            cleared by the writer when a write fails, at exit, on a fatal
 *            signal and in a forked child, and by init_once (inject.c)
 *            when the callbacks cannot be enabled. Read by every callback
 *            (relaxed: one seen late records a call more or less) and by
 *            pause/resume.
 *   epoch    incremented by gpureclaim_trace_pause (inject.c, under its
 *            lock); read by each call's entry callback, which forgets the
 *            calls entered before a pause (their exit never comes).
 *   selftime set once by init_once (inject.c) from the switch
 *            GPURECLAIM_TRACE_SELFTIME before any callback is enabled or
 *            the writer starts; read-only afterwards.
 * Plain globals in one struct: the callbacks pay no lock and no pointer
 * chase to read them.
 */
struct gpr_inj_state {
	_Atomic int active;	/* callbacks record while set */
	_Atomic unsigned epoch; /* counts pauses */
	int selftime;		/* sum the callbacks' own time */
};
extern struct gpr_inj_state gpr_inj_state;

/* One line on stderr, "gpureclaim-trace: ..." (inject_state.c). */
void gpr_inj_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * An on/off switch of the environment (trace/format/trace_switch.h), read
 * with secure_getenv: 1 or 0. A value that is not an on/off word is said
 * on stderr and taken as off. Each switch is read once, at initialisation,
 * never by a callback (inject_state.c).
 */
int gpr_inj_switch(const char *name);

#define GPR_RING_SIZE 8192 /* records per thread; a power of two */
#define GPR_INFLIGHT 4	   /* nested calls followed per thread */

/* A call between its enter and exit callbacks. */
struct gpr_inj_inflight {
	uint64_t t0, wait0, csw0;
	uint32_t lib, site;
	uint64_t size; /* of the memory a free/release gives back */
	int wait_ok;
	int size_found;
};

enum { GPR_TT_OWNED = 0, GPR_TT_DEAD = 1, GPR_TT_FREE = 2 };

/*
 * GPURECLAIM_TRACE_SELFTIME: what this thread's driver-call callbacks
 * cost, summed (written by the thread, read by the writer at exit).
 */
struct gpr_inj_selftime {
	_Atomic uint64_t calls, ns, walk_ns, wait_ns, fast, full;
};
static inline void gpr_inj_st_add(_Atomic uint64_t *c, uint64_t v)
{
	atomic_store_explicit(c,
			      atomic_load_explicit(c, memory_order_relaxed) + v,
			      memory_order_relaxed);
}
/* One stderr line: the sums over all threads. */
void gpr_inj_selftime_report(void);

/* One thread's state; a single-producer single-consumer ring. */
struct gpr_inj_tt {
	_Atomic uint32_t head; /* next slot the thread writes */
	_Atomic uint32_t tail; /* next slot the writer reads */
	_Atomic int state;     /* GPR_TT_* */
	_Atomic uint32_t dropped;
	struct gpr_inj_tt *next; /* list of all states, never unlinked */
	uint32_t tid;
	int sched_fd;
	/* the last schedstat reading and the context switches at the time */
	int have_last;
	uint64_t last_wait, last_csw;
	int depth;
	unsigned epoch; /* gpr_inj_state.epoch when depth was last valid */
	struct gpr_inj_inflight fl[GPR_INFLIGHT];
	void *ctx_key[4];
	int ctx_dev[4];
	unsigned ctx_next;
	struct gpr_inj_selftime st;
	struct gpr_trace_rec ring[GPR_RING_SIZE];
};

/* ---- inject_thread.c ---- */
/* This thread's state, registered on first use; NULL if that failed. */
struct gpr_inj_tt *gpr_inj_tt_self(void);
/* Head of the list of thread states (acquire). */
struct gpr_inj_tt *gpr_inj_tt_list(void);
/* Reserves the next ring slot, or NULL (counted as dropped) when full. */
static inline struct gpr_trace_rec *gpr_inj_tt_slot(struct gpr_inj_tt *tt)
{
	uint32_t h = atomic_load_explicit(&tt->head, memory_order_relaxed);
	uint32_t t = atomic_load_explicit(&tt->tail, memory_order_acquire);
	if (h - t >= GPR_RING_SIZE) {
		atomic_fetch_add_explicit(&tt->dropped, 1,
					  memory_order_relaxed);
		return NULL;
	}
	return &tt->ring[h & (GPR_RING_SIZE - 1)];
}
/* Publishes the slot returned by gpr_inj_tt_slot. */
static inline void gpr_inj_tt_push(struct gpr_inj_tt *tt)
{
	uint32_t h = atomic_load_explicit(&tt->head, memory_order_relaxed);
	atomic_store_explicit(&tt->head, h + 1, memory_order_release);
}
/* Run-queue wait of this thread so far (ns), via its schedstat fd. */
int gpr_inj_tt_run_delay(struct gpr_inj_tt *tt, uint64_t *out);
/*
 * The thread's run-queue wait now, reading schedstat only when the thread
 * has been switched out since the last reading (its wait cannot have grown
 * otherwise). *csw receives the context-switch count. -1: not measured.
 */
int gpr_inj_tt_wait_now(struct gpr_inj_tt *tt, uint64_t *wait, uint64_t *csw);
int gpr_inj_tt_init(void);

/* ---- inject_map.c: address -> size, handle -> size ---- */
void gpr_inj_map_put(int which, uint64_t key, uint64_t size);
/* Removes key and returns its size; 0 when absent. */
uint64_t gpr_inj_map_take(int which, uint64_t key);
int gpr_inj_map_init(void);
enum { GPR_MAP_ADDR = 0, GPR_MAP_HANDLE = 1 };

/* ---- inject_site.c ---- */
/*
 * The first caller outside libcuda/libcudart/libcupti/this library: its
 * library and call site as string ids (GPR_TRACE_NO_STRING if unknown).
 * Returns how it walked: GPR_WALK_*.
 */
enum { GPR_WALK_NONE = 0, GPR_WALK_FAST = 1, GPR_WALK_FULL = 2 };
int gpr_inj_callsite(uint32_t *lib, uint32_t *site);
/* Fast walks found wrong by the periodic check and done again in full. */
uint64_t gpr_inj_callsite_redone(void);
/* Marks the object holding `addr` as not a caller (a CUDA library). */
void gpr_inj_callsite_exclude(const void *addr);
int gpr_inj_callsite_init(void);
/* Interns s; returns its string id or GPR_TRACE_NO_STRING. */
uint32_t gpr_inj_intern(const char *s);
/* Strings interned so far: ids GPR_TRACE_N_OPS .. + *n - 1. */
const char *const *gpr_inj_interned(uint32_t *n);

/* ---- inject_writer.c ---- */
int gpr_inj_writer_start(const char *path);
void gpr_inj_writer_wake(void);

static inline uint64_t gpr_inj_now(void);
#include <time.h>
static inline uint64_t gpr_inj_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif /* GPR_TRACE_INJECT_H */
