/*
 * gpureclaim_trace.h: what a traced program may call in the tracer,
 * libgpureclaim_trace.so (docs/trace.md, "Pausing from the program").
 *
 * The tracer is not linked: the CUDA driver loads it at cuInit from
 * $CUDA_INJECTION64_PATH (set by `gpureclaim trace`). Find it after CUDA
 * is initialised, without loading anything:
 *
 *	#include <dlfcn.h>
 *	#include <stdlib.h>
 *	#include "gpureclaim_trace.h"
 *
 *	const char *path = getenv("CUDA_INJECTION64_PATH");
 *	void *tracer = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
 *	gpureclaim_trace_pause_fn *trace_pause = NULL;
 *	if (tracer)
 *		*(void **)&trace_pause =
 *		    dlsym(tracer, "gpureclaim_trace_pause");
 *	if (trace_pause)
 *		trace_pause();
 *
 * Not traced (no tracer loaded), the pointers stay NULL: a program calls
 * nothing and runs as it would.
 */
#ifndef GPURECLAIM_TRACE_H
#define GPURECLAIM_TRACE_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Stops recording: the tracer turns its callbacks off and unsubscribes
 * from CUPTI, so nothing is recorded and another CUPTI tool (a profiler)
 * may subscribe meanwhile. Returns 0 when paused now, 1 when it already
 * was, -1 when this process is not being traced (tracing could not start,
 * or has stopped: a failed write of the log, a forked child).
 *
 * Threads: callable from any thread; pause and resume are serialised by
 * the tracer. A driver call in flight on another thread at the moment of
 * pausing may go unrecorded. Not async-signal-safe.
 *
 * A free made while paused is missing from the log: memory allocated
 * before the pause and freed during it reads as "never freed" unless its
 * address is allocated again later.
 */
int gpureclaim_trace_pause(void);

/*
 * Records again: subscribes to CUPTI and turns the callbacks back on.
 * Returns 0 when resumed now, 1 when it was not paused, -1 when this
 * process is not being traced, -2 when CUPTI could not be taken back
 * (another tool holds it, or a CUPTI call failed): the tracer says why in
 * one "gpureclaim-trace: ..." line on stderr and stays paused; a later
 * call may succeed. Threads: as gpureclaim_trace_pause.
 */
int gpureclaim_trace_resume(void);

/* The functions' types, for pointers found with dlsym. */
typedef int gpureclaim_trace_pause_fn(void);
typedef int gpureclaim_trace_resume_fn(void);

#ifdef __cplusplus
}
#endif

#endif /* GPURECLAIM_TRACE_H */
