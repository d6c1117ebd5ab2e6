/*
 * Finding the tracer, libgpureclaim_trace.so: the one rule that the
 * command (`gpureclaim trace`, which preloads it) and the Python extension
 * (gpureclaim.trace, which loads it; gpureclaim.explain, which asks it)
 * follow. Not part of the tracer itself: trace/inject/meson.build
 * compiles locate.c into the command and into the extension.
 */
#ifndef GPR_TRACE_INJECT_LOCATE_H
#define GPR_TRACE_INJECT_LOCATE_H

#include <stddef.h>

#include "out/buf.h"

/* Who looks: the places differ (where each is installed). */
enum gpr_inj_from {
	GPR_INJ_FROM_COMMAND, /* the `gpureclaim` program */
	GPR_INJ_FROM_MODULE   /* the extension, in the gpureclaim package */
};

/*
 * The tracer's file, as an absolute path in out (len bytes): when
 * $GPURECLAIM_TRACE_LIBRARY is set, it and nothing else; otherwise beside
 * the caller (the command's folder, the package's), then, for the command,
 * the libdir of a C install (as configured: GPR_TRACER_LIBDIR, relative
 * to the command's folder), a build folder's trace/inject
 * (GPR_TRACER_BUILDDIR), and the gpureclaim package of a pip install
 * (../lib/python3.X/site-packages/gpureclaim, dist-packages, or
 * ../gpureclaim for `pip install --target`). A file is taken only when it
 * is the tracer: an ELF shared object of this machine that exports
 * gpureclaim_trace_start (read from its dynamic symbols, nothing loaded
 * or run). Every place looked at is noted in `tried`, one line each
 * ("  <place>[: why not]\n"). 0, or -1.
 */
int gpr_inj_locate(enum gpr_inj_from from, char *out, size_t len,
		   struct gpr__buf *tried);

/*
 * The tracer's function `name` when the tracer is already in this process:
 * preloaded or loaded RTLD_GLOBAL (dlsym(RTLD_DEFAULT)), or loaded by the
 * driver from $CUDA_INJECTION64_PATH, whose symbols are local. NULL when
 * it is not. Takes no reference of its own.
 */
void *gpr_inj_locate_loaded(const char *name);

#endif /* GPR_TRACE_INJECT_LOCATE_H */
