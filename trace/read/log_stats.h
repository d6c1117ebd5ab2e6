/*
 * What a trace says: memory replay (who holds how many driver bytes when)
 * and the aggregations of `gpureclaim report`.
 */
#ifndef GPR_TRACE_LOG_STATS_H
#define GPR_TRACE_LOG_STATS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../format/log_read.h"

/*
 * One step of the replay: record r, and the change it made to the device
 * bytes held (classic, managed, async-pool and VMM-created memory) and to
 * pinned host bytes. `owner` is the string id of the library that
 * allocated the memory concerned (for a free: the allocating library, not
 * the freeing one), `device` its device.
 *
 * An allocation at an address (or VMM handle) the replay still holds
 * means the earlier allocation's free was not logged (a dropped record):
 * the replay then gives a step with `implied` set first, a free (kind
 * GPR_K_FREE, GPR_K_RELEASE or GPR_K_HOST_FREE) of the earlier allocation
 * (its owner, device and size), with r the allocation that revealed it,
 * and then the allocation's own step. An implied step is not a call: it
 * only moves bytes.
 */
struct gpr_trace_step {
	const struct gpr_trace_rec *r;
	enum gpr_trace_kind kind;
	uint32_t owner;
	int device;
	int64_t dev_delta;
	int64_t host_delta;
	int unmatched; /* a free of memory the trace never saw allocated */
	int implied;   /* a free not in the log, inferred from r */
};

typedef int (*gpr_trace_step_fn)(void *ctx, const struct gpr_trace_step *s);

/*
 * How far the replay running now has come, in records: for a progress
 * line, read from another thread (the process's one replay at a time);
 * and how many replays have begun (each is a pass over every record: an
 * export of every GPU's RMM log is one, tests/trace/test_view.c checks).
 */
struct gpr_trace_progress {
	_Atomic uint64_t done, total;
	_Atomic uint64_t replays; /* replays begun in this process */
};
extern struct gpr_trace_progress gpr_trace_progress;

/*
 * Replays the records in effect order, calling fn for each; stops early
 * when fn returns non-zero and returns that. Returns GPR_E_NOMEM when out
 * of memory, 0 otherwise. When live/n_live are given, *live receives the
 * allocations still held at the end, largest first, then in the order
 * they took effect (malloc'ed, the caller frees).
 */
struct gpr_trace_live {
	uint64_t addr; /* address, or VMM handle when vmm */
	uint64_t bytes;
	uint64_t t_ns;
	uint32_t owner;
	uint32_t op;
	int device;
	int vmm;
	int host;
};
int gpr_trace_replay(const struct gpr_trace *t, gpr_trace_step_fn fn, void *ctx,
		     struct gpr_trace_live **live, size_t *n_live);

struct gpr_trace_opstat {
	uint32_t op; /* string id */
	uint64_t calls, errors, bytes;
	uint64_t p50, p90, p99, max; /* latency, ns */
	uint64_t dur_sum, wait_sum;  /* over calls with a wait figure */
	double wait_share;	     /* wait_sum / dur_sum */
	double tail_wait_share;	     /* same over calls >= p99 */
	uint64_t waited_calls;	     /* calls with a wait figure */
};

struct gpr_trace_libstat {
	uint32_t lib; /* string id, GPR_TRACE_NO_STRING = unknown */
	uint64_t calls, allocs, alloc_bytes, frees, freed_bytes;
	uint64_t held_end, peak;
};

struct gpr_trace_devstat {
	int device;
	uint64_t calls, alloc_bytes, freed_bytes, held_end, peak, peak_t;
};

struct gpr_trace_sitestat {
	uint32_t site, lib;
	uint64_t calls, bytes;
};

struct gpr_trace_stats {
	uint64_t records, errors, unmatched_frees, dropped;
	uint64_t implied_frees; /* frees not in the log (see the replay) */
	uint64_t t0, t1;	/* first entry, last exit (ns, trace clock) */
	uint64_t peak, peak_t, held_end; /* device bytes, all devices */
	uint64_t host_peak, host_end;	 /* pinned host bytes */
	uint64_t contexts_created, contexts_destroyed;
	struct gpr_trace_opstat *ops;
	size_t n_ops;
	struct gpr_trace_libstat *libs; /* by allocated bytes, descending */
	size_t n_libs;
	struct gpr_trace_devstat *devs; /* by device */
	size_t n_devs;
	struct gpr_trace_sitestat *sites; /* by bytes, descending */
	size_t n_sites;
	/*
	 * Allocations never freed, by bytes descending: the first n_live of
	 * live_count (all of them unless gpr_trace_stats_compute_top kept
	 * fewer); the sums are over all.
	 */
	struct gpr_trace_live *live;
	size_t n_live;
	uint64_t live_count;
	uint64_t live_bytes;	  /* device bytes among them */
	uint64_t live_host_bytes; /* pinned host bytes among them */
	/*
	 * A byte figure reached its limit and stopped there (sums at
	 * UINT64_MAX, bytes held at INT64_MAX): the log holds sizes no GPU
	 * has. Every sum saturates instead of wrapping.
	 */
	int saturated;
};

/* Computes the statistics of t. 0, or GPR_E_NOMEM. */
int gpr_trace_stats_compute(const struct gpr_trace *t,
			    struct gpr_trace_stats *s);

/*
 * The same, listing only the largest keep_live allocations never freed
 * (48 bytes each): what a report that shows the top N needs, so a log
 * whose every allocation is still held costs no more for it.
 */
int gpr_trace_stats_compute_top(const struct gpr_trace *t,
				struct gpr_trace_stats *s, size_t keep_live);
void gpr_trace_stats_free(struct gpr_trace_stats *s);

/* a + b, saturating: hostile logs carry any sizes. */
static inline int64_t gpr_trace_sadd(int64_t a, int64_t b)
{
	int64_t r;
	if (__builtin_add_overflow(a, b, &r))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

/* *acc += v, stopping at UINT64_MAX; 1 when it stopped there. */
static inline int gpr_trace_usum(uint64_t *acc, uint64_t v)
{
	if (__builtin_add_overflow(*acc, v, acc)) {
		*acc = UINT64_MAX;
		return 1;
	}
	return 0;
}

/*
 * A time of the trace clock as ns since tracing began (the log's start),
 * 0 for a time before it: the one origin of every time the reports and
 * exports show, so the text, the JSON, the timeline and the plot agree.
 */
static inline uint64_t gpr_trace_since_start(const struct gpr_trace *t,
					     uint64_t ns)
{
	return ns > t->hdr.start_mono_ns ? ns - t->hdr.start_mono_ns : 0;
}

/*
 * How long tracing ran, in ns since it began: to its end where the log
 * says (a log closed cleanly), else to the last call's exit. The header's
 * "over N of tracing" and the plot's time axis are this one figure.
 */
static inline uint64_t gpr_trace_traced_ns(const struct gpr_trace *t,
					   const struct gpr_trace_stats *s)
{
	uint64_t end = s->t1;
	if (t->complete && t->hdr.end_mono_ns > end)
		end = t->hdr.end_mono_ns;
	return gpr_trace_since_start(t, end);
}

/* The nearest-rank percentile p (0-100) of n sorted values; 0 if n == 0. */
uint64_t gpr_trace_percentile(const uint64_t *sorted, size_t n, unsigned p);

#endif /* GPR_TRACE_LOG_STATS_H */
