/*
 * libFuzzer target: the trace log reader, and on what it accepts, the
 * aggregations and both exports. `make fuzz` runs it open-ended,
 * `make fuzz-short` (part of `make check`) a fixed number of runs over the
 * corpus in tests/trace/corpus/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../../trace/log_export.h"
#include "../../trace/log_read.h"
#include "../../trace/log_stats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *null;
	struct gpr_trace t;
	char err[256];
	if (!null)
		null = fopen("/dev/null", "w");
	if (gpr__trace_parse(data, size, &t, err, sizeof(err)) != 0)
		return 0;
	struct gpr_trace_stats s;
	if (gpr__trace_stats(&t, &s) == 0)
		gpr__trace_stats_free(&s);
	if (null) {
		gpr__trace_export_chrome(&t, null);
		gpr__trace_export_svg(&t, null);
	}
	gpr__trace_free(&t);
	return 0;
}
