/*
 * The tracer's live query (include/gpureclaim_trace.h, exported by
 * libgpureclaim_trace.so), with names for its kinds.
 *
 * A row per (device, kind, library) of what the traced process allocated
 * through the driver and has not freed. The caller sets rows[0].sz to
 * sizeof(struct gpureclaim_trace_live); the tracer fills up to cap rows at
 * that stride and sets *n to the rows it has (more than cap: ask again
 * with more room). Returns 0, or -1 when it is not recording.
 */
#ifndef GPR_PY_TRACE_LIVE_H
#define GPR_PY_TRACE_LIVE_H

#include "gpureclaim_trace.h"

/* struct gpureclaim_trace_live's kind */
enum gpr_py_live_kind {
	GPR_PY_LIVE_DEVICE = 0,	     /* cuMemAlloc and the like */
	GPR_PY_LIVE_HOST_PINNED = 1, /* cuMemHostAlloc: not on a GPU */
	GPR_PY_LIVE_VMM = 2,	     /* physical memory (cuMemCreate) */
	GPR_PY_LIVE_ASYNC_POOL = 3   /* a stream-ordered pool's reserve */
};

#endif /* GPR_PY_TRACE_LIVE_H */
