/*
 * `gpureclaim suspend --pid N` and `gpureclaim resume --pid N`: the
 * options of the two commands; the work is cli/suspend_run.c's, what the
 * user reads cli/suspend_show.c's (docs/suspend.md).
 *
 * Several pids (--pid 1,2 or --pid repeated) are done one after the
 * other, in the order given, each reported; the exit status is 1 when
 * any failed. Output is written once every process is done.
 */
#include "suspend_run.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "out/buf.h"
#include "out/json.h"
#include "ps.h"

#define MAX_PIDS 64

static struct env {
	const char *cmd;    /* "suspend" or "resume" */
	int pids[MAX_PIDS]; /* --pid N[,N...], repeatable */
	int n_pids;
	int json;	     /* --json: one JSON document */
	int dry_run;	     /* --dry-run: the checks only */
	int no_release;	     /* --no-release: the agent is not asked */
	double timeout;	     /* --timeout SECONDS: the agent's release */
	double lock_timeout; /* --lock-timeout SECONDS */
	int manual;	     /* suspend --resume manual: no watcher */
	double poll;	     /* --poll SECONDS: the watcher's interval */
	int on_demand;	     /* resume --on-demand: be the watcher */
	int background;	     /* resume --background: detached */
} env;

static const char suspend_help[] =
    "USAGE: gpureclaim suspend --pid N [--pid N...] [--dry-run] [--json]\n"
    "                          [--no-release] [--timeout SECONDS]\n"
    "                          [--lock-timeout SECONDS]\n"
    "                          [--resume on-demand|manual] [--poll SECONDS]\n"
    "\n"
    "Give a whole process's GPU memory back without ending it: the\n"
    "driver's checkpoint (NVIDIA driver 570 or later) stops its CUDA\n"
    "calls, copies its GPU memory into its own host memory and releases\n"
    "the GPU. It is resumed on demand: a watcher brings it back as soon\n"
    "as the program makes a CUDA call again (or `gpureclaim resume` does),\n"
    "the program noticing nothing but the wait. First its agent, if it\n"
    "runs one, releases its caches, so only live data moves. Refused,\n"
    "before anything is stopped, when host memory or the process's memory\n"
    "cgroup cannot hold it, or when the process is another user's (root\n"
    "may). Not for processes with managed (UVM) or IPC-shared memory.\n"
    "\n"
    "OPTIONS:\n"
    "    --pid N             the process (repeat it, or N,N)\n"
    "    --dry-run           say what would move and whether the checks\n"
    "                        pass; nothing is stopped\n"
    "    --json              one JSON document (exact bytes)\n"
    "    --no-release        do not ask its agent to release first\n"
    "    --timeout SECONDS   how long the agent's release may take (30)\n"
    "    --lock-timeout SECONDS\n"
    "                        how long its submitted work may take to\n"
    "                        finish before the lock gives up (30)\n"
    "    --resume on-demand|manual\n"
    "                        on-demand (the default): a watcher resumes it\n"
    "                        at its next CUDA call; manual: it stays\n"
    "                        suspended until `gpureclaim resume`\n"
    "    --poll SECONDS      how often the watcher looks at its threads\n"
    "                        (0.5; a call through gpureclaim's interposer\n"
    "                        or a notebook's agent asks at once)\n"
    "    -h, --help          show this help\n"
    "\n"
    "EXAMPLES:\n"
    "    gpureclaim suspend --pid 4242 --dry-run\n"
    "    gpureclaim suspend --pid 4242\n"
    "    gpureclaim ps                  # shows it suspended\n"
    "    gpureclaim resume --pid 4242\n"
    "    gpureclaim suspend --pid 4242 --resume manual\n"
    "\n"
    "Exit status: 0 done; 1 refused or failed (the process is left\n"
    "running, or suspended and resumable: the message says which); 2 bad\n"
    "usage.\n";

static const char resume_help[] =
    "USAGE: gpureclaim resume --pid N [--pid N...] [--dry-run] [--json]\n"
    "       gpureclaim resume --pid N --on-demand [--poll SECONDS]\n"
    "                         [--background] [--json]\n"
    "\n"
    "Bring back a process that `gpureclaim suspend` (or cuda-checkpoint)\n"
    "suspended: its memory goes back onto the GPUs it was on, at the\n"
    "same addresses, and its CUDA calls go on. Says how long it was\n"
    "suspended. When the GPU lacks the room, it stays suspended, its\n"
    "memory kept in host memory: free some and run this again.\n"
    "\n"
    "With --on-demand, wait until the program needs the GPU again and\n"
    "resume it then: a thread of it waiting in a CUDA call (looked for\n"
    "every --poll seconds), or its call through gpureclaim's interposer\n"
    "or its notebook's agent asking (at once). `gpureclaim suspend` starts\n"
    "one such watcher in the background for each process it suspends.\n"
    "\n"
    "OPTIONS:\n"
    "    --pid N             the process (repeat it, or N,N)\n"
    "    --dry-run           say whether it can be resumed\n"
    "    --json              one JSON document (exact bytes); with\n"
    "                        --on-demand one a line: the watch, then the\n"
    "                        resume\n"
    "    --on-demand         resume it when it needs the GPU (one --pid)\n"
    "    --poll SECONDS      how often to look at its threads (0.5)\n"
    "    --background        watch detached, once it has said it watches\n"
    "    -h, --help          show this help\n"
    "\n"
    "EXAMPLES:\n"
    "    gpureclaim resume --pid 4242\n"
    "    gpureclaim resume --pid 4242 --json | jq .restored\n"
    "    gpureclaim resume --pid 4242 --on-demand --poll 2\n"
    "\n"
    "Exit status: 0 done (with --on-demand: resumed, or it exited or runs\n"
    "again); 1 refused or failed; 2 bad usage.\n";

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "gpureclaim %s: ", env.cmd);
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nRun 'gpureclaim %s --help' for the options.\n",
		env.cmd);
	return GPR_CLI_USAGE;
}

/* --pid's value: positive pids separated by commas. */
static int add_pids(const char *s)
{
	const char *p = s;
	for (;;) {
		char *end;
		errno = 0;
		long v = strtol(p, &end, 10);
		if (*p < '0' || *p > '9' || errno || v <= 0 || v > 0x7fffffff ||
		    (*end && *end != ','))
			return -1;
		int dup = 0;
		for (int i = 0; i < env.n_pids; i++)
			dup |= env.pids[i] == (int)v;
		if (!dup) {
			if (env.n_pids == MAX_PIDS)
				return -1;
			env.pids[env.n_pids++] = (int)v;
		}
		if (!*end)
			return 0;
		p = end + 1;
	}
}

static int parse_args(int argc, char **argv, int *help)
{
	enum {
		OPT_PID = 256,
		OPT_JSON,
		OPT_DRY,
		OPT_POLL,
		/* suspend's only */
		OPT_NO_RELEASE,
		OPT_TIMEOUT,
		OPT_LOCK,
		OPT_RESUME,
		/* resume's only */
		OPT_ON_DEMAND,
		OPT_BACKGROUND,
	};
	/* one table; what only one of them takes is refused for the other */
	static const struct option longopts[] = {
	    {"pid", required_argument, NULL, OPT_PID},
	    {"json", no_argument, NULL, OPT_JSON},
	    {"dry-run", no_argument, NULL, OPT_DRY},
	    {"poll", required_argument, NULL, OPT_POLL},
	    {"no-release", no_argument, NULL, OPT_NO_RELEASE},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	    {"lock-timeout", required_argument, NULL, OPT_LOCK},
	    {"resume", required_argument, NULL, OPT_RESUME},
	    {"on-demand", no_argument, NULL, OPT_ON_DEMAND},
	    {"background", no_argument, NULL, OPT_BACKGROUND},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int resume = strcmp(argv[0], "resume") == 0;
	env = (struct env){.cmd = resume ? "resume" : "suspend",
			   .timeout = 30,
			   .lock_timeout = 30,
			   .poll = GPR_CLI_POLL_S};
	opterr = 0;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		if (resume && c >= OPT_NO_RELEASE && c < OPT_ON_DEMAND)
			return usage_error("%s",
					   "--no-release, --timeout, "
					   "--lock-timeout and --resume are "
					   "suspend's, not resume's");
		if (!resume && c >= OPT_ON_DEMAND)
			return usage_error("%s",
					   "--on-demand and --background are "
					   "resume's (suspend resumes on "
					   "demand unless --resume manual)");
		switch (c) {
		case OPT_PID:
			if (add_pids(optarg) != 0)
				return usage_error(
				    "--pid needs process ids (4242, or "
				    "4242,4343; at most 64), not '%s'",
				    optarg);
			break;
		case OPT_JSON:
			env.json = 1;
			break;
		case OPT_DRY:
			env.dry_run = 1;
			break;
		case OPT_NO_RELEASE:
			env.no_release = 1;
			break;
		case OPT_TIMEOUT:
		case OPT_LOCK:
			if (gpr_cli_parse_seconds(
				optarg, c == OPT_LOCK ? &env.lock_timeout
						      : &env.timeout))
				return usage_error(
				    "the timeout needs a number of seconds "
				    "from 0.1 to 86400 (0.5, 30), not '%s'",
				    optarg);
			break;
		case OPT_POLL:
			if (gpr_cli_parse_seconds(optarg, &env.poll))
				return usage_error(
				    "--poll needs a number of seconds from 0.1 "
				    "to 86400 (0.5, 2), not '%s'",
				    optarg);
			break;
		case OPT_RESUME:
			if (strcmp(optarg, "manual") != 0 &&
			    strcmp(optarg, "on-demand") != 0)
				return usage_error(
				    "--resume is on-demand or manual, not '%s'",
				    optarg);
			env.manual = strcmp(optarg, "manual") == 0;
			break;
		case OPT_ON_DEMAND:
			env.on_demand = 1;
			break;
		case OPT_BACKGROUND:
			env.background = 1;
			break;
		case 'h':
			*help = 1;
			return GPR_CLI_OK;
		case ':':
			return usage_error("%s needs a value",
					   argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'",
					   argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (!env.n_pids)
		return usage_error("%s", "--pid needs a process id");
	if (env.on_demand && (env.n_pids > 1 || env.dry_run))
		return usage_error("%s", "--on-demand watches one process (one "
					 "--pid), and has no --dry-run");
	if (env.background && !env.on_demand)
		return usage_error("%s", "--background goes with --on-demand");
	return GPR_CLI_OK;
}

static int run(int argc, char **argv)
{
	int help = 0;
	int code = parse_args(argc, argv, &help);
	if (code != GPR_CLI_OK)
		return code;
	int resume = strcmp(env.cmd, "resume") == 0;
	if (help) {
		fputs(resume ? resume_help : suspend_help, stdout);
		return GPR_CLI_OK;
	}
	if (env.on_demand)
		return gpr_cli_wake_run(env.pids[0], env.poll, env.background,
					env.json);
	struct gpr_cli_suspender c;
	char err[768];
	if (gpr_cli_suspend_open(&c, err, sizeof err) != GPR_CLI_OK) {
		fprintf(stderr, "gpureclaim %s: %s\n", env.cmd, err);
		return GPR_CLI_ERROR;
	}
	struct gpr_cli_suspend_opts o = {
	    .dry_run = env.dry_run,
	    .no_release = env.no_release,
	    .agent_timeout = env.timeout,
	    .lock_timeout_ms = (unsigned)(env.lock_timeout * 1000),
	    .manual_resume = env.manual,
	    .poll = env.poll,
	};
	struct gpr__buf out = {0}, errs = {0};
	struct gpr__json j;
	struct timespec when;
	clock_gettime(CLOCK_REALTIME, &when);
	if (env.json) {
		gpr__json_init(&j, &out);
		gpr__json_object(&j);
		gpr_cli_json_when(&j, &when);
		gpr__json_kv_bool(&j, "dry_run", env.dry_run);
		gpr__json_key(&j, "processes");
		gpr__json_array(&j);
	}
	code = GPR_CLI_OK;
	struct gpr_cli_suspend_result *res = malloc(sizeof *res);
	for (int i = 0; res && i < env.n_pids; i++) {
		int rc = resume ? gpr_cli_resume_pid(&c, env.pids[i], &o, res)
				: gpr_cli_suspend_pid(&c, env.pids[i], &o, res);
		if (rc)
			code = GPR_CLI_ERROR;
		if (env.json)
			gpr_cli_suspend_json(&j, res);
		else
			gpr_cli_suspend_text(rc && !env.dry_run ? &errs : &out,
					     res);
	}
	if (!res) {
		fprintf(stderr, "gpureclaim: out of memory\n");
		code = GPR_CLI_ERROR;
	}
	free(res);
	if (env.json) {
		gpr__json_array_end(&j);
		gpr__json_object_end(&j);
		gpr__buf_puts(&out, "\n");
	}
	gpr_cli_suspend_close(&c);
	if (out.oom || errs.oom) {
		fprintf(stderr, "gpureclaim: out of memory\n");
		code = GPR_CLI_ERROR;
	} else {
		gpr__buf_write(&errs, stderr);
		if (gpr__buf_write(&out, stdout) != 0)
			code = GPR_CLI_ERROR;
	}
	gpr__buf_free(&out);
	gpr__buf_free(&errs);
	return code;
}

int gpr_cli_suspend(int argc, char **argv)
{
	return run(argc, argv);
}

int gpr_cli_resume(int argc, char **argv)
{
	return run(argc, argv);
}
