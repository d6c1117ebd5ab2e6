/* The HTML building blocks of html.h. */
#include "html.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "text.h"

void gpr__html_esc(struct gpr__buf *b, const char *s)
{
	if (!s)
		return;
	while (*s) {
		uint32_t cp = 0;
		size_t n = gpr__utf8_len(s, &cp);
		if (n == 0) { /* not UTF-8: one byte shown as '?' */
			gpr__buf_putn(b, "?", 1);
			s++;
			continue;
		}
		if (gpr__text_unsafe(cp))
			gpr__buf_putn(b, "?", 1);
		else if (cp == '&')
			gpr__buf_puts(b, "&amp;");
		else if (cp == '<')
			gpr__buf_puts(b, "&lt;");
		else if (cp == '>')
			gpr__buf_puts(b, "&gt;");
		else if (cp == '"')
			gpr__buf_puts(b, "&quot;");
		else if (cp == '\'')
			gpr__buf_puts(b, "&#39;");
		else
			gpr__buf_putn(b, s, n);
		s += n;
	}
}

/* Every rule under .gpr, so a view styles nothing else of the page; the
 * table rules are specific enough to win over a notebook's own. */
static const char STYLE[] =
    "<style>"
    ".gpr{font:13px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,"
    "'Helvetica Neue',Arial,sans-serif;max-width:900px;margin:4px 0}"
    ".gpr .gpr-t{font-weight:600;font-size:14px;margin:0 0 4px}"
    ".gpr h4{font-size:13px;font-weight:600;margin:14px 0 4px}"
    ".gpr p{margin:2px 0 6px}"
    ".gpr p.gpr-w{color:#c62828;font-weight:600}"
    ".gpr table.gpr-tab{border-collapse:collapse;margin:4px 0 10px;"
    "font-variant-numeric:tabular-nums;font-size:12.5px}"
    ".gpr table.gpr-tab caption{caption-side:top;text-align:left;"
    "font-weight:600;padding:2px 0 3px}"
    ".gpr .gpr-scroll{overflow-x:auto;max-width:100%}"
    ".gpr table.gpr-tab th,.gpr table.gpr-tab td{padding:3px 12px 3px 0;"
    "text-align:left;vertical-align:top;border:none;background:none;"
    "white-space:nowrap;border-bottom:1px solid rgba(127,127,127,.25)}"
    ".gpr table.gpr-tab th{font-weight:600;white-space:normal;"
    "vertical-align:bottom;border-bottom:1px solid rgba(127,127,127,.7)}"
    ".gpr table.gpr-tab th.r,.gpr table.gpr-tab td.r{text-align:right}"
    ".gpr table.gpr-tab td.w{white-space:normal;min-width:14em}"
    ".gpr table.gpr-tab tr.gpr-hs td{border-bottom:none}"
    ".gpr table.gpr-tab tr.gpr-sub td{padding:0 12px 4px 18px;"
    "font-size:11.5px;opacity:.8;white-space:normal}"
    ".gpr svg{max-width:100%;height:auto}"
    ".gpr .gpr-sw{display:inline-block;width:10px;height:10px;"
    "border-radius:2px;margin-right:5px;vertical-align:-1px}"
    ".gpr .gpr-nw{white-space:nowrap}"
    ".gpr .gpr-cap{margin:8px 0 3px}"
    ".gpr .gpr-bar{display:flex;width:100%;height:24px;border-radius:3px;"
    "overflow:hidden;background:rgba(127,127,127,.15)}"
    ".gpr .gpr-seg{flex:none;height:100%;box-sizing:border-box;"
    "overflow:hidden;white-space:nowrap;font-size:11px;line-height:24px;"
    "padding:0 4px;border-right:1px solid rgba(255,255,255,.8)}"
    ".gpr .gpr-seg:last-child{border-right:none}"
    ".gpr .gpr-out{position:relative;width:100%}"
    ".gpr .gpr-ol{position:absolute;top:0;font-size:11px;line-height:14px;"
    "white-space:nowrap;display:flex;align-items:flex-end;"
    "box-sizing:border-box}"
    ".gpr .gpr-ol.l{border-left:1px solid;padding-left:4px}"
    ".gpr .gpr-ol.rt{border-right:1px solid;padding-right:4px}"
    ".gpr .gpr-leg{display:flex;flex-wrap:wrap;gap:2px 16px;"
    "margin:5px 0 8px;font-size:12px}"
    ".gpr .gpr-leg .v{opacity:.8;font-variant-numeric:tabular-nums}"
    ".gpr ul.gpr-notes{margin:4px 0;padding-left:18px;font-size:12px}"
    "</style>";

void gpr__html_view_begin(struct gpr__buf *b, const char *title)
{
	gpr__buf_puts(b, "<div class=\"gpr\">");
	gpr__buf_puts(b, STYLE);
	if (title) {
		gpr__buf_puts(b, "<div class=\"gpr-t\">");
		gpr__html_esc(b, title);
		gpr__buf_puts(b, "</div>");
	}
}

void gpr__html_view_end(struct gpr__buf *b)
{
	gpr__buf_puts(b, "</div>\n");
}

void gpr__html_document_begin(struct gpr__buf *b, const char *title,
			      const char *generator)
{
	gpr__buf_puts(b, "<!DOCTYPE html>\n<!-- ");
	gpr__buf_puts(b, generator); /* a constant of ours, not outside text */
	gpr__buf_puts(b, " -->\n<html lang=\"en\"><head>"
			 "<meta charset=\"utf-8\"><title>");
	gpr__html_esc(b, title);
	gpr__buf_puts(b, "</title></head><body>\n");
	gpr__html_view_begin(b, title);
}

void gpr__html_document_end(struct gpr__buf *b)
{
	gpr__html_view_end(b);
	gpr__buf_puts(b, "</body></html>\n");
}

void gpr__html_heading(struct gpr__buf *b, const char *text)
{
	gpr__buf_puts(b, "<h4>");
	gpr__html_esc(b, text);
	gpr__buf_puts(b, "</h4>");
}

void gpr__html_p(struct gpr__buf *b, const char *text, int warn)
{
	gpr__buf_puts(b, warn ? "<p class=\"gpr-w\">" : "<p>");
	gpr__html_esc(b, text);
	gpr__buf_puts(b, "</p>");
}

/* The class of a column's cells: figures right, sentences wrapped. */
static const char *cell_class(enum gpr__col_kind kind)
{
	if (kind == GPR__COL_NUM || kind == GPR__COL_BYTES)
		return " class=\"r\"";
	return kind == GPR__COL_PROSE ? " class=\"w\"" : "";
}

static void swatch(struct gpr__buf *b, const char *colour)
{
	gpr__buf_puts(b, "<span class=\"gpr-sw\" style=\"background:");
	gpr__html_esc(b, colour);
	gpr__buf_puts(b, "\"></span>");
}

void gpr__html_table(struct gpr__buf *b, const char *caption,
		     const struct gpr__table *t)
{
	if (t->oom) {
		b->oom = 1;
		return;
	}
	size_t rows = gpr__table_rows(t);
	if (!rows)
		return;
	gpr__buf_puts(b, "<div class=\"gpr-scroll\"><table class=\"gpr-tab\">");
	if (caption) {
		gpr__buf_puts(b, "<caption>");
		gpr__html_esc(b, caption);
		gpr__buf_puts(b, "</caption>");
	}
	gpr__buf_puts(b, "<thead><tr>");
	for (size_t c = 0; c < t->n_cols; c++) {
		gpr__buf_printf(b, "<th%s>", cell_class(t->cols[c].kind));
		gpr__html_esc(b, t->cols[c].head);
		gpr__buf_puts(b, "</th>");
	}
	gpr__buf_puts(b, "</tr></thead><tbody>");
	for (size_t r = 0; r < rows; r++) {
		const char *sub = t->sub && r < t->cap_sub ? t->sub[r] : NULL;
		gpr__buf_puts(b, sub ? "<tr class=\"gpr-hs\">" : "<tr>");
		for (size_t c = 0; c < t->n_cols; c++) {
			size_t i = r * t->n_cols + c;
			const struct gpr__cell *x =
			    i < t->n_cells ? &t->cells[i] : NULL;
			gpr__buf_printf(b, "<td%s",
					cell_class(t->cols[c].kind));
			if (x && x->title) {
				gpr__buf_puts(b, " title=\"");
				gpr__html_esc(b, x->title);
				gpr__buf_puts(b, "\"");
			}
			gpr__buf_puts(b, ">");
			if (x && x->swatch) {
				gpr__buf_puts(b, "<span class=\"gpr-nw\">");
				swatch(b, x->swatch);
			}
			if (x)
				gpr__html_esc(b, x->text);
			if (x && x->swatch)
				gpr__buf_puts(b, "</span>");
			gpr__buf_puts(b, "</td>");
		}
		gpr__buf_puts(b, "</tr>");
		if (sub) {
			gpr__buf_printf(
			    b, "<tr class=\"gpr-sub\"><td colspan=\"%zu\">",
			    t->n_cols);
			for (const char *s = sub; s;) {
				const char *nl = strchr(s, '\n');
				size_t len = nl ? (size_t)(nl - s) : strlen(s);
				char *line = strndup(s, len);
				if (!line) {
					b->oom = 1;
					return;
				}
				gpr__html_esc(b, line);
				free(line);
				if (nl)
					gpr__buf_puts(b, "<br>");
				s = nl ? nl + 1 : NULL;
			}
			gpr__buf_puts(b, "</td></tr>");
		}
	}
	gpr__buf_puts(b, "</tbody></table></div>");
}

void gpr__html_notes(struct gpr__buf *b, const char *const *notes, size_t n)
{
	if (!n)
		return;
	gpr__buf_puts(b, "<ul class=\"gpr-notes\">");
	for (size_t i = 0; i < n; i++) {
		gpr__buf_puts(b, "<li>");
		gpr__html_esc(b, notes[i]);
		gpr__buf_puts(b, "</li>");
	}
	gpr__buf_puts(b, "</ul>");
}

const char *gpr__html_palette(size_t i)
{
	static const char *const tableau10[] = {
	    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
	    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
	return tableau10[i % (sizeof tableau10 / sizeof tableau10[0])];
}

/* ---------------------------------------------------------------- bar */

/* The bar's layout is computed for this width in pixels (a notebook
 * cell's); the page scales it, and labels are sized in pixels. */
#define BAR_PX 880.0
#define MIN_SEG_PX 4.0
#define CHAR_PX 6.3 /* an 11 px sans-serif character, on average */
#define ROW_PX 15
#define MAX_ROWS 8

/* Dark text on a light colour, white on a dark one. */
static const char *ink(const char *colour)
{
	unsigned r, g, bl;
	if (!colour || sscanf(colour, "#%2x%2x%2x", &r, &g, &bl) != 3)
		return "#fff";
	return 0.299 * r + 0.587 * g + 0.114 * bl > 150 ? "#111" : "#fff";
}

/* The colours of what memory is to its process, the same in every view. */
static const struct {
	const char *role, *colour;
} ROLES[] = {
    {"@mine", "#4e79a7"},     /* held by this process (or these workers) */
    {"@others", "#9c755f"},   /* held by other processes */
    {"@returned", "#59a14f"}, /* released by this call */
    {"@free", "#c8d0d8"},     /* free before it */
    {"@unlisted", "#bab0ac"}, /* in use, no process listed */
};

/* A colour safe inside style="": a role above, or "#" and six hex digits;
 * else the palette's. */
static const char *colour_of(const struct gpr__html_part *p, size_t i)
{
	const char *c = p->colour;
	for (size_t r = 0; c && r < sizeof ROLES / sizeof ROLES[0]; r++)
		if (strcmp(c, ROLES[r].role) == 0)
			return ROLES[r].colour;
	if (!c || c[0] != '#' || strlen(c) != 7 ||
	    strspn(c + 1, "0123456789abcdefABCDEF") != 6)
		return gpr__html_palette(i);
	return c;
}

static void share(char *out, size_t len, uint64_t part, uint64_t total)
{
	gpr__fmt_percent(total ? 100.0 * (double)part / (double)total : 0.0,
			 out, len);
}

/* label: 1.0 GiB (1073741824 bytes, 33.3%) */
static void part_title(struct gpr__buf *b, const struct gpr__html_part *p,
		       uint64_t total)
{
	char h[32], s[16];
	gpr__html_esc(b, p->label);
	gpr__buf_printf(b, ": %s (%" PRIu64 " bytes, ",
			gpr__fmt_bytes(p->bytes, h, sizeof h), p->bytes);
	share(s, sizeof s, p->bytes, total);
	gpr__html_esc(b, s);
	gpr__buf_puts(b, ")");
}

struct seg {
	double px, x;  /* width and left edge, in pixels of BAR_PX */
	int fixed;     /* at the minimum width */
	int inside;    /* 2: label and value inside, 1: value, 0: outside */
	int row;       /* outside: its row below the bar */
	int right;     /* outside: text to the left of its line */
	int placed;    /* outside: its row is chosen */
	double x0, x1; /* outside: the label's extent */
};

static double text_px(const char *label, const char *value)
{
	return ((double)gpr__text_len(label) + 1 + (double)strlen(value)) *
		   CHAR_PX +
	       10;
}

/* Widths: proportional, but each at least MIN_SEG_PX (the parts below
 * it are fixed there, and the others share what is left). */
static void widths(const struct gpr__html_part *p, size_t n, uint64_t total,
		   struct seg *s)
{
	double n_fixed = 0, fixed_bytes = 0;
	for (int changed = 1; changed;) {
		changed = 0;
		double avail = BAR_PX - n_fixed * MIN_SEG_PX;
		double rest = (double)total - fixed_bytes;
		for (size_t i = 0; i < n; i++) {
			if (s[i].fixed || rest <= 0)
				continue;
			if (avail * (double)p[i].bytes / rest < MIN_SEG_PX) {
				s[i].fixed = 1;
				n_fixed++;
				fixed_bytes += (double)p[i].bytes;
				changed = 1;
			}
		}
	}
	double avail = BAR_PX - n_fixed * MIN_SEG_PX;
	double rest = (double)total - fixed_bytes, x = 0;
	for (size_t i = 0; i < n; i++) {
		s[i].px = s[i].fixed || rest <= 0
			      ? MIN_SEG_PX
			      : avail * (double)p[i].bytes / rest;
		s[i].x = x;
		x += s[i].px;
	}
}

/* Whether label i in row r would cross a label placed before it: their
 * texts in one row, or a line through a text of a row it passes. */
static int clash(const struct seg *s, size_t n, size_t i, int r)
{
	double line = s[i].right ? s[i].x1 : s[i].x0;
	for (size_t j = 0; j < n; j++) {
		if (j == i || s[j].inside || !s[j].placed)
			continue;
		double lj = s[j].right ? s[j].x1 : s[j].x0;
		if (s[j].row == r && s[i].x0 < s[j].x1 + 6 &&
		    s[j].x0 < s[i].x1 + 6)
			return 1;
		if (s[j].row < r && line >= s[j].x0 - 3 && line <= s[j].x1 + 3)
			return 1;
		if (s[j].row > r && lj >= s[i].x0 - 3 && lj <= s[i].x1 + 3)
			return 1;
	}
	return 0;
}

/*
 * Rows below the bar for the labels that do not fit inside: each in the
 * first row where it crosses no other. Labels with their text to the right
 * of their line are placed from the right (so the one further left goes
 * below, its line passing left of the text above), those near the right
 * edge, text to the left, from the left.
 */
static int place(const struct gpr__html_part *p, size_t n, struct seg *s)
{
	int rows = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i].inside)
			continue;
		char h[32];
		double w = text_px(p[i].label,
				   gpr__fmt_bytes(p[i].bytes, h, sizeof h));
		double line = s[i].x + s[i].px / 2;
		s[i].right = line + w > BAR_PX;
		s[i].x0 = s[i].right ? line - w : line;
		s[i].x1 = s[i].right ? line : line + w;
	}
	for (int pass = 0; pass < 2; pass++)
		for (size_t k = 0; k < n; k++) {
			size_t i = pass ? k : n - 1 - k;
			if (s[i].inside || s[i].right != pass)
				continue;
			int r = 0;
			while (r < MAX_ROWS - 1 && clash(s, n, i, r))
				r++;
			s[i].row = r;
			s[i].placed = 1;
			if (r + 1 > rows)
				rows = r + 1;
		}
	return rows;
}

void gpr__html_bar(struct gpr__buf *b, const char *caption,
		   const struct gpr__html_part *all, size_t n_all)
{
	/* the parts shown: those with bytes */
	struct gpr__html_part *p = calloc(n_all ? n_all : 1, sizeof *p);
	struct seg *s = calloc(n_all ? n_all : 1, sizeof *s);
	size_t *at = calloc(n_all ? n_all : 1, sizeof *at);
	if (!p || !s || !at) {
		free(p);
		free(s);
		free(at);
		b->oom = 1;
		return;
	}
	size_t n = 0;
	uint64_t total = 0;
	for (size_t i = 0; i < n_all; i++)
		if (all[i].bytes) {
			at[n] = i;
			p[n++] = all[i];
			/* a total past 2^64 (hostile figures) stops there */
			total = total + all[i].bytes < total
				    ? UINT64_MAX
				    : total + all[i].bytes;
		}
	if (caption) {
		gpr__buf_puts(b, "<div class=\"gpr-cap\">");
		gpr__html_esc(b, caption);
		gpr__buf_puts(b, "</div>");
	}
	if (!n) {
		free(p);
		free(s);
		free(at);
		return;
	}
	widths(p, n, total, s);
	for (size_t i = 0; i < n; i++) {
		char h[32];
		const char *v = gpr__fmt_bytes(p[i].bytes, h, sizeof h);
		s[i].inside = text_px(p[i].label, v) <= s[i].px	    ? 2
			      : text_px("", v) - CHAR_PX <= s[i].px ? 1
								    : 0;
	}
	int rows = place(p, n, s);

	gpr__buf_puts(b, "<div class=\"gpr-bar\">");
	for (size_t i = 0; i < n; i++) {
		const char *c = colour_of(&p[i], at[i]);
		char h[32];
		gpr__buf_printf(b,
				"<div class=\"gpr-seg\" style=\"width:%.3f%%;"
				"background:%s;color:%s\" title=\"",
				100.0 * s[i].px / BAR_PX, c, ink(c));
		part_title(b, &p[i], total);
		gpr__buf_puts(b, "\">");
		if (s[i].inside == 2) {
			gpr__html_esc(b, p[i].label);
			gpr__buf_puts(b, " ");
		}
		if (s[i].inside)
			gpr__html_esc(b,
				      gpr__fmt_bytes(p[i].bytes, h, sizeof h));
		gpr__buf_puts(b, "</div>");
	}
	gpr__buf_puts(b, "</div>");

	if (rows) {
		gpr__buf_printf(b,
				"<div class=\"gpr-out\" style=\"height:%dpx\">",
				rows * ROW_PX + 4);
		for (size_t i = 0; i < n; i++) {
			if (s[i].inside)
				continue;
			const char *c = colour_of(&p[i], at[i]);
			double line = 100.0 * (s[i].x + s[i].px / 2) / BAR_PX;
			char h[32];
			if (s[i].right)
				gpr__buf_printf(b,
						"<div class=\"gpr-ol rt\" "
						"style=\"right:%.3f%%;",
						100.0 - line);
			else
				gpr__buf_printf(b,
						"<div class=\"gpr-ol l\" "
						"style=\"left:%.3f%%;",
						line);
			gpr__buf_printf(
			    b, "height:%dpx;border-color:%s\" title=\"",
			    (s[i].row + 1) * ROW_PX + 2, c);
			part_title(b, &p[i], total);
			gpr__buf_puts(b, "\">");
			gpr__html_esc(b, p[i].label);
			gpr__buf_puts(b, " ");
			gpr__html_esc(b,
				      gpr__fmt_bytes(p[i].bytes, h, sizeof h));
			gpr__buf_puts(b, "</div>");
		}
		gpr__buf_puts(b, "</div>");
	}

	gpr__buf_puts(b, "<div class=\"gpr-leg\">");
	for (size_t i = 0; i < n; i++) {
		char h[32], sh[16];
		gpr__buf_puts(b, "<span title=\"");
		part_title(b, &p[i], total);
		gpr__buf_puts(b, "\">");
		swatch(b, colour_of(&p[i], at[i]));
		gpr__html_esc(b, p[i].label);
		share(sh, sizeof sh, p[i].bytes, total);
		gpr__buf_printf(b, " <span class=\"v\">%s &middot; ",
				gpr__fmt_bytes(p[i].bytes, h, sizeof h));
		gpr__html_esc(b, sh);
		gpr__buf_puts(b, "</span></span>");
	}
	gpr__buf_puts(b, "</div>");
	free(p);
	free(s);
	free(at);
}
