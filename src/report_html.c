/*
 * The report as an HTML view (a notebook's _repr_html_, a file): the
 * headline, per visited GPU two bars, the two tables of the text form
 * (report_view.c) and the notes, with the output toolkit's building
 * blocks (src/out/html.h). The bars:
 * - this process at the scale of its own figure before the release: what
 *   it still holds and what it released, visible however small a share
 *   of the GPU they are;
 * - the GPU after the release at the GPU's scale: this process, the other
 *   processes and the free memory, the same figures as the table's
 *   "after", "in use" and "free" columns.
 */
#include <stdint.h>
#include <stdio.h>

#include "out/buf.h"
#include "out/fmt.h"
#include "out/html.h"
#include "out/table.h"
#include "report.h"

/* The bars' colours: the toolkit's roles, the same in every view. */
#define C_MINE "@mine"
#define C_OTHERS "@others"
#define C_RETURNED "@returned"
#define C_FREE "@free"

/* This process on one GPU, before the release: still held + released. */
static void process_bar(struct gpr__buf *b, const struct gpr_report_gpu *g,
			const char *label)
{
	if (!g->known || g->before == 0)
		return;
	uint64_t given = g->released > 0 ? (uint64_t)g->released : 0;
	uint64_t held = g->after;
	char cap[200], h1[32], h2[32];
	struct gpr__html_part parts[] = {{"still held", held, C_MINE},
					 {"released", given, C_RETURNED}};
	snprintf(cap, sizeof cap,
		 "GPU %s, this process: %s before the release, %s after:",
		 label, gpr__fmt_bytes(g->before, h1, sizeof h1),
		 gpr__fmt_bytes(g->after, h2, sizeof h2));
	gpr__html_bar(b, cap, parts, 2);
}

/* The whole GPU after the release, as the table's columns have it. */
static void gpu_bar(struct gpr__buf *b, const struct gpr_report_gpu *g,
		    const char *label)
{
	if (g->total == 0)
		return; /* a named GPU, or one NVML does not describe */
	char cap[160], h[32];
	uint64_t mine = g->known ? g->after : 0;
	uint64_t others = g->used > mine ? g->used - mine : 0;
	struct gpr__html_part parts[] = {
	    {g->known ? "this process" : "in use (all processes)",
	     g->known ? mine : g->used, C_MINE},
	    {"other processes", g->known ? others : 0, C_OTHERS},
	    {"free", g->free, C_FREE}};
	snprintf(cap, sizeof cap, "GPU %s after the release, of %s:", label,
		 gpr__fmt_bytes(g->total, h, sizeof h));
	gpr__html_bar(b, cap, parts, sizeof parts / sizeof parts[0]);
}

static void gpu_bars(struct gpr__buf *b, const struct gpr_report_gpu *g)
{
	char label[64];
	gpr__report_gpu_label(g, label, sizeof label);
	process_bar(b, g, label);
	gpu_bar(b, g, label);
}

char *gpr_report_html(const gpr_report *r)
{
	if (!r)
		return NULL;
	struct gpr__buf b = {0}, line = {0};
	struct gpr__table t;
	gpr__html_view_begin(&b, "gpureclaim release");
	gpr__report_headline(&line, r);
	gpr__html_p(&b, gpr__buf_str(&line), 0);
	if (line.oom)
		b.oom = 1;
	for (size_t i = 0; i < r->n_gpus; i++)
		gpu_bars(&b, &r->gpus[i]);
	gpr__report_gpu_table(r, &t);
	gpr__html_table(&b, "per GPU", &t);
	gpr__table_free(&t);
	size_t hidden = gpr__report_releaser_table(r, &t);
	gpr__html_table(&b, "per releaser", &t);
	gpr__table_free(&t);
	if (hidden) {
		gpr__buf_reset(&line);
		gpr__report_hidden_line(&line, hidden);
		gpr__html_p(&b, gpr__buf_str(&line), 0);
		if (line.oom)
			b.oom = 1;
	}
	gpr__html_notes(&b, (const char *const *)r->notes, r->n_notes);
	gpr__html_view_end(&b);
	gpr__buf_free(&line);
	return gpr__buf_finish(&b);
}
