/*
 * gpureclaim report FILE: what a trace log says. Tables of operations
 * (latency percentiles, share of the time spent waiting for a CPU), of
 * libraries and devices, the peak of driver memory, what was never freed
 * and the top call sites; --json for scripts, --chrome (capped by
 * --max-events), --svg, --html (the HTML report: the tables, bars and the
 * plot in one page) and --rmm-csv exports. The reading and the renderings
 * are the trace reader's (trace/read/); this file parses the arguments,
 * shows progress and writes the output.
 *
 * Order, so that a failure leaves nothing half done: the exports are
 * opened (cli/util_file.c: safe creation, never the log itself) before
 * anything is read or rendered, except RMM's logs, whose number (one per
 * GPU) is known once the log is read; then every output is rendered; only
 * when all succeeded are the exports put in place and the report written
 * to stdout. A failure prints one message and nothing on stdout, and
 * leaves existing files as they were.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpureclaim.h"
#include "out/buf.h"
#include "report.h"
#include "../trace/read/log_export.h"
#include "../trace/read/log_report.h"

static struct env {
	int json;	     /* --json */
	const char *chrome;  /* --chrome FILE */
	const char *svg;     /* --svg FILE */
	const char *html;    /* --html FILE */
	const char *rmm;     /* --rmm-csv FILE */
	uint64_t max_events; /* --max-events N (0: all) */
	int top;	     /* --top N */
	int force;	     /* --force: replace files that are not exports */
} env;

static void usage(FILE *f)
{
	fprintf(
	    f, "USAGE: gpureclaim report FILE [--json] [--chrome OUT.json "
	       "[--max-events N]]\n"
	       "                         [--svg OUT.svg] [--html OUT.html] "
	       "[--rmm-csv OUT.csv]\n"
	       "                         [--force] [--top N]\n"
	       "\n"
	       "Summarise a trace log written by `gpureclaim trace`, or an "
	       "out-of-memory\n"
	       "post-mortem written by gpureclaim.watch_oom() (FILE.json: as "
	       "text, --json or\n"
	       "--html FILE; docs/oom.md).\n"
	       "\n"
	       "OPTIONS:\n"
	       "    --json            the report as one JSON object on stdout\n"
	       "    --chrome FILE     write a Chrome/Perfetto timeline (open "
	       "in ui.perfetto.dev)\n"
	       "    --max-events N    keep the timeline to about N events "
	       "(from 1000): the failed,\n"
	       "                      slowest and largest calls as slices, "
	       "the rest merged into\n"
	       "                      counters\n"
	       "    --svg FILE        write a plot of driver memory over time "
	       "by library\n"
	       "    --html FILE       write the report as a page: its tables, "
	       "bars and the plot\n"
	       "    --rmm-csv FILE    write RMM's replay log (REPLAY_BENCH, "
	       "RMM's log parser);\n"
	       "                      with several GPUs one file each, "
	       "FILE.dev<N> before the\n"
	       "                      extension, as RMM's logger names them\n"
	       "    --force           replace an existing FILE that is not an "
	       "export of ours\n"
	       "    --top N           rows per list (default 10)\n"
	       "    -h, --help        show this help\n"
	       "\n"
	       "An export replaces an earlier export of ours (or an empty "
	       "file) at its path; any\n"
	       "other file, a symbolic link included, only with --force, and "
	       "never the log\n"
	       "itself. An RMM log, RMM's own included, counts as ours: the "
	       "format has no\n"
	       "room for a mark. Exports are created with mode 0600 (less the "
	       "umask). On a\n"
	       "terminal a progress line shows after a second of work.\n"
	       "\n"
	       "EXAMPLES:\n"
	       "    gpureclaim report gpureclaim-1234.trace\n"
	       "    gpureclaim report run.trace --svg mem.svg --chrome "
	       "timeline.json\n"
	       "    gpureclaim report big.trace --chrome tl.json --max-events "
	       "1000000\n"
	       "    gpureclaim report run.trace --rmm-csv replay.csv\n"
	       "    gpureclaim report run.trace --html report.html\n"
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

/* A whole number from min to max, or -1. */
static long long count_arg(const char *s, long long min, long long max)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (*s < '0' || *s > '9' || *end != '\0' || errno || v < min || v > max)
		return -1;
	return v;
}

static int parse_args(int argc, char **argv, int *help)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"chrome", required_argument, NULL, 'c'},
	    {"max-events", required_argument, NULL, 'm'},
	    {"svg", required_argument, NULL, 's'},
	    {"html", required_argument, NULL, 'H'},
	    {"rmm-csv", required_argument, NULL, 'r'},
	    {"top", required_argument, NULL, 't'},
	    {"force", no_argument, NULL, 'f'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	memset(&env, 0, sizeof(env));
	env.top = 10;
	opterr = 0;
	optind = 1;
	int c;
	long long v;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			env.json = 1;
			break;
		case 'c':
			env.chrome = optarg;
			break;
		case 'm':
			if ((v = count_arg(optarg, 1000, 1ll << 40)) < 0)
				return usage_error("--max-events takes a "
						   "number from 1000, not",
						   optarg);
			env.max_events = (uint64_t)v;
			break;
		case 's':
			env.svg = optarg;
			break;
		case 'H':
			env.html = optarg;
			break;
		case 'r':
			env.rmm = optarg;
			break;
		case 'f':
			env.force = 1;
			break;
		case 't':
			if ((v = count_arg(optarg, 1, 1000000)) < 0)
				return usage_error("--top takes a number from "
						   "1 to 1000000, not",
						   optarg);
			env.top = (int)v;
			break;
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
	if (env.max_events && !env.chrome)
		return usage_error("--max-events caps the timeline: it needs "
				   "--chrome",
				   NULL);
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

/*
 * An out-of-memory post-mortem of gpureclaim.watch_oom() (a JSON file that
 * begins with these bytes: SIGNATURE in python/gpureclaim/_postmortem.py)
 * is the Python package's to show: handed over as `explain` is.
 */
static int is_oom_postmortem(const char *path)
{
	static const char sig[] = "{\n \"format\": \"gpureclaim-oom\",";
	char head[sizeof(sig) - 1];
	struct stat st;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode)
			? read(fd, head, sizeof(head))
			: -1;
	close(fd);
	return n == (ssize_t)sizeof(head) && !memcmp(head, sig, sizeof(head));
}

/* The outputs of one report, opened before they are written. */
struct outputs {
	struct gpr_cli_out chrome, svg, html;
	struct gpr_cli_rmm rmm;
	uint64_t merged; /* calls merged into the timeline's counters */
};

/* Renders the report and the exports; 0, or GPR_CLI_ERROR with a message. */
static int render(const char *path, const struct stat *in, struct outputs *o,
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
	gpr_cli_progress_phase("computing the report");
	if (gpr_trace_stats_compute(&t, &s) < 0) {
		fprintf(stderr, "gpureclaim report: out of memory\n");
		gpr_trace_free(&t);
		return GPR_CLI_ERROR;
	}
	int bad = 0, rc = 0;
	const char *others[] = {env.chrome, env.svg, env.html};
	if (env.rmm && gpr_cli_rmm_open(&o->rmm, env.rmm, &t, env.force, in,
					others, 3) < 0)
		bad = 1;
	if (!bad && o->chrome.f) {
		gpr_cli_progress_phase("writing the timeline");
		bad = gpr_cli_report_chrome(&o->chrome, &t, env.max_events,
					    &o->merged) < 0;
	}
	if (!bad && o->svg.f) {
		gpr_cli_progress_phase("writing the plot");
		if ((rc = gpr_trace_export_svg(&t, &s, o->svg.f)) < 0) {
			fprintf(stderr,
				"gpureclaim report: writing %s failed: %s\n",
				o->svg.path, gpr_strerror(rc));
			bad = 1;
		}
	}
	if (!bad && o->html.f) {
		gpr_cli_progress_phase("writing the page");
		struct gpr__buf page = {0};
		gpr_trace_report_html(&page, path, &t, &s, env.top, 1);
		rc = page.oom				    ? GPR_E_NOMEM
		     : gpr__buf_write(&page, o->html.f) < 0 ? GPR_E_IO
							    : 0;
		if (rc < 0) {
			fprintf(stderr,
				"gpureclaim report: writing %s failed: %s\n",
				o->html.path, gpr_strerror(rc));
			bad = 1;
		}
		gpr__buf_free(&page);
	}
	if (!bad && env.rmm) {
		gpr_cli_progress_phase("writing the RMM log");
		bad = gpr_cli_rmm_write(&o->rmm, &t) < 0;
	}
	if (!bad) {
		if (env.json)
			gpr_trace_report_json(b, path, &t, &s, env.top);
		else
			gpr_trace_report_text(b, path, &t, &s, env.top, 0);
		if (b->oom) {
			fprintf(stderr, "gpureclaim report: out of memory\n");
			bad = 1;
		}
	}
	gpr_trace_stats_free(&s);
	gpr_trace_free(&t);
	return bad ? GPR_CLI_ERROR : GPR_CLI_OK;
}

/* Puts the exports in place, with a word on what they hold. */
static int commit(struct outputs *o)
{
	if (gpr_cli_out_commit(&o->chrome, "report") < 0 ||
	    gpr_cli_out_commit(&o->svg, "report") < 0 ||
	    gpr_cli_out_commit(&o->html, "report") < 0 ||
	    gpr_cli_rmm_commit(&o->rmm) < 0)
		return GPR_CLI_ERROR;
	if (o->merged)
		fprintf(stderr,
			"gpureclaim report: %s: %" PRIu64 " calls merged into "
			"counters to keep to about %" PRIu64 " events\n",
			env.chrome, o->merged, env.max_events);
	return GPR_CLI_OK;
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
	if (is_oom_postmortem(path))
		return gpr_cli_oom_report(argc, argv);
	/* the log, to tell it from the outputs (the reader opens it again) */
	struct stat in;
	if (stat(path, &in) != 0) {
		fprintf(stderr, "gpureclaim report: %s: %s\n", path,
			strerror(errno));
		return GPR_CLI_ERROR;
	}
	struct outputs o = {0};
	struct gpr__buf b = {0};
	if ((env.chrome && gpr_cli_out_open(&o.chrome, "report", env.chrome,
					    GPR_TRACE_CHROME_SIGNATURE,
					    env.force, &in) < 0) ||
	    (env.svg &&
	     gpr_cli_out_open(&o.svg, "report", env.svg,
			      GPR_TRACE_SVG_SIGNATURE, env.force, &in) < 0) ||
	    (env.html &&
	     gpr_cli_out_open(&o.html, "report", env.html,
			      GPR_TRACE_HTML_SIGNATURE, env.force, &in) < 0)) {
		code = GPR_CLI_ERROR;
		goto cleanup;
	}
	gpr_cli_progress_start(path);
	code = render(path, &in, &o, &b);
	gpr_cli_progress_stop();
	if (code == GPR_CLI_OK)
		code = commit(&o);
	if (code == GPR_CLI_OK && gpr__buf_write(&b, stdout) < 0) {
		if (errno != EPIPE)
			fprintf(stderr, "gpureclaim report: stdout: %s\n",
				strerror(errno));
		code = GPR_CLI_ERROR;
	}
cleanup:
	gpr_cli_out_abort(&o.chrome);
	gpr_cli_out_abort(&o.svg);
	gpr_cli_out_abort(&o.html);
	gpr_cli_rmm_free(&o.rmm);
	gpr__buf_free(&b);
	return code;
}
