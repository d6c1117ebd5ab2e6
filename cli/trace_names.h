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

struct trace_log {
	long pid;
	char *path;
};

struct trace_names {
	char dir[256]; /* the private directory; "" when none */
	struct trace_log *v;
	size_t n;
};

/*
 * Creates the private directory (mode 0700) under $TMPDIR or /tmp.
 * 0, or -1 with a one-line reason in err.
 */
int cli_trace_names_open(struct trace_names *tn, char *err, size_t errlen);

/*
 * Reads what the traced processes left (in pid order), then removes the
 * files and the directory. Entries that are not a pid holding one absolute
 * path are skipped. 0, or -1 when out of memory.
 */
int cli_trace_names_collect(struct trace_names *tn);

void cli_trace_names_free(struct trace_names *tn);

#endif /* GPR_CLI_TRACE_NAMES_H */
