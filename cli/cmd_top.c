/*
 * `gpureclaim top`: the node's GPU memory, live, and the actions on it at
 * one key (docs/top.md). This file holds the options; cli/top.h lists the
 * parts.
 *
 * Decisions (docs/top.md repeats them for users):
 * - On a terminal, the view (ncurses); otherwise (a pipe, a file, a
 *   script) one reading, laid out as the view lays it out for 80 columns
 *   (or $COLUMNS) with every process, and the exit: the same output a
 *   person would copy from the screen. --json: one reading as the JSON
 *   document of `ps --explain --json`, whose figures the screen shows.
 * - The interval is read as `ps --watch` reads it (0.1 to 86400 s).
 * - Colours as ps: --color=auto (a terminal, NO_COLOR unset, TERM not
 *   dumb), always, never; without colour the bars are told apart by
 *   their letters, and the selection by reverse video.
 * - Exit status: 0; 1 when NVML cannot be read (or, one-shot, a GPU
 *   could not be: the others are shown), or the terminal cannot be
 *   used; 2 bad usage.
 */
#include "top.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver_info.h"

#define MAX_SELECT 64

static struct env {
	double interval;	/* -d, --interval SECONDS */
	double timeout;		/* --timeout SECONDS: each agent's longest */
	int select[MAX_SELECT]; /* -i, --gpu INDEX[,INDEX] */
	int n_select;
	const char *color; /* --color[=WHEN] */
	int json;	   /* --json: one reading as JSON */
} env;

static const char usage_text[] =
    "USAGE: gpureclaim top [-d SECONDS] [-i INDEX]... [--timeout SECONDS]\n"
    "                      [--color[=WHEN]] [--json]\n"
    "\n"
    "The node's GPU memory, live: per GPU a bar of its memory by part\n"
    "(live, releasable, not releasable, workspaces, pools, the rest, the\n"
    "processes without an agent, others, free) and by process; then the\n"
    "processes, largest first, each with its parts where its agent\n"
    "answers (docs/agent.md) and its state: running (how busy its GPU\n"
    "is), idle for how long, or suspended. Keys act on the selected\n"
    "process, each after a question that says what it will do and the\n"
    "bytes.\n"
    "\n"
    "KEYS:\n"
    "    Up/Down, j/k, PgUp/PgDn, Home/End   select a process\n"
    "    r      release its cached memory (its agent; the bytes\n"
    "           released, exactly)\n"
    "    h      who holds its live memory (its agent's heap walk)\n"
    "    z      suspend it: its GPU memory to host memory, its cache\n"
    "           released first (gpureclaim suspend, its dry run first)\n"
    "    u      resume a suspended process (gpureclaim resume)\n"
    "    R      reclaim: every agent's caches (gpureclaim reclaim),\n"
    "           its dry run first\n"
    "    s      sort by memory, or by what a release would give back\n"
    "    Esc    back to the keys;  q, Ctrl-C   quit\n"
    "\n"
    "OPTIONS:\n"
    "    -d, --interval SECONDS   read every SECONDS (0.1 to 86400, as\n"
    "                             ps --watch; default 1)\n"
    "    -i, --gpu INDEX          only GPU INDEX (NVML index); repeat it\n"
    "                             or give a comma list (-i 0,2)\n"
    "    --timeout SECONDS        each agent's longest answer (default 5);\n"
    "                             the screen never waits for one\n"
    "    --color[=WHEN]           auto (on a terminal, unless NO_COLOR is\n"
    "                             set; the default), always, never\n"
    "    --json                   one reading as JSON (ps --explain\n"
    "                             --json's document), then exit\n"
    "    -h, --help               show this help\n"
    "\n"
    "Not on a terminal (a pipe, a file) it prints one reading, every\n"
    "process listed, and exits.\n"
    "\n"
    "EXAMPLES:\n"
    "    gpureclaim top                   # every GPU, every second\n"
    "    gpureclaim top -d 0.5 -i 0       # GPU 0, twice a second\n"
    "    gpureclaim top | cat             # one reading as text\n"
    "    gpureclaim top --json | jq '.gpus[].processes[].activity'\n"
    "\n"
    "Exit status: 0 ok; 1 NVML or the terminal cannot be used (or, for one\n"
    "reading, a GPU could not be read); 2 bad usage.\n";

static int parse_args(int argc, char **argv, int *help)
{
	enum { OPT_JSON = 256, OPT_COLOR, OPT_TIMEOUT };
	static const struct option longopts[] = {
	    {"interval", required_argument, NULL, 'd'},
	    {"gpu", required_argument, NULL, 'i'},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	    {"color", optional_argument, NULL, OPT_COLOR},
	    {"json", no_argument, NULL, OPT_JSON},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	env = (struct env){.interval = 1, .timeout = 5, .color = "auto"};
	opterr = 0;
	optind = 1;
	int c, code = GPR_CLI_OK;
	while (code == GPR_CLI_OK &&
	       (c = getopt_long(argc, argv, ":hd:i:", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			code = gpr_cli_opt_seconds("top", "--interval", optarg,
						   &env.interval);
			break;
		case 'i':
			code = gpr_cli_opt_gpus("top", optarg, env.select,
						&env.n_select, MAX_SELECT);
			break;
		case OPT_TIMEOUT:
			code = gpr_cli_opt_seconds("top", "--timeout", optarg,
						   &env.timeout);
			break;
		case OPT_COLOR:
			code = gpr_cli_opt_color("top", argc, argv, &env.color);
			break;
		case OPT_JSON:
			env.json = 1;
			break;
		case 'h':
			*help = 1;
			return GPR_CLI_OK;
		default: /* ':' or '?' */
			return gpr_cli_option_error("top", c, argv);
		}
	}
	if (code == GPR_CLI_OK && optind < argc)
		return gpr_cli_usage_error("top", "unexpected argument '%s'",
					   argv[optind]);
	return code;
}

/* The width of the one-shot text: $COLUMNS when it is a number from 40
 * to 1000, else 80. */
static int text_width(void)
{
	const char *c = getenv("COLUMNS");
	char *end;
	long w = c && *c ? strtol(c, &end, 10) : 0;
	return c && *c && !*end && w >= 40 && w <= 1000 ? (int)w : 80;
}

/* One reading, as text or JSON, on stdout. */
static int one_reading(gpr_ctx *ctx)
{
	struct gpr_cli_top_reading r;
	int code = GPR_CLI_OK;
	if (gpr_cli_top_read_once(ctx, env.select, env.n_select, env.timeout,
				  &r, &code) != 0)
		return code;
	char driver[96] = "";
	struct gpr__buf out = {0};
	if (env.json) {
		r.round.driver =
		    gpr__driver_version(ctx, driver, sizeof driver) == 0
			? driver
			: NULL;
		gpr_cli_ps_json_agents(&out, &r.round, &r.agents);
	} else {
		struct gpr_cli_top_ui ui = {0};
		struct gpr_cli_top_layout l = {.width = text_width()};
		struct gpr_cli_top_screen s = {0};
		gpr_cli_top_view(&r, &ui, &l, &s);
		gpr_cli_top_text(&s, &out);
		if (s.oom)
			out.oom = 1;
		gpr_cli_top_screen_free(&s);
	}
	for (size_t k = 0; k < r.round.n; k++)
		if (r.round.gpus[k].err)
			code = GPR_CLI_ERROR;
	gpr_cli_top_reading_free(&r);
	if (out.oom) {
		fprintf(stderr, "gpureclaim: out of memory\n");
		code = GPR_CLI_ERROR;
	} else if (gpr__buf_write(&out, stdout) != 0) {
		code = GPR_CLI_ERROR;
	}
	gpr__buf_free(&out);
	return code;
}

int gpr_cli_top(int argc, char **argv)
{
	int help = 0;
	int code = parse_args(argc, argv, &help);
	if (code != GPR_CLI_OK)
		return code;
	if (help) {
		fputs(usage_text, stdout);
		return GPR_CLI_OK;
	}
	gpr_ctx *ctx = NULL;
	int err = gpr_open(NULL, &ctx);
	if (err != 0) {
		fprintf(stderr, "gpureclaim: %s\n", gpr_strerror(err));
		return GPR_CLI_ERROR;
	}
	signal(SIGPIPE, SIG_IGN);
	if (env.json || !isatty(STDOUT_FILENO)) {
		code = one_reading(ctx);
		gpr_close(ctx);
		return code;
	}
	/* NVML's answer before the screen is taken: a machine without a
	 * driver is one line on a normal terminal */
	int n = 0;
	err = gpr_gpu_count(ctx, &n);
	if (err != 0) {
		char detail[512], msg[768];
		snprintf(detail, sizeof(detail), "%s", gpr_last_error(ctx));
		gpr_cli_ps_describe(err, detail, msg, sizeof(msg));
		fprintf(stderr, "gpureclaim: %s\n", msg);
		gpr_close(ctx);
		return GPR_CLI_ERROR;
	}
	for (int s = 0; s < env.n_select; s++)
		if (env.select[s] >= n) {
			fprintf(stderr,
				"gpureclaim top: no GPU %d: NVML sees %d\n",
				env.select[s], n);
			gpr_close(ctx);
			return GPR_CLI_USAGE;
		}
	struct gpr_cli_top_opts o = {
	    .ctx = ctx,
	    .select = env.select,
	    .n_select = env.n_select,
	    .interval = env.interval,
	    .timeout = env.timeout,
	    .color = gpr_cli_color(env.color, STDOUT_FILENO) == 1,
	};
	code = gpr_cli_top_screen(&o);
	gpr_close(ctx);
	return code;
}
