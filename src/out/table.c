/* The table of table.h: cells kept, then laid out as text. */
#include "table.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "text.h"

/* Widest a cell is shown in text, but in the last column. */
#define MAX_TEXT_CELL 60

void gpr__table_init(struct gpr__table *t, const struct gpr__col *cols,
		     size_t n_cols)
{
	memset(t, 0, sizeof *t);
	t->cols = cols;
	t->n_cols = n_cols;
}

void gpr__table_free(struct gpr__table *t)
{
	for (size_t i = 0; i < t->n_cells; i++) {
		free(t->cells[i].text);
		free(t->cells[i].title);
	}
	size_t rows = gpr__table_rows(t);
	for (size_t i = 0; t->sub && i < rows && i < t->cap_sub; i++)
		free(t->sub[i]);
	free(t->cells);
	free(t->sub);
	memset(t, 0, sizeof *t);
}

size_t gpr__table_rows(const struct gpr__table *t)
{
	return t->n_cols ? (t->n_cells + t->n_cols - 1) / t->n_cols : 0;
}

/* Takes s (malloc'ed, may be NULL after a failed allocation). */
static void push(struct gpr__table *t, char *s)
{
	if (!s || t->oom) {
		free(s);
		t->oom = 1;
		return;
	}
	if (t->n_cells == t->cap) {
		size_t c = t->cap ? t->cap * 2 : 16;
		struct gpr__cell *p = realloc(t->cells, c * sizeof *p);
		if (!p) {
			free(s);
			t->oom = 1;
			return;
		}
		t->cells = p;
		t->cap = c;
	}
	t->cells[t->n_cells++] = (struct gpr__cell){.text = s};
}

void gpr__table_cell(struct gpr__table *t, const char *text)
{
	push(t, strdup(text ? text : "-"));
}

void gpr__table_cellf(struct gpr__table *t, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	push(t, s);
}

/* A byte cell: the figure for people, the exact count as its title. */
static void bytes_cell(struct gpr__table *t, int known, int neg,
		       uint64_t magnitude)
{
	char h[32], x[48];
	if (!known) {
		gpr__table_cell(t, "-");
		return;
	}
	gpr__fmt_bytes(magnitude, neg ? h + 1 : h, sizeof h - 1);
	if (neg)
		h[0] = '-';
	gpr__table_cell(t, h);
	snprintf(x, sizeof x, "%s%" PRIu64 " bytes", neg ? "-" : "", magnitude);
	gpr__table_title(t, x);
}

void gpr__table_bytes(struct gpr__table *t, int known, uint64_t bytes)
{
	bytes_cell(t, known, 0, bytes);
}

void gpr__table_sbytes(struct gpr__table *t, int known, int64_t bytes)
{
	bytes_cell(t, known, bytes < 0,
		   bytes < 0 ? -(uint64_t)bytes : (uint64_t)bytes);
}

void gpr__table_title(struct gpr__table *t, const char *title)
{
	if (t->oom || !t->n_cells)
		return;
	struct gpr__cell *c = &t->cells[t->n_cells - 1];
	free(c->title);
	c->title = strdup(title);
	if (!c->title)
		t->oom = 1;
}

void gpr__table_swatch(struct gpr__table *t, const char *colour)
{
	if (!t->oom && t->n_cells)
		t->cells[t->n_cells - 1].swatch = colour;
}

void gpr__table_sub(struct gpr__table *t, const char *line)
{
	size_t rows = gpr__table_rows(t);
	if (t->oom || !rows)
		return;
	if (rows > t->cap_sub) {
		size_t c = rows * 2;
		char **p = realloc(t->sub, c * sizeof *p);
		if (!p) {
			t->oom = 1;
			return;
		}
		memset(p + t->cap_sub, 0, (c - t->cap_sub) * sizeof *p);
		t->sub = p;
		t->cap_sub = c;
	}
	char **s = &t->sub[rows - 1];
	char *joined = NULL;
	if (asprintf(&joined, "%s%s%s", *s ? *s : "", *s ? "\n" : "", line) <
	    0) {
		t->oom = 1;
		return;
	}
	free(*s);
	*s = joined;
}

static int shown_width(const struct gpr__table *t, size_t col, const char *s)
{
	int n = gpr__text_len(s);
	return col + 1 < t->n_cols && n > MAX_TEXT_CELL ? MAX_TEXT_CELL : n;
}

static void put_cell(struct gpr__buf *b, const struct gpr__table *t, size_t col,
		     const char *s, int width)
{
	int last = col + 1 == t->n_cols;
	int n = shown_width(t, col, s);
	if (col)
		gpr__buf_puts(b, "  ");
	int left = t->cols[col].kind == GPR__COL_TEXT ||
		   t->cols[col].kind == GPR__COL_PROSE;
	if (!left)
		gpr__buf_printf(b, "%*s", width - n, "");
	gpr__text_put(b, s, last ? 0 : MAX_TEXT_CELL, 0);
	if (left && !last)
		gpr__buf_printf(b, "%*s", width - n, "");
}

/* Ends the line without the spaces a left-aligned last cell left. */
static void end_line(struct gpr__buf *b)
{
	while (b->len && b->data[b->len - 1] == ' ')
		b->len--;
	gpr__buf_puts(b, "\n");
}

void gpr__table_text(struct gpr__buf *b, const struct gpr__table *t, int indent)
{
	if (t->oom) {
		b->oom = 1;
		return;
	}
	size_t rows = gpr__table_rows(t);
	if (!rows)
		return;
	int w[64] = {0};
	size_t nc = t->n_cols < 64 ? t->n_cols : 64;
	for (size_t c = 0; c < nc; c++)
		w[c] = shown_width(t, c, t->cols[c].head);
	for (size_t i = 0; i < t->n_cells; i++) {
		size_t c = i % t->n_cols;
		int n = c < nc ? shown_width(t, c, t->cells[i].text) : 0;
		if (c < nc && n > w[c])
			w[c] = n;
	}
	gpr__buf_printf(b, "%*s", indent, "");
	for (size_t c = 0; c < nc; c++)
		put_cell(b, t, c, t->cols[c].head, w[c]);
	end_line(b);
	for (size_t r = 0; r < rows; r++) {
		gpr__buf_printf(b, "%*s", indent, "");
		for (size_t c = 0; c < nc; c++) {
			size_t i = r * t->n_cols + c;
			put_cell(b, t, c,
				 i < t->n_cells ? t->cells[i].text : "", w[c]);
		}
		end_line(b);
		const char *sub = r < t->cap_sub && t->sub ? t->sub[r] : NULL;
		while (sub && *sub) {
			const char *nl = strchr(sub, '\n');
			size_t len = nl ? (size_t)(nl - sub) : strlen(sub);
			char line[1024];
			snprintf(line, sizeof line, "%.*s", (int)len, sub);
			gpr__buf_printf(b, "%*s", indent + 4, "");
			gpr__text_put(b, line, 0, 0);
			gpr__buf_puts(b, "\n");
			sub = nl ? nl + 1 : NULL;
		}
	}
}
