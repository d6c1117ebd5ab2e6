/*
 * libFuzzer target: the trace log reader, and on what it accepts, the
 * aggregations and every rendering: the text, JSON and HTML reports of
 * `gpureclaim report` and gpureclaim.trace (the HTML page and its
 * fragment), the Chrome timeline (whole and capped), the SVG plot and
 * RMM's replay log of every GPU. The reports must also keep their promise
 * about hostile strings: no terminal control and no invalid UTF-8 in the
 * text, none unescaped in the JSON (it aborts otherwise). `make fuzz` runs
 * it open-ended, the `fuzz` suite (part of `make check`) a fixed number of
 * runs over the corpus in tests/trace/corpus/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../trace/read/log_report.h"
#include "../../trace/read/log_export.h"
#include "../../trace/format/log_read.h"
#include "../../trace/read/log_rmm.h"
#include "../../trace/read/log_stats.h"
#include "out/text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts unless b is valid UTF-8 without controls other than newlines. */
static void check_clean(const struct gpr__buf *b, const char *what)
{
	const char *s = gpr__buf_str(b);
	while (*s) {
		uint32_t cp;
		size_t n = gpr__utf8_len(s, &cp);
		if (n == 0 || (cp < 0x20 && cp != '\n') ||
		    (cp >= 0x7f && cp <= 0x9f)) {
			fprintf(stderr, "%s report: byte 0x%02x at %zu\n", what,
				(unsigned char)*s, (size_t)(s - b->data));
			abort();
		}
		s += n;
	}
}

/* Every GPU's RMM log to /dev/null (ctx), counted in one place. */
static int rmm_null(void *ctx, int device, FILE **f,
		    struct gpr_trace_rmm_counts **counts)
{
	static struct gpr_trace_rmm_counts c;
	(void)device;
	*f = ctx;
	*counts = &c;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *null;
	struct gpr_trace t;
	char err[256];
	if (!null)
		null = fopen("/dev/null", "w");
	if (gpr_trace_parse(data, size, &t, err, sizeof(err)) != 0)
		return 0;
	struct gpr_trace_stats s;
	if (gpr_trace_stats_compute(&t, &s) == 0) {
		if (null)
			gpr_trace_export_svg(&t, &s, null);
		struct gpr__buf b = {0};
		gpr_trace_report_text(&b, "fuzz.trace", &t, &s, 10, 0);
		if (!b.oom)
			check_clean(&b, "text");
		gpr__buf_reset(&b);
		gpr_trace_report_json(&b, "fuzz.trace", &t, &s, 10);
		if (!b.oom)
			check_clean(&b, "JSON");
		gpr__buf_reset(&b);
		gpr_trace_report_html(&b, "fuzz.trace", &t, &s, 10, 1);
		if (!b.oom)
			check_clean(&b, "HTML");
		gpr__buf_reset(&b);
		gpr_trace_report_html(&b, "fuzz.trace", &t, &s, 10, 0);
		if (!b.oom)
			check_clean(&b, "HTML fragment");
		gpr__buf_free(&b);
		gpr_trace_stats_free(&s);
	}
	if (null) {
		gpr_trace_export_chrome(&t, null);
		gpr_trace_export_chrome_max(&t, null, 1000, NULL);
		uint64_t unknown;
		gpr_trace_export_rmm(&t, rmm_null, null, &unknown);
	}
	gpr_trace_free(&t);
	return 0;
}
