/*
 * gpr_release: visit the GPUs this process has opened, run the releasers,
 * measure what the driver got back.
 *
 * The number is the drop of NVML's per-process figure (what nvidia-smi
 * lists for this pid), never the drop of cuMemGetInfo's free memory, which
 * moves with every other process on the GPU. Where NVML has no per-process
 * figure for a visited GPU (MIG, a pid namespace, no NVML) the allocators'
 * own counters are summed instead and the report says so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctx.h"
#include "report.h"

struct visit {
	int dev;
	struct gpr__figure before, after;
};

struct run {
	gpr_ctx *ctx;
	struct gpr_release_opts o;
	gpr_report *r;
	struct visit *v;
	int nv;
	struct gpr__mine *mine; /* the scan that found the GPUs */
	int n_mine;
	size_t row0; /* first releaser row: releaser i, visit j at
			row0 + i * (nv + 1) + j; j == nv is the once step */
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct gpr__rrow *row(struct run *x, size_t i, int j)
{
	return &x->r->rel[x->row0 + i * (size_t)(x->nv + 1) + (size_t)j];
}

static int dev_of(struct run *x, int j)
{
	return j == x->nv ? GPR_DEVICE_ONCE : x->v[j].dev;
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
	for (size_t i = 0; i < x->ctx->n_rel; i++)
		for (int j = 0; j <= x->nv; j++) {
			struct gpr_held h = held(&x->ctx->rel[i], dev_of(x, j));
			if (after)
				row(x, i, j)->after = h;
			else
				row(x, i, j)->before = h;
		}
}

static void release_one(struct run *x, size_t i, int j)
{
	const struct gpr__releaser *e = &x->ctx->rel[i];
	if (!e->r.release)
		return;
	int dev = dev_of(x, j);
	char where[32];
	if (dev == GPR_DEVICE_ONCE)
		snprintf(where, sizeof where, "the once-per-call step");
	else
		snprintf(where, sizeof where, "GPU %d", dev);
	char note[512] = "";
	int rc = e->r.release(e->r.data, dev, note, sizeof note);
	note[sizeof note - 1] = '\0';
	if (rc < 0) {
		struct gpr__rrow *w = row(x, i, j);
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

/*
 * Every releaser on every visited GPU, then every releaser's once step;
 * with `only` (one flag a row, as row()), just the flagged rows.
 */
static void pass(struct run *x, const unsigned char *only)
{
	size_t w = (size_t)x->nv + 1;
	for (size_t i = 0; i < x->ctx->n_rel; i++)
		for (int j = 0; j < x->nv; j++)
			if (!only || only[i * w + (size_t)j])
				release_one(x, i, j);
	for (size_t i = 0; i < x->ctx->n_rel; i++)
		if (!only || only[i * w + (size_t)x->nv])
			release_one(x, i, x->nv);
}

static void collect(struct run *x)
{
	if (!x->o.collect_fn)
		return;
	double t = now();
	int rc = x->o.collect_fn(x->o.collect_user);
	x->r->collect_seconds += now() - t;
	x->r->collected = 1;
	if (rc < 0)
		gpr__report_note(x->r, "the garbage collector failed (%d)", rc);
}

/*
 * 1 if a releaser still holds live bytes on a visited GPU. `again` (one
 * flag a row) marks the rows the collector can change: a releaser that
 * holds nothing live on a GPU gets nothing back there from a collection,
 * so the pass after it skips that row. Once steps and releasers that
 * cannot tell are always run again.
 */
static int live_left(struct run *x, unsigned char *again)
{
	size_t w = (size_t)x->nv + 1;
	int any = 0;
	for (size_t i = 0; i < x->ctx->n_rel; i++) {
		for (int j = 0; j < x->nv; j++) {
			struct gpr_held h = held(&x->ctx->rel[i], x->v[j].dev);
			any |= h.live > 0;
			if (again)
				again[i * w + (size_t)j] = !h.known || h.live;
		}
		if (again)
			again[i * w + (size_t)x->nv] = 1;
	}
	return any;
}

/* Before: from the scan that found the GPUs; after: asked anew. */
static void read_figures(struct run *x, int after)
{
	for (int j = 0; j < x->nv; j++)
		gpr__process_figure(x->ctx, x->v[j].dev,
				    after ? &x->v[j].after : &x->v[j].before,
				    after ? NULL : x->mine, x->n_mine);
}

/* Bytes the allocators say they gave back on GPU j (known rows only). */
static int64_t allocator_drop(struct run *x, int j)
{
	int64_t sum = 0;
	for (size_t i = 0; i < x->ctx->n_rel; i++) {
		const struct gpr__rrow *w = row(x, i, j);
		if (w->known)
			sum += (int64_t)(w->before.live + w->before.cached) -
			       (int64_t)(w->after.live + w->after.cached);
	}
	return sum;
}

static void account(struct run *x)
{
	for (size_t i = 0; i < x->ctx->n_rel; i++)
		for (int j = 0; j <= x->nv; j++) {
			struct gpr__rrow *w = row(x, i, j);
			w->known = w->before.known && w->after.known;
		}
	int all = 1;
	for (int j = 0; j < x->nv; j++)
		if (!x->v[j].before.known || !x->v[j].after.known)
			all = 0;
	x->r->source = all ? "driver" : "allocators";
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
			const char *why =
			    v->before.known ? v->after.why : v->before.why;
			gpr__report_note(x->r,
					 "GPU %d: no driver figure (%s): "
					 "bytes from the allocators' counters",
					 v->dev, why);
		}
		char err[GPR__ERRLEN] = "";
		struct gpr__nvml_gpu m;
		if (g->nvml_index >= 0 &&
		    gpr__nvml_memory(&x->ctx->nvml, g->nvml_index, &m, err,
				     sizeof err) == 0) {
			g->used = m.used;
			g->free = m.free;
			g->total = m.total;
		}
	}
	x->r->bytes = total;
}

/* The GPUs to visit: those in use, or the requested ones among them. */
static int choose(struct run *x, const int *inuse, int n_in, int count)
{
	int want = x->o.devices ? x->o.n_devices : n_in;
	x->v = calloc((size_t)(want ? want : 1), sizeof *x->v);
	if (!x->v)
		return GPR_E_NOMEM;
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
	return 0;
}

static int run(struct run *x)
{
	int *inuse = NULL, n_in = 0, count = 0;
	int rc = gpr__devices_in_use(x->ctx, &inuse, &n_in, &count, x->r,
				     &x->mine, &x->n_mine);
	if (rc == GPR_E_NOT_LOADED) {
		gpr__report_note(x->r, "CUDA driver not loaded in this "
				       "process: no GPU memory to release");
		return 0;
	}
	if (rc)
		return rc;
	if (count == 0) {
		free(inuse);
		gpr__report_note(x->r, "CUDA driver loaded but not initialised "
				       "(no cuInit): no GPU memory to release");
		return 0;
	}
	rc = choose(x, inuse, n_in, count);
	free(inuse);
	if (rc)
		return rc;
	if (!x->o.devices && x->nv == 0)
		gpr__report_note(x->r,
				 "no GPU holds a context of this process");
	for (int j = 0; j < x->nv; j++)
		if (!gpr__report_add_gpu(x->r))
			return GPR_E_NOMEM;
	x->row0 = x->r->n_rel;
	for (size_t i = 0; i < x->ctx->n_rel; i++)
		for (int j = 0; j <= x->nv; j++)
			if (!gpr__report_add_releaser(x->r, x->ctx->rel[i].name,
						      dev_of(x, j)))
				return GPR_E_NOMEM;

	read_figures(x, 0);
	read_held(x, 0);
	if (x->o.collect == GPR_COLLECT_ALWAYS)
		collect(x);
	pass(x, NULL);
	if (x->o.collect == GPR_COLLECT_AUTO && x->o.collect_fn) {
		unsigned char *again =
		    calloc(x->ctx->n_rel * ((size_t)x->nv + 1) + 1, 1);
		if (live_left(x, again)) {
			collect(x);
			pass(x, again);
		}
		free(again);
	}
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
				 "gpr_release from inside a release");
	}
	struct gpr__release_frame frame;
	pthread_mutex_lock(&ctx->release_lock);
	gpr__release_enter(ctx, &frame);
	int rc = run(&x);
	gpr__release_leave(&frame);
	pthread_mutex_unlock(&ctx->release_lock);
	free(x.v);
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
