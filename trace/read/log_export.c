/*
 * The SVG plot of a trace (the Chrome timeline is log_chrome.c). It walks
 * the memory replay of log_stats.c, so the plot, the timeline and the
 * report agree on who held what.
 */
#include "log_export.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gpureclaim.h"
#include "log_stats.h"
#include "out/buf.h"
#include "out/fmt.h"
#include "out/html.h"
#include "out/json.h"
#include "u64map.h"

/* ---------------- SVG plot ---------------- */

#define W 960
#define H 480
#define PL 90 /* plot area: left, top, width, height */
#define PT 40
#define PW 640
#define PH 380
#define MAX_SERIES 7 /* total + 6 libraries; the rest in "other" */

struct plot {
	const struct gpr_trace *t;
	uint64_t span; /* ns since tracing began at the right end of the axis */
	/* series 0 = total, 1..k = libraries, k+1 = other */
	uint32_t lib[MAX_SERIES + 1];
	size_t pal[MAX_SERIES + 1]; /* a library's place in the stats: its
				       colour, as in the HTML report's bars */
	int n_series;
	int64_t cur[MAX_SERIES + 1];
	uint64_t *col; /* [series][PW] max held in each pixel column */
	int last_col;
	double ymax; /* bytes at the top of the axis */
};

static int series_of(const struct plot *p, uint32_t owner)
{
	for (int i = 1; i < p->n_series; i++)
		if (p->lib[i] == owner)
			return i;
	return p->n_series; /* other */
}

static void fill_to(struct plot *p, int col)
{
	for (int c = p->last_col + 1; c <= col && c < PW; c++)
		for (int s = 0; s <= p->n_series; s++)
			p->col[s * PW + c] =
			    p->cur[s] < 0 ? 0 : (uint64_t)p->cur[s];
	if (col > p->last_col)
		p->last_col = col;
}

static int plot_step(void *ctx, const struct gpr_trace_step *st)
{
	struct plot *p = ctx;
	if (st->dev_delta == 0)
		return 0;
	uint64_t off = gpr_trace_since_start(p->t, gpr_trace_key(p->t, st->r));
	int col = (int)((unsigned __int128)off * (PW - 1) / p->span);
	if (col >= PW)
		col = PW - 1;
	fill_to(p, col);
	int s = series_of(p, st->owner);
	p->cur[s] = gpr_trace_sadd(p->cur[s], st->dev_delta);
	p->cur[0] = gpr_trace_sadd(p->cur[0], st->dev_delta);
	int idx[2] = {0, s};
	for (int i = 0; i < 2; i++) {
		uint64_t v = p->cur[idx[i]] < 0 ? 0 : (uint64_t)p->cur[idx[i]];
		if (v > p->col[idx[i] * PW + col])
			p->col[idx[i] * PW + col] = v;
	}
	return 0;
}

/* Text for XML: escaped, control bytes and non-ASCII shown as '?'. */
static void xml_text(FILE *f, const char *s, size_t max)
{
	for (size_t i = 0; s[i] && i < max; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '&')
			fputs("&amp;", f);
		else if (c == '<')
			fputs("&lt;", f);
		else if (c == '>')
			fputs("&gt;", f);
		else if (c == '"')
			fputs("&quot;", f);
		else if (c < 0x20 || c >= 0x7f)
			fputc('?', f);
		else
			fputc(c, f);
	}
}

static double ypix(const struct plot *p, uint64_t v)
{
	return PT + PH - (double)PH * (double)v / p->ymax;
}

/*
 * The time between ticks: 1, 2 or 5 x 10^k seconds, the smallest that
 * puts at most `max` steps in `span` seconds (> 0), so every label is a
 * round number ("0.005 s", "0.5 s", "20 s").
 */
static double nice_seconds(double span, int max)
{
	double raw = span / max;
	double p = 1e-9; /* the power of ten at or below raw, from 1 ns */
	while (p * 10 <= raw)
		p *= 10;
	static const double m[] = {1, 2, 5};
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		if (m[i] * p >= raw * (1 - 1e-9))
			return m[i] * p;
	return 10 * p;
}

/*
 * The bytes between ticks: a power of two (512 MiB, 1 GiB, 16 GiB), the
 * smallest that puts at most `max` steps below `top`; *ticks is how many.
 */
static uint64_t nice_bytes(uint64_t top, int max, uint64_t *ticks)
{
	uint64_t step = 1;
	for (int k = 0; k < 64; k++) {
		step = 1ull << k;
		*ticks = top / step + (top % step != 0);
		if (*ticks <= (uint64_t)max)
			break;
	}
	if (*ticks == 0)
		*ticks = 1;
	return step;
}

/* The total in black, each library in the views' palette colour of its
 * place in the statistics (so the HTML report's bars agree), the rest in
 * grey. */
static const char *series_colour(const struct plot *p, int sidx)
{
	if (sidx == 0)
		return "#222222";
	if (sidx == p->n_series)
		return "#bab0ac";
	return gpr__html_palette(p->pal[sidx]);
}

static void svg_axes(FILE *f, const struct plot *p, uint64_t ystep,
		     uint64_t yticks, double tstep, uint64_t tticks)
{
	char buf[64];
	fprintf(f,
		"<g stroke=\"#999\" fill=\"none\"><rect x=\"%d\" y=\"%d\" "
		"width=\"%d\" height=\"%d\"/></g>\n",
		PL, PT, PW, PH);
	for (uint64_t i = 0; i <= yticks; i++) {
		uint64_t v;
		if (__builtin_mul_overflow(i, ystep, &v))
			v = UINT64_MAX;
		double y = ypix(p, v);
		gpr__fmt_bytes(v, buf, sizeof(buf));
		fprintf(f,
			"<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
			"stroke=\"#eee\"/>\n<text x=\"%d\" y=\"%.1f\" "
			"text-anchor=\"end\">%s</text>\n",
			PL, y, PL + PW, y, PL - 6, y + 4, buf);
	}
	/* as many decimals as the step has: 0.005 -> 3, 0.5 -> 1, 20 -> 0 */
	int decimals = 0;
	for (double q = tstep; q < 1 - 1e-9 && decimals < 9; q *= 10)
		decimals++;
	for (uint64_t i = 0; i <= tticks; i++) {
		double x = PL + (double)PW * (double)i / (double)tticks;
		fprintf(f,
			"<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">"
			"%.*f s</text>\n",
			x, PT + PH + 18, decimals, tstep * (double)i);
	}
	fprintf(f,
		"<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">time since "
		"tracing began</text>\n",
		PL + PW / 2, PT + PH + 36);
}

int gpr_trace_export_svg(const struct gpr_trace *t,
			 const struct gpr_trace_stats *s, FILE *f)
{
	struct plot p = {.t = t, .last_col = -1};
	p.n_series = 1;
	/* the libraries with the highest peaks */
	for (size_t i = 0; i < s->n_libs && p.n_series < MAX_SERIES; i++) {
		size_t best = s->n_libs;
		for (size_t j = 0; j < s->n_libs; j++) {
			int taken = 0;
			for (int k = 1; k < p.n_series; k++)
				taken |= p.lib[k] == s->libs[j].lib;
			if (!taken && s->libs[j].peak > 0 &&
			    (best == s->n_libs ||
			     s->libs[j].peak > s->libs[best].peak))
				best = j;
		}
		if (best == s->n_libs)
			break;
		p.pal[p.n_series] = best;
		p.lib[p.n_series++] = s->libs[best].lib;
	}
	/* the axes end on a tick: round steps, the whole run shown */
	uint64_t yticks, tticks;
	uint64_t ystep = nice_bytes(s->peak ? s->peak : 1024, 5, &yticks);
	p.ymax = (double)ystep * (double)yticks;
	uint64_t end = gpr_trace_since_start(t, s->t1);
	double span_s = (double)(end ? end : 1) / 1e9;
	double tstep = nice_seconds(span_s, 6);
	double steps = span_s / tstep - 1e-9;
	tticks = (uint64_t)steps + (steps > (double)(uint64_t)steps);
	if (tticks == 0)
		tticks = 1;
	double span_ns = tstep * (double)tticks * 1e9;
	p.span =
	    span_ns >= 18446744073709549568.0 ? UINT64_MAX : (uint64_t)span_ns;
	if (p.span == 0)
		p.span = 1;
	p.col = calloc((size_t)(p.n_series + 1) * PW, sizeof(*p.col));
	if (!p.col)
		return GPR_E_NOMEM;
	int rc = gpr_trace_replay(t, plot_step, &p, NULL, NULL);
	fill_to(&p, PW - 1);
	int other = 0;
	for (int c = 0; c < PW; c++)
		other |= p.col[p.n_series * PW + c] != 0;
	char buf[64];
	fprintf(f,
		GPR_TRACE_SVG_SIGNATURE
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
		"height=\"%d\" viewBox=\"0 0 %d %d\" "
		"font-family=\"sans-serif\" font-size=\"12\">\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
		"<text x=\"%d\" y=\"24\" font-size=\"15\">Driver memory held "
		"by pid %u, by allocating library</text>\n",
		W, H, W, H, PL, t->hdr.pid);
	svg_axes(f, &p, ystep, yticks, tstep, tticks);
	/* series */
	for (int sidx = 0; sidx <= p.n_series; sidx++) {
		if (sidx == p.n_series && !other)
			break;
		fprintf(f,
			"<polyline fill=\"none\" stroke=\"%s\" "
			"stroke-width=\"%s\" points=\"",
			series_colour(&p, sidx), sidx == 0 ? "2" : "1.5");
		for (int c = 0; c < PW; c++)
			fprintf(f, "%s%d,%.1f", c ? " " : "", PL + c,
				ypix(&p, p.col[sidx * PW + c]));
		fputs("\"/>\n", f);
		int ly = PT + 10 + 18 * sidx;
		fprintf(f,
			"<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" "
			"fill=\"%s\"/>\n<text x=\"%d\" y=\"%d\">",
			PL + PW + 14, ly, series_colour(&p, sidx), PL + PW + 32,
			ly + 11);
		if (sidx == 0)
			fputs("total", f);
		else if (sidx == p.n_series)
			fputs("other libraries", f);
		else
			xml_text(f, gpr_trace_str(t, p.lib[sidx], "[unknown]"),
				 36);
		fputs("</text>\n", f);
	}
	/* the peak as the text report gives it: same figure, same origin */
	gpr__fmt_bytes(s->peak, buf, sizeof(buf));
	fprintf(f, "<text x=\"%d\" y=\"%d\">peak %s at %.3f s</text>\n</svg>\n",
		PL + PW + 14, PT + 10 + 18 * (MAX_SERIES + 2), buf,
		(double)gpr_trace_since_start(t, s->peak_t) / 1e9);
	free(p.col);
	if (rc == 0 && (fflush(f) != 0 || ferror(f)))
		rc = GPR_E_IO;
	return rc;
}
