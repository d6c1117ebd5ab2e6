/*
 * The text and JSON reports of a trace log: what `gpureclaim report`
 * prints, and `gpureclaim trace` as the summary of the log it made.
 */
#ifndef GPR_TRACE_LOG_REPORT_H
#define GPR_TRACE_LOG_REPORT_H

#include "log_read.h"
#include "log_stats.h"
#include "out/buf.h"

/*
 * Appends the text report of t (read from `path`) to b. `top` bounds each
 * list (operations are always all shown); `brief` leaves out the call-site
 * and never-freed lists.
 */
void gpr_trace_report_text(struct gpr__buf *b, const char *path,
			   const struct gpr_trace *t,
			   const struct gpr_trace_stats *s, int top, int brief);

/* Appends the JSON report (one object) of t to b. */
void gpr_trace_report_json(struct gpr__buf *b, const char *path,
			   const struct gpr_trace *t,
			   const struct gpr_trace_stats *s, int top);

/*
 * Appends the report as an HTML fragment (log_html.c): the text report in
 * a <pre>, the SVG plot of log_export.h inline. 0 or GPR_E_NOMEM.
 */
int gpr_trace_report_html(struct gpr__buf *b, const char *path,
			  const struct gpr_trace *t,
			  const struct gpr_trace_stats *s, int top);

#endif /* GPR_TRACE_LOG_REPORT_H */
