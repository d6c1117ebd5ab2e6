/*
 * The per-thread state of the tracer (inject_thread.c): each traced
 * thread's ring of records (a single-producer single-consumer queue that
 * the writer drains), its calls in flight, its caller memos, its
 * waiting-time source and its selftime counters, and the list of all of
 * them that the writer walks.
 */
#ifndef GPR_TRACE_INJECT_THREADS_H
#define GPR_TRACE_INJECT_THREADS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../format/trace_format.h"
#include "fd.h"

#define GPR_RING_SIZE 8192 /* records per thread; a power of two */
#define GPR_INFLIGHT 4	   /* nested CUPTI calls followed per thread */
#define GPR_MEMO 8	   /* frames of a remembered caller path */
#define GPR_MEMOS 4	   /* caller paths a thread remembers */
#define GPR_SELF_BINS 1024 /* selftime histogram: 4 ns bins */

/* The waiting-time reading at a call's entry (wait.h). */
struct gpr_inj_wait {
	uint64_t rd0;  /* run_delay at entry */
	uint64_t csw0; /* getrusage gate: switches at entry */
	uint32_t s0;   /* perf gate: lock word at entry */
	int ok;	       /* rd0 was read */
};

/* A call from its entry to its exit. */
struct gpr_inj_inflight {
	uint64_t t0;   /* entry (a stamp: gpr_inj_stamp) */
	uint64_t t1;   /* exit (set by gpr_inj_rec_exit) */
	uintptr_t ip;  /* the caller (callers.h) */
	uint64_t size; /* of the memory a free or release ends */
	uint32_t meta; /* and where it was (GPR_INJ_META_*) */
	int size_found;
	uint64_t self_ticks; /* selftime: our code at entry (stamps) */
	struct gpr_inj_wait wait;
};

enum { GPR_TT_OWNED = 0, GPR_TT_DEAD = 1, GPR_TT_FREE = 2 };

/*
 * GPURECLAIM_TRACE_SELFTIME: what this thread's calls cost in our own
 * code (written by the thread, read at the end of a session).
 */
struct gpr_inj_selftime {
	_Atomic uint64_t calls, ns, walk_ns, wait_ns, fast, full, reads;
	_Atomic uint32_t hist[GPR_SELF_BINS + 1]; /* per-call ns / 4 */
};
static inline void gpr_inj_st_add(_Atomic uint64_t *c, uint64_t v)
{
	atomic_store_explicit(c,
			      atomic_load_explicit(c, memory_order_relaxed) + v,
			      memory_order_relaxed);
}

/* A record in a ring: the log's record (t_ns and dur_ns in stamps) and
 * the caller, which the writer turns into ns and into the record's lib
 * and site (clock.h, callers.h). */
struct gpr_inj_slot {
	struct gpr_trace_rec r;
	uintptr_t ip;
};

/* The caller path of one of the thread's recent fast walks
 * (inject_site.c). */
struct gpr_inj_memo {
	uintptr_t cfa0; /* where the walk started */
	unsigned gen;	/* gpr_inj_site_gen() when taken */
	int n;		/* frames, the caller last */
	struct {
		uintptr_t slot; /* a return-address word on the stack */
		uintptr_t ip;	/* what it held */
	} f[GPR_MEMO];
};

/*
 * One thread's state; its ring is a single-producer single-consumer
 * queue. What a recorded call reads and writes comes first, packed into
 * a few cache lines (a call follows a framework's and the driver's own
 * work, which evicts much of what the tracer touched last time).
 */
struct gpr_inj_tt {
	/* ---- every call ---- */
	_Atomic uint32_t head; /* next slot the thread writes */
	_Atomic int inside;    /* set while inside a recorded call */
	uint32_t tid;
	unsigned fast_walks;	      /* since the last verifying full walk */
	unsigned memo_next;	      /* the memo a new path replaces */
	uintptr_t stack_lo, stack_hi; /* 1, 1: unknown (inject_site.c) */
	/* waiting time (inject_wait.c) */
	volatile const void *pg; /* perf task-clock page */
	int pg_state;		 /* 0 not tried, 1 mapped, -1 refused */
	int have_rd; /* rd_at_read is a reading taken at seq_at_read */
	uint32_t seq_at_read;
	int sched_state;	 /* 0 not opened, 1 open, -1 refused */
	struct gpr_inj_fd sched; /* /proc/thread-self/schedstat */
	uint64_t rd_at_read, csw_at_read;
	/* context -> device of the thread's recent contexts */
	void *ctx_key[4];
	int ctx_dev[4];
	unsigned ctx_next;
	struct gpr_inj_memo memo[GPR_MEMOS];
	/* ---- the writer's side, CUPTI's, the rest ---- */
	_Atomic uint32_t tail __attribute__((aligned(64))); /* next to read */
	_Atomic int state;				    /* GPR_TT_* */
	_Atomic uint32_t dropped;
	struct gpr_inj_tt *next; /* list of all states, never unlinked */
	/* CUPTI calls between their enter and exit callbacks */
	int depth;
	unsigned epoch; /* gpr_inj_state.epoch when depth was last valid */
	struct gpr_inj_inflight fl[GPR_INFLIGHT];
	struct gpr_inj_selftime st;
	struct gpr_inj_slot ring[GPR_RING_SIZE];
};

/* This thread's state, registered on first use; NULL if that failed. */
struct gpr_inj_tt *gpr_inj_tt_self(void);
/* Head of the list of thread states (acquire). */
struct gpr_inj_tt *gpr_inj_tt_list(void);
/* Reserves the next ring slot, or NULL (counted as dropped) when full. */
static inline struct gpr_inj_slot *gpr_inj_tt_slot(struct gpr_inj_tt *tt)
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
/* Publishes the slot returned by gpr_inj_tt_slot; 1 when the ring has
 * just become half full (the writer should be woken). */
static inline int gpr_inj_tt_push(struct gpr_inj_tt *tt)
{
	uint32_t h = atomic_load_explicit(&tt->head, memory_order_relaxed);
	atomic_store_explicit(&tt->head, h + 1, memory_order_release);
	/* the slot the next call writes, fetched while the program runs */
	__builtin_prefetch(&tt->ring[(h + 1) & (GPR_RING_SIZE - 1)], 1, 3);
	return h + 1 - atomic_load_explicit(&tt->tail, memory_order_relaxed) ==
	       GPR_RING_SIZE / 2;
}
int gpr_inj_tt_init(void);
/* Sums every thread's selftime into *out and zeroes them. */
void gpr_inj_tt_selftime(struct gpr_inj_selftime *out);
/* One stderr line: the session's selftime, summed over the threads
 * (inject_selftime.c). */
void gpr_inj_selftime_report(void);

#endif /* GPR_TRACE_INJECT_THREADS_H */
