/*
 * gpureclaim report FILE: what a trace log says. Tables of operations
 * (latency percentiles, share of the time spent waiting for a CPU), of
 * libraries and devices, the peak of driver memory, what was never freed
 * and the top call sites; --json for scripts, --chrome, --svg and --html
 * exports (the HTML report: the tables, bars and the plot in one page).
 * The reading and the renderings are the trace reader's (trace/read/);
 * this file parses the arguments and writes the output.
 *
 * Order, so that a failure leaves nothing half done: the exports are
 * opened (cli/util_file.c: safe creation, never the log itself) before
 * anything is read or rendered; then the log is read and every output
 * rendered; only when all succeeded are the exports put in place and the
 * report written to stdout. A failure prints one message and nothing on
 * stdout, and leaves existing files as they were.
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpureclaim.h"
#include "out/buf.h"
#include "../trace/read/log_export.h"
#include "../trace/read/log_report.h"

static struct env {
	int json;	    /* --json */
	const char *chrome; /* --chrome FILE */
	const char *svg;    /* --svg FILE */
	const char *html;   /* --html FILE */
	int top;	    /* --top N */
	int force;	    /* --force: replace files that are not exports */
} env;

static void usage(FILE *f)
{
	fprintf(
	    f, "USAGE: gpureclaim report FILE [--json] [--chrome OUT.json] "
	       "[--svg OUT.svg] [--html OUT.html] [--force] [--top N]\n"
	       "\n"
	       "Summarise a trace log written by `gpureclaim trace`.\n"
	       "\n"
	       "OPTIONS:\n"
	       "    --json            the report as one JSON object on stdout\n"
	       "    --chrome FILE     write a Chrome/Perfetto timeline (open "
	       "in ui.perfetto.dev)\n"
	       "    --svg FILE        write a plot of driver memory over time "
	       "by library\n"
	       "    --html FILE       write the report as a page: its tables, "
	       "bars and the plot\n"
	       "    --force           replace an existing FILE that is not an "
	       "export of ours\n"
	       "    --top N           rows per list (default 10)\n"
	       "    -h, --help        show this help\n"
	       "\n"
	       "An export replaces an earlier export of ours (or an empty "
	       "file) at its path; any\n"
	       "other file, a symbolic link included, only with --force, and "
	       "never the log\n"
	       "itself. Exports are created with mode 0600 (less the umask).\n"
	       "\n"
	       "EXAMPLES:\n"
	       "    gpureclaim report gpureclaim-1234.trace\n"
	       "    gpureclaim report run.trace --svg mem.svg --chrome "
	       "timeline.json\n"
	       "    gpureclaim report run.trace --json | jq .peak_bytes\n"
	       "\n"
	       "Exit status: 0 ok, 1 unreadable or malformed log or an "
	       "export that cannot be\n"
	       "written (then nothing is written), 2 bad usage.\n");
}

static int usage_error(const char *what, const char *arg)
{
	fprintf(stderr, "gpureclaim report: %s%s%s%s\n", what, arg ? " '" : "",
		arg ? arg : "", arg ? "'" : "");
	fprintf(stderr, "Run 'gpureclaim report --help' for the options.\n");
	return GPR_CLI_USAGE;
}

static int parse_args(int argc, char **argv, int *help)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"chrome", required_argument, NULL, 'c'},
	    {"svg", required_argument, NULL, 's'},
	    {"html", required_argument, NULL, 'H'},
	    {"top", required_argument, NULL, 't'},
	    {"force", no_argument, NULL, 'f'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	memset(&env, 0, sizeof(env));
	env.top = 10;
	opterr = 0;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			env.json = 1;
			break;
		case 'c':
			env.chrome = optarg;
			break;
		case 's':
			env.svg = optarg;
			break;
		case 'H':
			env.html = optarg;
			break;
		case 'f':
			env.force = 1;
			break;
		case 't': {
			char *end;
			errno = 0;
			long v = strtol(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end != '\0' ||
			    errno || v < 1 || v > 1000000)
				return usage_error("--top takes a number from "
						   "1 to 1000000, not",
						   optarg);
			env.top = (int)v;
			break;
		}
		case 'h':
			*help = 1;
			return GPR_CLI_OK;
		case ':':
			return usage_error("this option needs a value:",
					   argv[optind - 1]);
		default:
			return usage_error("unknown option", argv[optind - 1]);
		}
	}
	if (optind != argc - 1)
		return usage_error(optind < argc ? "expected one trace file, "
						   "not also"
						 : "expected one trace file",
				   optind < argc ? argv[optind + 1] : NULL);
	const char *outs[] = {env.chrome, env.svg, env.html};
	for (int i = 0; i < 3; i++)
		for (int j = i + 1; j < 3; j++)
			if (outs[i] && outs[j] &&
			    gpr_cli_out_same(outs[i], outs[j]))
				return usage_error("two exports name the same "
						   "file",
						   outs[j]);
	return GPR_CLI_OK;
}

/* Renders the report and the exports; 0, or GPR_CLI_ERROR with a message. */
static int render(const char *path, struct gpr_cli_out *chrome,
		  struct gpr_cli_out *svg, struct gpr_cli_out *html,
		  struct gpr__buf *b)
{
	struct gpr_trace t;
	struct gpr_trace_stats s;
	char err[256];
	/* A symbolic link named here is followed; the reader follows none. */
	char real[PATH_MAX];
	if (gpr_trace_load(realpath(path, real) ? real : path, &t, err,
			   sizeof(err)) < 0) {
		fprintf(stderr, "gpureclaim report: %s: %s\n", path, err);
		return GPR_CLI_ERROR;
	}
	if (gpr_trace_stats_compute(&t, &s) < 0) {
		fprintf(stderr, "gpureclaim report: out of memory\n");
		gpr_trace_free(&t);
		return GPR_CLI_ERROR;
	}
	int rc = 0;
	const char *failed = NULL;
	if (chrome->f && (rc = gpr_trace_export_chrome(&t, chrome->f)) < 0)
		failed = chrome->path;
	if (!failed && svg->f &&
	    (rc = gpr_trace_export_svg(&t, &s, svg->f)) < 0)
		failed = svg->path;
	if (!failed && html->f) {
		struct gpr__buf page = {0};
		gpr_trace_report_html(&page, path, &t, &s, env.top, 1);
		if (page.oom)
			rc = GPR_E_NOMEM;
		else if (gpr__buf_write(&page, html->f) < 0)
			rc = GPR_E_IO;
		if (rc < 0)
			failed = html->path;
		gpr__buf_free(&page);
	}
	if (!failed) {
		if (env.json)
			gpr_trace_report_json(b, path, &t, &s, env.top);
		else
			gpr_trace_report_text(b, path, &t, &s, env.top, 0);
		if (b->oom)
			rc = GPR_E_NOMEM;
	}
	gpr_trace_stats_free(&s);
	gpr_trace_free(&t);
	if (failed)
		fprintf(stderr, "gpureclaim report: writing %s failed: %s\n",
			failed, gpr_strerror(rc));
	else if (rc < 0)
		fprintf(stderr, "gpureclaim report: %s\n", gpr_strerror(rc));
	return rc < 0 ? GPR_CLI_ERROR : GPR_CLI_OK;
}

int gpr_cli_report(int argc, char **argv)
{
	int help = 0;
	int code = parse_args(argc, argv, &help);
	if (code != GPR_CLI_OK)
		return code;
	if (help) {
		usage(stdout);
		return GPR_CLI_OK;
	}
	const char *path = argv[optind];
	/* the log, to tell it from the outputs (the reader opens it again) */
	struct stat in;
	if (stat(path, &in) != 0) {
		fprintf(stderr, "gpureclaim report: %s: %s\n", path,
			strerror(errno));
		return GPR_CLI_ERROR;
	}
	struct gpr_cli_out chrome = {0}, svg = {0}, html = {0};
	struct gpr__buf b = {0};
	if ((env.chrome && gpr_cli_out_open(&chrome, "report", env.chrome,
					    GPR_TRACE_CHROME_SIGNATURE,
					    env.force, &in) < 0) ||
	    (env.svg &&
	     gpr_cli_out_open(&svg, "report", env.svg, GPR_TRACE_SVG_SIGNATURE,
			      env.force, &in) < 0) ||
	    (env.html &&
	     gpr_cli_out_open(&html, "report", env.html,
			      GPR_TRACE_HTML_SIGNATURE, env.force, &in) < 0)) {
		code = GPR_CLI_ERROR;
		goto cleanup;
	}
	code = render(path, &chrome, &svg, &html, &b);
	if (code == GPR_CLI_OK && (gpr_cli_out_commit(&chrome, "report") < 0 ||
				   gpr_cli_out_commit(&svg, "report") < 0 ||
				   gpr_cli_out_commit(&html, "report") < 0))
		code = GPR_CLI_ERROR;
	if (code == GPR_CLI_OK && gpr__buf_write(&b, stdout) < 0) {
		if (errno != EPIPE)
			fprintf(stderr, "gpureclaim report: stdout: %s\n",
				strerror(errno));
		code = GPR_CLI_ERROR;
	}
cleanup:
	gpr_cli_out_abort(&chrome);
	gpr_cli_out_abort(&svg);
	gpr_cli_out_abort(&html);
	gpr__buf_free(&b);
	return code;
}
