/*
 * Exports of a trace: a Chrome/Perfetto JSON timeline and an SVG plot of
 * the device bytes held over time by library.
 */
#ifndef GPR_TRACE_LOG_EXPORT_H
#define GPR_TRACE_LOG_EXPORT_H

#include <stdio.h>

#include "../format/log_read.h"
#include "log_stats.h"

/*
 * How each export begins. `gpureclaim report` replaces an existing file
 * without --force only when it begins so (an export of ours) or is empty
 * (docs/trace.md, "Exports").
 */
#define GPR_TRACE_CHROME_SIGNATURE                                             \
	"{\"displayTimeUnit\":\"ns\",\"otherData\":{\"tool\":\"gpureclaim "    \
	"trace\""
#define GPR_TRACE_SVG_SIGNATURE                                                \
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"                         \
	"<!-- gpureclaim report: driver memory over time -->\n"

/*
 * Writes the Chrome trace-event JSON of t to f: a slice per call (thread =
 * calling thread) and a counter track of device bytes held per library and
 * in total. 0, GPR_E_NOMEM or GPR_E_IO (write error on f).
 */
int gpr_trace_export_chrome(const struct gpr_trace *t, FILE *f);

/* How large the full timeline of t would be. */
struct gpr_trace_chrome_size {
	uint64_t events; /* slices, instants and counter points */
	uint64_t bytes;	 /* estimated size of the JSON */
};
int gpr_trace_chrome_size(const struct gpr_trace *t,
			  struct gpr_trace_chrome_size *out);

/*
 * The timeline within about max_events events (0: no cap, as
 * gpr_trace_export_chrome). Over the cap, the calls kept as slices (with
 * all their arguments, at most half the events) are the failed ones, then
 * the slowest and the largest allocations; the rest are merged, per
 * thread, into a counter "driver calls (merged)" per time bucket (calls,
 * busy microseconds), and the held-bytes counters keep, per bucket and
 * track, their maximum (at its time) and their last value, so the plot
 * keeps every peak and the exact final figures. An instant event at time
 * 0 says what was merged. *merged receives the calls merged (0: none).
 */
int gpr_trace_export_chrome_max(const struct gpr_trace *t, FILE *f,
				uint64_t max_events, uint64_t *merged);

/*
 * Writes an SVG plot of device bytes held over time: the total and the
 * libraries with the highest peaks, from s (the statistics of t, so the
 * plot's peak is the report's). Time runs from the start of tracing, as
 * in every report; the axes have round ticks. 0, GPR_E_NOMEM or GPR_E_IO.
 */
int gpr_trace_export_svg(const struct gpr_trace *t,
			 const struct gpr_trace_stats *s, FILE *f);

#endif /* GPR_TRACE_LOG_EXPORT_H */
