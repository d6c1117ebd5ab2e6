/*
 * The text and JSON forms of a trace's report, rendered from its view
 * (log_view.h). Names come from a log that may be hostile: the text shows
 * them by the output toolkit's terminal-safe rule, the JSON escapes them
 * by its one rule. Both stream: a table's rows are made one at a time and
 * what is rendered goes to the sink's file as it grows.
 */
#include "log_report.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "gpureclaim.h"
#include "out/fmt.h"
#include "out/json.h"
#include "out/table.h"
#include "out/text.h"

#define FLUSH_AT (64u << 10)

/* ---------------------------------------------------------------- text */

static void text_line(struct gpr__buf *b, const char *s)
{
	gpr__text_put(b, s, 0, 0);
	gpr__buf_puts(b, "\n");
}

static void text(const struct gpr_trace_view *v, struct gpr_trace_sink *k)
{
	struct gpr__buf *b = k->b;
	char x[32], y[32], n[64];
	gpr__buf_puts(b, "Trace ");
	gpr__text_put(b, v->path, 0, 0);
	gpr__buf_printf(
	    b, ": pid %u, %s over %s of tracing", v->pid,
	    gpr__fmt_count(v->records, "call", "calls", n, sizeof n),
	    gpr_trace_fmt_ns(v->traced_ns, x, sizeof x));
	if (*v->state)
		gpr__buf_printf(b, " (%s)", v->state);
	gpr__buf_puts(b, "\n");
	if (v->recorded_by.oom)
		b->oom = 1;
	text_line(b, gpr__buf_str(&v->recorded_by));
	gpr__buf_printf(b,
			"Peak driver memory: %s at %s; held at the end: %s\n",
			gpr__fmt_bytes(v->peak, x, sizeof x),
			gpr_trace_fmt_ns(v->peak_at, y, sizeof y),
			gpr__fmt_bytes(v->held_end, n, sizeof n));
	if (v->host_peak)
		gpr__buf_printf(b,
				"Pinned host memory: peak %s, held at the "
				"end %s\n",
				gpr__fmt_bytes(v->host_peak, x, sizeof x),
				gpr__fmt_bytes(v->host_end, y, sizeof y));
	for (int i = 0; i < GPR_TRACE_VT_N; i++) {
		const struct gpr_trace_vtable *t = &v->tables[i];
		if (v->brief && t->full_only)
			continue;
		gpr__buf_puts(b, "\n");
		gpr__text_put(b, t->caption, 0, 0);
		gpr__buf_puts(b, t->no_colon ? "\n" : ":\n");
		if (!t->rows && t->empty) {
			gpr__buf_printf(b, "  %s\n", t->empty);
			continue;
		}
		struct gpr__col cols[GPR_TRACE_VCOLS];
		struct gpr__table x;
		gpr_trace_view_table(v, i, cols, &x);
		gpr__table_text(b, &x, 2);
		gpr__table_free(&x);
		if (*t->more)
			gpr__buf_printf(b, "  (%s)\n", t->more);
		gpr_trace_sink_flush(k, FLUSH_AT);
	}
	const char *list[GPR_TRACE_VIEW_NOTES];
	for (size_t i = 0; i < v->n_notes; i++)
		list[i] = v->notes[i];
	gpr__text_notes(b, list, v->n_notes);
}

/* ---------------------------------------------------------------- JSON */

static void json_cell(struct gpr__json *j, const struct gpr_trace_vcol *c,
		      const struct gpr_trace_vcell *x)
{
	gpr__json_key(j, c->key);
	switch (c->kind) {
	case GPR_TRACE_VK_NAME:
	case GPR_TRACE_VK_FIGURE:
		gpr__json_str(j, x->s ? x->s : "");
		break;
	case GPR_TRACE_VK_DEVICE:
	case GPR_TRACE_VK_INT:
		gpr__json_i64(j, x->i);
		break;
	case GPR_TRACE_VK_SHARE:
		gpr__json_double(j, x->d, 6);
		break;
	case GPR_TRACE_VK_BOOL:
		gpr__json_bool(j, x->u != 0);
		break;
	default:
		gpr__json_u64(j, x->u);
		break;
	}
}

static void json_table(const struct gpr_trace_view *v,
		       const struct gpr_trace_vtable *t, struct gpr__json *j,
		       struct gpr_trace_sink *k)
{
	gpr__json_key(j, t->key);
	gpr__json_array(j);
	struct gpr_trace_vcell cell[GPR_TRACE_VCOLS];
	for (size_t r = 0; r < t->json_rows; r++) {
		memset(cell, 0, sizeof cell);
		t->row(v, r, cell);
		gpr__json_object(j);
		for (size_t c = 0; c < t->n_cols && c < GPR_TRACE_VCOLS; c++)
			if (t->cols[c].key)
				json_cell(j, &t->cols[c], &cell[c]);
		gpr__json_object_end(j);
		gpr_trace_sink_flush(k, FLUSH_AT);
	}
	gpr__json_array_end(j);
}

static void json(const struct gpr_trace_view *v, struct gpr_trace_sink *k)
{
	struct gpr__json j;
	gpr__json_init(&j, k->b);
	gpr__json_object(&j);
	gpr__json_kv_str(&j, "file", v->path);
	gpr__json_kv_u64(&j, "format_version", v->format_version);
	gpr__json_kv_u64(&j, "pid", v->pid);
	gpr__json_kv_bool(&j, "complete", v->complete);
	/* where a log cut short ends; null when it is whole */
	gpr__json_key(&j, "cut_at_offset");
	if (v->cut)
		gpr__json_u64(&j, v->cut_at);
	else
		gpr__json_null(&j);
	gpr__json_kv_u64(&j, "start_realtime_ns", v->start_realtime_ns);
	gpr__json_kv_u64(&j, "records", v->records);
	gpr__json_kv_u64(&j, "errors", v->errors);
	gpr__json_kv_u64(&j, "dropped", v->dropped);
	gpr__json_kv_u64(&j, "unmatched_frees", v->unmatched_frees);
	gpr__json_kv_u64(&j, "implied_frees", v->implied_frees);
	gpr__json_kv_bool(&j, "sums_saturated", v->saturated);
	gpr__json_kv_u64(&j, "duration_ns", v->duration_ns);
	gpr__json_kv_u64(&j, "traced_ns", v->traced_ns);
	gpr__json_kv_u64(&j, "peak_bytes", v->peak);
	gpr__json_kv_u64(&j, "peak_at_ns", v->peak_at);
	gpr__json_kv_u64(&j, "held_at_end_bytes", v->held_end);
	gpr__json_kv_u64(&j, "host_peak_bytes", v->host_peak);
	/* null in a log that does not say (before version 1.1) */
	gpr__json_kv_str(&j, "backend", v->backend);
	gpr__json_kv_str(&j, "wait", v->wait);
	gpr__json_key(&j, "meta");
	gpr__json_object(&j);
	for (uint32_t i = 0; i < v->n_meta; i++)
		gpr__json_kv_str(&j, v->meta[i].key, v->meta[i].value);
	gpr__json_object_end(&j);
	for (int i = 0; i < GPR_TRACE_VT_N; i++) {
		if (i == GPR_TRACE_VT_LIVE) {
			gpr__json_kv_u64(&j, "never_freed_count",
					 v->never_freed);
			gpr__json_kv_u64(&j, "never_freed_bytes",
					 v->never_freed_bytes);
		}
		json_table(v, &v->tables[i], &j, k);
	}
	gpr__json_key(&j, "notes");
	gpr__json_array(&j);
	for (size_t i = 0; i < v->n_notes; i++)
		gpr__json_str(&j, v->notes[i]);
	gpr__json_array_end(&j);
	gpr__json_object_end(&j);
	gpr__buf_puts(k->b, "\n");
}

/* ------------------------------------------------------------- forms */

int gpr_trace_render(const struct gpr_trace_view *v, enum gpr_trace_form form,
		     struct gpr_trace_sink *k)
{
	if (form == GPR_TRACE_FORM_TEXT)
		text(v, k);
	else if (form == GPR_TRACE_FORM_JSON)
		json(v, k);
	else
		gpr_trace_render_html(v, form == GPR_TRACE_FORM_HTML_PAGE, k);
	if (k->b->oom)
		return GPR_E_NOMEM;
	gpr_trace_sink_flush(k, 0);
	if (k->f && !k->err && fflush(k->f) != 0)
		k->err = errno ? errno : EIO;
	return k->err ? GPR_E_IO : 0;
}

static void render_into(struct gpr__buf *b, const char *path,
			const struct gpr_trace *t,
			const struct gpr_trace_stats *s, int top, int brief,
			enum gpr_trace_form form)
{
	struct gpr_trace_view v;
	gpr_trace_view_build(&v, path, t, s, top, brief);
	struct gpr_trace_sink k = {b, NULL, 0};
	gpr_trace_render(&v, form, &k);
	gpr_trace_view_free(&v);
}

void gpr_trace_report_text(struct gpr__buf *b, const char *path,
			   const struct gpr_trace *t,
			   const struct gpr_trace_stats *s, int top, int brief)
{
	render_into(b, path, t, s, top, brief, GPR_TRACE_FORM_TEXT);
}

void gpr_trace_report_json(struct gpr__buf *b, const char *path,
			   const struct gpr_trace *t,
			   const struct gpr_trace_stats *s, int top)
{
	render_into(b, path, t, s, top, 0, GPR_TRACE_FORM_JSON);
}

void gpr_trace_report_html(struct gpr__buf *b, const char *path,
			   const struct gpr_trace *t,
			   const struct gpr_trace_stats *s, int top,
			   int document)
{
	render_into(b, path, t, s, top, 0,
		    document ? GPR_TRACE_FORM_HTML_PAGE : GPR_TRACE_FORM_HTML);
}
