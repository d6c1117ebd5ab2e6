/*
 * The report as an HTML view (a notebook's _repr_html_, a file): the
 * headline, per visited GPU a bar of where its memory stands after the
 * release (this process, other processes, what this release gave back,
 * what was free before), the two tables of the text form
 * (report_view.c) and the notes, with the output toolkit's building
 * blocks (src/out/html.h).
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

static void gpu_bar(struct gpr__buf *b, const struct gpr_report_gpu *g)
{
	char label[64], cap[160], h[32];
	gpr__report_gpu_label(g, label, sizeof label);
	uint64_t given = g->released > 0 ? (uint64_t)g->released : 0;
	if (g->total > 0) {
		uint64_t mine = g->known ? g->after : 0;
		uint64_t others = g->used > mine ? g->used - mine : 0;
		if (given > g->free)
			given = g->free;
		struct gpr__html_part parts[] = {
		    {g->known ? "this process" : "in use (all processes)",
		     g->known ? mine : g->used, C_MINE},
		    {"other processes", g->known ? others : 0, C_OTHERS},
		    {"given back now", given, C_RETURNED},
		    {"free before", g->free - given, C_FREE}};
		snprintf(cap, sizeof cap,
			 "GPU %s after the release, of %s:", label,
			 gpr__fmt_bytes(g->total, h, sizeof h));
		gpr__html_bar(b, cap, parts, sizeof parts / sizeof parts[0]);
		return;
	}
	/* a named GPU, or one NVML does not describe: this process only */
	if (!g->known)
		return;
	struct gpr__html_part parts[] = {{"still held", g->after, C_MINE},
					 {"given back now", given, C_RETURNED}};
	snprintf(cap, sizeof cap,
		 "GPU %s: this process's figure before the release, %s:", label,
		 gpr__fmt_bytes(g->before, h, sizeof h));
	gpr__html_bar(b, cap, parts, 2);
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
		gpu_bar(&b, &r->gpus[i]);
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
