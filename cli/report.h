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
#include "../trace/read/log_path.h"
#include "../trace/read/log_rmm.h"

/* A timeline this large (bytes: 100 MiB) is said to be hard to open. */
#define GPR_CLI_LARGE_TIMELINE (100ull << 20)

/*
 * "gpureclaim report: writing PATH failed: WHY" for an export that
 * returned rc: for GPR_E_IO, WHY is errno's ("No space left on device"),
 * which the export left set.
 */
void gpr_cli_report_failed(const char *path, int rc);

/*
 * Writes the timeline of t to o->f, at most about max_events events (0:
 * all), warning on stderr first when it will pass GPR_CLI_LARGE_TIMELINE;
 * *merged: the calls merged into counters. 0, or a message and -1.
 */
int gpr_cli_report_chrome(struct gpr_cli_out *o, const struct gpr_trace *t,
			  uint64_t max_events, uint64_t *merged);

/* One RMM log: a GPU's rows, at `path` once named. */
struct gpr_cli_rmm_file {
	int device;
	char *path;
	struct gpr_cli_out out;
	struct gpr_trace_rmm_counts counts;
};

/* RMM's logs of one trace. */
struct gpr_cli_rmm {
	const char *path; /* as --rmm-csv names it */
	struct gpr_cli_rmm_file **files;
	size_t n, cap;
	uint64_t unknown; /* rows of an unknown GPU, in no file */
	int said;	  /* a failure was said already */
};

/*
 * Writes RMM's logs of t for `path`, in one replay of the log: a file for
 * each GPU with device memory in it, created when the replay meets the
 * GPU. Then names them: one GPU, `path`; several, one each with
 * ".dev<N>" before the extension, as RMM names them (refused when `path`
 * is something other than a regular file, /dev/null say: it would not be
 * what the files are). Each name is checked as every export
 * (gpr_cli_out_check) and may not be one of the `n_others` paths in
 * `others`. 0, or a message and -1.
 */
int gpr_cli_rmm_write(struct gpr_cli_rmm *r, const char *path,
		      const struct gpr_trace *t, int force,
		      const struct stat *input, const char *const *others,
		      size_t n_others);

/* Puts the files in place; 0 or -1 with a message. */
int gpr_cli_rmm_commit(struct gpr_cli_rmm *r);

/* Says on stderr what each file holds (after the commit). */
void gpr_cli_rmm_said(const struct gpr_cli_rmm *r);

/* Drops what was not committed, and frees r. */
void gpr_cli_rmm_free(struct gpr_cli_rmm *r);

#endif /* GPR_CLI_REPORT_H */
