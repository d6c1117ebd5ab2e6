/*
 * The HTML form of a trace's report, rendered from its view (log_view.h):
 * the headline as paragraphs, the bars of what each library allocated and
 * held at the end (one scale), the SVG plot of log_export.c inline, the
 * tables and the notes, built from the output toolkit's blocks
 * (src/out/html.h), so it looks and is checked like every other view.
 * Names come from a log that may be hostile: every one goes through the
 * toolkit's escaping.
 */
#include "log_report.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log_export.h"
#include "out/fmt.h"
#include "out/html.h"
#include "out/table.h"

/* The SVG plot, inline (its XML declaration and comment left out). */
static void plot(struct gpr__buf *b, const struct gpr_trace_view *v)
{
	char *svg = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&svg, &len);
	if (!f) {
		b->oom = 1;
		return;
	}
	int rc = gpr_trace_export_svg(v->t, v->s, f);
	if (fclose(f) != 0 || rc < 0 || !svg) {
		b->oom = 1;
		free(svg);
		return;
	}
	const char *start = strstr(svg, "<svg");
	if (start) {
		gpr__buf_puts(b, "<div class=\"gpr-cap\">Driver memory over "
				 "time, by library</div>");
		gpr__buf_puts(b, start);
	}
	free(svg);
}

void gpr_trace_render_html(const struct gpr_trace_view *v, int document,
			   struct gpr_trace_sink *k)
{
	struct gpr__buf *b = k->b;
	struct gpr__buf line = {0};
	char x[32], y[32], n[64];
	gpr__buf_puts(&line, "gpureclaim report: ");
	gpr__buf_puts(&line, v->path);
	if (document)
		gpr__html_document_begin(b, gpr__buf_str(&line),
					 "gpureclaim report");
	else
		gpr__html_view_begin(b, gpr__buf_str(&line));
	gpr__buf_reset(&line);
	gpr__buf_printf(
	    &line, "pid %u, %s over %s of tracing", v->pid,
	    gpr__fmt_count(v->records, "call", "calls", n, sizeof n),
	    gpr_trace_fmt_ns(v->traced_ns, x, sizeof x));
	gpr__html_p(b, gpr__buf_str(&line), 0);
	if (v->recorded_by.oom)
		b->oom = 1;
	gpr__html_p(b, gpr__buf_str(&v->recorded_by), 0);
	if (*v->state)
		gpr__html_p(b, v->state, 1);
	gpr__buf_reset(&line);
	gpr__buf_printf(&line,
			"Peak driver memory: %s at %s; held at the end: %s",
			gpr__fmt_bytes(v->peak, x, sizeof x),
			gpr_trace_fmt_ns(v->peak_at, y, sizeof y),
			gpr__fmt_bytes(v->held_end, n, sizeof n));
	if (v->host_peak)
		gpr__buf_printf(&line,
				"; pinned host memory: peak %s, held at the "
				"end %s",
				gpr__fmt_bytes(v->host_peak, x, sizeof x),
				gpr__fmt_bytes(v->host_end, y, sizeof y));
	gpr__html_p(b, gpr__buf_str(&line), 0);
	if (line.oom)
		b->oom = 1;
	gpr__buf_free(&line);
	for (size_t i = 0; i < v->n_bars; i++)
		gpr__html_bar(b, v->bars[i].caption, v->bars[i].parts,
			      v->bars[i].n);
	plot(b, v);
	gpr_trace_sink_flush(k, 0);
	for (int i = 0; i < GPR_TRACE_VT_N; i++) {
		const struct gpr_trace_vtable *t = &v->tables[i];
		if (v->brief && t->full_only)
			continue;
		struct gpr__col cols[GPR_TRACE_VCOLS];
		struct gpr__table x;
		gpr_trace_view_table(v, i, cols, &x);
		gpr__html_table(b, t->caption, &x);
		gpr__table_free(&x);
		if (*t->more)
			gpr__html_p(b, t->more, 0);
		gpr_trace_sink_flush(k, 0);
	}
	const char *list[GPR_TRACE_VIEW_NOTES];
	for (size_t i = 0; i < v->n_notes; i++)
		list[i] = v->notes[i];
	gpr__html_notes(b, list, v->n_notes);
	if (document)
		gpr__html_document_end(b);
	else
		gpr__html_view_end(b);
}
