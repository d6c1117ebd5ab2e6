/*
 * The tracer's live query, as issue 14 adds it to libgpureclaim_trace.so
 * and include/gpureclaim_trace.h. Declared here until that header has it;
 * the two are made one when both land (the layout below is the agreed
 * one: do not change it here alone).
 *
 * A row per (device, kind, library) of what the traced process allocated
 * through the driver and has not freed. The caller sets rows[0].sz to
 * sizeof(struct gpureclaim_trace_live); the tracer fills up to cap rows at
 * that stride and sets *n to the rows it has (more than cap: ask again
 * with more room). Returns 0, or -1 when it is not recording.
 */
#ifndef GPR_PY_TRACE_LIVE_H
#define GPR_PY_TRACE_LIVE_H

#include <stddef.h>
#include <stdint.h>

struct gpureclaim_trace_live {
	size_t sz;	     /* caller sets sizeof */
	int device;	     /* CUDA ordinal, -1 host */
	int kind;	     /* enum gpr_py_live_kind */
	const char *library; /* the calling library's short name; valid
				while the tracer is loaded */
	uint64_t bytes;	     /* allocated, not yet freed */
	uint64_t count;
};

enum gpr_py_live_kind {
	GPR_PY_LIVE_DEVICE = 0,	     /* cuMemAlloc and the like */
	GPR_PY_LIVE_HOST_PINNED = 1, /* cuMemHostAlloc: not on a GPU */
	GPR_PY_LIVE_VMM = 2,	     /* physical memory (cuMemCreate) */
	GPR_PY_LIVE_ASYNC_POOL = 3   /* a stream-ordered pool's reserve */
};

typedef int gpureclaim_trace_live_fn(struct gpureclaim_trace_live *rows,
				     size_t cap, size_t *n);

#endif /* GPR_PY_TRACE_LIVE_H */
