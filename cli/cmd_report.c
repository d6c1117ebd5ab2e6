/*
 * gpureclaim report FILE: what a trace log says. Tables of operations
 * (latency percentiles, share of the time spent waiting for a CPU), of
 * libraries and devices, the peak of driver memory, what was never freed
 * and the top call sites; --json for scripts, --chrome and --svg exports.
 * The reading and the renderings are the trace reader's (trace/read/);
 * this file parses the arguments and writes the output.
 */
#include "cli.h"

#include <getopt.h>
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
	int top;	    /* --top N */
} env;

static void usage(FILE *f)
{
	fprintf(
	    f, "USAGE: gpureclaim report FILE [--json] [--chrome OUT.json] "
	       "[--svg OUT.svg] [--top N]\n"
	       "\n"
	       "Summarise a trace log written by `gpureclaim trace`.\n"
	       "\n"
	       "OPTIONS:\n"
	       "    --json            the report as one JSON object on stdout\n"
	       "    --chrome FILE     write a Chrome/Perfetto timeline (open "
	       "in ui.perfetto.dev)\n"
	       "    --svg FILE        write a plot of driver memory over time "
	       "by library\n"
	       "    --top N           rows per list (default 10)\n"
	       "    -h, --help        show this help\n"
	       "\n"
	       "EXAMPLES:\n"
	       "    gpureclaim report gpureclaim-1234.trace\n"
	       "    gpureclaim report run.trace --svg mem.svg --chrome "
	       "timeline.json\n"
	       "    gpureclaim report run.trace --json | jq .peak_bytes\n"
	       "\n"
	       "Exit status: 0 ok, 1 unreadable or malformed log, 2 bad "
	       "usage.\n");
}

/* Writes one export to path; 0 or GPR_CLI_ERROR with a message. */
static int export_to(const char *path, const struct gpr_trace *t,
		     int (*fn)(const struct gpr_trace *, FILE *))
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "gpureclaim report: cannot write %s: %m\n",
			path);
		return GPR_CLI_ERROR;
	}
	int rc = fn(t, f);
	if (fclose(f) != 0 && rc == 0)
		rc = GPR_E_IO;
	if (rc < 0) {
		fprintf(stderr, "gpureclaim report: writing %s failed: %s\n",
			path, gpr_strerror(rc));
		return GPR_CLI_ERROR;
	}
	return 0;
}

int gpr_cli_report(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"chrome", required_argument, NULL, 'c'},
	    {"svg", required_argument, NULL, 's'},
	    {"top", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	memset(&env, 0, sizeof(env));
	env.top = 10;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
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
		case 't': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || v < 1 ||
			    v > 1000000) {
				fprintf(stderr, "gpureclaim report: --top "
						"takes a number from 1\n");
				return GPR_CLI_USAGE;
			}
			env.top = (int)v;
			break;
		}
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
	const char *path = argv[optind];
	struct gpr_trace t;
	char err[256];
	if (gpr_trace_load(path, &t, err, sizeof(err)) < 0) {
		fprintf(stderr, "gpureclaim report: %s: %s\n", path, err);
		return GPR_CLI_ERROR;
	}
	struct gpr_trace_stats s;
	int ret = GPR_CLI_OK;
	if (gpr_trace_stats_compute(&t, &s) < 0) {
		fprintf(stderr, "gpureclaim report: out of memory\n");
		gpr_trace_free(&t);
		return GPR_CLI_ERROR;
	}
	if (env.chrome)
		ret |= export_to(env.chrome, &t, gpr_trace_export_chrome);
	if (env.svg)
		ret |= export_to(env.svg, &t, gpr_trace_export_svg);
	struct gpr__buf b = {0};
	if (env.json)
		gpr_trace_report_json(&b, path, &t, &s, env.top);
	else
		gpr_trace_report_text(&b, path, &t, &s, env.top, 0);
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
