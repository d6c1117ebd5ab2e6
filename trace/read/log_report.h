/*
 * The report of a trace log rendered from its one view (log_view.h): as
 * text (what `gpureclaim report` prints, and `gpureclaim trace` as the
 * summary of the log it made), as JSON, and as HTML (a notebook's view or
 * a page of its own).
 */
#ifndef GPR_TRACE_LOG_REPORT_H
#define GPR_TRACE_LOG_REPORT_H

#include <stdio.h>

#include "../format/log_read.h"
#include "log_sink.h"
#include "log_stats.h"
#include "log_view.h"
#include "out/buf.h"

/* The forms of the report. */
enum gpr_trace_form {
	GPR_TRACE_FORM_TEXT,
	GPR_TRACE_FORM_JSON,
	GPR_TRACE_FORM_HTML,	  /* a notebook's _repr_html_ */
	GPR_TRACE_FORM_HTML_PAGE, /* a page: GPR_TRACE_HTML_SIGNATURE first */
};

#define GPR_TRACE_HTML_SIGNATURE "<!DOCTYPE html>\n<!-- gpureclaim report -->\n"

/*
 * Renders v in `form` into k. 0, GPR_E_NOMEM or GPR_E_IO (k->err says
 * why); with k->f, everything is written and f flushed when it returns 0.
 */
int gpr_trace_render(const struct gpr_trace_view *v, enum gpr_trace_form form,
		     struct gpr_trace_sink *k);

/* The HTML forms (log_report_html.c), for gpr_trace_render. */
void gpr_trace_render_html(const struct gpr_trace_view *v, int document,
			   struct gpr_trace_sink *k);

/*
 * The same, built and rendered in one call into b: the text report of t
 * (read from `path`, its statistics s; `top` bounds the lists, `brief`
 * leaves out the never-freed and call-site lists), the JSON report, and
 * the HTML view (document 0: a notebook's; 1: a page).
 */
void gpr_trace_report_text(struct gpr__buf *b, const char *path,
			   const struct gpr_trace *t,
			   const struct gpr_trace_stats *s, int top, int brief);
void gpr_trace_report_json(struct gpr__buf *b, const char *path,
			   const struct gpr_trace *t,
			   const struct gpr_trace_stats *s, int top);
void gpr_trace_report_html(struct gpr__buf *b, const char *path,
			   const struct gpr_trace *t,
			   const struct gpr_trace_stats *s, int top,
			   int document);

#endif /* GPR_TRACE_LOG_REPORT_H */
