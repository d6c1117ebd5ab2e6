/*
 * The SVG plot of a trace (the Chrome timeline is log_chrome.c). It walks
 * the memory replay of log_stats.c, so the plot, the timeline and the
 * report agree on who held what.
 *
 * One panel per GPU (a log of one GPU: one panel), each with the bytes
 * its libraries held over time and their total, on its own scale; the
 * lines end where tracing ended (the report's "of tracing"), and the peak
 * is marked on the curve where it happens, with the figure the report
 * gives. A panel with one
 * library draws it alone: its total would be the same line, hidden.
 */
#include "log_export.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gpureclaim.h"
#include "log_stats.h"
#include "log_view.h"
#include "out/fmt.h"
#include "out/html.h"

/* ---------------- SVG plot ---------------- */

#define W 960
#define PL 90 /* plot area: left and width; each panel's top and height */
#define PW 640
#define PT 40		/* the first panel's top */
#define PH1 380		/* a panel's height, one GPU */
#define PHN 200		/* with several GPUs */
#define GAP 66		/* below a panel: its time axis, the next one's title */
#define MAX_SERIES 7	/* total + 6 libraries; the rest in "other" */
#define MAX_PANELS 8	/* GPUs drawn apart; more are one "other GPUs" */
#define N_DEVICES 32768 /* the devices a log can name (an int16) */

/* One GPU's panel: series 0 = total, 1..k = libraries, k+1 = other. */
struct panel {
	int device;    /* CUDA ordinal, -1 unknown; the others' panel: -2 */
	uint64_t peak; /* bytes, and when (ns since tracing began) */
	uint64_t peak_at;
	int64_t cur[MAX_SERIES + 1];
	uint64_t *col; /* [series][PW] max held in each pixel column */
	int last_col;
	int used[MAX_SERIES + 1]; /* the series has bytes in this panel */
	double ymax;		  /* bytes at the top of the axis */
	uint64_t ystep, yticks;
};

struct plot {
	const struct gpr_trace *t;
	uint64_t span; /* ns since tracing began at the right end */
	int end_col;   /* the column where the trace ends */
	uint32_t lib[MAX_SERIES + 1];
	size_t pal[MAX_SERIES + 1]; /* a library's place in the stats: its
				       colour, as in the HTML report's bars */
	int n_series;
	struct panel panels[MAX_PANELS + 1];
	int n_panels;
	int16_t panel_of[N_DEVICES + 1]; /* device + 1 -> panel */
	int failed;
};

static int series_of(const struct plot *p, uint32_t owner)
{
	for (int i = 1; i < p->n_series; i++)
		if (p->lib[i] == owner)
			return i;
	return p->n_series; /* other */
}

static void fill_to(const struct plot *p, struct panel *q, int col)
{
	for (int c = q->last_col + 1; c <= col && c < PW; c++)
		for (int s = 0; s <= p->n_series; s++)
			q->col[s * PW + c] =
			    q->cur[s] < 0 ? 0 : (uint64_t)q->cur[s];
	if (col > q->last_col)
		q->last_col = col;
}

static int column(const struct plot *p, uint64_t off)
{
	int col = (int)((unsigned __int128)off * (PW - 1) / p->span);
	return col >= PW ? PW - 1 : col;
}

static int plot_step(void *ctx, const struct gpr_trace_step *st)
{
	struct plot *p = ctx;
	if (st->dev_delta == 0)
		return 0;
	int d = st->device;
	if (d < -1 || d >= N_DEVICES)
		d = -1;
	int pi = p->panel_of[d + 1];
	if (pi < 0)
		return 0;
	struct panel *q = &p->panels[pi];
	uint64_t off = gpr_trace_since_start(p->t, gpr_trace_key(p->t, st->r));
	int col = column(p, off);
	fill_to(p, q, col);
	int s = series_of(p, st->owner);
	q->cur[s] = gpr_trace_sadd(q->cur[s], st->dev_delta);
	q->cur[0] = gpr_trace_sadd(q->cur[0], st->dev_delta);
	q->used[s] = 1;
	int idx[2] = {0, s};
	for (int i = 0; i < 2; i++) {
		uint64_t v = q->cur[idx[i]] < 0 ? 0 : (uint64_t)q->cur[idx[i]];
		if (v > q->col[idx[i] * PW + col])
			q->col[idx[i] * PW + col] = v;
	}
	uint64_t total = q->cur[0] < 0 ? 0 : (uint64_t)q->cur[0];
	if (total > q->peak) {
		q->peak = total;
		q->peak_at = off;
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

static double ypix(const struct panel *q, int top, int ph, uint64_t v)
{
	return top + ph - (double)ph * (double)v / q->ymax;
}

/*
 * The time between ticks: 1, 2 or 5 x 10^k seconds, the smallest that
 * puts at most `max` steps in `span` seconds (> 0), so every label is a
 * round number ("5 ms", "500 µs", "20 s").
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

/*
 * A byte tick's label, exact: in the largest binary unit not above it,
 * with the decimals it needs there (at most two: 1.25 GiB, never the
 * toolkit's rounded "1.2 GiB"), else in the unit below ("768 MiB").
 */
static void byte_tick(char *out, size_t len, uint64_t v)
{
	static const char *const units[] = {"B",   "KiB", "MiB", "GiB",
					    "TiB", "PiB", "EiB"};
	int u = 0;
	while (u < 6 && v >> (10 * (u + 1)) != 0)
		u++;
	for (; u > 0; u--) {
		uint64_t unit = 1ull << (10 * u);
		/* v / unit exact in two decimals: v * 100 a multiple of unit */
		if ((unsigned __int128)v * 100 % unit == 0)
			break;
	}
	uint64_t unit = 1ull << (10 * u);
	unsigned __int128 hundredths = (unsigned __int128)v * 100 / unit;
	int decimals = hundredths % 100 == 0 ? 0 : hundredths % 10 == 0 ? 1 : 2;
	snprintf(out, len, "%.*f %s", decimals, (double)hundredths / 100.0,
		 units[u]);
}

/*
 * A time tick's label: in the largest unit (s, ms, µs, ns) in which the
 * step is at least a tenth, with the decimals it needs ("0.5 s", "200
 * µs", "0.1 ms"); 0 as "0".
 */
static void time_tick(char *out, size_t len, double secs, double step)
{
	static const struct {
		double scale;
		const char *unit;
	} u[] = {{1, "s"}, {1e3, "ms"}, {1e6, "\u00b5s"}, {1e9, "ns"}};
	size_t i = 0;
	while (i + 1 < sizeof u / sizeof u[0] &&
	       step * u[i].scale < 0.1 - 1e-12)
		i++;
	if (secs == 0) {
		snprintf(out, len, "0");
		return;
	}
	int decimals = 0;
	for (double q = step * u[i].scale; q < 1 - 1e-9 && decimals < 9;
	     q *= 10)
		decimals++;
	snprintf(out, len, "%.*f %s", decimals, secs * u[i].scale, u[i].unit);
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

static void svg_axes(FILE *f, const struct panel *q, int top, int ph,
		     double tstep, uint64_t tticks)
{
	char buf[64];
	fprintf(f,
		"<g stroke=\"#999\" fill=\"none\"><rect x=\"%d\" y=\"%d\" "
		"width=\"%d\" height=\"%d\"/></g>\n",
		PL, top, PW, ph);
	for (uint64_t i = 0; i <= q->yticks; i++) {
		uint64_t v;
		if (__builtin_mul_overflow(i, q->ystep, &v))
			v = UINT64_MAX;
		double y = ypix(q, top, ph, v);
		byte_tick(buf, sizeof buf, v);
		fprintf(f,
			"<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
			"stroke=\"#eee\"/>\n<text x=\"%d\" y=\"%.1f\" "
			"text-anchor=\"end\">%s</text>\n",
			PL, y, PL + PW, y, PL - 6, y + 4, buf);
	}
	for (uint64_t i = 0; i <= tticks; i++) {
		double x = PL + (double)PW * (double)i / (double)tticks;
		time_tick(buf, sizeof buf, tstep * (double)i, tstep);
		fprintf(f,
			"<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">"
			"%s</text>\n",
			x, top + ph + 18, buf);
	}
	fprintf(f,
		"<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">time since "
		"tracing began</text>\n",
		PL + PW / 2, top + ph + 36);
}

/* The libraries with the highest peaks become the series. */
static void choose_series(struct plot *p, const struct gpr_trace_stats *s)
{
	p->n_series = 1;
	for (size_t i = 0; i < s->n_libs && p->n_series < MAX_SERIES; i++) {
		size_t best = s->n_libs;
		for (size_t j = 0; j < s->n_libs; j++) {
			int taken = 0;
			for (int k = 1; k < p->n_series; k++)
				taken |= p->lib[k] == s->libs[j].lib;
			if (!taken && s->libs[j].peak > 0 &&
			    (best == s->n_libs ||
			     s->libs[j].peak > s->libs[best].peak))
				best = j;
		}
		if (best == s->n_libs)
			break;
		p->pal[p->n_series] = best;
		p->lib[p->n_series++] = s->libs[best].lib;
	}
}

/* A panel per GPU that held device memory (none did: one), in device
 * order; past MAX_PANELS the rest share one. */
static void choose_panels(struct plot *p, const struct gpr_trace_stats *s)
{
	for (size_t i = 0; i <= N_DEVICES; i++)
		p->panel_of[i] = -1;
	for (size_t i = 0; i < s->n_devs; i++) {
		int d = s->devs[i].device, at = MAX_PANELS;
		if (s->devs[i].peak == 0 || d < -1 || d >= N_DEVICES)
			continue;
		if (p->n_panels < MAX_PANELS) {
			at = p->n_panels++;
			p->panels[at].device = d;
		} else if (p->n_panels == MAX_PANELS) {
			p->panels[p->n_panels++].device = -2;
		}
		p->panel_of[d + 1] = (int16_t)at;
	}
	if (p->n_panels == 0) {
		p->panels[0].device = s->n_devs ? s->devs[0].device : 0;
		p->n_panels = 1;
	}
}

static void draw_panel(FILE *f, const struct plot *p, struct panel *q, int top,
		       int ph, double tstep, uint64_t tticks,
		       const struct gpr_trace_stats *s)
{
	char buf[64], at[32];
	if (p->n_panels > 1) {
		fprintf(f, "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">", PL,
			top - 8);
		if (q->device == -2)
			fputs("other GPUs", f);
		else if (q->device < 0)
			fputs("GPU ? (device not known)", f);
		else
			fprintf(f, "GPU %d", q->device);
		fputs("</text>\n", f);
	}
	svg_axes(f, q, top, ph, tstep, tticks);
	/* one library alone: the total is the same line, left out */
	int libs = 0;
	for (int sidx = 1; sidx <= p->n_series; sidx++)
		libs += q->used[sidx];
	int ly = top + 10;
	for (int sidx = 0; sidx <= p->n_series; sidx++) {
		if (sidx == 0 ? libs < 2 : !q->used[sidx])
			continue;
		fprintf(f,
			"<polyline fill=\"none\" stroke=\"%s\" "
			"stroke-width=\"%s\" points=\"",
			series_colour(p, sidx), sidx == 0 ? "2" : "1.5");
		/* to where the trace ends, never past it */
		for (int c = 0; c <= p->end_col; c++)
			fprintf(f, "%s%d,%.1f", c ? " " : "", PL + c,
				ypix(q, top, ph, q->col[sidx * PW + c]));
		fputs("\"/>\n", f);
		fprintf(f,
			"<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" "
			"fill=\"%s\"/>\n<text x=\"%d\" y=\"%d\">",
			PL + PW + 14, ly, series_colour(p, sidx), PL + PW + 32,
			ly + 11);
		if (sidx == 0)
			fputs("total", f);
		else if (sidx == p->n_series)
			fputs("other libraries", f);
		else
			xml_text(f,
				 gpr_trace_str(p->t, p->lib[sidx], "[unknown]"),
				 36);
		fputs("</text>\n", f);
		ly += 18;
	}
	/*
	 * The peak as the report gives it (one GPU: the report's own figure
	 * and time; several: the device table's), in the legend and marked
	 * on the curve.
	 */
	uint64_t peak = q->peak, peak_at = q->peak_at;
	if (p->n_panels == 1) {
		peak = s->peak;
		peak_at = gpr_trace_since_start(p->t, s->peak_t);
	} else {
		for (size_t i = 0; i < s->n_devs; i++)
			if (s->devs[i].device == q->device) {
				peak = s->devs[i].peak;
				peak_at = gpr_trace_since_start(
				    p->t, s->devs[i].peak_t);
			}
	}
	gpr__fmt_bytes(peak, buf, sizeof buf);
	gpr_trace_fmt_ns(peak_at, at, sizeof at);
	fprintf(f, "<text x=\"%d\" y=\"%d\">peak %s at %s</text>\n",
		PL + PW + 14, ly + 11 + 8, buf, at);
	if (peak) {
		/* beside the mark, inside the frame (below it at the top) */
		double x = PL + column(p, peak_at);
		double y = ypix(q, top, ph, peak);
		int left = x > PL + PW * 0.8;
		fprintf(f,
			"<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"none\" "
			"stroke=\"#e15759\" stroke-width=\"2\"/>\n"
			"<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
			"text-anchor=\"%s\" fill=\"#e15759\">peak %s</text>\n",
			x, y, x + (left ? -8 : 8),
			y - top < 12 ? y + 15 : y + 4, left ? "end" : "start",
			buf);
	}
}

int gpr_trace_export_svg(const struct gpr_trace *t,
			 const struct gpr_trace_stats *s, FILE *f)
{
	struct plot *p = calloc(1, sizeof(*p));
	if (!p)
		return GPR_E_NOMEM;
	p->t = t;
	choose_series(p, s);
	choose_panels(p, s);
	/* the time axis ends on a tick: round steps, the whole of the
	 * tracing the header counts shown (memory held stays drawn to its
	 * end) */
	uint64_t end = gpr_trace_traced_ns(t, s);
	double span_s = (double)(end ? end : 1) / 1e9;
	double tstep = nice_seconds(span_s, 6);
	double steps = span_s / tstep - 1e-9;
	uint64_t tticks = (uint64_t)steps + (steps > (double)(uint64_t)steps);
	if (tticks == 0)
		tticks = 1;
	double span_ns = tstep * (double)tticks * 1e9;
	p->span =
	    span_ns >= 18446744073709549568.0 ? UINT64_MAX : (uint64_t)span_ns;
	if (p->span == 0)
		p->span = 1;
	p->end_col = column(p, end);
	int rc = 0;
	for (int i = 0; i < p->n_panels && rc == 0; i++) {
		p->panels[i].last_col = -1;
		p->panels[i].col =
		    calloc((size_t)(p->n_series + 1) * PW, sizeof(uint64_t));
		if (!p->panels[i].col)
			rc = GPR_E_NOMEM;
	}
	if (rc == 0)
		rc = gpr_trace_replay(t, plot_step, p, NULL, NULL);
	int ph = p->n_panels == 1 ? PH1 : PHN;
	for (int i = 0; i < p->n_panels && rc == 0; i++) {
		struct panel *q = &p->panels[i];
		fill_to(p, q, p->end_col);
		uint64_t top = q->peak;
		if (p->n_panels == 1 && s->peak > top)
			top = s->peak;
		q->ystep = nice_bytes(top ? top : 1024, 5, &q->yticks);
		q->ymax = (double)q->ystep * (double)q->yticks;
	}
	if (rc == 0) {
		int h = PT + (p->n_panels > 1 ? 14 : 0) + p->n_panels * ph +
			(p->n_panels - 1) * GAP + 50;
		fprintf(
		    f,
		    GPR_TRACE_SVG_SIGNATURE
		    "<svg xmlns=\"http://www.w3.org/2000/svg\" "
		    "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		    "font-family=\"sans-serif\" font-size=\"12\">\n"
		    "<rect width=\"100%%\" height=\"100%%\" "
		    "fill=\"white\"/>\n"
		    "<text x=\"%d\" y=\"24\" font-size=\"15\">Driver "
		    "memory held by pid %u, by allocating library%s</text>\n",
		    W, h, W, h, PL, t->hdr.pid,
		    p->n_panels > 1 ? ", per GPU" : "");
		for (int i = 0; i < p->n_panels; i++)
			draw_panel(f, p, &p->panels[i],
				   PT + (p->n_panels > 1 ? 14 : 0) +
				       i * (ph + GAP),
				   ph, tstep, tticks, s);
		fputs("</svg>\n", f);
	}
	for (int i = 0; i < p->n_panels; i++)
		free(p->panels[i].col);
	free(p);
	if (rc == 0) {
		errno = 0;
		if (fflush(f) != 0 || ferror(f)) {
			if (!errno)
				errno = EIO;
			rc = GPR_E_IO;
		}
	}
	return rc;
}
