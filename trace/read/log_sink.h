/*
 * Where a rendering of the trace report goes (log_report.h): a buffer,
 * and a file it is written to as it grows, so a report of a million rows
 * is never held whole.
 */
#ifndef GPR_TRACE_LOG_SINK_H
#define GPR_TRACE_LOG_SINK_H

#include <stddef.h>
#include <stdio.h>

#include "out/buf.h"

/*
 * Appended to b; with f given, what b holds is written to f as it grows
 * (b then ends empty). err: the errno of a failed write.
 */
struct gpr_trace_sink {
	struct gpr__buf *b;
	FILE *f;
	int err;
};

/* Writes what b holds to f once it holds at least `at_least` bytes. */
void gpr_trace_sink_flush(struct gpr_trace_sink *k, size_t at_least);

#endif /* GPR_TRACE_LOG_SINK_H */
