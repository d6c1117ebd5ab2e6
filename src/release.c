/*
 * gpr_release: visit the GPUs this process has opened, run the releasers,
 * measure what the driver got back.
 *
 * The number is the drop of the driver's per-process figure: NVML's on a
 * CUDA GPU (what nvidia-smi lists for this pid), a releaser's figure() on a
 * GPU that CUDA does not see (Metal's per-process total); never the drop
 * of cuMemGetInfo's free memory, which moves with every other process on
 * the GPU. Where a visited GPU has no such figure (MIG, a pid namespace, no
 * NVML) the allocators' own counters are summed instead and the report says
 * so.
 *
 * Order, and why: the figures and each releaser's held() are read first;
 * then the collector runs, when asked to or when a releaser reports live
 * bytes (a release returns only cached blocks: live ones may be garbage in
 * a reference cycle, and a pass before the collection would be repeated
 * after it); then one pass of every releaser; then the figures and held()
 * again.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"
#include "devices.h"
#include "figure.h"
#include "gpus.h"
#include "registry.h"
#include "report.h"
#include "sized.h"

/* A GPU the release visits: a CUDA GPU, or one CUDA does not see. */
struct visit {
	int dev;	    /* CUDA ordinal, or GPR_DEVICE_NAMED */
	const char *name;   /* a named GPU's name (the registry's copy) */
	size_t figure_from; /* named: the releaser whose figure() answered */
	struct gpr__figure before, after;
};

#define NO_FIGURE SIZE_MAX

/* One releaser on one visited GPU, or its once step: a report row. */
struct cell {
	size_t rel; /* index in the registry */
	int visit;  /* index in run.v; -1: a CUDA releaser's once step */
	int dev;    /* what held() and release() get */
};

struct run {
	gpr_ctx *ctx;
	struct gpr_release_opts o;
	gpr_report *r;
	struct visit *v;
	int nv, nv_cuda; /* CUDA GPUs first, then named ones */
	struct cell *c;
	size_t nc;
	size_t row0;		/* report row of cell 0 */
	struct gpr__mine *mine; /* the scan that found the CUDA GPUs */
	int n_mine;
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const struct gpr__releaser *rel_of(struct run *x, size_t k)
{
	return &x->ctx->rel[x->c[k].rel];
}

static struct gpr__rrow *row(struct run *x, size_t k)
{
	return &x->r->rel[x->row0 + k];
}

/* A releaser's held(): zero with known = 0 when it cannot tell. */
static struct gpr_held held(const struct gpr__releaser *e, int dev)
{
	struct gpr_held h = {0};
	if (!e->r.held || e->r.held(e->r.data, dev, &h) < 0 || !h.known)
		memset(&h, 0, sizeof h);
	return h;
}

static void read_held(struct run *x, int after)
{
	for (size_t k = 0; k < x->nc; k++) {
		struct gpr_held h = held(rel_of(x, k), x->c[k].dev);
		if (after)
			row(x, k)->after = h;
		else
			row(x, k)->before = h;
	}
}

static void release_one(struct run *x, size_t k)
{
	const struct gpr__releaser *e = rel_of(x, k);
	if (!e->r.release)
		return;
	int dev = x->c[k].dev;
	char where[32];
	if (dev == GPR_DEVICE_ONCE)
		snprintf(where, sizeof where, "the once-per-call step");
	else
		snprintf(where, sizeof where, "GPU %d", dev);
	char note[512] = "";
	int rc = e->r.release(e->r.data, dev, note, sizeof note);
	note[sizeof note - 1] = '\0';
	if (rc < 0) {
		struct gpr__rrow *w = row(x, k);
		if (!w->status)
			w->status = rc;
		gpr__report_note(x->r, "%s: release on %s failed: %s", e->name,
				 where, note[0] ? note : gpr_strerror(rc));
		gpr__log(x->ctx, GPR_LOG_WARN, "%s: release on %s failed: %s",
			 e->name, where, note);
	} else if (note[0]) {
		gpr__report_note(x->r, "%s: %s: %s", e->name, where, note);
	}
}

/* Every releaser on every visited CUDA GPU, then every once step (the
 * releasers of named GPUs have only that one), in registration order. */
static void pass(struct run *x)
{
	for (size_t k = 0; k < x->nc; k++)
		if (x->c[k].dev != GPR_DEVICE_ONCE)
			release_one(x, k);
	for (size_t k = 0; k < x->nc; k++)
		if (x->c[k].dev == GPR_DEVICE_ONCE)
			release_one(x, k);
}

static void run_collector(struct run *x, int (*fn)(void *user))
{
	double t = now();
	int rc = fn(x->o.collect_user);
	x->r->collect_seconds += now() - t;
	x->r->collected = 1;
	if (rc < 0)
		gpr__report_note(x->r, "the garbage collector failed (%d)", rc);
}

/*
 * 1 if a releaser reports live bytes on a visited GPU: in the figures read
 * before (fresh = 0), or asked again of the releasers that reported some
 * (fresh = 1).
 */
static int live(struct run *x, int fresh)
{
	for (size_t k = 0; k < x->nc; k++) {
		if (x->c[k].visit < 0 || !row(x, k)->before.live)
			continue;
		if (!fresh || held(rel_of(x, k), x->c[k].dev).live)
			return 1;
	}
	return 0;
}

static void collect(struct run *x)
{
	if (!x->o.collect_fn || x->o.collect == GPR_COLLECT_NEVER)
		return;
	if (x->o.collect == GPR_COLLECT_AUTO) {
		if (!live(x, 0))
			return;
		if (x->o.collect_young_fn) {
			run_collector(x, x->o.collect_young_fn);
			if (!live(x, 1))
				return;
		}
	}
	run_collector(x, x->o.collect_fn);
}

/* A named GPU's figure from releaser i; the enum gpr_figure answer. */
static int named_figure(struct run *x, size_t i, struct gpr__figure *f)
{
	const struct gpr__releaser *e = &x->ctx->rel[i];
	memset(f, 0, sizeof *f);
	f->nvml_index = -1;
	f->state = GPR__FIG_ERROR;
	if (!e->r.figure) {
		snprintf(f->why, sizeof f->why, "%s: no figure", e->name);
		return GPR_FIGURE_UNKNOWN;
	}
	char why[256] = "";
	uint64_t bytes = 0;
	int rc = e->r.figure(e->r.data, &bytes, why, sizeof why);
	why[sizeof why - 1] = '\0';
	if (rc == GPR_FIGURE_KNOWN) {
		f->known = 1;
		f->state = GPR__FIG_KNOWN;
		f->bytes = bytes;
		return rc;
	}
	if (rc < 0) {
		f->rc = rc;
		snprintf(f->why, sizeof f->why, "%s: %s", e->name,
			 why[0] ? why : gpr_strerror(rc));
		return GPR_FIGURE_UNKNOWN; /* in use, unreadable */
	}
	snprintf(f->why, sizeof f->why, "%s", why[0] ? why : e->name);
	return rc == GPR_FIGURE_UNUSED ? rc : GPR_FIGURE_UNKNOWN;
}

/*
 * The named GPUs in use, each with the figure of the first releaser that
 * reads it; in_use[i] marks the releasers that run there.
 */
static void choose_named(struct run *x, unsigned char *in_use)
{
	for (size_t i = 0; i < x->ctx->n_rel; i++) {
		const struct gpr__releaser *e = &x->ctx->rel[i];
		if (!e->device_name)
			continue;
		struct gpr__figure f;
		if (named_figure(x, i, &f) == GPR_FIGURE_UNUSED)
			continue;
		in_use[i] = 1;
		struct visit *v = NULL;
		for (int j = x->nv_cuda; j < x->nv && !v; j++)
			if (strcmp(x->v[j].name, e->device_name) == 0)
				v = &x->v[j];
		if (!v) {
			v = &x->v[x->nv++];
			memset(v, 0, sizeof *v);
			v->dev = GPR_DEVICE_NAMED;
			v->name = e->device_name;
			v->figure_from = NO_FIGURE;
			v->before = f;
		}
		if (f.known && v->figure_from == NO_FIGURE) {
			v->before = f;
			v->figure_from = i;
		}
	}
}

/* Before (CUDA): from the scan that found the GPUs; after: asked anew. */
static void read_figures(struct run *x, int after)
{
	for (int j = 0; j < x->nv; j++) {
		struct visit *v = &x->v[j];
		if (v->dev == GPR_DEVICE_NAMED) {
			if (!after)
				continue; /* read when the GPU was chosen */
			if (v->figure_from == NO_FIGURE)
				v->after = v->before;
			else
				named_figure(x, v->figure_from, &v->after);
			continue;
		}
		gpr__process_figure(x->ctx, v->dev,
				    after ? &v->after : &v->before,
				    after ? NULL : x->mine, x->n_mine);
	}
}

/* Bytes the allocators say they gave back on visit j (known rows only). */
static int64_t allocator_drop(struct run *x, int j)
{
	int64_t sum = 0;
	for (size_t k = 0; k < x->nc; k++) {
		const struct gpr__rrow *w = row(x, k);
		if (x->c[k].visit == j && w->known)
			sum += (int64_t)(w->before.live + w->before.cached) -
			       (int64_t)(w->after.live + w->after.cached);
	}
	return sum;
}

static void account(struct run *x)
{
	for (size_t k = 0; k < x->nc; k++) {
		struct gpr__rrow *w = row(x, k);
		w->known = w->before.known && w->after.known;
	}
	int all = 1;
	for (int j = 0; j < x->nv; j++)
		if (!x->v[j].before.known || !x->v[j].after.known)
			all = 0;
	/* no GPU visited: nothing was measured, and the report says so */
	x->r->source = x->nv == 0 ? "none" : all ? "driver" : "allocators";
	int64_t total = 0;
	for (int j = 0; j < x->nv; j++) {
		struct visit *v = &x->v[j];
		struct gpr_report_gpu *g = &x->r->gpus[j];
		g->device = v->dev;
		g->nvml_index = v->after.nvml_index >= 0 ? v->after.nvml_index
							 : v->before.nvml_index;
		g->known = v->before.known && v->after.known;
		g->before = v->before.known ? v->before.bytes : 0;
		g->after = v->after.known ? v->after.bytes : 0;
		g->released = all ? (int64_t)g->before - (int64_t)g->after
				  : allocator_drop(x, j);
		total += g->released;
		if (!g->known) {
			char label[64];
			gpr__report_gpu_label(g, label, sizeof label);
			const char *why =
			    v->before.known ? v->after.why : v->before.why;
			gpr__report_note(x->r,
					 "GPU %s: no driver figure (%s): "
					 "bytes from the allocators' counters",
					 label, why);
		}
		struct gpr__nvml_gpu m;
		if (g->nvml_index >= 0 &&
		    gpr__gpu_memory(x->ctx, g->nvml_index, &m) == 0) {
			g->used = m.used;
			g->free = m.free;
			g->total = m.total;
		}
	}
	x->r->bytes = total;
}

/* The CUDA GPUs to visit: those in use, or the requested ones among them. */
static void choose_cuda(struct run *x, const int *inuse, int n_in, int count)
{
	int want = x->o.devices ? x->o.n_devices : n_in;
	for (int k = 0; k < want; k++) {
		int d = x->o.devices ? x->o.devices[k] : inuse[k];
		int dup = 0, used = 0;
		for (int j = 0; j < x->nv; j++)
			dup |= x->v[j].dev == d;
		for (int j = 0; j < n_in; j++)
			used |= inuse[j] == d;
		if (dup)
			continue;
		if (d < 0 || d >= count)
			gpr__report_note(x->r,
					 "GPU %d: no such CUDA device (%d "
					 "devices), not visited",
					 d, count);
		else if (!used)
			gpr__report_note(
			    x->r,
			    "GPU %d: no context in this process, not "
			    "visited",
			    d);
		else
			x->v[x->nv++].dev = d;
	}
	x->nv_cuda = x->nv;
}

/* Room in x->v for `cuda` CUDA GPUs and every named GPU there may be. */
static int room(struct run *x, int cuda)
{
	x->v = calloc((size_t)cuda + x->ctx->n_rel + 1, sizeof *x->v);
	return x->v ? 0 : GPR_E_NOMEM;
}

/*
 * The CUDA GPUs in use (visits and the scan), or a note saying why there
 * are none. *cuda = 1 when the driver is loaded and initialised: the CUDA
 * releasers then run, at least their once steps.
 */
static int find_cuda(struct run *x, int *cuda)
{
	int *inuse = NULL, n_in = 0, count = 0;
	*cuda = 0;
	int rc = gpr__devices_in_use(x->ctx, &inuse, &n_in, &count, x->r,
				     &x->mine, &x->n_mine);
	if (rc == GPR_E_NOT_LOADED) {
		gpr__report_note(x->r, "CUDA driver not loaded in this "
				       "process: no GPU memory to release");
		return room(x, 0);
	}
	if (rc)
		return rc;
	if (count == 0) {
		free(inuse);
		gpr__report_note(x->r, "CUDA driver loaded but not initialised "
				       "(no cuInit): no GPU memory to release");
		return room(x, 0);
	}
	*cuda = 1;
	rc = room(x, x->o.devices ? x->o.n_devices : n_in);
	if (!rc)
		choose_cuda(x, inuse, n_in, count);
	free(inuse);
	if (rc)
		return rc;
	if (!x->o.devices && x->nv == 0)
		gpr__report_note(x->r,
				 "no GPU holds a context of this process");
	return 0;
}

/* The report rows: one per visit, one per cell. */
static int plan(struct run *x, int cuda, const unsigned char *named_in)
{
	size_t n_rel = x->ctx->n_rel;
	x->c = calloc(n_rel * ((size_t)x->nv_cuda + 1) + 1, sizeof *x->c);
	if (!x->c)
		return GPR_E_NOMEM;
	for (size_t i = 0; i < n_rel; i++) {
		const struct gpr__releaser *e = &x->ctx->rel[i];
		if (!e->device_name && cuda) {
			for (int j = 0; j < x->nv_cuda; j++)
				x->c[x->nc++] =
				    (struct cell){i, j, x->v[j].dev};
			x->c[x->nc++] = (struct cell){i, -1, GPR_DEVICE_ONCE};
		} else if (e->device_name && named_in[i]) {
			int j = x->nv_cuda;
			while (strcmp(x->v[j].name, e->device_name) != 0)
				j++;
			x->c[x->nc++] = (struct cell){i, j, GPR_DEVICE_ONCE};
		}
	}
	for (int j = 0; j < x->nv; j++) {
		struct gpr_report_gpu *g = gpr__report_add_gpu(x->r);
		if (!g)
			return GPR_E_NOMEM;
		if (x->v[j].name && !(g->name = strdup(x->v[j].name)))
			return GPR_E_NOMEM;
	}
	x->row0 = x->r->n_rel;
	for (size_t k = 0; k < x->nc; k++)
		if (!gpr__report_add_releaser(x->r, rel_of(x, k)->name,
					      x->c[k].dev))
			return GPR_E_NOMEM;
	return 0;
}

static int run(struct run *x)
{
	int cuda = 0;
	unsigned char *named_in = calloc(x->ctx->n_rel + 1, 1);
	if (!named_in)
		return GPR_E_NOMEM;
	int rc = find_cuda(x, &cuda);
	if (!rc) {
		choose_named(x, named_in);
		rc = plan(x, cuda, named_in);
	}
	free(named_in);
	if (rc)
		return rc;
	read_figures(x, 0);
	read_held(x, 0);
	collect(x);
	pass(x);
	read_figures(x, 1);
	read_held(x, 1);
	account(x);
	return 0;
}

int gpr_release(gpr_ctx *ctx, const struct gpr_release_opts *opts,
		gpr_report **out)
{
	if (!ctx || !out)
		return GPR_E_INVAL;
	*out = NULL;
	double t0 = now();
	struct run x = {.ctx = ctx};
	if (gpr__opts_copy(&x.o, sizeof x.o, opts, opts ? opts->sz : 0))
		return gpr__fail(ctx, GPR_E_INVAL, "release options: bad sz");
	if (x.o.n_devices < 0 || (x.o.n_devices > 0 && !x.o.devices) ||
	    x.o.collect < GPR_COLLECT_AUTO || x.o.collect > GPR_COLLECT_NEVER)
		return gpr__fail(ctx, GPR_E_INVAL,
				 "release options: devices %p n_devices %d "
				 "collect %d",
				 (const void *)x.o.devices, x.o.n_devices,
				 x.o.collect);
	x.r = gpr__report_new();
	if (!x.r)
		return GPR_E_NOMEM;
	/* Before the lock: a parent thread may have held it at fork. */
	if (gpr__forked(ctx)) {
		x.r->source = "none";
		gpr__report_note(x.r, "forked child: the parent's CUDA state "
				      "is not usable here; nothing released");
		x.r->seconds = now() - t0;
		if (x.r->oom) {
			gpr_report_free(x.r);
			return GPR_E_NOMEM;
		}
		*out = x.r;
		return 0;
	}
	if (gpr__in_release(ctx)) {
		gpr_report_free(x.r);
		return gpr__fail(ctx, GPR_E_BUSY,
				 "gpr_release called from inside a releaser");
	}
	struct gpr__release_frame frame;
	pthread_mutex_lock(&ctx->release_lock);
	gpr__release_enter(ctx, &frame);
	int rc = run(&x);
	gpr__release_leave(&frame);
	pthread_mutex_unlock(&ctx->release_lock);
	free(x.v);
	free(x.c);
	free(x.mine);
	x.r->seconds = now() - t0;
	if (!rc && x.r->oom)
		rc = GPR_E_NOMEM;
	if (rc) {
		gpr_report_free(x.r);
		return rc;
	}
	gpr__log(ctx, GPR_LOG_INFO, "released %lld bytes (%s) in %.3f ms",
		 (long long)x.r->bytes, x.r->source, x.r->seconds * 1e3);
	*out = x.r;
	return 0;
}
