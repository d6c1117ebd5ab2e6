/*
 * The text and JSON reports of a trace log: what `gpureclaim report`
 * prints, and `gpureclaim trace` as its summary. Names come from a log
 * that may be hostile: the text shows them by the output toolkit's
 * terminal-safe rule, the JSON escapes them by its one rule.
 */
#include "log_report.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "out/fmt.h"
#include "out/json.h"
#include "out/text.h"

char *gpr_trace_fmt_ns(uint64_t ns, char *out, size_t len)
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
	return (double)gpr_trace_since_start(t, ns) / 1e9;
}

static const char *str(const struct gpr_trace *t, uint32_t id)
{
	return gpr_trace_str(t, id, "[unknown]");
}

/* What a META value says, for the report's reader. */
static const char *backend_words(const char *v)
{
	if (!v)
		return "not named in the log (CUPTI, before version 1.1)";
	if (strcmp(v, "interpose") == 0)
		return "the interposer (LD_PRELOAD)";
	if (strcmp(v, "cupti") == 0)
		return "CUPTI callbacks";
	return v;
}

static const char *wait_words(const char *v)
{
	if (!v)
		return "schedstat";
	if (strcmp(v, "perf-gated") == 0)
		return "schedstat, read after a switch the perf page shows";
	if (strcmp(v, "getrusage-gated") == 0)
		return "schedstat, read after a switch getrusage counts";
	if (strcmp(v, "none") == 0)
		return "not measured";
	return v;
}

void gpr_trace_recorded_by(struct gpr__buf *b, const struct gpr_trace *t)
{
	gpr__buf_puts(b, "Recorded by ");
	gpr__buf_puts(b, backend_words(gpr_trace_meta(t, "backend")));
	gpr__buf_puts(b, "; waiting time: ");
	gpr__buf_puts(b, wait_words(gpr_trace_meta(t, "wait")));
	const char *ch = gpr_trace_meta(t, "chained");
	if (ch && *ch) {
		gpr__buf_puts(b, "; through another interposer's functions "
				 "(HAMi-core's, say): ");
		gpr__buf_puts(b, ch);
	}
	const char *un = gpr_trace_meta(t, "unrecognised");
	if (un && *un) {
		gpr__buf_puts(b, "; not recorded (unknown driver answers): ");
		gpr__buf_puts(b, un);
	}
}

/* That line in the text report, by the terminal-safe rule. */
static void recorded_by(struct gpr__buf *b, const struct gpr_trace *t)
{
	struct gpr__buf line = {0};
	gpr_trace_recorded_by(&line, t);
	if (line.oom)
		b->oom = 1;
	else
		gpr__text_put(b, gpr__buf_str(&line), 0, 1);
	gpr__buf_free(&line);
	gpr__buf_puts(b, "\n");
}

void gpr_trace_report_text(struct gpr__buf *b, const char *path,
			   const struct gpr_trace *t,
			   const struct gpr_trace_stats *s, int top, int brief)
{
	char x[32], y[32], z[32], w[32], n[64];
	gpr__buf_puts(b, "Trace ");
	gpr__text_put(b, path, 0, 1);
	gpr__buf_printf(
	    b, ": pid %u, %s over %.3f s%s\n", t->hdr.pid,
	    gpr__fmt_count(s->records, "call", "calls", n, sizeof(n)),
	    s->t1 > s->t0 ? (double)(s->t1 - s->t0) / 1e9 : 0.0,
	    t->complete ? ""
			: " (log not closed: the program was "
			  "killed or is still running)");
	recorded_by(b, t);
	gpr__buf_printf(b,
			"Peak driver memory: %s at %.3f s; held at the end: "
			"%s\n",
			gpr__fmt_bytes(s->peak, x, sizeof(x)),
			secs(t, s->peak_t),
			gpr__fmt_bytes(s->held_end, y, sizeof(y)));
	if (s->host_peak)
		gpr__buf_printf(b,
				"Pinned host memory: peak %s, held at the "
				"end %s\n",
				gpr__fmt_bytes(s->host_peak, x, sizeof(x)),
				gpr__fmt_bytes(s->host_end, y, sizeof(y)));

	gpr__buf_puts(b, "\nBy operation (latency; waiting = share of the call "
			 "time spent runnable but not running, all calls / "
			 "slowest 1%):\n");
	gpr__buf_printf(b, "  %-24s %8s %6s %11s %9s %9s %9s %9s %15s\n",
			"operation", "calls", "errors", "bytes", "p50", "p90",
			"p99", "max", "waiting");
	for (size_t i = 0; i < s->n_ops; i++) {
		const struct gpr_trace_opstat *o = &s->ops[i];
		char wait[32] = "-";
		if (o->waited_calls)
			snprintf(wait, sizeof(wait), "%.1f%% / %.1f%%",
				 100 * o->wait_share, 100 * o->tail_wait_share);
		gpr__buf_puts(b, "  ");
		gpr__text_put(b, str(t, o->op), 24, 1);
		gpr__buf_printf(b, " %8" PRIu64 " %6" PRIu64 " %11s %9s",
				o->calls, o->errors,
				gpr__fmt_bytes(o->bytes, x, sizeof(x)),
				gpr_trace_fmt_ns(o->p50, y, sizeof(y)));
		gpr__buf_printf(b, " %9s %9s",
				gpr_trace_fmt_ns(o->p90, z, sizeof(z)),
				gpr_trace_fmt_ns(o->p99, w, sizeof(w)));
		gpr__buf_printf(b, " %9s %15s\n",
				gpr_trace_fmt_ns(o->max, x, sizeof(x)), wait);
	}

	gpr__buf_puts(b, "\nBy library (allocated/calls: as the caller; freed, "
			 "peak and held: of the memory it allocated):\n");
	gpr__buf_printf(b, "  %-28s %8s %11s %11s %11s %11s\n", "library",
			"calls", "allocated", "freed", "peak held",
			"held at end");
	for (size_t i = 0; i < s->n_libs && (int)i < top; i++) {
		const struct gpr_trace_libstat *l = &s->libs[i];
		gpr__buf_puts(b, "  ");
		gpr__text_put(b, str(t, l->lib), 28, 1);
		gpr__buf_printf(b, " %8" PRIu64 " %11s", l->calls,
				gpr__fmt_bytes(l->alloc_bytes, x, sizeof(x)));
		gpr__buf_printf(b, " %11s %11s %11s\n",
				gpr__fmt_bytes(l->freed_bytes, y, sizeof(y)),
				gpr__fmt_bytes(l->peak, z, sizeof(z)),
				gpr__fmt_bytes(l->held_end, w, sizeof(w)));
	}

	gpr__buf_puts(b, "\nBy device:\n");
	gpr__buf_printf(b, "  %-7s %8s %11s %11s %11s %9s %11s\n", "device",
			"calls", "allocated", "freed", "peak", "peak at",
			"held at end");
	for (size_t i = 0; i < s->n_devs; i++) {
		const struct gpr_trace_devstat *d = &s->devs[i];
		char dev[16];
		if (d->device < 0)
			snprintf(dev, sizeof(dev), "?");
		else
			snprintf(dev, sizeof(dev), "%d", d->device);
		gpr__buf_printf(b, "  %-7s %8" PRIu64 " %11s", dev, d->calls,
				gpr__fmt_bytes(d->alloc_bytes, x, sizeof(x)));
		gpr__buf_printf(b, " %11s %11s %8.3fs",
				gpr__fmt_bytes(d->freed_bytes, y, sizeof(y)),
				gpr__fmt_bytes(d->peak, z, sizeof(z)),
				secs(t, d->peak_t));
		gpr__buf_printf(b, " %11s\n",
				gpr__fmt_bytes(d->held_end, w, sizeof(w)));
	}

	int saturated = s->saturated;
	if (!brief) {
		uint64_t host = 0;
		for (size_t i = 0; i < s->n_live; i++)
			if (s->live[i].host)
				saturated |=
				    gpr_trace_usum(&host, s->live[i].bytes);
		gpr__buf_printf(b, "\nNever freed: %s, %s of device memory",
				gpr__fmt_count(s->n_live, "allocation",
					       "allocations", n, sizeof(n)),
				gpr__fmt_bytes(s->live_bytes, x, sizeof(x)));
		if (host)
			gpr__buf_printf(b, ", %s of pinned host memory",
					gpr__fmt_bytes(host, y, sizeof(y)));
		gpr__buf_puts(b, "\n");
		for (size_t i = 0; i < s->n_live && (int)i < top; i++) {
			const struct gpr_trace_live *l = &s->live[i];
			/* where the memory is: a device, or pinned host */
			char where[16];
			if (l->host)
				snprintf(where, sizeof(where), "host");
			else
				snprintf(where, sizeof(where), "dev %d",
					 l->device);
			gpr__buf_printf(b, "  %11s  %s0x%-14" PRIx64 " %-7s ",
					gpr__fmt_bytes(l->bytes, x, sizeof(x)),
					l->vmm ? "handle " : "", l->addr,
					where);
			gpr__text_put(b, str(t, l->op), 20, 1);
			gpr__buf_printf(b, " at %8.3fs by ", secs(t, l->t_ns));
			gpr__text_put(b, str(t, l->owner), 0, 1);
			gpr__buf_puts(b, "\n");
		}
		gpr__buf_puts(b, "\nTop call sites (by bytes allocated):\n");
		if (s->n_sites == 0)
			gpr__buf_puts(b, "  none in the log\n");
		for (size_t i = 0; i < s->n_sites && (int)i < top; i++) {
			const struct gpr_trace_sitestat *c = &s->sites[i];
			gpr__buf_printf(b, "  %11s %14s  ",
					gpr__fmt_bytes(c->bytes, x, sizeof(x)),
					gpr__fmt_count(c->calls, "call",
						       "calls", n, sizeof(n)));
			gpr__text_put(b, str(t, c->site), 0, 1);
			gpr__buf_puts(b, "\n");
		}
	}
	if (s->unmatched_frees || s->dropped || s->implied_frees || s->errors ||
	    saturated) {
		gpr__buf_puts(b, "\nNotes:\n");
		if (saturated)
			gpr__buf_puts(b,
				      "  some byte figures reached the largest "
				      "value they can hold and stopped there "
				      "(the log holds sizes no GPU has)\n");
		if (s->errors)
			gpr__buf_printf(
			    b, "  %s (counted in errors, no memory moved)\n",
			    gpr__fmt_count(s->errors, "call failed",
					   "calls failed", n, sizeof(n)));
		if (s->unmatched_frees)
			gpr__buf_printf(
			    b,
			    "  %s of memory allocated before tracing "
			    "began\n",
			    gpr__fmt_count(s->unmatched_frees, "free", "frees",
					   n, sizeof(n)));
		if (s->dropped)
			gpr__buf_printf(
			    b, "  %s (buffers full)\n",
			    gpr__fmt_count(s->dropped, "record was lost",
					   "records were lost", n, sizeof(n)));
		if (s->implied_frees)
			gpr__buf_printf(
			    b,
			    "  %s from the log, inferred where the address "
			    "or handle was allocated again\n",
			    gpr__fmt_count(s->implied_frees, "free missing",
					   "frees missing", n, sizeof(n)));
	}
}

void gpr_trace_report_json(struct gpr__buf *b, const char *path,
			   const struct gpr_trace *t,
			   const struct gpr_trace_stats *s, int top)
{
	struct gpr__json j;
	gpr__json_init(&j, b);
	gpr__json_object(&j);
	gpr__json_kv_str(&j, "file", path);
	gpr__json_kv_u64(&j, "format_version", t->hdr.version);
	gpr__json_kv_u64(&j, "pid", t->hdr.pid);
	gpr__json_kv_bool(&j, "complete", t->complete);
	gpr__json_kv_u64(&j, "start_realtime_ns", t->hdr.start_realtime_ns);
	gpr__json_kv_u64(&j, "records", s->records);
	gpr__json_kv_u64(&j, "errors", s->errors);
	gpr__json_kv_u64(&j, "dropped", s->dropped);
	gpr__json_kv_u64(&j, "unmatched_frees", s->unmatched_frees);
	gpr__json_kv_u64(&j, "implied_frees", s->implied_frees);
	gpr__json_kv_bool(&j, "sums_saturated", s->saturated);
	gpr__json_kv_u64(&j, "duration_ns", s->t1 > s->t0 ? s->t1 - s->t0 : 0);
	gpr__json_kv_u64(&j, "peak_bytes", s->peak);
	gpr__json_kv_u64(&j, "peak_at_ns", gpr_trace_since_start(t, s->peak_t));
	gpr__json_kv_u64(&j, "held_at_end_bytes", s->held_end);
	gpr__json_kv_u64(&j, "host_peak_bytes", s->host_peak);
	/* null in a log that does not say (before version 1.1) */
	gpr__json_kv_str(&j, "backend", gpr_trace_meta(t, "backend"));
	gpr__json_kv_str(&j, "wait", gpr_trace_meta(t, "wait"));
	gpr__json_key(&j, "meta");
	gpr__json_object(&j);
	for (uint32_t i = 0; i < t->n_meta; i++)
		gpr__json_kv_str(&j, t->meta[i].key, t->meta[i].value);
	gpr__json_object_end(&j);

	gpr__json_key(&j, "operations");
	gpr__json_array(&j);
	for (size_t i = 0; i < s->n_ops; i++) {
		const struct gpr_trace_opstat *o = &s->ops[i];
		gpr__json_object(&j);
		gpr__json_kv_str(&j, "op", str(t, o->op));
		gpr__json_kv_u64(&j, "calls", o->calls);
		gpr__json_kv_u64(&j, "errors", o->errors);
		gpr__json_kv_u64(&j, "bytes", o->bytes);
		gpr__json_kv_u64(&j, "p50_ns", o->p50);
		gpr__json_kv_u64(&j, "p90_ns", o->p90);
		gpr__json_kv_u64(&j, "p99_ns", o->p99);
		gpr__json_kv_u64(&j, "max_ns", o->max);
		gpr__json_key(&j, "wait_share");
		gpr__json_double(&j, o->wait_share, 6);
		gpr__json_key(&j, "tail_wait_share");
		gpr__json_double(&j, o->tail_wait_share, 6);
		gpr__json_object_end(&j);
	}
	gpr__json_array_end(&j);

	gpr__json_key(&j, "libraries");
	gpr__json_array(&j);
	for (size_t i = 0; i < s->n_libs; i++) {
		const struct gpr_trace_libstat *l = &s->libs[i];
		gpr__json_object(&j);
		gpr__json_kv_str(&j, "library", str(t, l->lib));
		gpr__json_kv_u64(&j, "calls", l->calls);
		gpr__json_kv_u64(&j, "allocs", l->allocs);
		gpr__json_kv_u64(&j, "allocated_bytes", l->alloc_bytes);
		gpr__json_kv_u64(&j, "frees", l->frees);
		gpr__json_kv_u64(&j, "freed_bytes", l->freed_bytes);
		gpr__json_kv_u64(&j, "peak_bytes", l->peak);
		gpr__json_kv_u64(&j, "held_at_end_bytes", l->held_end);
		gpr__json_object_end(&j);
	}
	gpr__json_array_end(&j);

	gpr__json_key(&j, "devices");
	gpr__json_array(&j);
	for (size_t i = 0; i < s->n_devs; i++) {
		const struct gpr_trace_devstat *d = &s->devs[i];
		gpr__json_object(&j);
		gpr__json_kv_i64(&j, "device", d->device);
		gpr__json_kv_u64(&j, "calls", d->calls);
		gpr__json_kv_u64(&j, "allocated_bytes", d->alloc_bytes);
		gpr__json_kv_u64(&j, "freed_bytes", d->freed_bytes);
		gpr__json_kv_u64(&j, "peak_bytes", d->peak);
		gpr__json_kv_u64(&j, "held_at_end_bytes", d->held_end);
		gpr__json_object_end(&j);
	}
	gpr__json_array_end(&j);

	gpr__json_kv_u64(&j, "never_freed_count", s->n_live);
	gpr__json_kv_u64(&j, "never_freed_bytes", s->live_bytes);
	gpr__json_key(&j, "never_freed");
	gpr__json_array(&j);
	for (size_t i = 0; i < s->n_live && (int)i < top; i++) {
		const struct gpr_trace_live *l = &s->live[i];
		gpr__json_object(&j);
		gpr__json_kv_u64(&j, "addr", l->addr);
		gpr__json_kv_u64(&j, "bytes", l->bytes);
		gpr__json_kv_i64(&j, "device", l->device);
		gpr__json_kv_bool(&j, "vmm_handle", l->vmm);
		gpr__json_kv_bool(&j, "host", l->host);
		gpr__json_kv_str(&j, "op", str(t, l->op));
		gpr__json_kv_str(&j, "library", str(t, l->owner));
		gpr__json_object_end(&j);
	}
	gpr__json_array_end(&j);

	gpr__json_key(&j, "call_sites");
	gpr__json_array(&j);
	for (size_t i = 0; i < s->n_sites && (int)i < top; i++) {
		const struct gpr_trace_sitestat *c = &s->sites[i];
		gpr__json_object(&j);
		gpr__json_kv_str(&j, "site", str(t, c->site));
		gpr__json_kv_str(&j, "library", str(t, c->lib));
		gpr__json_kv_u64(&j, "calls", c->calls);
		gpr__json_kv_u64(&j, "allocated_bytes", c->bytes);
		gpr__json_object_end(&j);
	}
	gpr__json_array_end(&j);
	gpr__json_object_end(&j);
	gpr__buf_puts(b, "\n");
}
