/*
 * gpureclaim report FILE: what a trace log says. Tables of operations
 * (latency percentiles, share of the time spent waiting for a CPU), of
 * libraries and devices, the peak of driver memory, what was never freed
 * and the top call sites; --json for scripts, --chrome and --svg exports.
 * --rmm-csv writes RMM's replay log, --max-events caps the timeline. The
 * reading and the renderings are the trace reader's (trace/read/); this
 * file parses the arguments, shows progress and writes the output.
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpureclaim.h"
#include "out/buf.h"
#include "out/fmt.h"
#include "../trace/read/log_export.h"
#include "../trace/read/log_report.h"
#include "../trace/read/log_rmm.h"

/* A timeline this large (bytes) is said to be hard to open. */
#define LARGE_TIMELINE (100ull * 1000 * 1000)

static struct env {
	int json;	     /* --json */
	const char *chrome;  /* --chrome FILE */
	const char *svg;     /* --svg FILE */
	const char *rmm;     /* --rmm-csv FILE */
	uint64_t max_events; /* --max-events N (0: all) */
	int top;	     /* --top N */
} env;

static void usage(FILE *f)
{
	fprintf(
	    f, "USAGE: gpureclaim report FILE [--json] [--chrome OUT.json "
	       "[--max-events N]]\n"
	       "                         [--svg OUT.svg] [--rmm-csv OUT.csv] "
	       "[--top N]\n"
	       "\n"
	       "Summarise a trace log written by `gpureclaim trace`.\n"
	       "\n"
	       "OPTIONS:\n"
	       "    --json            the report as one JSON object on stdout\n"
	       "    --chrome FILE     write a Chrome/Perfetto timeline (open "
	       "in ui.perfetto.dev)\n"
	       "    --max-events N    keep the timeline to about N events: the "
	       "failed, slowest\n"
	       "                      and largest calls as slices, the rest "
	       "merged into counters\n"
	       "    --svg FILE        write a plot of driver memory over time "
	       "by library\n"
	       "    --rmm-csv FILE    write RMM's replay log (REPLAY_BENCH, "
	       "RMM's log parser);\n"
	       "                      with several GPUs one file each, "
	       "FILE.dev<N> before the\n"
	       "                      extension, as RMM's logger names them\n"
	       "    --top N           rows per list (default 10)\n"
	       "    -h, --help        show this help\n"
	       "\n"
	       "On a terminal a progress line shows after a second of work.\n"
	       "\n"
	       "EXAMPLES:\n"
	       "    gpureclaim report gpureclaim-1234.trace\n"
	       "    gpureclaim report run.trace --svg mem.svg --chrome "
	       "timeline.json\n"
	       "    gpureclaim report big.trace --chrome tl.json --max-events "
	       "1000000\n"
	       "    gpureclaim report run.trace --rmm-csv replay.csv\n"
	       "    gpureclaim report run.trace --json | jq .peak_bytes\n"
	       "\n"
	       "Exit status: 0 ok, 1 unreadable or malformed log, 2 bad "
	       "usage.\n");
}

/* What an export writes: one of the reader's renderings of t. */
struct export
{
	const struct gpr_trace *t;
	int device;			    /* --rmm-csv: the GPU */
	struct gpr_trace_rmm_counts rmm;    /* --rmm-csv: what it left out */
	uint64_t merged;		    /* --chrome: calls merged */
	int (*fn)(struct export *, FILE *); /* the rendering */
};

/* Writes one export to path; 0 or GPR_CLI_ERROR with a message. */
static int export_to(const char *path, struct export *x)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "gpureclaim report: cannot write %s: %m\n",
			path);
		return GPR_CLI_ERROR;
	}
	int rc = x->fn(x, f);
	if (fclose(f) != 0 && rc == 0)
		rc = GPR_E_IO;
	if (rc < 0) {
		fprintf(stderr, "gpureclaim report: writing %s failed: %s\n",
			path, gpr_strerror(rc));
		return GPR_CLI_ERROR;
	}
	return 0;
}

static int svg(struct export *x, FILE *f)
{
	return gpr_trace_export_svg(x->t, f);
}

static int chrome(struct export *x, FILE *f)
{
	return gpr_trace_export_chrome_max(x->t, f, env.max_events, &x->merged);
}

static int rmm(struct export *x, FILE *f)
{
	return gpr_trace_export_rmm(x->t, x->device, f, &x->rmm);
}

/* path with ".dev<N>" before its extension, as RMM's _append_id. */
static void device_path(const char *path, int dev, char *out, size_t len)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	const char *dot = strrchr(base, '.');
	if (!dot || dot == base)
		dot = path + strlen(path);
	snprintf(out, len, "%.*s.dev%d%s", (int)(dot - path), path, dev, dot);
}

/* One device's RMM log into path, and what it left out. */
static int rmm_file(const char *path, const struct gpr_trace *t, int dev)
{
	struct export x = {.t = t, .device = dev, .fn = rmm};
	if (export_to(path, &x))
		return GPR_CLI_ERROR;
	fprintf(stderr, "gpureclaim report: wrote %s: GPU %d, %" PRIu64 " rows",
		path, dev, x.rmm.rows);
	if (x.rmm.implied)
		fprintf(stderr,
			" (%" PRIu64 " frees missing from the log added)",
			x.rmm.implied);
	if (x.rmm.unmatched)
		fprintf(stderr,
			"; %" PRIu64
			" frees of memory allocated before tracing "
			"began left out",
			x.rmm.unmatched);
	fputs("\n", stderr);
	return 0;
}

/* RMM's replay log: one file, or one per device as RMM writes them. */
static int export_rmm(const char *path, const struct gpr_trace *t)
{
	int devs[256], rc;
	uint64_t unknown;
	size_t n = gpr_trace_rmm_devices(t, devs, 256, &unknown, &rc);
	if (rc < 0) {
		fprintf(stderr, "gpureclaim report: %s\n", gpr_strerror(rc));
		return GPR_CLI_ERROR;
	}
	if (unknown)
		fprintf(stderr,
			"gpureclaim report: %" PRIu64 " allocations and frees "
			"of an unknown GPU are not in the RMM log\n",
			unknown);
	if (n == 0) {
		fprintf(stderr, "gpureclaim report: the trace has no device "
				"memory: the RMM log has its header only\n");
		return rmm_file(path, t, 0);
	}
	int ret = 0;
	for (size_t i = 0; i < n && i < 256; i++) {
		char p[4200];
		if (n == 1)
			snprintf(p, sizeof(p), "%s", path);
		else
			device_path(path, devs[i], p, sizeof(p));
		ret |= rmm_file(p, t, devs[i]);
	}
	return ret;
}

/* The timeline, within --max-events; a word first when it will be big. */
static int export_chrome(const char *path, const struct gpr_trace *t)
{
	struct gpr_trace_chrome_size size;
	if (gpr_trace_chrome_size(t, &size) == 0 &&
	    (!env.max_events || size.events <= env.max_events) &&
	    size.bytes > LARGE_TIMELINE) {
		/* the cap that keeps it near a fifth of the limit */
		double per = (double)size.bytes / (double)size.events;
		uint64_t cap = (uint64_t)((double)LARGE_TIMELINE / 5 / per);
		cap = cap < 1000 ? 1000 : cap / 1000 * 1000;
		char b[32];
		fprintf(stderr,
			"gpureclaim report: the timeline will be about %s "
			"(%.1f M events); ui.perfetto.dev opens a few hundred "
			"MB in a browser; --max-events %" PRIu64
			" keeps it near %.0f MB\n",
			gpr__fmt_bytes(size.bytes, b, sizeof(b)),
			(double)size.events / 1e6, cap,
			(double)cap * per / 1e6);
	}
	struct export x = {.t = t, .fn = chrome};
	if (export_to(path, &x))
		return GPR_CLI_ERROR;
	if (x.merged)
		fprintf(stderr,
			"gpureclaim report: %s: %" PRIu64 " calls merged into "
			"counters to keep to about %" PRIu64 " events\n",
			path, x.merged, env.max_events);
	return 0;
}

/* A whole number from 1 to max, or -1. */
static long long count_arg(const char *s, long long max)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno || v < 1 || v > max)
		return -1;
	return v;
}

int gpr_cli_report(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"chrome", required_argument, NULL, 'c'},
	    {"max-events", required_argument, NULL, 'm'},
	    {"svg", required_argument, NULL, 's'},
	    {"rmm-csv", required_argument, NULL, 'r'},
	    {"top", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	memset(&env, 0, sizeof(env));
	env.top = 10;
	optind = 1;
	int c;
	long long v;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			env.json = 1;
			break;
		case 'c':
			env.chrome = optarg;
			break;
		case 'm':
			if ((v = count_arg(optarg, (long long)1 << 40)) <
			    1000) {
				fprintf(stderr,
					"gpureclaim report: --max-events "
					"takes a number from 1000\n");
				return GPR_CLI_USAGE;
			}
			env.max_events = (uint64_t)v;
			break;
		case 's':
			env.svg = optarg;
			break;
		case 'r':
			env.rmm = optarg;
			break;
		case 't':
			if ((v = count_arg(optarg, 1000000)) < 0) {
				fprintf(stderr, "gpureclaim report: --top "
						"takes a number from 1\n");
				return GPR_CLI_USAGE;
			}
			env.top = (int)v;
			break;
		case 'h':
			usage(stdout);
			return GPR_CLI_OK;
		default:
			usage(stderr);
			return GPR_CLI_USAGE;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "gpureclaim report: expected one trace file\n");
		usage(stderr);
		return GPR_CLI_USAGE;
	}
	if (env.max_events && !env.chrome) {
		fprintf(stderr,
			"gpureclaim report: --max-events caps --chrome\n");
		return GPR_CLI_USAGE;
	}
	const char *path = argv[optind];
	struct gpr_trace t;
	char err[256];
	gpr_cli_progress_start(path);
	if (gpr_trace_load(path, &t, err, sizeof(err)) < 0) {
		gpr_cli_progress_stop();
		fprintf(stderr, "gpureclaim report: %s: %s\n", path, err);
		return GPR_CLI_ERROR;
	}
	struct gpr_trace_stats s;
	int ret = GPR_CLI_OK;
	gpr_cli_progress_phase("computing the report");
	if (gpr_trace_stats_compute(&t, &s) < 0) {
		gpr_cli_progress_stop();
		fprintf(stderr, "gpureclaim report: out of memory\n");
		gpr_trace_free(&t);
		return GPR_CLI_ERROR;
	}
	struct gpr__buf b = {0};
	if (env.json)
		gpr_trace_report_json(&b, path, &t, &s, env.top);
	else
		gpr_trace_report_text(&b, path, &t, &s, env.top, 0);
	if (env.chrome) {
		gpr_cli_progress_phase("writing the timeline");
		ret |= export_chrome(env.chrome, &t);
	}
	if (env.svg) {
		gpr_cli_progress_phase("writing the plot");
		struct export x = {.t = &t, .fn = svg};
		ret |= export_to(env.svg, &x);
	}
	if (env.rmm) {
		gpr_cli_progress_phase("writing the RMM log");
		ret |= export_rmm(env.rmm, &t);
	}
	gpr_cli_progress_stop();
	if (b.oom) {
		fprintf(stderr, "gpureclaim report: out of memory\n");
		ret = GPR_CLI_ERROR;
	} else if (gpr__buf_write(&b, stdout) < 0) {
		ret = GPR_CLI_ERROR;
	}
	gpr__buf_free(&b);
	gpr_trace_stats_free(&s);
	gpr_trace_free(&t);
	return ret ? GPR_CLI_ERROR : GPR_CLI_OK;
}
