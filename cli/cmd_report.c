/*
 * gpureclaim report FILE: what a trace log says. Tables of operations
 * (latency percentiles, share of the time spent waiting for a CPU), of
 * libraries and devices, the peak of driver memory, what was never freed
 * and the top call sites, all from one view of the log (trace/read/
 * log_view.h); --json for scripts, and the exports --chrome (capped by
 * --max-events), --svg, --html (the report as a page: its tables, bars and
 * the plot) and --rmm-csv. The reading and the renderings are the trace
 * reader's (trace/read/); this file parses the arguments, shows progress
 * and writes the outputs.
 *
 * As memray's reporters do, an export is the answer: with one, the
 * command says "wrote FILE" for each file it wrote and prints the report
 * on stdout only when asked (--text, --json); without one, the text
 * report is the answer.
 *
 * Order, so that a failure leaves nothing half done: the exports are
 * opened (cli/util_file.c: safe creation, never the log itself) before
 * anything is read or rendered, except RMM's logs, one per GPU, which are
 * made as the replay meets each GPU and named once all are known; then
 * every export is rendered into its temporary file; only when all
 * succeeded are they put in place, and the report streams to stdout last.
 * A failure prints one message and nothing on stdout, and leaves existing
 * files as they were.
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
#include "out/fmt.h"
#include "report.h"
#include "../trace/read/log_export.h"
#include "../trace/read/log_path.h"
#include "../trace/read/log_report.h"

static struct env {
	int json;	     /* --json */
	int text;	     /* --text: the text report even with an export */
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
	    f,
	    "USAGE: gpureclaim report FILE [--text | --json] [--chrome "
	    "OUT.json [--max-events N]]\n"
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
	    "    --text            the text report on stdout, also with an "
	    "export\n"
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
	    "    --top N           rows per list (default 10; text and HTML "
	    "show at most\n"
	    "                      1000, --json all N)\n"
	    "    -h, --help        show this help\n"
	    "\n"
	    "An export replaces an earlier export of ours (or an empty "
	    "file) at its path; any\n"
	    "other file, a symbolic link included, only with --force, and "
	    "never the log\n"
	    "itself. An RMM log, RMM's own included, counts as ours: the "
	    "format has no\n"
	    "room for a mark. Exports are created with mode 0600 (less the "
	    "umask). Each\n"
	    "export says \"wrote FILE\" on stderr; with an export the report "
	    "is printed\n"
	    "only with --text or --json. On a terminal a progress line shows "
	    "after a\n"
	    "second of work. A log cut short (a full disk, kill -9) is read "
	    "up to the cut.\n"
	    "\n"
	    "EXAMPLES:\n"
	    "    gpureclaim report gpureclaim-1234.trace\n"
	    "    gpureclaim report run.trace --svg mem.svg --chrome "
	    "timeline.json\n"
	    "    gpureclaim report big.trace --chrome tl.json --max-events "
	    "1000000\n"
	    "    gpureclaim report run.trace --rmm-csv replay.csv\n"
	    "    gpureclaim report run.trace --html report.html --text\n"
	    "    gpureclaim report run.trace --json | jq .peak_bytes\n"
	    "\n"
	    "Exit status: 0 ok, 1 unreadable or malformed log or an "
	    "export that cannot be\n"
	    "written (then nothing is written), 2 bad usage.\n");
}

/* A usage error: what (NULL: said), arg as a word to paste, the way on. */
static int usage_error(const char *what, const char *arg)
{
	char q[GPR_TRACE_QUOTED_MAX];
	if (what)
		fprintf(stderr, "gpureclaim report: %s%s%s\n", what,
			arg ? " " : "",
			arg ? gpr_trace_path_quoted(q, sizeof q, arg) : "");
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
	    {"text", no_argument, NULL, 'T'},
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
		case 'T':
			env.text = 1;
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
			/*
			 * A short option is optopt: argv[optind - 1] may be
			 * the word before it ("-x.trace" is still being read)
			 */
			if (optopt) {
				fprintf(stderr,
					"gpureclaim report: unknown option "
					"-%c (a file whose name begins with "
					"'-': ./NAME, or -- before it)\n",
					optopt > ' ' && optopt < 0x7f ? optopt
								      : '?');
				return usage_error(NULL, NULL);
			}
			return usage_error("unknown option", argv[optind - 1]);
		}
	}
	if (optind != argc - 1)
		return usage_error(optind < argc ? "expected one trace file, "
						   "not also"
						 : "expected one trace file",
				   optind < argc ? argv[optind + 1] : NULL);
	if (env.json && env.text)
		return usage_error("--text and --json: one report on stdout, "
				   "choose one",
				   NULL);
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
 * begins with these bytes: SIGNATURE in python/gpureclaim/oom/_postmortem.py)
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
	int rmm_made;	 /* the RMM logs were written (to commit, to say) */
	uint64_t merged; /* calls merged into the timeline's counters */
};

/* The report of the log, in memory. */
struct report {
	struct gpr_trace t;
	struct gpr_trace_stats s;
	int loaded, computed;
};

static void report_free(struct report *r)
{
	if (r->computed)
		gpr_trace_stats_free(&r->s);
	if (r->loaded)
		gpr_trace_free(&r->t);
}

/*
 * The allocations never freed the statistics list: those the outputs
 * show, no more (48 bytes each, and a log can hold millions): text and
 * HTML at most GPR_TRACE_VIEW_MAX_ROWS; JSON, listing up to --top, gets
 * its own statistics after the exports (print), so their replays and a
 * long list are never in memory at once.
 */
static size_t shown_live(void)
{
	return (size_t)env.top < GPR_TRACE_VIEW_MAX_ROWS
		   ? (size_t)env.top
		   : GPR_TRACE_VIEW_MAX_ROWS;
}

/* Reads the log and computes its statistics; 0, or a message and -1. */
static int load(const char *path, struct report *r)
{
	char err[256], q[GPR_TRACE_QUOTED_MAX];
	/* A symbolic link named here is followed; the reader follows none. */
	char real[PATH_MAX];
	if (gpr_trace_load(realpath(path, real) ? real : path, &r->t, err,
			   sizeof(err)) < 0) {
		fprintf(stderr, "gpureclaim report: %s: %s\n",
			gpr_trace_path_quoted(q, sizeof q, path), err);
		return -1;
	}
	r->loaded = 1;
	gpr_cli_progress_phase("computing the report");
	if (gpr_trace_stats_compute_top(&r->t, &r->s, shown_live()) < 0) {
		fprintf(stderr, "gpureclaim report: out of memory\n");
		return -1;
	}
	r->computed = 1;
	return 0;
}

/* Renders view v in form into an export's file; 0, or a message and -1. */
static int render_to(const struct gpr_trace_view *v, enum gpr_trace_form form,
		     struct gpr_cli_out *o)
{
	struct gpr__buf b = {0};
	struct gpr_trace_sink k = {&b, o->f, 0};
	int rc = gpr_trace_render(v, form, &k);
	gpr__buf_free(&b);
	if (rc < 0) {
		errno = k.err;
		gpr_cli_report_failed(o->path, rc);
		return -1;
	}
	return 0;
}

/* Writes every export into its temporary file; 0, or a message and -1. */
static int exports(const char *path, const struct stat *in, struct report *r,
		   struct outputs *o)
{
	int rc;
	if (o->chrome.f) {
		gpr_cli_progress_phase("writing the timeline");
		if (gpr_cli_report_chrome(&o->chrome, &r->t, env.max_events,
					  &o->merged) < 0)
			return -1;
	}
	if (o->svg.f) {
		gpr_cli_progress_phase("writing the plot");
		errno = 0;
		if ((rc = gpr_trace_export_svg(&r->t, &r->s, o->svg.f)) < 0) {
			gpr_cli_report_failed(o->svg.path, rc);
			return -1;
		}
	}
	if (o->html.f) {
		gpr_cli_progress_phase("writing the page");
		struct gpr_trace_view v;
		gpr_trace_view_build(&v, path, &r->t, &r->s, env.top, 0);
		rc = render_to(&v, GPR_TRACE_FORM_HTML_PAGE, &o->html);
		gpr_trace_view_free(&v);
		if (rc < 0)
			return -1;
	}
	if (env.rmm) {
		gpr_cli_progress_phase("writing the RMM log");
		const char *others[] = {env.chrome, env.svg, env.html};
		o->rmm_made = 1;
		if (gpr_cli_rmm_write(&o->rmm, env.rmm, &r->t, env.force, in,
				      others, 3) < 0)
			return -1;
	}
	return 0;
}

/* Puts the exports in place, and says what each holds. */
static int commit(struct outputs *o)
{
	if (gpr_cli_out_commit(&o->chrome, "report") < 0 ||
	    gpr_cli_out_commit(&o->svg, "report") < 0 ||
	    gpr_cli_out_commit(&o->html, "report") < 0 ||
	    gpr_cli_rmm_commit(&o->rmm) < 0)
		return GPR_CLI_ERROR;
	char q[GPR_TRACE_QUOTED_MAX], n[64];
	if (env.chrome) {
		fprintf(stderr, "gpureclaim report: wrote %s (the timeline",
			gpr_trace_path_quoted(q, sizeof q, env.chrome));
		if (o->merged)
			fprintf(stderr,
				"; %s merged into counters to keep to about "
				"%" PRIu64 " events",
				gpr__fmt_count(o->merged, "call", "calls", n,
					       sizeof n),
				env.max_events);
		fputs(")\n", stderr);
	}
	if (env.svg)
		fprintf(stderr, "gpureclaim report: wrote %s (the plot)\n",
			gpr_trace_path_quoted(q, sizeof q, env.svg));
	if (env.html)
		fprintf(stderr,
			"gpureclaim report: wrote %s (the report as a "
			"page)\n",
			gpr_trace_path_quoted(q, sizeof q, env.html));
	if (o->rmm_made)
		gpr_cli_rmm_said(&o->rmm);
	return GPR_CLI_OK;
}

/* The report on stdout, streamed: 0, or a message and GPR_CLI_ERROR. */
static int print(const char *path, struct report *r)
{
	if (env.json && r->s.n_live < r->s.live_count &&
	    (size_t)env.top > r->s.n_live) {
		gpr_trace_stats_free(&r->s);
		r->computed = 0;
		if (gpr_trace_stats_compute_top(&r->t, &r->s, (size_t)env.top) <
		    0) {
			fprintf(stderr, "gpureclaim report: out of memory\n");
			return GPR_CLI_ERROR;
		}
		r->computed = 1;
	}
	struct gpr_trace_view v;
	gpr_trace_view_build(&v, path, &r->t, &r->s, env.top, 0);
	struct gpr__buf b = {0};
	struct gpr_trace_sink k = {&b, stdout, 0};
	int rc = gpr_trace_render(
	    &v, env.json ? GPR_TRACE_FORM_JSON : GPR_TRACE_FORM_TEXT, &k);
	gpr__buf_free(&b);
	gpr_trace_view_free(&v);
	if (rc == GPR_E_NOMEM)
		fprintf(stderr, "gpureclaim report: out of memory\n");
	else if (rc < 0 && k.err != EPIPE)
		fprintf(stderr, "gpureclaim report: stdout: %s\n",
			strerror(k.err));
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
	char q[GPR_TRACE_QUOTED_MAX];
	if (is_oom_postmortem(path))
		return gpr_cli_oom_report(argc, argv);
	/* the log, to tell it from the outputs (the reader opens it again) */
	struct stat in;
	if (stat(path, &in) != 0) {
		fprintf(stderr, "gpureclaim report: %s: %s\n",
			gpr_trace_path_quoted(q, sizeof q, path),
			strerror(errno));
		return GPR_CLI_ERROR;
	}
	struct outputs o = {0};
	struct report r = {0};
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
	code = load(path, &r) < 0 || exports(path, &in, &r, &o) < 0
		   ? GPR_CLI_ERROR
		   : GPR_CLI_OK;
	gpr_cli_progress_stop();
	if (code == GPR_CLI_OK)
		code = commit(&o);
	/* with an export, the report only when asked (memray's way) */
	int exported = env.chrome || env.svg || env.html || env.rmm;
	if (code == GPR_CLI_OK && (!exported || env.text || env.json))
		code = print(path, &r);
cleanup:
	report_free(&r);
	gpr_cli_out_abort(&o.chrome);
	gpr_cli_out_abort(&o.svg);
	gpr_cli_out_abort(&o.html);
	gpr_cli_rmm_free(&o.rmm);
	return code;
}
