/*
 * The report as a text table: a header line with the total, one row per
 * visited GPU, one row per releaser and GPU, then the notes. Figures in
 * the output toolkit's binary units (src/out/fmt.h), the exact total in
 * bytes on the first line.
 */
#include <stdlib.h>
#include <string.h>

#include "out/buf.h"
#include "out/fmt.h"
#include "out/text.h"
#include "report.h"

static const char *source_phrase(const char *source)
{
	if (strcmp(source, "driver") == 0)
		return "from the driver";
	if (strcmp(source, "allocators") == 0)
		return "by the allocators' counters";
	return "(nothing measured)";
}

static void duration(struct gpr__buf *b, double s)
{
	if (s < 1.0)
		gpr__buf_printf(b, "%.1f ms", s * 1e3);
	else
		gpr__buf_printf(b, "%.2f s", s);
}

/* One cell: human bytes, or "-" when unknown. */
static void cell(struct gpr__buf *b, int known, int64_t v, int width)
{
	char h[32];
	gpr__buf_printf(b, "  %-*s", width,
			known ? gpr__fmt_sbytes(v, h, sizeof h) : "-");
}

static void gpus(struct gpr__buf *b, const gpr_report *r)
{
	if (!r->n_gpus)
		return;
	gpr__buf_printf(b, "\n%-4s  %-11s  %-11s  %-11s  %-11s  %-11s  %s\n",
			"GPU", "released", "before", "after", "in use", "free",
			"total");
	for (size_t i = 0; i < r->n_gpus; i++) {
		const struct gpr_report_gpu *g = &r->gpus[i];
		int mem = g->total > 0;
		if (g->name) /* a GPU CUDA does not see: its name */
			gpr__text_put(b, g->name, 4, 1);
		else
			gpr__buf_printf(b, "%-4d", g->device);
		cell(b, 1, g->released, 11);
		cell(b, g->known, (int64_t)g->before, 11);
		cell(b, g->known, (int64_t)g->after, 11);
		cell(b, mem, (int64_t)g->used, 11);
		cell(b, mem, (int64_t)g->free, 11);
		char h[32];
		gpr__buf_printf(b, "  %s\n",
				mem ? gpr__fmt_bytes(g->total, h, sizeof h)
				    : "-");
	}
}

static void releasers(struct gpr__buf *b, const gpr_report *r)
{
	if (!r->n_rel)
		return;
	int w = 8;
	for (size_t i = 0; i < r->n_rel; i++) {
		int n = gpr__text_len(r->rel[i].name);
		if (n > w)
			w = n > 40 ? 40 : n;
	}
	gpr__buf_printf(b, "\n%-*s  %-4s  %-13s  %-13s  %-13s  %-13s  %s\n", w,
			"releaser", "GPU", "live before", "cached before",
			"live after", "cached after", "status");
	for (size_t i = 0; i < r->n_rel; i++) {
		const struct gpr__rrow *x = &r->rel[i];
		/* names and notes come from releasers: terminal-safe */
		gpr__text_put(b, x->name, w, 1);
		if (x->device == GPR_DEVICE_ONCE)
			gpr__buf_printf(b, "  %-4s", "once");
		else
			gpr__buf_printf(b, "  %-4d", x->device);
		cell(b, x->before.known, (int64_t)x->before.live, 13);
		cell(b, x->before.known, (int64_t)x->before.cached, 13);
		cell(b, x->after.known, (int64_t)x->after.live, 13);
		cell(b, x->after.known, (int64_t)x->after.cached, 13);
		if (x->status)
			gpr__buf_printf(b, "  failed (%d)\n", x->status);
		else
			gpr__buf_puts(b, "  ok\n");
	}
}

char *gpr_report_text(const gpr_report *r)
{
	if (!r)
		return NULL;
	struct gpr__buf b = {0};
	char h[32];
	gpr__buf_printf(&b, "released %s (%lld bytes) %s in ",
			gpr__fmt_sbytes(r->bytes, h, sizeof h),
			(long long)r->bytes, source_phrase(r->source));
	duration(&b, r->seconds);
	if (r->collected) {
		gpr__buf_puts(&b, ", garbage collection ");
		duration(&b, r->collect_seconds);
	}
	gpr__buf_puts(&b, "\n");
	gpus(&b, r);
	releasers(&b, r);
	if (r->n_notes) {
		gpr__buf_puts(&b, "\nnotes:\n");
		for (size_t i = 0; i < r->n_notes; i++) {
			gpr__buf_puts(&b, "  - ");
			gpr__text_put(&b, r->notes[i], 0, 0);
			gpr__buf_puts(&b, "\n");
		}
	}
	return gpr__buf_finish(&b);
}
