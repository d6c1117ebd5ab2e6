/*
 * `gpureclaim suspend` and `gpureclaim resume` as functions another part
 * of the command can call (a console's keys, a policy):
 * cli/suspend_run.c suspends or resumes one process and keeps the records,
 * cli/suspend_show.c writes what happened as text or JSON, and
 * cli/cmd_suspend.c holds the two commands' options. docs/suspend.md
 * says what the user sees.
 *
 * Use: gpr_cli_suspend_open once (it loads and initialises the driver,
 * ~0.2 s), then gpr_cli_suspend_pid / gpr_cli_resume_pid per process,
 * then gpr_cli_suspend_close. Nothing here prints: each result carries
 * its one line on failure and its notes.
 */
#ifndef GPR_CLI_SUSPEND_RUN_H
#define GPR_CLI_SUSPEND_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#include "gpureclaim.h"
#include "out/buf.h"
#include "out/json.h"
#include "suspend.h"
#include "suspend_record.h"

struct gpr_cli_suspender {
	gpr_ctx *ctx;	   /* NVML */
	gpr__suspender *s; /* the driver, initialised */
};

/* 0, or an exit code with the reason in err (one line). */
int gpr_cli_suspend_open(struct gpr_cli_suspender *c, char *err, size_t len);
void gpr_cli_suspend_close(struct gpr_cli_suspender *c);

struct gpr_cli_suspend_opts {
	int dry_run;	      /* suspend: the checks only */
	int no_release;	      /* suspend: do not ask the agent first */
	double agent_timeout; /* seconds the agent's release may take */
	unsigned lock_timeout_ms;
	/* suspend: resume on demand (docs/suspend.md): a watcher is started
	 * unless manual_resume; it looks every `poll` seconds (0: the
	 * default, GPR_CLI_POLL_S) */
	int manual_resume;
	double poll;
	/* why this is done, for the actions' log (NULL: by hand) */
	const char *cause;
};

#define GPR_CLI_POLL_S 0.5

#define GPR_CLI_NOTES 4

struct gpr_cli_suspend_result {
	struct gpr__suspend_report r;
	int dry_run;	   /* the checks only: nothing was locked */
	char command[256]; /* the process's command line, for people */
	char user[64];
	/* suspend: its agent's release first */
	int agent;	 /* 0 not asked (none, --no-release, dry run),
			  * 1 released, -1 asked and failed */
	int cache_known; /* the drop of NVML's figure over the release */
	int64_t cache_released;
	/* resume: how long it was suspended (from gpureclaim's record) */
	int suspended_known;
	double suspended_s;
	int recorded; /* suspend: the record written (ps lists it) */
	/* suspend: resume on demand: 1 a watcher watches it, -1 none could
	 * (on_demand_line says why), 0 not asked (--resume manual, a dry
	 * run, a suspend that failed) */
	int on_demand;
	int watcher;		  /* its pid */
	double on_demand_poll;	  /* its interval */
	char on_demand_line[512]; /* what the watcher said, or why none */
	char notes[GPR_CLI_NOTES][512];
	int n_notes;
};

/* Suspends pid (its agent asked to release first), recording it. The
 * result's r.rc is 0 or the failure, r.why its line. Returns r.rc. */
int gpr_cli_suspend_pid(struct gpr_cli_suspender *c, int pid,
			const struct gpr_cli_suspend_opts *o,
			struct gpr_cli_suspend_result *res);

/* Resumes pid, removing its record once it runs again. */
int gpr_cli_resume_pid(struct gpr_cli_suspender *c, int pid,
		       const struct gpr_cli_suspend_opts *o,
		       struct gpr_cli_suspend_result *res);

/* What happened, for people (several lines, each ending in \n); a
 * failure is its one line "gpureclaim suspend: ..." and the notes. */
void gpr_cli_suspend_text(struct gpr__buf *b,
			  const struct gpr_cli_suspend_result *res);

/* ... and as one JSON object (docs/suspend.md, "JSON"). */
void gpr_cli_suspend_json(struct gpr__json *j,
			  const struct gpr_cli_suspend_result *res);

/* -------- resume on demand (cli/wake_start.c, cli/wake_watch.c) -------- */

/*
 * Starts pid's watcher (`gpureclaim resume --pid N --on-demand
 * --background`, detached: its own session, no terminal, its life bound
 * to the suspension) and waits for its first word, filling res's
 * on_demand fields. 0 when it watches.
 */
int gpr_cli_wake_start(int pid, double interval,
		       struct gpr_cli_suspend_result *res);

/* `gpureclaim resume --pid N --on-demand`: the watcher itself. An exit
 * code. */
int gpr_cli_wake_run(int pid, double interval, int background, int json);

/* One line into the actions' log of this user's records folder
 * (docs/suspend.md, "The log"): what a suspend or resume did. */
void gpr_cli_suspend_log(const struct gpr_cli_suspend_result *res,
			 const char *cause);
/* ... and a cache release's (`reclaim --idle`): pid, whether it worked,
 * its exact bytes, why it was asked, its error. */
void gpr_cli_release_log(long pid, int ok, long long released,
			 const char *cause, const char *error);

/* ---------------- ps (cli/ps_suspended.c) ---------------- */

struct gpr_cli_ps_round;
/*
 * Adds to a round of `ps` the processes gpureclaim suspended that NVML no
 * longer lists, each under the GPUs it held, with the driver's state of
 * it and its host bytes; records of processes that are gone or run
 * again are removed. Costs nothing but a look at the records folder when
 * there is none; the driver is loaded (cuInit) once, at the first record.
 * 0, or -1 when out of memory.
 */
int gpr_cli_ps_suspended(struct gpr_cli_ps_round *r);

#endif /* GPR_CLI_SUSPEND_RUN_H */
