/*
 * The trace report's one view (trace/read/log_view.h) and what is built
 * on it: text, JSON and HTML rendered from one view say the same figures
 * (each library's bytes, the peak and its time, the never-freed list);
 * a sink with a file streams the same bytes as the buffer holds whole;
 * RMM's logs of every GPU come from one replay of the log, each GPU's
 * file asked for once; the plot's panels, lines, peak and ticks.
 *
 * Usage: test_view CORPUS_DIR   (tests/trace/corpus: sample.gprtrace, a
 * log of two GPUs; rmm-sample.gprtrace)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpureclaim.h"
#include "out/buf.h"
#include "out/fmt.h"
#include "../../trace/format/log_write.h"
#include "../../trace/read/log_export.h"
#include "../../trace/read/log_report.h"
#include "../../trace/read/log_rmm.h"
#include "../../trace/read/log_stats.h"
#include "../../trace/read/log_view.h"

static char *render(const struct gpr_trace_view *v, enum gpr_trace_form form)
{
	struct gpr__buf b = {0};
	struct gpr_trace_sink k = {&b, NULL, 0};
	CHECK(gpr_trace_render(v, form, &k) == 0);
	return gpr__buf_finish(&b);
}

/* The same rendering through a file, 64 KiB at a time: the same bytes. */
static void streamed_alike(const struct gpr_trace_view *v,
			   enum gpr_trace_form form, const char *whole)
{
	char *data = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&data, &len);
	CHECK(f != NULL);
	if (!f)
		return;
	struct gpr__buf b = {0};
	struct gpr_trace_sink k = {&b, f, 0};
	CHECK(gpr_trace_render(v, form, &k) == 0);
	CHECK(b.len == 0); /* all of it went to the file */
	gpr__buf_free(&b);
	fclose(f);
	CHECK(data && strcmp(data, whole) == 0);
	free(data);
}

static void test_forms_agree(const char *corpus)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/sample.gprtrace", corpus);
	struct gpr_trace t;
	struct gpr_trace_stats s;
	if (gpr_test_load(path, &t) < 0)
		return;
	CHECK(gpr_trace_stats_compute(&t, &s) == 0);
	struct gpr_trace_view v;
	gpr_trace_view_build(&v, "sample.trace", &t, &s, 10, 0);
	char *text = render(&v, GPR_TRACE_FORM_TEXT);
	char *json = render(&v, GPR_TRACE_FORM_JSON);
	char *html = render(&v, GPR_TRACE_FORM_HTML);
	CHECK(text && json && html);
	if (!text || !json || !html)
		goto out;
	streamed_alike(&v, GPR_TRACE_FORM_TEXT, text);
	streamed_alike(&v, GPR_TRACE_FORM_JSON, json);
	streamed_alike(&v, GPR_TRACE_FORM_HTML, html);

	/* the peak: the same figure and time in every form */
	char peak[32], at[32], line[128], key[96];
	gpr__fmt_bytes(s.peak, peak, sizeof peak);
	gpr_trace_fmt_ns(gpr_trace_since_start(&t, s.peak_t), at, sizeof at);
	snprintf(line, sizeof line, "Peak driver memory: %s at %s;", peak, at);
	CHECK(strstr(text, line) != NULL);
	CHECK(strstr(html, line) != NULL);
	snprintf(key, sizeof key, "\"peak_bytes\":%" PRIu64, s.peak);
	CHECK(strstr(json, key) != NULL);
	snprintf(key, sizeof key, "\"peak_at_ns\":%" PRIu64,
		 gpr_trace_since_start(&t, s.peak_t));
	CHECK(strstr(json, key) != NULL);

	/* every library: its name and exact bytes in JSON, the same bytes
	   as a title in HTML, its row in text */
	CHECK(s.n_libs >= 2);
	for (size_t i = 0; i < s.n_libs; i++) {
		const struct gpr_trace_libstat *l = &s.libs[i];
		const char *name = gpr_trace_str(&t, l->lib, "[unknown]");
		snprintf(key, sizeof key,
			 "{\"library\":\"%s\",\"calls\":%" PRIu64
			 ",\"allocs\":%" PRIu64 ",\"allocated_bytes\":%" PRIu64,
			 name, l->calls, l->allocs, l->alloc_bytes);
		CHECK(strstr(json, key) != NULL);
		char b[32];
		snprintf(key, sizeof key, "title=\"%" PRIu64 " bytes\">%s<",
			 l->alloc_bytes,
			 gpr__fmt_bytes(l->alloc_bytes, b, sizeof b));
		if (l->alloc_bytes && !strstr(html, key)) {
			fprintf(stderr, "html lacks %s\n", key);
			gpr_test_failures++;
		}
		snprintf(key, sizeof key, "\n  %s ", name);
		CHECK(strstr(text, key) != NULL);
	}
	/* the never-freed list: its caption in text and HTML, its count in
	   JSON */
	snprintf(line, sizeof line, "Never freed: %s",
		 gpr__fmt_count(s.live_count, "allocation", "allocations", key,
				sizeof key));
	CHECK(strstr(text, line) != NULL && strstr(html, line) != NULL);
	snprintf(key, sizeof key, "\"never_freed_count\":%" PRIu64,
		 s.live_count);
	CHECK(strstr(json, key) != NULL);
	/* the held-at-the-end bar is on the allocated bar's scale: its parts
	   (held, then freed) add up to what was allocated */
	CHECK(v.n_bars == 2);
	uint64_t a = 0, h = 0;
	for (size_t i = 0; i < v.bars[0].n; i++)
		a += v.bars[0].parts[i].bytes;
	for (size_t i = 0; i < v.bars[1].n; i++)
		h += v.bars[1].parts[i].bytes;
	CHECK(a == h && a > 0);
	CHECK(strcmp(v.bars[1].parts[v.bars[1].n - 1].label, "freed") == 0);
out:
	free(text);
	free(json);
	free(html);
	gpr_trace_view_free(&v);
	gpr_trace_stats_free(&s);
	gpr_trace_free(&t);
}

/* RMM's logs: one memstream per GPU, each asked for once. */
struct rmm_files {
	int asked[8];
	char *data[8];
	size_t len[8];
	FILE *f[8];
	struct gpr_trace_rmm_counts c[8];
	int n;
};

static int open_mem(void *ctx, int device, FILE **f,
		    struct gpr_trace_rmm_counts **counts)
{
	struct rmm_files *r = ctx;
	if (device < 0 || device >= 8)
		return -1;
	r->asked[device]++;
	r->f[device] = open_memstream(&r->data[device], &r->len[device]);
	*f = r->f[device];
	*counts = &r->c[device];
	r->n++;
	return *f ? 0 : -1;
}

static void test_rmm_one_pass(const char *corpus)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/rmm-sample.gprtrace", corpus);
	struct gpr_trace t;
	if (gpr_test_load(path, &t) < 0)
		return;
	struct rmm_files r = {0};
	uint64_t unknown;
	uint64_t before = atomic_load(&gpr_trace_progress.replays);
	CHECK(gpr_trace_export_rmm(&t, open_mem, &r, &unknown) == 0);
	/* every GPU in one pass over the log */
	CHECK(atomic_load(&gpr_trace_progress.replays) == before + 1);
	CHECK(r.n == 2 && r.asked[0] == 1 && r.asked[1] == 1);
	for (int d = 0; d < 2; d++) {
		if (r.f[d])
			fclose(r.f[d]);
		size_t lines = 0;
		for (size_t i = 0; r.data[d] && i < r.len[d]; i++)
			lines += r.data[d][i] == '\n';
		CHECK(r.data[d] &&
		      strncmp(r.data[d], GPR_TRACE_RMM_SIGNATURE,
			      strlen(GPR_TRACE_RMM_SIGNATURE)) == 0);
		CHECK(lines == r.c[d].rows + 1 && r.c[d].rows > 0);
		free(r.data[d]);
	}
	gpr_trace_free(&t);
}

/* The SVG of t as a string. */
static char *svg_of(const struct gpr_trace *t, const struct gpr_trace_stats *s)
{
	char *data = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&data, &len);
	CHECK(f != NULL);
	if (!f)
		return NULL;
	CHECK(gpr_trace_export_svg(t, s, f) == 0);
	fclose(f);
	return data;
}

/* The x of the last point of the first polyline. */
static double last_x(const char *svg)
{
	const char *p = strstr(svg, "points=\"");
	const char *end = p ? strchr(p + 8, '"') : NULL;
	if (!end)
		return -1;
	const char *sp = end;
	while (sp > p && sp[-1] != ' ' && sp[-1] != '"')
		sp--;
	return atof(sp);
}

static size_t count(const char *s, const char *what)
{
	size_t n = 0;
	for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

/*
 * The plot: one library alone (its line, no total under it), the peak
 * marked on the curve, the line ending where the trace ends (before the
 * axis's end), exact byte ticks (1.25 GiB), time ticks in ms; a log of
 * two GPUs, a panel each.
 */
static void test_svg(const char *corpus, const char *dir)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/one.trace", dir);
	struct gpr_trace_writer w;
	CHECK(gpr_trace_writer_open(&w, path, 7, 0, 1000000) == 0);
	const char *lib = "libone.so";
	CHECK(gpr_trace_writer_strings(&w, &lib, 1) == 0);
	struct gpr_trace_rec r[2] = {{.t_ns = 2000000,
				      .dur_ns = 1000,
				      .addr = 0x1000,
				      .bytes = (5ull << 30) / 4,
				      .op = GPR_OP_MEM_ALLOC,
				      .lib = GPR_TRACE_N_OPS,
				      .site = GPR_TRACE_NO_STRING},
				     {.t_ns = 3300000,
				      .dur_ns = 1000,
				      .addr = 0x1000,
				      .op = GPR_OP_MEM_FREE,
				      .lib = GPR_TRACE_N_OPS,
				      .site = GPR_TRACE_NO_STRING}};
	CHECK(gpr_trace_writer_records(&w, r, 2) == 0);
	CHECK(gpr_trace_writer_close(&w, 3301000, 0) == 0);
	struct gpr_trace t;
	struct gpr_trace_stats s;
	if (gpr_test_load(path, &t) < 0)
		return;
	CHECK(gpr_trace_stats_compute(&t, &s) == 0);
	char *svg = svg_of(&t, &s);
	if (svg) {
		CHECK(count(svg, "<polyline") == 1);
		CHECK(!strstr(svg, ">total<") && strstr(svg, ">libone.so<"));
		CHECK(count(svg, "<circle") == 1);
		CHECK(strstr(svg, ">peak 1.2 GiB at 1.0 ms<") != NULL);
		CHECK(strstr(svg, ">1.25 GiB<") && !strstr(svg, ">1.2 GiB<"));
		CHECK(strstr(svg, ">0.5 ms<") && strstr(svg, ">2.5 ms<"));
		CHECK(!strstr(svg, " s</text>"));
		/* the trace ends at 2.3 ms, the axis at 2.5: 0.92 of 640 px */
		double x = last_x(svg);
		CHECK(x > 90 + 0.9 * 639 && x < 90 + 0.94 * 639);
	}
	free(svg);
	/* one library that freed all it allocated: no bar (a bar of one part,
	 * "freed", would say only what the headline says) */
	struct gpr_trace_view v;
	gpr_trace_view_build(&v, path, &t, &s, 10, 0);
	CHECK(v.n_bars == 0);
	gpr_trace_view_free(&v);
	gpr_trace_stats_free(&s);
	gpr_trace_free(&t);
	/* one library that freed part of it: one bar, held vs freed */
	snprintf(path, sizeof path, "%s/held.trace", dir);
	CHECK(gpr_trace_writer_open(&w, path, 7, 0, 1000000) == 0);
	CHECK(gpr_trace_writer_strings(&w, &lib, 1) == 0);
	struct gpr_trace_rec kept = r[0];
	kept.addr = 0x9000;
	kept.bytes = 1ull << 30;
	CHECK(gpr_trace_writer_records(&w, r, 2) == 0);
	CHECK(gpr_trace_writer_records(&w, &kept, 1) == 0);
	CHECK(gpr_trace_writer_close(&w, 3301000, 0) == 0);
	if (gpr_test_load(path, &t) < 0)
		return;
	CHECK(gpr_trace_stats_compute(&t, &s) == 0);
	gpr_trace_view_build(&v, path, &t, &s, 10, 0);
	CHECK(v.n_bars == 1);
	if (v.n_bars == 1) {
		CHECK(v.bars[0].n == 2);
		CHECK(strstr(v.bars[0].caption, "Allocated by libone.so") !=
		      NULL);
		CHECK(strcmp(v.bars[0].parts[0].label, "held at the end") ==
			  0 &&
		      v.bars[0].parts[0].bytes == 1ull << 30);
		CHECK(strcmp(v.bars[0].parts[1].label, "freed") == 0 &&
		      v.bars[0].parts[1].bytes == (5ull << 30) / 4);
	}
	gpr_trace_view_free(&v);
	gpr_trace_stats_free(&s);
	gpr_trace_free(&t);

	snprintf(path, sizeof path, "%s/sample.gprtrace", corpus);
	if (gpr_test_load(path, &t) < 0)
		return;
	CHECK(gpr_trace_stats_compute(&t, &s) == 0);
	svg = svg_of(&t, &s);
	if (svg) {
		CHECK(strstr(svg, ">GPU 0<") && strstr(svg, ">GPU 1<"));
		CHECK(count(svg, "<circle") == 2);
		/* GPU 0: total and two libraries; GPU 1: one library alone */
		CHECK(count(svg, "<polyline") == 4);
	}
	free(svg);
	gpr_trace_stats_free(&s);
	gpr_trace_free(&t);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test_view CORPUS_DIR\n");
		return 2;
	}
	char dir[] = "/tmp/gpr-view-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	test_forms_agree(argv[1]);
	test_rmm_one_pass(argv[1]);
	test_svg(argv[1], dir);
	return gpr_test_finish("test_view", dir);
}
