/*
 * RMM's replay log (log_rmm.h), every GPU's file in one replay. The rows
 * come from the memory replay (log_stats.c), so they agree with the report
 * on what was held; the format is what rapidsai/rmm's
 * logging_resource_adaptor writes (spdlog pattern "%t,%H:%M:%S.%f,%v",
 * message "<action>,%p,%zu,<stream>") and what its benchmarks'
 * log_parser.hpp reads: columns by name, Pointer with stoull(base 16) and
 * "(nil)" for a failure, Stream with stoul(base 10), which reads any
 * "0x..." as 0 (RMM's replay replays the default stream only).
 */
#include "log_rmm.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpureclaim.h"
#include "log_stats.h"

/* A device's file, once the replay met it. */
struct dev {
	FILE *f; /* NULL: left out */
	struct gpr_trace_rmm_counts *c;
	int asked;
};

struct rmm {
	const struct gpr_trace *t;
	gpr_trace_rmm_open_fn open_fn;
	void *ctx;
	struct dev *devs;    /* by ordinal, GPR_TRACE_RMM_DEVICES of them */
	uint64_t *unmatched; /* by ordinal: frees of memory never seen */
	uint64_t unknown;
	int failed;
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
static void row(struct rmm *m, struct dev *d, const struct gpr_trace_rec *r,
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
	fprintf(d->f, "%" PRIu32 ",%02d:%02d:%02d.%06u,%s,%s,%" PRIu64 ",%s\n",
		r->tid, tm.tm_hour, tm.tm_min, tm.tm_sec,
		(unsigned)(real % 1000000000ull / 1000), action, p, size, s);
	d->c->rows++;
}

/* Device dev's file: asked for the first time it has a row. */
static struct dev *device(struct rmm *m, int dev)
{
	if (dev < 0) {
		m->unknown++;
		return NULL;
	}
	struct dev *d = &m->devs[dev];
	if (!d->asked) {
		d->asked = 1;
		if (m->open_fn(m->ctx, dev, &d->f, &d->c) < 0) {
			m->failed = 1;
			return NULL;
		}
		if (d->f) {
			memset(d->c, 0, sizeof(*d->c));
			fputs(GPR_TRACE_RMM_SIGNATURE, d->f);
		}
	}
	return d->f ? d : NULL;
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
		    r->device >= 0)
			m->unmatched[r->device]++;
		return 0;
	}
	struct dev *d = device(m, dev);
	if (m->failed)
		return GPR_E_IO;
	if (!d)
		return 0;
	d->c->implied += st->implied != 0;
	row(m, d, r, action, ptr, size, st->implied ? 0 : stream_of(m->t, r));
	return 0;
}

int gpr_trace_export_rmm(const struct gpr_trace *t,
			 gpr_trace_rmm_open_fn open_fn, void *ctx,
			 uint64_t *unknown)
{
	struct rmm m = {.t = t, .open_fn = open_fn, .ctx = ctx};
	*unknown = 0;
	m.devs = calloc(GPR_TRACE_RMM_DEVICES, sizeof(*m.devs));
	m.unmatched = calloc(GPR_TRACE_RMM_DEVICES, sizeof(*m.unmatched));
	int rc = GPR_E_NOMEM;
	if (m.devs && m.unmatched)
		rc = gpr_trace_replay(t, step, &m, NULL, NULL);
	/* every stream once: a failed write leaves errno saying why */
	int e = 0;
	for (int i = 0; m.devs && i < GPR_TRACE_RMM_DEVICES; i++) {
		struct dev *d = &m.devs[i];
		if (!d->f)
			continue;
		d->c->unmatched = m.unmatched[i];
		errno = 0;
		if ((fflush(d->f) != 0 || ferror(d->f)) && !e)
			e = errno ? errno : EIO;
	}
	if (rc == 0 && e)
		rc = GPR_E_IO;
	*unknown = m.unknown;
	free(m.devs);
	free(m.unmatched);
	if (rc == GPR_E_IO)
		errno = e ? e : EIO;
	return rc;
}
