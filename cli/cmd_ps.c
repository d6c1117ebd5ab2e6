/*
 * `gpureclaim ps`: per GPU, the processes holding memory on it and how
 * much, as NVML's per-process figure (what nvidia-smi lists) says. This
 * file holds the options and the rounds; cli/ps.h lists the other parts.
 *
 * Decisions (docs/ps.md repeats them for users):
 * - Output is built whole in memory and written only once a round is
 *   complete, so stdout never holds half a JSON document.
 * - A GPU that cannot be queried is shown as an error line (JSON: an
 *   object with "error") and the others are still listed; the exit code
 *   is then 1.
 * - Where NVML withholds the per-process figure (MIG), the pids are still
 *   listed with bytes "n/a" (JSON: null, "bytes_known": false), a note
 *   goes to stderr and the exit code is 0: the list is what the driver
 *   knows, and JSON readers see the missing figure on each process.
 * - An index given with -i that no GPU has is bad usage (exit 2); it can
 *   only be checked once NVML answered.
 * - A one-shot listing leaves the handle open when it exits: closing it
 *   calls nvmlShutdown (2.7-4 ms on an H200), work the exit makes moot;
 *   it returns to the shell once its output is written, the kernel's
 *   release of NVML's files left to a detached process, and NVML is
 *   started on a thread while the rest is prepared (cli/ps_start.c and
 *   cli/util_exit.c say why).
 */
#include "ps.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driver_info.h"
#include "gpureclaim.h"
#include "out/buf.h"
#include "ps_explain.h"
#include "suspend_run.h"

#define MAX_SELECT 64

static struct env {
	int json;		/* --json: one JSON document per round */
	double watch;		/* --watch SECONDS: 0 runs once */
	int select[MAX_SELECT]; /* -i/--gpu INDEX[,INDEX]: only these */
	int n_select;		/* 0: every GPU */
	const char *color;	/* --color[=WHEN]: always, never, auto */
	int explain;		/* --explain: ask the agents too */
	double timeout;		/* --timeout SECONDS: each agent's longest */
	int timeout_given;
} env = {
    .timeout = 5,
    .json = 0,
    .watch = 0,
    .n_select = 0,
    .color = "auto",
};

static const char usage_text[] =
    "USAGE: gpureclaim ps [--json] [--watch SECONDS] [-i INDEX]... "
    "[--color[=WHEN]]\n"
    "       gpureclaim ps --explain [-i INDEX]... [--json] "
    "[--timeout SECONDS]\n"
    "       gpureclaim ps --dask ADDRESS [--workers ADDR...] "
    "[--timeout SECONDS] [--json]\n"
    "\n"
    "List, per GPU, the processes holding memory on it: pid, user,\n"
    "command, the driver's per-process figure (as nvidia-smi shows it)\n"
    "and its share of the GPU's memory. A process that has exited while\n"
    "the driver still holds its memory shows as <exited>; one this pid\n"
    "namespace cannot see (a container's view of a host pid) as\n"
    "<not in this pid namespace>. One holding about a CUDA context on a\n"
    "GPU while it works on another is marked <stray context: works on GPU\n"
    "N>: the missing torch.cuda.set_device of pytorch#135279.\n"
    "\n"
    "OPTIONS:\n"
    "    --json              one JSON document, with the time, host and\n"
    "                        driver version (with --watch: one per line,\n"
    "                        JSON Lines)\n"
    "    --watch SECONDS     repeat every SECONDS (0.1 to 86400, e.g. 0.5)\n"
    "                        until Ctrl-C; on a terminal the listing fits\n"
    "                        the window\n"
    "    -i, --gpu INDEX     only GPU INDEX (NVML index); repeat it or\n"
    "                        give a comma list (-i 0,2)\n"
    "    --color[=WHEN]      colour the text: auto (on a terminal, unless\n"
    "                        NO_COLOR is set; the default), always, never\n"
    "    --explain           also each process's parts, asked of its agent\n"
    "                        (docs/agent.md; gpureclaim ps --explain --help)\n"
    "    --dask ADDRESS      every GPU of a Dask cluster's workers instead,\n"
    "                        each worker about its own process\n"
    "                        (gpureclaim ps --dask ADDRESS --help)\n"
    "    -h, --help          show this help\n"
    "\n"
    "EXAMPLES:\n"
    "    gpureclaim ps                    # every GPU\n"
    "    gpureclaim ps -i 0               # GPU 0 only\n"
    "    gpureclaim ps --json | jq '.gpus[].processes[].pid'\n"
    "    gpureclaim ps --watch 1          # refresh every second\n"
    "    gpureclaim ps --json --watch 0.5 > gpu.jsonl\n"
    "    gpureclaim ps --explain          # and what each agent says\n"
    "\n"
    "Exit status: 0 ok; 1 runtime error (no NVIDIA driver, a GPU that\n"
    "cannot be queried: the others are still listed); 2 bad usage.\n"
    "Memory that NVML does not report per process (MIG) shows as n/a.\n";

static int usage_error(const char *fmt, const char *arg)
{
	return gpr_cli_usage_error("ps", fmt, arg);
}

/* Parses argv into env; GPR_CLI_OK, or an exit code to return now. */
static int parse_args(int argc, char **argv, int *help)
{
	enum { OPT_JSON = 256, OPT_WATCH, OPT_COLOR, OPT_EXPLAIN, OPT_TIMEOUT };
	static const struct option longopts[] = {
	    {"explain", no_argument, NULL, OPT_EXPLAIN},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	    {"json", no_argument, NULL, OPT_JSON},
	    {"watch", required_argument, NULL, OPT_WATCH},
	    {"gpu", required_argument, NULL, 'i'},
	    {"color", optional_argument, NULL, OPT_COLOR},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	opterr = 0;
	optind = 1;
	int c, code = GPR_CLI_OK;
	while (code == GPR_CLI_OK &&
	       (c = getopt_long(argc, argv, ":hi:", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_JSON:
			env.json = 1;
			break;
		case OPT_WATCH:
			code = gpr_cli_opt_seconds("ps", "--watch", optarg,
						   &env.watch);
			break;
		case 'i':
			code = gpr_cli_opt_gpus("ps", optarg, env.select,
						&env.n_select, MAX_SELECT);
			break;
		case OPT_EXPLAIN:
			env.explain = 1;
			break;
		case OPT_TIMEOUT:
			code = gpr_cli_opt_seconds("ps", "--timeout", optarg,
						   &env.timeout);
			env.timeout_given = 1;
			break;
		case OPT_COLOR:
			code = gpr_cli_opt_color("ps", argc, argv, &env.color);
			break;
		case 'h':
			*help = 1;
			return GPR_CLI_OK;
		default: /* ':' or '?' */
			return gpr_cli_option_error("ps", c, argv);
		}
	}
	if (code != GPR_CLI_OK)
		return code;
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (env.explain && env.watch > 0)
		return usage_error("%s", "--explain asks the agents once; it "
					 "takes no --watch");
	if (env.timeout_given && !env.explain)
		return usage_error("%s", "--timeout is --explain's (how long "
					 "each agent may take)");
	return GPR_CLI_OK;
}

/* On stderr, once per run however many rounds --watch makes: why a GPU
 * shows figures as n/a. */
static void note_hidden(const struct gpr_cli_ps_round *r)
{
	static int shown;
	for (size_t k = 0; k < r->n && !shown; k++) {
		const struct gpr_cli_ps_gpu *g = &r->gpus[k];
		if (g->err || g->hidden == 0)
			continue;
		if (g->info.mig)
			fprintf(stderr,
				"gpureclaim: NVML has no per-process figures "
				"on MIG (GPU %d): memory shown as n/a\n",
				g->index);
		else
			fprintf(stderr,
				"gpureclaim: NVML withholds the memory of %zu "
				"process%s on GPU %d: shown as n/a\n",
				g->hidden, g->hidden == 1 ? "" : "es",
				g->index);
		shown = 1;
	}
}

/* Each failed GPU on stderr too: a script reading stdout sees the code. */
/* Whether a GPU could not be read (exit status 1). Its error is said
 * once, where the GPU is listed ("GPU 1: error: ..." in the text, "error"
 * in JSON), not again on stderr. */
static void note_errors(const struct gpr_cli_ps_round *r, int *failed)
{
	*failed = 0;
	for (size_t k = 0; k < r->n; k++)
		if (r->gpus[k].err)
			*failed = 1;
}

/*
 * Waits `seconds` with SIGINT blocked and taken with sigtimedwait: a
 * Ctrl-C during a round is kept pending and ends the wait that follows,
 * so the round's output is always written whole. 1 if SIGINT came.
 */
static int wait_interrupted(const sigset_t *set, double seconds)
{
	struct timespec end, now;
	clock_gettime(CLOCK_MONOTONIC, &end);
	long long ns = (long long)(seconds * 1e9);
	end.tv_sec += ns / 1000000000LL;
	end.tv_nsec += ns % 1000000000LL;
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		long long left = (end.tv_sec - now.tv_sec) * 1000000000LL +
				 (end.tv_nsec - now.tv_nsec);
		if (left <= 0)
			return 0;
		struct timespec ts = {left / 1000000000LL, left % 1000000000LL};
		int sig = sigtimedwait(set, NULL, &ts);
		if (sig == SIGINT)
			return 1;
		if (sig < 0 && errno == EAGAIN)
			return 0;
	}
}

/* The handle of a one-shot listing, left open for the exit to end (see
 * the top of the file); kept here so leak checkers see it reachable. */
static gpr_ctx *volatile left_open;

int gpr_cli_ps(int argc, char **argv)
{
	gpr_cli_prof_start();
	double t0 = gpr_cli_prof_clock();
	int help = 0;
	int code = parse_args(argc, argv, &help);
	if (code != GPR_CLI_OK)
		return code;
	if (help) {
		fputs(usage_text, stdout);
		return GPR_CLI_OK;
	}
	struct gpr_cli_ps_variant variant;
	if (gpr_cli_ps_variant(&variant) != 0)
		return GPR_CLI_USAGE;

	struct gpr_cli_ps_start start = {0};
	char driver[96] = "";
	char host[256] = "";
	struct gpr_cli_ps_round round = {.host = host};
	struct gpr_cli_ps_layout layout = {
	    .color = !env.json && gpr_cli_color(env.color, STDOUT_FILENO),
	    .watch = env.watch};
	gpr_ctx *ctx = NULL;
	struct gpr__buf out = {0};
	struct gpr_cli_ps_agents agents = {0};
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	/* the profile's log: the core's NVML steps, with their times */
	GPR_OPTS(gpr_opts, opts,
		 .log = gpr_cli_prof_on() ? gpr_cli_prof_log : NULL,
		 .log_level = GPR_LOG_DEBUG);
	int err = gpr_open(&opts, &ctx);
	if (err != 0) {
		fprintf(stderr, "gpureclaim: %s\n", gpr_strerror(err));
		code = GPR_CLI_ERROR;
		goto cleanup;
	}
	gpr_cli_prof_step(t0, "options, handle");
	gpr_cli_ps_start(&start, ctx, &variant);
	if (env.explain) { /* the agents asked while NVML starts */
		t0 = gpr_cli_prof_clock();
		gpr_cli_ps_agents_start(&agents, env.timeout);
		gpr_cli_prof_step(t0, "agents found and asked (%zu)", agents.n);
	}

	t0 = gpr_cli_prof_clock();
	/* A reader that leaves (`| head -1`) ends the run through EPIPE,
	 * quietly with 0, instead of killing it with SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	tzset();
	if (gethostname(host, sizeof(host) - 1) != 0)
		host[0] = '\0';
	int tty = isatty(STDOUT_FILENO);
	gpr_cli_prof_step(t0, "time zone, host name, terminal");
	if (!variant.serial) {
		t0 = gpr_cli_prof_clock();
		gpr_cli_proc_warm();
		gpr_cli_prof_step(t0,
				  "warm-up: pid namespace, NSS (getpwuid_r)");
	}
	gpr_cli_ps_started(&start);
	if (env.watch > 0)
		sigprocmask(SIG_BLOCK, &set, NULL);
	int clear = env.watch > 0 && !env.json && tty;
	for (int first = 1;; first = 0) {
		gpr__buf_reset(&out);
		if (gpr_cli_ps_query(ctx, env.select, env.n_select,
				     variant.split, &round, &code) < 0)
			goto cleanup;
		t0 = gpr_cli_prof_clock();
		/* the processes gpureclaim suspended, which NVML no longer
		 * lists (docs/suspend.md) */
		if (!env.explain && gpr_cli_ps_suspended(&round) != 0) {
			fprintf(stderr, "gpureclaim: out of memory\n");
			gpr_cli_ps_round_free(&round);
			code = GPR_CLI_ERROR;
			goto cleanup;
		}
		gpr_cli_prof_step(t0, "suspended processes' records");
		t0 = gpr_cli_prof_clock();
		/* the driver's version, once, from the handle's own NVML
		 * (up already: it costs µs, and NVML is loaded once) */
		if (first && env.json) {
			round.driver =
			    gpr__driver_version(ctx, driver, sizeof driver) == 0
				? driver
				: NULL;
			gpr_cli_prof_step(t0, "driver version (--json)");
			t0 = gpr_cli_prof_clock();
		}
		int failed;
		note_errors(&round, &failed);
		note_hidden(&round);
		if (!env.json && tty)
			gpr_cli_term_size(STDOUT_FILENO, &layout.width,
					  &layout.height);
		if (!clear)
			layout.height = 0; /* a one-shot listing may scroll */
		if (clear)
			gpr__buf_puts(&out, "\033[H\033[2J");
		if (env.explain) {
			double t1 = gpr_cli_prof_clock();
			gpr_cli_ps_work(ctx, &round, NULL);
			gpr_cli_prof_step(t1, "GPU work (NVML's samples)");
			t1 = gpr_cli_prof_clock();
			gpr_cli_ps_agents_wait(&agents);
			gpr_cli_ps_agents_check(&agents, &round);
			gpr_cli_prof_step(t1, "agents answered");
		}
		if (env.json)
			gpr_cli_ps_json_agents(&out, &round,
					       env.explain ? &agents : NULL);
		else if (env.explain)
			gpr_cli_ps_explain_text(&out, &round, &agents);
		else
			gpr_cli_ps_text(&out, &round, &layout);
		gpr_cli_ps_round_free(&round);
		gpr_cli_prof_step(t0, "render %s", env.json ? "JSON" : "text");
		if (out.oom) {
			fprintf(stderr, "gpureclaim: out of memory\n");
			code = GPR_CLI_ERROR;
			goto cleanup;
		}
		t0 = gpr_cli_prof_clock();
		if (gpr__buf_write(&out, stdout) != 0) {
			/* EPIPE: SIGPIPE ignored, the reader left */
			code = errno == EPIPE ? GPR_CLI_OK : GPR_CLI_ERROR;
			if (code)
				fprintf(stderr, "gpureclaim: stdout: %s\n",
					strerror(errno));
			goto cleanup;
		}
		gpr_cli_prof_step(t0, "write stdout");
		code = failed ? GPR_CLI_ERROR : GPR_CLI_OK;
		if (env.watch <= 0)
			break;
		if (wait_interrupted(&set, env.watch)) {
			code = GPR_CLI_OK;
			break;
		}
	}
cleanup:
	gpr_cli_ps_started(&start);	 /* gpr_open failed: nothing running */
	gpr_cli_ps_agents_wait(&agents); /* a failed query: none left */
	gpr_cli_ps_agents_free(&agents);
	gpr__buf_free(&out);
	if (env.watch > 0 || code != GPR_CLI_OK)
		gpr_close(ctx);
	else
		left_open = ctx;
	return gpr_cli_ps_end(&start, code, env.watch <= 0);
}
