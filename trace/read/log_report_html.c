/*
 * The HTML view of a trace's report: the figures of the text report
 * (log_report.c), bars of the bytes each library allocated and still
 * held at the end, the SVG plot of log_export.c inline, and the tables,
 * built from the output toolkit's blocks (src/out/html.h), so it looks
 * and is checked like every other view. Names come from a log that may be
 * hostile: every one goes through the toolkit's escaping.
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

/* Libraries shown in a bar by name; the others are one part. */
#define BAR_LIBS 9

static const char *str(const struct gpr_trace *t, uint32_t id)
{
	return gpr_trace_str(t, id, "[unknown]");
}

static double secs(const struct gpr_trace *t, uint64_t ns)
{
	return (double)gpr_trace_since_start(t, ns) / 1e9;
}

/* A bar of one figure per library (held 0: allocated bytes, 1: held at
 * the end); libraries past BAR_LIBS add up to "other libraries". */
static void lib_bar(struct gpr__buf *b, const struct gpr_trace *t,
		    const struct gpr_trace_stats *s, int held,
		    const char *caption)
{
	struct gpr__html_part p[BAR_LIBS + 1];
	size_t n = 0;
	uint64_t other = 0;
	for (size_t i = 0; i < s->n_libs; i++) {
		const struct gpr_trace_libstat *l = &s->libs[i];
		uint64_t v = held ? l->held_end : l->alloc_bytes;
		if (n < BAR_LIBS)
			p[n++] =
			    (struct gpr__html_part){str(t, l->lib), v, NULL};
		else
			gpr_trace_usum(&other, v); /* hostile sizes saturate */
	}
	if (other)
		p[n++] = (struct gpr__html_part){"other libraries", other,
						 "#bab0ac"};
	gpr__html_bar(b, caption, p, n);
}

/* The SVG plot, inline (its XML declaration and comment left out). */
static void plot(struct gpr__buf *b, const struct gpr_trace *t,
		 const struct gpr_trace_stats *s)
{
	char *svg = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&svg, &len);
	if (!f) {
		b->oom = 1;
		return;
	}
	int rc = gpr_trace_export_svg(t, s, f);
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

static const struct gpr__col OPS[] = {
    {"operation", GPR__COL_TEXT}, {"calls", GPR__COL_NUM},
    {"errors", GPR__COL_NUM},	  {"bytes", GPR__COL_BYTES},
    {"p50", GPR__COL_NUM},	  {"p90", GPR__COL_NUM},
    {"p99", GPR__COL_NUM},	  {"max", GPR__COL_NUM},
    {"waiting", GPR__COL_NUM}};

static void ops_table(struct gpr__buf *b, const struct gpr_trace *t,
		      const struct gpr_trace_stats *s)
{
	struct gpr__table x;
	gpr__table_init(&x, OPS, sizeof OPS / sizeof OPS[0]);
	for (size_t i = 0; i < s->n_ops; i++) {
		const struct gpr_trace_opstat *o = &s->ops[i];
		char h[32];
		gpr__table_cell(&x, str(t, o->op));
		gpr__table_cellf(&x, "%" PRIu64, o->calls);
		gpr__table_cellf(&x, "%" PRIu64, o->errors);
		gpr__table_bytes(&x, 1, o->bytes);
		gpr__table_cell(&x, gpr_trace_fmt_ns(o->p50, h, sizeof h));
		gpr__table_cell(&x, gpr_trace_fmt_ns(o->p90, h, sizeof h));
		gpr__table_cell(&x, gpr_trace_fmt_ns(o->p99, h, sizeof h));
		gpr__table_cell(&x, gpr_trace_fmt_ns(o->max, h, sizeof h));
		if (o->waited_calls)
			gpr__table_cellf(&x, "%.1f%% / %.1f%%",
					 100 * o->wait_share,
					 100 * o->tail_wait_share);
		else
			gpr__table_cell(&x, "-");
	}
	gpr__html_table(b,
			"By operation (latency; waiting: share of the call "
			"time spent runnable but not running, all calls / "
			"slowest 1%)",
			&x);
	gpr__table_free(&x);
}

static const struct gpr__col LIBS[] = {
    {"library", GPR__COL_TEXT},	   {"calls", GPR__COL_NUM},
    {"allocated", GPR__COL_BYTES}, {"freed", GPR__COL_BYTES},
    {"peak held", GPR__COL_BYTES}, {"held at end", GPR__COL_BYTES}};

static void libs_table(struct gpr__buf *b, const struct gpr_trace *t,
		       const struct gpr_trace_stats *s, int top)
{
	struct gpr__table x;
	gpr__table_init(&x, LIBS, sizeof LIBS / sizeof LIBS[0]);
	for (size_t i = 0; i < s->n_libs && (int)i < top; i++) {
		const struct gpr_trace_libstat *l = &s->libs[i];
		gpr__table_cell(&x, str(t, l->lib));
		gpr__table_cellf(&x, "%" PRIu64, l->calls);
		gpr__table_bytes(&x, 1, l->alloc_bytes);
		gpr__table_bytes(&x, 1, l->freed_bytes);
		gpr__table_bytes(&x, 1, l->peak);
		gpr__table_bytes(&x, 1, l->held_end);
	}
	gpr__html_table(b,
			"By library (allocated, calls: as the caller; freed, "
			"peak and held: of the memory it allocated)",
			&x);
	gpr__table_free(&x);
}

static const struct gpr__col DEVS[] = {
    {"device", GPR__COL_TEXT},	    {"calls", GPR__COL_NUM},
    {"allocated", GPR__COL_BYTES},  {"freed", GPR__COL_BYTES},
    {"peak", GPR__COL_BYTES},	    {"peak at", GPR__COL_NUM},
    {"held at end", GPR__COL_BYTES}};

static void devs_table(struct gpr__buf *b, const struct gpr_trace *t,
		       const struct gpr_trace_stats *s)
{
	struct gpr__table x;
	gpr__table_init(&x, DEVS, sizeof DEVS / sizeof DEVS[0]);
	for (size_t i = 0; i < s->n_devs; i++) {
		const struct gpr_trace_devstat *d = &s->devs[i];
		if (d->device < 0)
			gpr__table_cell(&x, "?");
		else
			gpr__table_cellf(&x, "%d", d->device);
		gpr__table_cellf(&x, "%" PRIu64, d->calls);
		gpr__table_bytes(&x, 1, d->alloc_bytes);
		gpr__table_bytes(&x, 1, d->freed_bytes);
		gpr__table_bytes(&x, 1, d->peak);
		gpr__table_cellf(&x, "%.3f s", secs(t, d->peak_t));
		gpr__table_bytes(&x, 1, d->held_end);
	}
	gpr__html_table(b, "By device", &x);
	gpr__table_free(&x);
}

static const struct gpr__col LIVE[] = {
    {"bytes", GPR__COL_BYTES}, {"address", GPR__COL_TEXT},
    {"where", GPR__COL_TEXT},  {"operation", GPR__COL_TEXT},
    {"at", GPR__COL_NUM},      {"library", GPR__COL_TEXT}};

static void live_table(struct gpr__buf *b, const struct gpr_trace *t,
		       const struct gpr_trace_stats *s, int top)
{
	struct gpr__table x;
	gpr__table_init(&x, LIVE, sizeof LIVE / sizeof LIVE[0]);
	for (size_t i = 0; i < s->n_live && (int)i < top; i++) {
		const struct gpr_trace_live *l = &s->live[i];
		gpr__table_bytes(&x, 1, l->bytes);
		gpr__table_cellf(&x, "%s0x%" PRIx64, l->vmm ? "handle " : "",
				 l->addr);
		if (l->host)
			gpr__table_cell(&x, "pinned host");
		else
			gpr__table_cellf(&x, "device %d", l->device);
		gpr__table_cell(&x, str(t, l->op));
		gpr__table_cellf(&x, "%.3f s", secs(t, l->t_ns));
		gpr__table_cell(&x, str(t, l->owner));
	}
	char n[64], h[32], cap[160];
	snprintf(
	    cap, sizeof cap, "Never freed: %s, %s of device memory",
	    gpr__fmt_count(s->n_live, "allocation", "allocations", n, sizeof n),
	    gpr__fmt_bytes(s->live_bytes, h, sizeof h));
	gpr__html_table(b, cap, &x);
	gpr__table_free(&x);
}

static const struct gpr__col SITES[] = {{"allocated", GPR__COL_BYTES},
					{"calls", GPR__COL_NUM},
					{"call site", GPR__COL_TEXT}};

static void sites_table(struct gpr__buf *b, const struct gpr_trace *t,
			const struct gpr_trace_stats *s, int top)
{
	struct gpr__table x;
	gpr__table_init(&x, SITES, sizeof SITES / sizeof SITES[0]);
	for (size_t i = 0; i < s->n_sites && (int)i < top; i++) {
		const struct gpr_trace_sitestat *c = &s->sites[i];
		gpr__table_bytes(&x, 1, c->bytes);
		gpr__table_cellf(&x, "%" PRIu64, c->calls);
		gpr__table_cell(&x, str(t, c->site));
	}
	gpr__html_table(b, "Top call sites (by bytes allocated)", &x);
	gpr__table_free(&x);
}

/* The notes of the text report, as sentences. */
static void notes(struct gpr__buf *b, const struct gpr_trace_stats *s)
{
	char v[5][128], n[64];
	const char *list[5];
	size_t k = 0;
	if (s->saturated)
		snprintf(v[k++], sizeof v[0],
			 "some byte figures reached the largest value they "
			 "can hold and stopped there (the log holds sizes no "
			 "GPU has)");
	if (s->errors)
		snprintf(v[k++], sizeof v[0],
			 "%s (counted in errors, no memory moved)",
			 gpr__fmt_count(s->errors, "call failed",
					"calls failed", n, sizeof n));
	if (s->unmatched_frees)
		snprintf(v[k++], sizeof v[0],
			 "%s of memory allocated before tracing began",
			 gpr__fmt_count(s->unmatched_frees, "free", "frees", n,
					sizeof n));
	if (s->dropped)
		snprintf(v[k++], sizeof v[0], "%s (buffers full)",
			 gpr__fmt_count(s->dropped, "record was lost",
					"records were lost", n, sizeof n));
	if (s->implied_frees)
		snprintf(v[k++], sizeof v[0],
			 "%s from the log, inferred where the address or "
			 "handle was allocated again",
			 gpr__fmt_count(s->implied_frees, "free missing",
					"frees missing", n, sizeof n));
	for (size_t i = 0; i < k; i++)
		list[i] = v[i];
	gpr__html_notes(b, list, k);
}

void gpr_trace_report_html(struct gpr__buf *b, const char *path,
			   const struct gpr_trace *t,
			   const struct gpr_trace_stats *s, int top,
			   int document)
{
	struct gpr__buf line = {0};
	char x[32], y[32], n[64];
	gpr__buf_puts(&line, "gpureclaim report: ");
	gpr__buf_puts(&line, path);
	if (document)
		gpr__html_document_begin(b, gpr__buf_str(&line),
					 "gpureclaim report");
	else
		gpr__html_view_begin(b, gpr__buf_str(&line));
	gpr__buf_reset(&line);
	gpr__buf_printf(
	    &line, "pid %u, %s over %.3f s", t->hdr.pid,
	    gpr__fmt_count(s->records, "call", "calls", n, sizeof n),
	    s->t1 > s->t0 ? (double)(s->t1 - s->t0) / 1e9 : 0.0);
	gpr__html_p(b, gpr__buf_str(&line), 0);
	gpr__buf_reset(&line);
	gpr_trace_recorded_by(&line, t);
	gpr__html_p(b, gpr__buf_str(&line), 0);
	if (!t->complete)
		gpr__html_p(b,
			    "log not closed: the program was killed or is "
			    "still running",
			    1);
	gpr__buf_reset(&line);
	gpr__buf_printf(&line,
			"Peak driver memory: %s at %.3f s; held at the end: "
			"%s",
			gpr__fmt_bytes(s->peak, x, sizeof x),
			secs(t, s->peak_t),
			gpr__fmt_bytes(s->held_end, y, sizeof y));
	if (s->host_peak)
		gpr__buf_printf(&line,
				"; pinned host memory: peak %s, held at the "
				"end %s",
				gpr__fmt_bytes(s->host_peak, x, sizeof x),
				gpr__fmt_bytes(s->host_end, y, sizeof y));
	gpr__html_p(b, gpr__buf_str(&line), 0);
	if (line.oom)
		b->oom = 1;
	gpr__buf_free(&line);
	lib_bar(b, t, s, 0, "Allocated, by library:");
	if (s->held_end)
		lib_bar(b, t, s, 1, "Held at the end, by library:");
	plot(b, t, s);
	ops_table(b, t, s);
	libs_table(b, t, s, top);
	devs_table(b, t, s);
	live_table(b, t, s, top);
	sites_table(b, t, s, top);
	notes(b, s);
	if (document)
		gpr__html_document_end(b);
	else
		gpr__html_view_end(b);
}
