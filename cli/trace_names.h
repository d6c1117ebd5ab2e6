/*
 * Which logs a traced command wrote. `gpureclaim trace` makes a private
 * directory and names it in GPURECLAIM_TRACE_NAMES_DIR; each process the
 * injection library traces leaves there a file named by its pid that holds
 * its log's absolute path. The summary reads those paths: a log name is
 * never guessed, so a file planted at the default name is never read.
 */
#ifndef GPR_CLI_TRACE_NAMES_H
#define GPR_CLI_TRACE_NAMES_H

#include <stddef.h>

struct gpr_cli_trace_log {
	long pid;
	char *path;
};

struct gpr_cli_trace_names {
	char dir[256]; /* the private directory; "" when none */
	struct gpr_cli_trace_log *v;
	size_t n;
};

/*
 * Creates the private directory (mode 0700) under $TMPDIR or /tmp.
 * 0, or -1 with a one-line reason in err.
 */
int gpr_cli_trace_names_open(struct gpr_cli_trace_names *tn, char *err,
			     size_t errlen);

/*
 * Reads what the traced processes left (in pid order), then removes the
 * files and the directory. Entries that are not a pid holding one absolute
 * path are skipped. 0, or -1 when out of memory.
 */
int gpr_cli_trace_names_collect(struct gpr_cli_trace_names *tn);

void gpr_cli_trace_names_free(struct gpr_cli_trace_names *tn);

#endif /* GPR_CLI_TRACE_NAMES_H */
