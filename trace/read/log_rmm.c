/*
 * RMM's replay log (log_rmm.h). The rows come from the memory replay
 * (log_stats.c), so they agree with the report on what was held; the
 * format is what rapidsai/rmm's logging_resource_adaptor writes (spdlog
 * pattern "%t,%H:%M:%S.%f,%v", message "<action>,%p,%zu,<stream>") and
 * what its benchmarks' log_parser.hpp reads: columns by name, Pointer
 * with stoull(base 16) and "(nil)" for a failure, Stream with
 * stoul(base 10), which reads any "0x..." as 0 (RMM's replay replays the
 * default stream only).
 */
#include "log_rmm.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpureclaim.h"
#include "log_stats.h"

struct rmm {
	const struct gpr_trace *t;
	int device; /* the device written; -2 when only counting */
	FILE *f;
	struct gpr_trace_rmm_counts *c;
	/* counting: the devices seen */
	int *devs;
	size_t n, cap;
	uint64_t unknown;
};

/* The stream of a stream-ordered call (its aux), else 0. */
static uint64_t stream_of(const struct gpr_trace *t,
			  const struct gpr_trace_rec *r)
{
	const char *op = gpr_trace_str(t, r->op, "");
	return strcmp(op, "cuMemAllocAsync") == 0 ||
		       strcmp(op, "cuMemFreeAsync") == 0
		   ? r->aux
		   : 0;
}

/* One row; action "allocate", "free" or "allocate failure". */
static void row(struct rmm *m, const struct gpr_trace_rec *r,
		const char *action, uint64_t ptr, uint64_t size,
		uint64_t stream)
{
	const struct gpr_trace *t = m->t;
	uint64_t key = gpr_trace_key(t, r);
	uint64_t since =
	    key > t->hdr.start_mono_ns ? key - t->hdr.start_mono_ns : 0;
	uint64_t real = t->hdr.start_realtime_ns + since;
	time_t sec = (time_t)(real / 1000000000ull);
	struct tm tm;
	if (!localtime_r(&sec, &tm))
		memset(&tm, 0, sizeof(tm));
	char p[32], s[32];
	/* printf's %p, as RMM: 0x7f1c2a000000, (nil) */
	snprintf(p, sizeof(p), "%p", (void *)(uintptr_t)ptr);
	if (stream)
		snprintf(s, sizeof(s), "0x%" PRIx64, stream);
	else
		snprintf(s, sizeof(s), "0");
	fprintf(m->f, "%" PRIu32 ",%02d:%02d:%02d.%06u,%s,%s,%" PRIu64 ",%s\n",
		r->tid, tm.tm_hour, tm.tm_min, tm.tm_sec,
		(unsigned)(real % 1000000000ull / 1000), action, p, size, s);
	m->c->rows++;
}

static int note_device(struct rmm *m, int dev)
{
	if (dev < 0) {
		m->unknown++;
		return 0;
	}
	for (size_t i = 0; i < m->n; i++)
		if (m->devs[i] == dev)
			return 0;
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 8;
		int *d = realloc(m->devs, cap * sizeof(*d));
		if (!d)
			return GPR_E_NOMEM;
		m->devs = d;
		m->cap = cap;
	}
	m->devs[m->n++] = dev;
	return 0;
}

static int step(void *ctx, const struct gpr_trace_step *st)
{
	struct rmm *m = ctx;
	const struct gpr_trace_rec *r = st->r;
	enum gpr_trace_kind k = st->kind;
	int dev;
	const char *action;
	uint64_t ptr = 0, size;
	if (st->dev_delta > 0) {
		dev = st->device;
		action = "allocate";
		ptr = k == GPR_K_CREATE ? r->aux : r->addr;
		size = (uint64_t)st->dev_delta;
	} else if (st->dev_delta < 0) {
		dev = st->device;
		action = "free";
		ptr = k == GPR_K_RELEASE ? r->aux : r->addr;
		size = (uint64_t)-st->dev_delta;
	} else if (r->result != 0 && (k == GPR_K_ALLOC || k == GPR_K_CREATE) &&
		   !(r->flags & GPR_TRACE_R_HOST)) {
		dev = r->device;
		action = "allocate failure";
		size = r->bytes;
	} else {
		if (st->unmatched && (k == GPR_K_FREE || k == GPR_K_RELEASE) &&
		    m->device == r->device)
			m->c->unmatched++;
		return 0;
	}
	if (m->device == -2)
		return note_device(m, dev);
	if (dev != m->device)
		return 0;
	m->c->implied += st->implied != 0;
	row(m, r, action, ptr, size, st->implied ? 0 : stream_of(m->t, r));
	return 0;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

size_t gpr_trace_rmm_devices(const struct gpr_trace *t, int *devs, size_t cap,
			     uint64_t *unknown, int *rc)
{
	struct gpr_trace_rmm_counts c = {0};
	struct rmm m = {.t = t, .device = -2, .c = &c};
	*rc = gpr_trace_replay(t, step, &m, NULL, NULL);
	if (m.n)
		qsort(m.devs, m.n, sizeof(*m.devs), cmp_int);
	for (size_t i = 0; i < m.n && i < cap; i++)
		devs[i] = m.devs[i];
	*unknown = m.unknown;
	free(m.devs);
	return *rc ? 0 : m.n;
}

int gpr_trace_export_rmm(const struct gpr_trace *t, int device, FILE *f,
			 struct gpr_trace_rmm_counts *counts)
{
	memset(counts, 0, sizeof(*counts));
	struct rmm m = {.t = t, .device = device, .f = f, .c = counts};
	fputs(GPR_TRACE_RMM_SIGNATURE, f);
	int rc = gpr_trace_replay(t, step, &m, NULL, NULL);
	if (rc == 0 && (fflush(f) != 0 || ferror(f)))
		rc = GPR_E_IO;
	return rc;
}
