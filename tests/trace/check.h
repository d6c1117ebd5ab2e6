/*
 * What the trace test programs share (test_trace_log, test_inject,
 * test_preload): the CHECK that counts failures instead of stopping, and
 * what a scenario run in a process of its own left behind.
 */
#ifndef GPR_TEST_TRACE_CHECK_H
#define GPR_TEST_TRACE_CHECK_H

#include <stdio.h>

#include "../../trace/format/log_read.h"

/* Failed checks so far; the program's exit status says whether any. */
extern int gpr_test_failures;

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, \
				__LINE__, #cond);                              \
			gpr_test_failures++;                                   \
		}                                                              \
	} while (0)

/* A scenario's process: its wait status and the start of its stderr. */
struct gpr_test_run {
	int status;
	char err[8192];
};

/* Reads the scenario's stderr, kept in the file at path, into r->err. */
void gpr_test_run_stderr(struct gpr_test_run *r, const char *path);

/* 1 when r exited with code; otherwise says how it ended, 0. */
int gpr_test_exited(const struct gpr_test_run *r, int code);

/* Loads the log at path; a failure is counted and said. 0 or -1. */
int gpr_test_load(const char *path, struct gpr_trace *t);

/*
 * The end of a test program `name`: removes its scratch directory dir when
 * all passed (kept to look at otherwise), says how it went; the exit code.
 */
int gpr_test_finish(const char *name, const char *dir);

/*
 * Sets each variable of list, "NAME=VALUE[,NAME=VALUE...]" (NULL: none),
 * in a scenario's process before it runs. 0, or -1 for an item without
 * '=' or a list longer than 2047 bytes.
 */
int gpr_test_setenv_list(const char *list);

#endif /* GPR_TEST_TRACE_CHECK_H */
