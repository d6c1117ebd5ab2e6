/*
 * The text and JSON reports of a trace log: what `gpureclaim report`
 * prints, and `gpureclaim trace` as the summary of the log it made.
 */
#ifndef GPR_TRACE_LOG_REPORT_H
#define GPR_TRACE_LOG_REPORT_H

#include "../format/log_read.h"
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

/*
 * Appends the HTML view of the report: the text report's figures and
 * tables, bars of the bytes each library allocated and still held at the
 * end, and the SVG plot inline, built from the output toolkit's blocks
 * (src/out/html.h): a notebook's _repr_html_ (document 0) or, with
 * document 1, a page that begins with GPR_TRACE_HTML_SIGNATURE.
 */
void gpr_trace_report_html(struct gpr__buf *b, const char *path,
			   const struct gpr_trace *t,
			   const struct gpr_trace_stats *s, int top,
			   int document);

#define GPR_TRACE_HTML_SIGNATURE "<!DOCTYPE html>\n<!-- gpureclaim report -->\n"

/*
 * Appends "Recorded by ...; waiting time: ..." (what the log's META lines
 * say recorded it, and any driver answers the interposer left unwrapped)
 * as it is: the caller shows it by its output's rule.
 */
void gpr_trace_recorded_by(struct gpr__buf *b, const struct gpr_trace *t);

/* A latency for people: "850ns", "1.2us", "3.40ms", "1.250s". */
char *gpr_trace_fmt_ns(uint64_t ns, char *out, size_t len);

/* Appends the JSON report (one object) of t to b. */
void gpr_trace_report_json(struct gpr__buf *b, const char *path,
			   const struct gpr_trace *t,
			   const struct gpr_trace_stats *s, int top);

#endif /* GPR_TRACE_LOG_REPORT_H */
