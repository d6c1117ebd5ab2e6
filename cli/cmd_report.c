/*
 * gpureclaim report FILE: what a trace log says. Tables of operations
 * (latency percentiles, share of the time spent waiting for a CPU), of
 * libraries and devices, the peak of driver memory, what was never freed
 * and the top call sites; --json for scripts, --chrome and --svg exports.
 */
#include "cmd_report.h"

#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpureclaim.h"
#include "../trace/log_export.h"

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

/* Names from a log that may be hostile: terminal-safe (cli/util_text.c). */
static void put_safe(struct cli_buf *b, const char *s, int width)
{
	cli_buf_put_text(b, s, width, 1);
}

static char *fmt_ns(uint64_t ns, char *out, size_t len)
{
	if (ns < 1000)
		snprintf(out, len, "%" PRIu64 "ns", ns);
	else if (ns < 1000000)
		snprintf(out, len, "%.1fus", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(out, len, "%.2fms", (double)ns / 1e6);
	else
		snprintf(out, len, "%.3fs", (double)ns / 1e9);
	return out;
}

static double secs(const struct gpr_trace *t, uint64_t ns)
{
	return ns > t->hdr.start_mono_ns
		   ? (double)(ns - t->hdr.start_mono_ns) / 1e9
		   : 0.0;
}

static const char *str(const struct gpr_trace *t, uint32_t id)
{
	return gpr__trace_str(t, id, "[unknown]");
}

void gpr__report_text(struct cli_buf *b, const char *path,
		      const struct gpr_trace *t,
		      const struct gpr_trace_stats *s, int top, int brief)
{
	char x[32], y[32], z[32], w[32];
	cli_buf_puts(b, "Trace ");
	put_safe(b, path, 0);
	cli_buf_printf(b, ": pid %u, %" PRIu64 " calls over %.3f s%s\n",
		       t->hdr.pid, s->records,
		       s->t1 > s->t0 ? (double)(s->t1 - s->t0) / 1e9 : 0.0,
		       t->complete ? ""
				   : " (log not closed: the program was "
				     "killed or is still running)");
	cli_buf_printf(b,
		       "Peak driver memory: %s at %.3f s; held at the end: "
		       "%s\n",
		       cli_fmt_bytes(s->peak, x, sizeof(x)), secs(t, s->peak_t),
		       cli_fmt_bytes(s->held_end, y, sizeof(y)));
	if (s->host_peak)
		cli_buf_printf(b,
			       "Pinned host memory: peak %s, held at the "
			       "end %s\n",
			       cli_fmt_bytes(s->host_peak, x, sizeof(x)),
			       cli_fmt_bytes(s->host_end, y, sizeof(y)));

	cli_buf_puts(b, "\nBy operation (latency; waiting = share of the call "
			"time spent runnable but not running, all calls / "
			"slowest 1%):\n");
	cli_buf_printf(b, "  %-24s %8s %6s %11s %9s %9s %9s %9s %15s\n",
		       "operation", "calls", "errors", "bytes", "p50", "p90",
		       "p99", "max", "waiting");
	for (size_t i = 0; i < s->n_ops; i++) {
		const struct gpr_trace_opstat *o = &s->ops[i];
		char wait[32] = "-";
		if (o->waited_calls)
			snprintf(wait, sizeof(wait), "%.1f%% / %.1f%%",
				 100 * o->wait_share, 100 * o->tail_wait_share);
		cli_buf_puts(b, "  ");
		put_safe(b, str(t, o->op), 24);
		cli_buf_printf(b, " %8" PRIu64 " %6" PRIu64 " %11s %9s",
			       o->calls, o->errors,
			       cli_fmt_bytes(o->bytes, x, sizeof(x)),
			       fmt_ns(o->p50, y, sizeof(y)));
		cli_buf_printf(b, " %9s %9s", fmt_ns(o->p90, z, sizeof(z)),
			       fmt_ns(o->p99, w, sizeof(w)));
		cli_buf_printf(b, " %9s %15s\n", fmt_ns(o->max, x, sizeof(x)),
			       wait);
	}

	cli_buf_puts(b, "\nBy library (allocated/calls: as the caller; freed, "
			"peak and held: of the memory it allocated):\n");
	cli_buf_printf(b, "  %-28s %8s %11s %11s %11s %11s\n", "library",
		       "calls", "allocated", "freed", "peak held",
		       "held at end");
	for (size_t i = 0; i < s->n_libs && (int)i < top; i++) {
		const struct gpr_trace_libstat *l = &s->libs[i];
		cli_buf_puts(b, "  ");
		put_safe(b, str(t, l->lib), 28);
		cli_buf_printf(b, " %8" PRIu64 " %11s", l->calls,
			       cli_fmt_bytes(l->alloc_bytes, x, sizeof(x)));
		cli_buf_printf(b, " %11s %11s %11s\n",
			       cli_fmt_bytes(l->freed_bytes, y, sizeof(y)),
			       cli_fmt_bytes(l->peak, z, sizeof(z)),
			       cli_fmt_bytes(l->held_end, w, sizeof(w)));
	}

	cli_buf_puts(b, "\nBy device:\n");
	cli_buf_printf(b, "  %-7s %8s %11s %11s %11s %9s %11s\n", "device",
		       "calls", "allocated", "freed", "peak", "peak at",
		       "held at end");
	for (size_t i = 0; i < s->n_devs; i++) {
		const struct gpr_trace_devstat *d = &s->devs[i];
		char dev[16];
		if (d->device < 0)
			snprintf(dev, sizeof(dev), "?");
		else
			snprintf(dev, sizeof(dev), "%d", d->device);
		cli_buf_printf(b, "  %-7s %8" PRIu64 " %11s", dev, d->calls,
			       cli_fmt_bytes(d->alloc_bytes, x, sizeof(x)));
		cli_buf_printf(b, " %11s %11s %8.3fs",
			       cli_fmt_bytes(d->freed_bytes, y, sizeof(y)),
			       cli_fmt_bytes(d->peak, z, sizeof(z)),
			       secs(t, d->peak_t));
		cli_buf_printf(b, " %11s\n",
			       cli_fmt_bytes(d->held_end, w, sizeof(w)));
	}

	if (!brief) {
		cli_buf_printf(b,
			       "\nNever freed: %zu allocations, %s of device "
			       "memory\n",
			       s->n_live,
			       cli_fmt_bytes(s->live_bytes, x, sizeof(x)));
		for (size_t i = 0; i < s->n_live && (int)i < top; i++) {
			const struct gpr_trace_live *l = &s->live[i];
			cli_buf_printf(
			    b, "  %11s  %s0x%-14" PRIx64 " dev %-3d ",
			    cli_fmt_bytes(l->bytes, x, sizeof(x)),
			    l->vmm ? "handle " : "", l->addr, l->device);
			put_safe(b, str(t, l->op), 20);
			cli_buf_printf(b, " at %8.3fs by ", secs(t, l->t_ns));
			put_safe(b, str(t, l->owner), 0);
			cli_buf_puts(b, "\n");
		}
		cli_buf_puts(b, "\nTop call sites (by bytes allocated):\n");
		for (size_t i = 0; i < s->n_sites && (int)i < top; i++) {
			const struct gpr_trace_sitestat *c = &s->sites[i];
			cli_buf_printf(b, "  %11s %8" PRIu64 " calls  ",
				       cli_fmt_bytes(c->bytes, x, sizeof(x)),
				       c->calls);
			put_safe(b, str(t, c->site), 0);
			cli_buf_puts(b, "\n");
		}
	}
	if (s->unmatched_frees || s->dropped || s->implied_frees || s->errors ||
	    s->saturated) {
		cli_buf_puts(b, "\nNotes:\n");
		if (s->saturated)
			cli_buf_puts(b,
				     "  some byte figures reached the largest "
				     "value they can hold and stopped there "
				     "(the log holds sizes no GPU has)\n");
		if (s->errors)
			cli_buf_printf(b,
				       "  %" PRIu64 " calls failed (counted "
				       "in errors, no memory moved)\n",
				       s->errors);
		if (s->unmatched_frees)
			cli_buf_printf(b,
				       "  %" PRIu64 " frees of memory "
				       "allocated before tracing began\n",
				       s->unmatched_frees);
		if (s->dropped)
			cli_buf_printf(b,
				       "  %" PRIu64 " records were lost "
				       "(buffers full)\n",
				       s->dropped);
		if (s->implied_frees)
			cli_buf_printf(b,
				       "  %" PRIu64 " frees missing from the "
				       "log, inferred where the address or "
				       "handle was allocated again\n",
				       s->implied_frees);
	}
}

void gpr__report_json(struct cli_buf *b, const char *path,
		      const struct gpr_trace *t,
		      const struct gpr_trace_stats *s, int top)
{
	cli_buf_puts(b, "{");
	cli_json_kv_str(b, "file", path);
	cli_buf_puts(b, ",");
	cli_json_kv_u64(b, "format_version", t->hdr.version);
	cli_buf_puts(b, ",");
	cli_json_kv_u64(b, "pid", t->hdr.pid);
	cli_buf_puts(b, ",");
	cli_json_kv_bool(b, "complete", t->complete);
	cli_buf_puts(b, ",");
	cli_json_kv_u64(b, "start_realtime_ns", t->hdr.start_realtime_ns);
	cli_buf_puts(b, ",");
	cli_json_kv_u64(b, "records", s->records);
	cli_buf_puts(b, ",");
	cli_json_kv_u64(b, "errors", s->errors);
	cli_buf_puts(b, ",");
	cli_json_kv_u64(b, "dropped", s->dropped);
	cli_buf_puts(b, ",");
	cli_json_kv_u64(b, "unmatched_frees", s->unmatched_frees);
	cli_buf_puts(b, ",");
	cli_json_kv_u64(b, "implied_frees", s->implied_frees);
	cli_buf_puts(b, ",");
	cli_json_kv_bool(b, "sums_saturated", s->saturated);
	cli_buf_puts(b, ",");
	cli_json_kv_u64(b, "duration_ns", s->t1 > s->t0 ? s->t1 - s->t0 : 0);
	cli_buf_puts(b, ",");
	cli_json_kv_u64(b, "peak_bytes", s->peak);
	cli_buf_puts(b, ",");
	cli_json_kv_u64(b, "peak_at_ns",
			s->peak_t > t->hdr.start_mono_ns
			    ? s->peak_t - t->hdr.start_mono_ns
			    : 0);
	cli_buf_puts(b, ",");
	cli_json_kv_u64(b, "held_at_end_bytes", s->held_end);
	cli_buf_puts(b, ",");
	cli_json_kv_u64(b, "host_peak_bytes", s->host_peak);
	cli_buf_puts(b, ",");
	cli_json_key(b, "operations");
	cli_buf_puts(b, "[");
	for (size_t i = 0; i < s->n_ops; i++) {
		const struct gpr_trace_opstat *o = &s->ops[i];
		cli_buf_puts(b, i ? ",{" : "{");
		cli_json_kv_str(b, "op", str(t, o->op));
		cli_buf_printf(b,
			       ",\"calls\":%" PRIu64 ",\"errors\":%" PRIu64
			       ",\"bytes\":%" PRIu64 ",\"p50_ns\":%" PRIu64
			       ",\"p90_ns\":%" PRIu64 ",\"p99_ns\":%" PRIu64
			       ",\"max_ns\":%" PRIu64 ",\"wait_share\":%.6f"
			       ",\"tail_wait_share\":%.6f}",
			       o->calls, o->errors, o->bytes, o->p50, o->p90,
			       o->p99, o->max, o->wait_share,
			       o->tail_wait_share);
	}
	cli_buf_puts(b, "],");
	cli_json_key(b, "libraries");
	cli_buf_puts(b, "[");
	for (size_t i = 0; i < s->n_libs; i++) {
		const struct gpr_trace_libstat *l = &s->libs[i];
		cli_buf_puts(b, i ? ",{" : "{");
		cli_json_kv_str(b, "library", str(t, l->lib));
		cli_buf_printf(b,
			       ",\"calls\":%" PRIu64 ",\"allocs\":%" PRIu64
			       ",\"allocated_bytes\":%" PRIu64
			       ",\"frees\":%" PRIu64 ",\"freed_bytes\":%" PRIu64
			       ",\"peak_bytes\":%" PRIu64
			       ",\"held_at_end_bytes\":%" PRIu64 "}",
			       l->calls, l->allocs, l->alloc_bytes, l->frees,
			       l->freed_bytes, l->peak, l->held_end);
	}
	cli_buf_puts(b, "],");
	cli_json_key(b, "devices");
	cli_buf_puts(b, "[");
	for (size_t i = 0; i < s->n_devs; i++) {
		const struct gpr_trace_devstat *d = &s->devs[i];
		cli_buf_printf(
		    b,
		    "%s{\"device\":%d,\"calls\":%" PRIu64
		    ",\"allocated_bytes\":%" PRIu64 ",\"freed_bytes\":%" PRIu64
		    ",\"peak_bytes\":%" PRIu64 ",\"held_at_end_bytes\":%" PRIu64
		    "}",
		    i ? "," : "", d->device, d->calls, d->alloc_bytes,
		    d->freed_bytes, d->peak, d->held_end);
	}
	cli_buf_puts(b, "],");
	cli_json_kv_u64(b, "never_freed_count", s->n_live);
	cli_buf_puts(b, ",");
	cli_json_kv_u64(b, "never_freed_bytes", s->live_bytes);
	cli_buf_puts(b, ",");
	cli_json_key(b, "never_freed");
	cli_buf_puts(b, "[");
	for (size_t i = 0; i < s->n_live && (int)i < top; i++) {
		const struct gpr_trace_live *l = &s->live[i];
		cli_buf_printf(b,
			       "%s{\"addr\":%" PRIu64 ",\"bytes\":%" PRIu64
			       ",\"device\":%d,\"vmm_handle\":%s,\"host\":%s,",
			       i ? "," : "", l->addr, l->bytes, l->device,
			       l->vmm ? "true" : "false",
			       l->host ? "true" : "false");
		cli_json_kv_str(b, "op", str(t, l->op));
		cli_buf_puts(b, ",");
		cli_json_kv_str(b, "library", str(t, l->owner));
		cli_buf_puts(b, "}");
	}
	cli_buf_puts(b, "],");
	cli_json_key(b, "call_sites");
	cli_buf_puts(b, "[");
	for (size_t i = 0; i < s->n_sites && (int)i < top; i++) {
		const struct gpr_trace_sitestat *c = &s->sites[i];
		cli_buf_puts(b, i ? ",{" : "{");
		cli_json_kv_str(b, "site", str(t, c->site));
		cli_buf_puts(b, ",");
		cli_json_kv_str(b, "library", str(t, c->lib));
		cli_buf_printf(b,
			       ",\"calls\":%" PRIu64
			       ",\"allocated_bytes\":%" PRIu64 "}",
			       c->calls, c->bytes);
	}
	cli_buf_puts(b, "]}\n");
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
	/* A symbolic link named here is followed; the reader follows none. */
	char real[PATH_MAX];
	if (gpr__trace_load(realpath(path, real) ? real : path, &t, err,
			    sizeof(err)) < 0) {
		fprintf(stderr, "gpureclaim report: %s: %s\n", path, err);
		return GPR_CLI_ERROR;
	}
	struct gpr_trace_stats s;
	int ret = GPR_CLI_OK;
	if (gpr__trace_stats(&t, &s) < 0) {
		fprintf(stderr, "gpureclaim report: out of memory\n");
		gpr__trace_free(&t);
		return GPR_CLI_ERROR;
	}
	if (env.chrome)
		ret |= export_to(env.chrome, &t, gpr__trace_export_chrome);
	if (env.svg)
		ret |= export_to(env.svg, &t, gpr__trace_export_svg);
	struct cli_buf b = {0};
	if (env.json)
		gpr__report_json(&b, path, &t, &s, env.top);
	else
		gpr__report_text(&b, path, &t, &s, env.top, 0);
	if (b.oom) {
		fprintf(stderr, "gpureclaim report: out of memory\n");
		ret = GPR_CLI_ERROR;
	} else if (cli_buf_write_stdout(&b) < 0) {
		ret = GPR_CLI_ERROR;
	}
	cli_buf_free(&b);
	gpr__trace_stats_free(&s);
	gpr__trace_free(&t);
	return ret ? GPR_CLI_ERROR : GPR_CLI_OK;
}
