/*
 * The report as text: the headline (the exact total in bytes with it),
 * the table of visited GPUs, the table of releasers, the notes; built from
 * the parts report_view.c shares with the HTML form. Names and notes come
 * from releasers: shown by the terminal-safe rule (src/out/text.h).
 */
#include "out/buf.h"
#include "out/table.h"
#include "out/text.h"
#include "report.h"

char *gpr_report_text(const gpr_report *r)
{
	if (!r)
		return NULL;
	struct gpr__buf b = {0};
	struct gpr__table t;
	gpr__report_headline(&b, r);
	gpr__buf_puts(&b, "\n");
	gpr__report_gpu_table(r, &t);
	if (gpr__table_rows(&t))
		gpr__buf_puts(&b, "\n");
	gpr__table_text(&b, &t, 0);
	gpr__table_free(&t);
	size_t hidden = gpr__report_releaser_table(r, &t);
	if (gpr__table_rows(&t) || hidden)
		gpr__buf_puts(&b, "\n");
	gpr__table_text(&b, &t, 0);
	gpr__table_free(&t);
	if (hidden) {
		gpr__report_hidden_line(&b, hidden);
		gpr__buf_puts(&b, "\n");
	}
	gpr__text_notes(&b, (const char *const *)r->notes, r->n_notes);
	return gpr__buf_finish(&b);
}
