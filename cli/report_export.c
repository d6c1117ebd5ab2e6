/*
 * The exports of `gpureclaim report` that need more than one call of the
 * reader (report.h): the timeline's size, measured before it is written
 * so the warning comes first, and RMM's logs, one per GPU, all written in
 * one replay of the log and named once it is known how many there are.
 */
#include "report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

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
		char b[32], near[32];
		fprintf(stderr,
			"gpureclaim report: the timeline will be about %s "
			"(%.1f M events); ui.perfetto.dev opens a few hundred "
			"MiB in a browser; --max-events %" PRIu64
			" keeps it near %s\n",
			gpr__fmt_bytes(size.bytes, b, sizeof(b)),
			(double)size.events / 1e6, cap,
			gpr__fmt_bytes((uint64_t)((double)cap * per), near,
				       sizeof(near)));
	}
	errno = 0;
	int rc = gpr_trace_export_chrome_max(t, o->f, max_events, merged);
	if (rc < 0) {
		gpr_cli_report_failed(o->path, rc);
		return -1;
	}
	return 0;
}

void gpr_cli_report_failed(const char *path, int rc)
{
	char q[GPR_TRACE_QUOTED_MAX];
	int e = errno;
	fprintf(stderr, "gpureclaim report: writing %s failed: %s\n",
		gpr_trace_path_quoted(q, sizeof q, path),
		rc == GPR_E_IO ? strerror(e ? e : EIO) : gpr_strerror(rc));
}

/* path with ".dev<N>" before its extension, as RMM's _append_id. */
static char *device_path(const char *path, int dev)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	const char *dot = strrchr(base, '.');
	if (!dot || dot == base)
		dot = path + strlen(path);
	char *out = NULL;
	if (asprintf(&out, "%.*s.dev%d%s", (int)(dot - path), path, dev, dot) <
	    0)
		return NULL;
	return out;
}

/*
 * One RMM log per GPU means as many files open at once: the soft limit
 * of open files is raised to the hard one first (a log of 300 GPUs is
 * written whole), and past that the export fails saying why.
 */
static void more_files(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* A GPU's file, made when the replay meets its first row. */
static int open_device(void *ctx, int device, FILE **f,
		       struct gpr_trace_rmm_counts **counts)
{
	struct gpr_cli_rmm *r = ctx;
	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 8;
		struct gpr_cli_rmm_file **p =
		    realloc(r->files, cap * sizeof(*p));
		if (!p)
			goto nomem;
		r->files = p;
		r->cap = cap;
	}
	struct gpr_cli_rmm_file *x = calloc(1, sizeof(*x));
	if (!x)
		goto nomem;
	r->files[r->n++] = x;
	x->device = device;
	/* beside --rmm-csv's path, as every name it may get is */
	if (gpr_cli_out_create(&x->out, "report", r->path) < 0) {
		r->said = 1;
		if (errno == EMFILE || errno == ENFILE)
			fprintf(stderr,
				"gpureclaim report: --rmm-csv writes a file "
				"per GPU, and this log has more GPUs than "
				"files this process may open (ulimit -n)\n");
		return -1;
	}
	*f = x->out.f;
	*counts = &x->counts;
	return 0;
nomem:
	r->said = 1;
	fprintf(stderr, "gpureclaim report: out of memory\n");
	return -1;
}

static int by_device(const void *a, const void *b)
{
	const struct gpr_cli_rmm_file *x =
	    *(const struct gpr_cli_rmm_file *const *)a;
	const struct gpr_cli_rmm_file *y =
	    *(const struct gpr_cli_rmm_file *const *)b;
	return (x->device > y->device) - (x->device < y->device);
}

/* The files' names, each checked as an export's. */
static int name_files(struct gpr_cli_rmm *r, int force,
		      const struct stat *input, const char *const *others,
		      size_t n_others)
{
	char q[GPR_TRACE_QUOTED_MAX];
	struct stat st;
	if (r->n > 1 && lstat(r->path, &st) == 0 && !S_ISREG(st.st_mode)) {
		fprintf(stderr,
			"gpureclaim report: --rmm-csv %s is not a regular "
			"file: the log has %zu GPUs, and RMM's logs of them "
			"would be %s with .dev<N> added; name a regular "
			"file\n",
			gpr_trace_path_quoted(q, sizeof q, r->path), r->n,
			r->path);
		return -1;
	}
	for (size_t i = 0; i < r->n; i++) {
		struct gpr_cli_rmm_file *f = r->files[i];
		f->path = r->n == 1 ? strdup(r->path)
				    : device_path(r->path, f->device);
		if (!f->path) {
			fprintf(stderr, "gpureclaim report: out of memory\n");
			return -1;
		}
		f->out.path = f->path;
		for (size_t k = 0; k < n_others; k++)
			if (others[k] && gpr_cli_out_same(f->path, others[k])) {
				fprintf(stderr,
					"gpureclaim report: the RMM log %s "
					"is also another export\n",
					gpr_trace_path_quoted(q, sizeof q,
							      f->path));
				return -1;
			}
		if (gpr_cli_out_check(
			"report", f->path, GPR_TRACE_RMM_SIGNATURE,
			"an export of gpureclaim", force, input) < 0)
			return -1;
	}
	return 0;
}

int gpr_cli_rmm_write(struct gpr_cli_rmm *r, const char *path,
		      const struct gpr_trace *t, int force,
		      const struct stat *input, const char *const *others,
		      size_t n_others)
{
	memset(r, 0, sizeof(*r));
	r->path = path;
	more_files();
	errno = 0;
	int rc = gpr_trace_export_rmm(t, open_device, r, &r->unknown);
	if (rc < 0) {
		/* a file that could not be made said so already */
		if (!r->said)
			gpr_cli_report_failed(path, rc);
		return -1;
	}
	if (r->n == 0) {
		/* a file still, so a script finds what it asked for */
		FILE *f;
		struct gpr_trace_rmm_counts *c;
		if (open_device(r, 0, &f, &c) < 0)
			return -1;
		memset(c, 0, sizeof(*c));
		errno = 0;
		if (fputs(GPR_TRACE_RMM_SIGNATURE, f) < 0 || fflush(f) != 0) {
			gpr_cli_report_failed(path, GPR_E_IO);
			return -1;
		}
	}
	qsort(r->files, r->n, sizeof(*r->files), by_device);
	return name_files(r, force, input, others, n_others);
}

int gpr_cli_rmm_commit(struct gpr_cli_rmm *r)
{
	for (size_t i = 0; i < r->n; i++)
		if (gpr_cli_out_commit(&r->files[i]->out, "report") < 0)
			return -1;
	return 0;
}

void gpr_cli_rmm_said(const struct gpr_cli_rmm *r)
{
	char q[GPR_TRACE_QUOTED_MAX], n[64];
	if (r->unknown)
		fprintf(stderr,
			"gpureclaim report: %s of an unknown GPU not in the "
			"RMM log\n",
			gpr__fmt_count(r->unknown, "allocation or free",
				       "allocations and frees", n, sizeof n));
	for (size_t i = 0; i < r->n; i++) {
		const struct gpr_cli_rmm_file *f = r->files[i];
		const struct gpr_trace_rmm_counts *c = &f->counts;
		fprintf(stderr, "gpureclaim report: wrote %s: GPU %d, %s",
			gpr_trace_path_quoted(q, sizeof q, f->path), f->device,
			gpr__fmt_count(c->rows, "row", "rows", n, sizeof n));
		if (c->rows == 0)
			fputs(" (the trace has no device memory: the header "
			      "only)",
			      stderr);
		if (c->implied)
			fprintf(stderr, " (%s added)",
				gpr__fmt_count(
				    c->implied, "free missing from the log",
				    "frees missing from the log", n, sizeof n));
		if (c->unmatched)
			fprintf(stderr,
				"; %s of memory allocated before tracing "
				"began left out",
				gpr__fmt_count(c->unmatched, "free", "frees", n,
					       sizeof n));
		fputs("\n", stderr);
	}
}

void gpr_cli_rmm_free(struct gpr_cli_rmm *r)
{
	for (size_t i = 0; i < r->n; i++) {
		gpr_cli_out_abort(&r->files[i]->out);
		free(r->files[i]->path);
		free(r->files[i]);
	}
	free(r->files);
	memset(r, 0, sizeof(*r));
}
