/*
 * The output toolkit's HTML: the one escaping rule and the building blocks
 * of every notebook view (Release, explain(), the trace report, the
 * cluster reports), so they look alike and are checked alike.
 *
 * A view is self-contained: its style travels with it (one <style> block,
 * every rule under the class "gpr"), it loads nothing (no script, no
 * link, no image from elsewhere) and needs no JavaScript; hover titles
 * carry the exact figures. Jupyter shows it as it is (_repr_html_); a file
 * (`gpureclaim report --html`) wraps it in a document.
 *
 *	gpr__html_view_begin(b, "gpureclaim release");
 *	gpr__html_p(b, "released 1.0 GiB ...", 0);
 *	gpr__html_heading(b, "GPU 0");
 *	gpr__html_bar(b, "this process on GPU 0", parts, n);
 *	gpr__html_table(b, "per releaser", &table);	(table.h)
 *	gpr__html_notes(b, notes, n_notes);
 *	gpr__html_view_end(b);
 *
 * Text from outside (names, notes, a hostile trace log) goes through
 * gpr__html_esc: markup characters become entities, and what text.h shows
 * as '?' on a terminal (controls, bidirectional overrides, bytes that are
 * not UTF-8) is shown as '?' here too.
 */
#ifndef GPR_OUT_HTML_H
#define GPR_OUT_HTML_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "table.h"

/* s escaped for HTML text and attribute values (NULL: nothing). */
void gpr__html_esc(struct gpr__buf *b, const char *s);

/*
 * A view: <div class="gpr"> with the style, and its title in bold. The
 * document form adds <!DOCTYPE html>, a comment naming the program that
 * wrote it (`generator`, so a later run can tell its own file), <html>, a
 * <head> with charset and title; close with the matching _end.
 */
void gpr__html_view_begin(struct gpr__buf *b, const char *title);
void gpr__html_view_end(struct gpr__buf *b);
void gpr__html_document_begin(struct gpr__buf *b, const char *title,
			      const char *generator);
void gpr__html_document_end(struct gpr__buf *b);

/* A heading inside a view, and a paragraph (warn: shown as a warning). */
void gpr__html_heading(struct gpr__buf *b, const char *text);
void gpr__html_p(struct gpr__buf *b, const char *text, int warn);

/* The table of table.h, with an optional caption (NULL: none). */
void gpr__html_table(struct gpr__buf *b, const char *caption,
		     const struct gpr__table *t);

/* The notes of a report, one item each (nothing when n is 0). */
void gpr__html_notes(struct gpr__buf *b, const char *const *notes, size_t n);

/*
 * One part of a stacked bar: its label ("live (torch)"), its bytes and its
 * colour ("#4c78a8"; NULL: the palette's colour for its place). Parts of
 * 0 bytes are left out; a bar shows what adds up, so a caller leaves out
 * a negative figure and says so in a paragraph.
 */
struct gpr__html_part {
	const char *label;
	uint64_t bytes;
	const char *colour;
};

/*
 * A stacked bar of the parts, in their order, and its legend. Each part
 * is as wide as its share, but at least a few pixels, so a small part
 * stays visible; its label and value are written inside it when they fit,
 * else below the bar with a line up to it; the legend lists every part
 * with its value and share. Every segment and legend entry carries the
 * part's exact bytes in its title. The caption (may be NULL) stands above
 * the bar, with the total.
 */
void gpr__html_bar(struct gpr__buf *b, const char *caption,
		   const struct gpr__html_part *parts, size_t n);

/* The palette's colour i (distinguishable for people with the common
 * colour-vision deficiencies: Tableau 10), cycling. */
const char *gpr__html_palette(size_t i);

#endif /* GPR_OUT_HTML_H */
