/*
 * What the text and HTML forms of a report share (report_text.c,
 * report_html.c): the headline and the two tables, built once, so the two
 * forms, the CLI's and the Python package's alike, never disagree. Byte
 * figures are the output toolkit's binary units; exact counts are in the
 * headline and in JSON (report_json.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "out/buf.h"
#include "out/fmt.h"
#include "out/table.h"
#include "report.h"

void gpr__report_headline(struct gpr__buf *b, const gpr_report *r)
{
	char h[32], t[32];
	gpr__buf_printf(b, "released %s (%" PRId64 " bytes) ",
			gpr__fmt_sbytes(r->bytes, h, sizeof h), r->bytes);
	if (strcmp(r->source, "driver") == 0)
		gpr__buf_puts(b, "from the driver ");
	else if (strcmp(r->source, "allocators") == 0)
		gpr__buf_puts(b, "by the allocators' counters ");
	gpr__buf_printf(b, "in %s", gpr__fmt_secs(r->seconds, t, sizeof t));
	if (r->collected)
		gpr__buf_printf(b, ", garbage collection %s",
				gpr__fmt_secs(r->collect_seconds, t, sizeof t));
	if (strcmp(r->source, "none") == 0)
		gpr__buf_puts(b, "; nothing was measured (the notes say why)");
}

static const struct gpr__col GPU_COLS[] = {
    {"GPU", GPR__COL_TEXT},	{"released", GPR__COL_BYTES},
    {"before", GPR__COL_BYTES}, {"after", GPR__COL_BYTES},
    {"in use", GPR__COL_BYTES}, {"free", GPR__COL_BYTES},
    {"total", GPR__COL_BYTES}};

void gpr__report_gpu_label(const struct gpr_report_gpu *g, char *out,
			   size_t len)
{
	if (g->name) /* a GPU CUDA does not see: its name */
		snprintf(out, len, "%s", g->name);
	else
		snprintf(out, len, "%d", g->device);
}

void gpr__report_gpu_table(const gpr_report *r, struct gpr__table *t)
{
	gpr__table_init(t, GPU_COLS, sizeof GPU_COLS / sizeof GPU_COLS[0]);
	for (size_t i = 0; i < r->n_gpus; i++) {
		const struct gpr_report_gpu *g = &r->gpus[i];
		int mem = g->total > 0;
		char label[64];
		gpr__report_gpu_label(g, label, sizeof label);
		gpr__table_cell(t, label);
		gpr__table_sbytes(t, 1, g->released);
		gpr__table_bytes(t, g->known, g->before);
		gpr__table_bytes(t, g->known, g->after);
		gpr__table_bytes(t, mem, g->used);
		gpr__table_bytes(t, mem, g->free);
		gpr__table_bytes(t, mem, g->total);
	}
}

static const struct gpr__col REL_COLS[] = {
    {"releaser", GPR__COL_TEXT},     {"GPU", GPR__COL_TEXT},
    {"live before", GPR__COL_BYTES}, {"cached before", GPR__COL_BYTES},
    {"live after", GPR__COL_BYTES},  {"cached after", GPR__COL_BYTES},
    {"status", GPR__COL_TEXT}};

/* A row worth showing: something measured, or a failure. */
static int shown(const struct gpr__rrow *x)
{
	return x->before.known || x->after.known || x->status;
}

size_t gpr__report_releaser_table(const gpr_report *r, struct gpr__table *t)
{
	gpr__table_init(t, REL_COLS, sizeof REL_COLS / sizeof REL_COLS[0]);
	size_t hidden = 0;
	for (size_t i = 0; i < r->n_rel; i++) {
		const struct gpr__rrow *x = &r->rel[i];
		if (!shown(x)) {
			hidden++;
			continue;
		}
		gpr__table_cell(t, x->name);
		if (x->device == GPR_DEVICE_ONCE)
			gpr__table_cell(t, "once");
		else
			gpr__table_cellf(t, "%d", x->device);
		gpr__table_bytes(t, x->before.known, x->before.live);
		gpr__table_bytes(t, x->before.known, x->before.cached);
		gpr__table_bytes(t, x->after.known, x->after.live);
		gpr__table_bytes(t, x->after.known, x->after.cached);
		if (x->status)
			gpr__table_cellf(t, "failed (%d)", x->status);
		else
			gpr__table_cell(t, "ok");
	}
	return hidden;
}

void gpr__report_hidden_line(struct gpr__buf *b, size_t hidden)
{
	char n[64];
	gpr__buf_printf(b,
			"(%s of releasers not in use, which measured "
			"nothing, left out; the JSON has them)",
			gpr__fmt_count(hidden, "row", "rows", n, sizeof n));
}
