/*
 * The report as an HTML fragment, for a notebook (gpureclaim.trace's
 * report in Jupyter): the text report in a <pre>, the SVG plot inline.
 * Both come from the reader's renderers, so the three forms agree.
 */
#include "log_report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpureclaim.h"
#include "log_export.h"

/* s, escaped for HTML text (the report's text is already terminal-safe). */
static void html_text(struct gpr__buf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '&')
			gpr__buf_puts(b, "&amp;");
		else if (c == '<')
			gpr__buf_puts(b, "&lt;");
		else if (c == '>')
			gpr__buf_puts(b, "&gt;");
		else
			gpr__buf_putn(b, &s[i], 1);
	}
}

int gpr_trace_report_html(struct gpr__buf *b, const char *path,
			  const struct gpr_trace *t,
			  const struct gpr_trace_stats *s, int top)
{
	struct gpr__buf text = {0};
	gpr_trace_report_text(&text, path, t, s, top, 0);
	if (text.oom) {
		gpr__buf_free(&text);
		return GPR_E_NOMEM;
	}
	char *svg = NULL;
	size_t svg_len = 0;
	FILE *f = open_memstream(&svg, &svg_len);
	int rc = f ? gpr_trace_export_svg(t, s, f) : GPR_E_NOMEM;
	if (f && fclose(f) != 0 && rc == 0)
		rc = GPR_E_NOMEM;
	if (rc == 0) {
		gpr__buf_puts(b, "<div class=\"gpureclaim-trace\">\n<pre>");
		html_text(b, text.data, text.len);
		gpr__buf_puts(b, "</pre>\n");
		/* the plot without its XML declaration, inline */
		const char *start = svg ? strstr(svg, "<svg") : NULL;
		if (start)
			gpr__buf_puts(b, start);
		gpr__buf_puts(b, "</div>\n");
		if (b->oom)
			rc = GPR_E_NOMEM;
	}
	free(svg);
	gpr__buf_free(&text);
	return rc;
}
