/*
 * The text and JSON renderings of `gpureclaim report`, shared with
 * `gpureclaim trace`, which prints a summary of the log it made.
 */
#ifndef GPR_CLI_CMD_REPORT_H
#define GPR_CLI_CMD_REPORT_H

#include "cli.h"
#include "../trace/log_read.h"
#include "../trace/log_stats.h"

/*
 * Appends the text report of t (read from `path`) to b. `top` bounds each
 * list (operations are always all shown); `brief` leaves out the call-site
 * and never-freed lists.
 */
void gpr__report_text(struct cli_buf *b, const char *path,
		      const struct gpr_trace *t,
		      const struct gpr_trace_stats *s, int top, int brief);

/* Appends the JSON report (one object) of t to b. */
void gpr__report_json(struct cli_buf *b, const char *path,
		      const struct gpr_trace *t,
		      const struct gpr_trace_stats *s, int top);

#endif /* GPR_CLI_CMD_REPORT_H */
