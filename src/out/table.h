/*
 * The output toolkit's table: cells written once, shown as aligned text
 * (a terminal, a repr) or as an HTML table (html.h), so the two views of
 * one report never disagree. Prose columns are left-aligned, figures
 * right-aligned; a byte cell shows the toolkit's binary units (fmt.h) and
 * keeps the exact count for HTML's title. Cells are copied.
 *
 *	static const struct gpr__col cols[] = {
 *	    {"GPU", GPR__COL_TEXT}, {"released", GPR__COL_BYTES}};
 *	struct gpr__table t;
 *	gpr__table_init(&t, cols, 2);
 *	gpr__table_cell(&t, "0");
 *	gpr__table_bytes(&t, 1, 1073741824);	-> "1.0 GiB"
 *	gpr__table_text(b, &t, 2);		(or gpr__html_table)
 *	gpr__table_free(&t);
 *
 * Out of memory marks the table failed (oom): rendering it then marks the
 * output buffer failed too, so no half table is ever shown.
 */
#ifndef GPR_OUT_TABLE_H
#define GPR_OUT_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

enum gpr__col_kind {
	GPR__COL_TEXT = 0,  /* a name: left-aligned, kept on one line */
	GPR__COL_NUM = 1,   /* a figure given as text: right-aligned */
	GPR__COL_BYTES = 2, /* bytes: right-aligned, exact count kept */
	GPR__COL_PROSE = 3  /* sentences: left-aligned, wrapped in HTML */
};

struct gpr__col {
	const char *head;
	enum gpr__col_kind kind;
};

struct gpr__cell {
	char *text;
	char *title;	    /* HTML hover text, or NULL */
	const char *swatch; /* a colour shown before the text in HTML */
};

struct gpr__table {
	const struct gpr__col *cols; /* borrowed; live as long as the table */
	size_t n_cols;
	struct gpr__cell *cells; /* row-major */
	size_t n_cells, cap;
	char **sub; /* per row: lines under it (joined by '\n'), or NULL */
	size_t cap_sub;
	int oom;
};

void gpr__table_init(struct gpr__table *t, const struct gpr__col *cols,
		     size_t n_cols);
void gpr__table_free(struct gpr__table *t);

/* Rows so far (a row counts once its first cell is written). */
size_t gpr__table_rows(const struct gpr__table *t);

/* The next cell: text (NULL: "-"), printf-formatted, or bytes (known 0:
 * "-"; the exact count becomes its title). */
void gpr__table_cell(struct gpr__table *t, const char *text);
void gpr__table_cellf(struct gpr__table *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void gpr__table_bytes(struct gpr__table *t, int known, uint64_t bytes);
void gpr__table_sbytes(struct gpr__table *t, int known, int64_t bytes);

/* Decorations of the last cell written: its hover text, its swatch. */
void gpr__table_title(struct gpr__table *t, const char *title);
void gpr__table_swatch(struct gpr__table *t, const char *colour);

/* A line under the current row (indented in text, a row of its own in
 * HTML): how a figure was found, what pins it. */
void gpr__table_sub(struct gpr__table *t, const char *line);

/*
 * Appends the table as text (at most 64 columns shown): a header line and
 * one line per row, each
 * indented by `indent` spaces, columns two spaces apart, every cell by the
 * terminal-safe rule of text.h (cells wider than 60 characters are cut,
 * but the last column's). Nothing when the table has no row.
 */
void gpr__table_text(struct gpr__buf *b, const struct gpr__table *t,
		     int indent);

#endif /* GPR_OUT_TABLE_H */
