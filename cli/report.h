/*
 * The exports of `gpureclaim report` that need more than one call of the
 * reader (cli/report_export.c): the Chrome timeline under --max-events
 * with its size warning, and RMM's replay logs, one file per GPU.
 */
#ifndef GPR_CLI_REPORT_H
#define GPR_CLI_REPORT_H

#include <limits.h>
#include <stdint.h>
#include <sys/stat.h>

#include "cli.h"
#include "../trace/format/log_read.h"
#include "../trace/read/log_rmm.h"

/* A timeline this large (bytes) is said to be hard to open. */
#define GPR_CLI_LARGE_TIMELINE (100ull * 1000 * 1000)

/*
 * Writes the timeline of t to o->f, at most about max_events events (0:
 * all), warning on stderr first when it will pass GPR_CLI_LARGE_TIMELINE;
 * *merged: the calls merged into counters. 0, or a message and -1.
 */
int gpr_cli_report_chrome(struct gpr_cli_out *o, const struct gpr_trace *t,
			  uint64_t max_events, uint64_t *merged);

/* One RMM log: a GPU's rows, at `path`. */
struct gpr_cli_rmm_file {
	int device;
	char path[PATH_MAX];
	struct gpr_cli_out out;
	struct gpr_trace_rmm_counts counts;
};

/* RMM's logs of one trace. */
struct gpr_cli_rmm {
	struct gpr_cli_rmm_file *files;
	size_t n;
	uint64_t unknown; /* rows of an unknown GPU, in no file */
};

/*
 * Opens the RMM logs for t at `path`: one GPU, that file; several, one
 * each with ".dev<N>" before the extension, as RMM names them. The files
 * are opened as every export (gpr_cli_out_open) and may not name one of
 * the `n_others` paths in `others`. 0, or a message and -1.
 */
int gpr_cli_rmm_open(struct gpr_cli_rmm *r, const char *path,
		     const struct gpr_trace *t, int force,
		     const struct stat *input, const char *const *others,
		     size_t n_others);

/* Writes every file's rows; 0, or a message and -1. */
int gpr_cli_rmm_write(struct gpr_cli_rmm *r, const struct gpr_trace *t);

/* Puts the files in place and says on stderr what each holds; 0 or -1. */
int gpr_cli_rmm_commit(struct gpr_cli_rmm *r);

/* Drops what was not committed, and frees r. */
void gpr_cli_rmm_free(struct gpr_cli_rmm *r);

#endif /* GPR_CLI_REPORT_H */
