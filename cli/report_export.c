/*
 * The exports of `gpureclaim report` that need more than one call of the
 * reader (report.h): the timeline's size, measured before it is written
 * so the warning comes first, and RMM's logs, whose number (one per GPU)
 * is known only once the log has been read.
 */
#include "report.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpureclaim.h"
#include "out/fmt.h"
#include "../trace/read/log_export.h"

int gpr_cli_report_chrome(struct gpr_cli_out *o, const struct gpr_trace *t,
			  uint64_t max_events, uint64_t *merged)
{
	struct gpr_trace_chrome_size size;
	*merged = 0;
	if (gpr_trace_chrome_size(t, &size) == 0 &&
	    (!max_events || size.events <= max_events) &&
	    size.bytes > GPR_CLI_LARGE_TIMELINE) {
		/* the cap that keeps it near a fifth of the limit */
		double per = (double)size.bytes / (double)size.events;
		uint64_t cap =
		    (uint64_t)((double)GPR_CLI_LARGE_TIMELINE / 5 / per);
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
	int rc = gpr_trace_export_chrome_max(t, o->f, max_events, merged);
	if (rc < 0) {
		fprintf(stderr, "gpureclaim report: writing %s failed: %s\n",
			o->path, gpr_strerror(rc));
		return -1;
	}
	return 0;
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

int gpr_cli_rmm_open(struct gpr_cli_rmm *r, const char *path,
		     const struct gpr_trace *t, int force,
		     const struct stat *input, const char *const *others,
		     size_t n_others)
{
	memset(r, 0, sizeof(*r));
	int devs[256], rc;
	size_t n = gpr_trace_rmm_devices(t, devs, 256, &r->unknown, &rc);
	if (rc < 0) {
		fprintf(stderr, "gpureclaim report: %s\n", gpr_strerror(rc));
		return -1;
	}
	if (n > 256)
		n = 256; /* CUDA ordinals are below 256 */
	if (n == 0) {
		/* a file still, so a script finds what it asked for */
		devs[0] = 0;
		n = 1;
	}
	r->files = calloc(n, sizeof(*r->files));
	if (!r->files) {
		fprintf(stderr, "gpureclaim report: out of memory\n");
		return -1;
	}
	r->n = n;
	for (size_t i = 0; i < n; i++) {
		struct gpr_cli_rmm_file *f = &r->files[i];
		f->device = devs[i];
		if (n == 1)
			snprintf(f->path, sizeof(f->path), "%s", path);
		else
			device_path(path, devs[i], f->path, sizeof(f->path));
		for (size_t k = 0; k < n_others; k++)
			if (others[k] && gpr_cli_out_same(f->path, others[k])) {
				fprintf(stderr,
					"gpureclaim report: the RMM log %s "
					"is also another export\n",
					f->path);
				return -1;
			}
		if (gpr_cli_out_open(&f->out, "report", f->path,
				     GPR_TRACE_RMM_SIGNATURE, force, input) < 0)
			return -1;
	}
	return 0;
}

int gpr_cli_rmm_write(struct gpr_cli_rmm *r, const struct gpr_trace *t)
{
	for (size_t i = 0; i < r->n; i++) {
		struct gpr_cli_rmm_file *f = &r->files[i];
		int rc =
		    gpr_trace_export_rmm(t, f->device, f->out.f, &f->counts);
		if (rc < 0) {
			fprintf(stderr,
				"gpureclaim report: writing %s failed: %s\n",
				f->path, gpr_strerror(rc));
			return -1;
		}
	}
	return 0;
}

int gpr_cli_rmm_commit(struct gpr_cli_rmm *r)
{
	for (size_t i = 0; i < r->n; i++)
		if (gpr_cli_out_commit(&r->files[i].out, "report") < 0)
			return -1;
	if (r->unknown)
		fprintf(stderr,
			"gpureclaim report: %" PRIu64 " allocations and frees "
			"of an unknown GPU are not in the RMM log\n",
			r->unknown);
	for (size_t i = 0; i < r->n; i++) {
		const struct gpr_cli_rmm_file *f = &r->files[i];
		const struct gpr_trace_rmm_counts *c = &f->counts;
		fprintf(stderr,
			"gpureclaim report: wrote %s: GPU %d, %" PRIu64 " rows",
			f->path, f->device, c->rows);
		if (c->rows == 0)
			fputs(" (the trace has no device memory: the header "
			      "only)",
			      stderr);
		if (c->implied)
			fprintf(stderr,
				" (%" PRIu64 " frees missing from the log "
				"added)",
				c->implied);
		if (c->unmatched)
			fprintf(stderr,
				"; %" PRIu64 " frees of memory allocated "
				"before tracing began left out",
				c->unmatched);
		fputs("\n", stderr);
	}
	return 0;
}

void gpr_cli_rmm_free(struct gpr_cli_rmm *r)
{
	for (size_t i = 0; i < r->n; i++)
		gpr_cli_out_abort(&r->files[i].out);
	free(r->files);
	memset(r, 0, sizeof(*r));
}
