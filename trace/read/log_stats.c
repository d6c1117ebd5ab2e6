/*
 * Trace aggregation. The replay is the one place that decides what a record
 * does to the bytes held; the statistics and the exports both walk it.
 */
#include "log_stats.h"

#include <stdlib.h>
#include <string.h>

#include "gpureclaim.h"
#include "u64map.h"

struct live_set {
	struct gpr_trace_live *v;
	size_t n, cap;
	struct gpr_trace_map addr;   /* address -> index in v */
	struct gpr_trace_map handle; /* VMM handle -> index in v */
};

static int live_add(struct live_set *ls, struct gpr_trace_map *m,
		    const struct gpr_trace_live *e)
{
	if (ls->n == ls->cap) {
		size_t cap = ls->cap ? ls->cap * 2 : 256;
		void *p = realloc(ls->v, cap * sizeof(*ls->v));
		if (!p)
			return -1;
		ls->v = p;
		ls->cap = cap;
	}
	if (gpr_trace_map_put(m, e->addr, (uint32_t)ls->n) < 0)
		return -1;
	ls->v[ls->n++] = *e;
	return 0;
}

/* Removes key from m and its entry from v (the last entry moves in). */
static int live_take(struct live_set *ls, struct gpr_trace_map *m, uint64_t key,
		     struct gpr_trace_live *out)
{
	uint32_t *ip = gpr_trace_map_get(m, key);
	if (!ip)
		return 0;
	uint32_t i = *ip;
	*out = ls->v[i];
	gpr_trace_map_del(m, key);
	size_t last = ls->n - 1;
	if (i != last) {
		ls->v[i] = ls->v[last];
		struct gpr_trace_map *lm =
		    ls->v[i].vmm ? &ls->handle : &ls->addr;
		uint32_t *lp = gpr_trace_map_get(lm, ls->v[i].addr);
		if (lp)
			*lp = i;
	}
	ls->n--;
	return 1;
}

static int64_t signed_bytes(uint64_t b)
{
	return b > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)b;
}

/* The free of live entry e, as a step: its owner, device and bytes. */
static struct gpr_trace_step free_step(const struct gpr_trace_rec *r,
				       enum gpr_trace_kind kind,
				       const struct gpr_trace_live *e)
{
	struct gpr_trace_step s = {
	    .r = r, .kind = kind, .owner = e->owner, .device = e->device};
	if (e->host)
		s.host_delta = -signed_bytes(e->bytes);
	else
		s.dev_delta = -signed_bytes(e->bytes);
	return s;
}

struct gpr_trace_progress gpr_trace_progress;

int gpr_trace_replay(const struct gpr_trace *t, gpr_trace_step_fn fn, void *ctx,
		     struct gpr_trace_live **live, size_t *n_live)
{
	struct live_set ls = {0};
	int rc = 0;
	atomic_store_explicit(&gpr_trace_progress.total, t->n_recs,
			      memory_order_relaxed);
	for (size_t i = 0; i < t->n_recs && rc == 0; i++) {
		const struct gpr_trace_rec *r = &t->recs[i];
		if ((i & 0xffff) == 0)
			atomic_store_explicit(&gpr_trace_progress.done, i,
					      memory_order_relaxed);
		enum gpr_trace_kind kind = gpr_trace_rec_kind(t, r);
		struct gpr_trace_step s = {
		    .r = r, .kind = kind, .owner = r->lib, .device = r->device};
		struct gpr_trace_live e = {r->addr, r->bytes,  r->t_ns, r->lib,
					   r->op,   r->device, 0,	0};
		struct gpr_trace_live old;
		struct gpr_trace_map *m = &ls.addr;
		switch (r->result == 0 ? kind : GPR_K_OTHER) {
		case GPR_K_CREATE:
			e.addr = r->aux;
			e.vmm = 1;
			m = &ls.handle;
			/* fall through */
		case GPR_K_ALLOC:
		case GPR_K_HOST_ALLOC:
			/* NCCL creates host memory with cuMemCreate too */
			e.host = kind == GPR_K_HOST_ALLOC ||
				 (r->flags & GPR_TRACE_R_HOST) != 0;
			/*
			 * A key still held: its free is not in the log (a
			 * dropped record, or made while paused). The earlier
			 * allocation ends here, against its own owner and
			 * device, before this one begins.
			 */
			if (live_take(&ls, m, e.addr, &old) && fn) {
				struct gpr_trace_step f =
				    free_step(r,
					      old.vmm	 ? GPR_K_RELEASE
					      : old.host ? GPR_K_HOST_FREE
							 : GPR_K_FREE,
					      &old);
				f.implied = 1;
				rc = fn(ctx, &f);
			}
			if (rc == 0 && live_add(&ls, m, &e) < 0)
				rc = GPR_E_NOMEM;
			if (e.host)
				s.host_delta = signed_bytes(e.bytes);
			else
				s.dev_delta = signed_bytes(e.bytes);
			break;
		case GPR_K_RELEASE:
			m = &ls.handle;
			/* fall through */
		case GPR_K_FREE:
		case GPR_K_HOST_FREE: {
			uint64_t key = kind == GPR_K_RELEASE ? r->aux : r->addr;
			if (live_take(&ls, m, key, &old))
				s = free_step(r, kind, &old);
			else
				s.unmatched = key != 0;
			break;
		}
		default:
			break;
		}
		if (rc == 0 && fn)
			rc = fn(ctx, &s);
	}
	if (rc == 0 && live) {
		*live = ls.v;
		*n_live = ls.n;
		ls.v = NULL;
	}
	free(ls.v);
	gpr_trace_map_free(&ls.addr);
	gpr_trace_map_free(&ls.handle);
	return rc;
}

uint64_t gpr_trace_percentile(const uint64_t *sorted, size_t n, unsigned p)
{
	if (n == 0)
		return 0;
	/* nearest rank: the ceil(p/100 * n)-th smallest */
	size_t rank = (size_t)(((unsigned __int128)n * p + 99) / 100);
	size_t i = rank < 1 ? 0 : rank - 1;
	return sorted[i < n ? i : n - 1];
}

/* Index of key in a table grown on demand (keys: string ids, devices). */
struct table {
	struct gpr_trace_map map;
	void *v;
	size_t n, cap, elem;
};

static void *table_slot(struct table *tb, uint64_t key, int *fresh)
{
	uint32_t *ip = gpr_trace_map_get(&tb->map, key);
	if (ip) {
		*fresh = 0;
		return (char *)tb->v + (size_t)*ip * tb->elem;
	}
	if (tb->n == tb->cap) {
		size_t cap = tb->cap ? tb->cap * 2 : 16;
		void *p = realloc(tb->v, cap * tb->elem);
		if (!p)
			return NULL;
		tb->v = p;
		tb->cap = cap;
	}
	if (gpr_trace_map_put(&tb->map, key, (uint32_t)tb->n) < 0)
		return NULL;
	void *e = (char *)tb->v + tb->n * tb->elem;
	memset(e, 0, tb->elem);
	tb->n++;
	*fresh = 1;
	return e;
}

struct acc {
	const struct gpr_trace *t;
	struct gpr_trace_stats *s;
	struct table libs, devs, sites, ops;
	int64_t held, host;
	/* bytes held per lib / device, parallel to libs.v / devs.v */
	int64_t *lib_held, *dev_held;
	size_t lib_held_cap, dev_held_cap;
};

static int64_t *held_slot(int64_t **v, size_t *cap, size_t i)
{
	if (i >= *cap) {
		size_t c = *cap ? *cap : 16;
		while (c <= i)
			c *= 2;
		int64_t *p = realloc(*v, c * sizeof(*p));
		if (!p)
			return NULL;
		memset(p + *cap, 0, (c - *cap) * sizeof(*p));
		*v = p;
		*cap = c;
	}
	return &(*v)[i];
}

static uint64_t clamp0(int64_t v)
{
	return v < 0 ? 0 : (uint64_t)v;
}

/* The bytes held: by owning library, by device, in total. */
static int on_held(struct acc *a, const struct gpr_trace_step *st)
{
	struct gpr_trace_stats *s = a->s;
	const struct gpr_trace_rec *r = st->r;
	int fresh;
	if (st->dev_delta != 0) {
		struct gpr_trace_libstat *o =
		    table_slot(&a->libs, st->owner, &fresh);
		if (!o)
			return GPR_E_NOMEM;
		o->lib = st->owner;
		size_t oi = (size_t)(o - (struct gpr_trace_libstat *)a->libs.v);
		int64_t *h = held_slot(&a->lib_held, &a->lib_held_cap, oi);
		if (!h)
			return GPR_E_NOMEM;
		*h = gpr_trace_sadd(*h, st->dev_delta);
		if (st->dev_delta < 0) {
			o->frees++;
			o->freed_bytes += (uint64_t)-st->dev_delta;
		}
		if (clamp0(*h) > o->peak)
			o->peak = clamp0(*h);

		struct gpr_trace_devstat *d =
		    table_slot(&a->devs, (uint64_t)(int64_t)st->device, &fresh);
		if (!d)
			return GPR_E_NOMEM;
		d->device = st->device;
		size_t di = (size_t)(d - (struct gpr_trace_devstat *)a->devs.v);
		h = held_slot(&a->dev_held, &a->dev_held_cap, di);
		if (!h)
			return GPR_E_NOMEM;
		*h = gpr_trace_sadd(*h, st->dev_delta);
		if (st->dev_delta > 0)
			d->alloc_bytes += (uint64_t)st->dev_delta;
		else
			d->freed_bytes += (uint64_t)-st->dev_delta;
		if (clamp0(*h) > d->peak) {
			d->peak = clamp0(*h);
			d->peak_t = gpr_trace_key(a->t, r);
		}
	}
	a->held = gpr_trace_sadd(a->held, st->dev_delta);
	a->host = gpr_trace_sadd(a->host, st->host_delta);
	if (clamp0(a->held) > s->peak) {
		s->peak = clamp0(a->held);
		s->peak_t = gpr_trace_key(a->t, r);
	}
	if (clamp0(a->host) > s->host_peak)
		s->host_peak = clamp0(a->host);
	return 0;
}

static int on_step(void *ctx, const struct gpr_trace_step *st)
{
	struct acc *a = ctx;
	struct gpr_trace_stats *s = a->s;
	const struct gpr_trace_rec *r = st->r;
	int fresh;
	if (st->implied) {
		s->implied_frees++;
		return on_held(a, st);
	}
	uint64_t end =
	    r->t_ns > UINT64_MAX - r->dur_ns ? UINT64_MAX : r->t_ns + r->dur_ns;
	if (s->records == 0 || r->t_ns < s->t0)
		s->t0 = r->t_ns;
	if (end > s->t1)
		s->t1 = end;
	s->records++;
	if (r->result != 0)
		s->errors++;
	s->unmatched_frees += st->unmatched != 0;
	if (st->kind == GPR_K_CTX_CREATE)
		s->contexts_created++;
	if (st->kind == GPR_K_CTX_DESTROY)
		s->contexts_destroyed++;
	int allocating = st->dev_delta > 0 || st->host_delta > 0;

	/* the calling library */
	struct gpr_trace_libstat *l = table_slot(&a->libs, r->lib, &fresh);
	if (!l)
		return GPR_E_NOMEM;
	l->lib = r->lib;
	l->calls++;
	if (allocating) {
		l->allocs++;
		l->alloc_bytes += r->bytes;
	}

	/* the device: a free's is that of the memory freed */
	int dev = st->dev_delta < 0 ? st->device : r->device;
	struct gpr_trace_devstat *d =
	    table_slot(&a->devs, (uint64_t)(int64_t)dev, &fresh);
	if (!d)
		return GPR_E_NOMEM;
	d->device = dev;
	d->calls++;

	int rc = on_held(a, st);
	if (rc != 0)
		return rc;

	/* the call site */
	if (r->site != GPR_TRACE_NO_STRING) {
		struct gpr_trace_sitestat *c =
		    table_slot(&a->sites, r->site, &fresh);
		if (!c)
			return GPR_E_NOMEM;
		c->site = r->site;
		c->lib = r->lib;
		c->calls++;
		if (allocating)
			c->bytes += r->bytes;
	}

	/* the operation */
	struct gpr_trace_opstat *o = table_slot(&a->ops, r->op, &fresh);
	if (!o)
		return GPR_E_NOMEM;
	o->op = r->op;
	o->calls++;
	if (r->result != 0)
		o->errors++;
	else
		o->bytes += r->bytes;
	if (r->dur_ns > o->max)
		o->max = r->dur_ns;
	return 0;
}

static int cmp_lib(const void *a, const void *b)
{
	const struct gpr_trace_libstat *x = a, *y = b;
	if (x->alloc_bytes != y->alloc_bytes)
		return x->alloc_bytes > y->alloc_bytes ? -1 : 1;
	return x->calls > y->calls ? -1 : x->calls < y->calls;
}

static int cmp_dev(const void *a, const void *b)
{
	const struct gpr_trace_devstat *x = a, *y = b;
	return x->device < y->device ? -1 : x->device > y->device;
}

static int cmp_site(const void *a, const void *b)
{
	const struct gpr_trace_sitestat *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return x->calls > y->calls ? -1 : x->calls < y->calls;
}

static int cmp_live(const void *a, const void *b)
{
	const struct gpr_trace_live *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return x->t_ns < y->t_ns ? -1 : x->t_ns > y->t_ns;
}

struct lat {
	uint32_t op;
	int waited;
	uint64_t dur, wait;
};

static int cmp_lat(const void *a, const void *b)
{
	const struct lat *x = a, *y = b;
	if (x->op != y->op)
		return x->op < y->op ? -1 : 1;
	return x->dur < y->dur ? -1 : x->dur > y->dur;
}

static uint64_t sat(long double v)
{
	return v >= (long double)UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

/* Percentiles and waiting shares of one operation's sorted calls. */
static void op_latency(const struct lat *l, size_t n, uint64_t *tmp,
		       struct gpr_trace_opstat *o)
{
	long double dur = 0, wait = 0, td = 0, tw = 0;
	for (size_t i = 0; i < n; i++)
		tmp[i] = l[i].dur;
	o->p50 = gpr_trace_percentile(tmp, n, 50);
	o->p90 = gpr_trace_percentile(tmp, n, 90);
	o->p99 = gpr_trace_percentile(tmp, n, 99);
	for (size_t i = 0; i < n; i++) {
		if (!l[i].waited)
			continue;
		uint64_t w = l[i].wait < l[i].dur ? l[i].wait : l[i].dur;
		o->waited_calls++;
		dur += l[i].dur;
		wait += w;
		if (l[i].dur >= o->p99) {
			td += l[i].dur;
			tw += w;
		}
	}
	o->dur_sum = sat(dur);
	o->wait_sum = sat(wait);
	o->wait_share = dur > 0 ? (double)(wait / dur) : 0;
	o->tail_wait_share = td > 0 ? (double)(tw / td) : 0;
}

/* Fills the latency figures of every operation: one sort, one pass. */
static int ops_latency(const struct gpr_trace *t, struct gpr_trace_stats *s)
{
	size_t n = t->n_recs;
	struct lat *l = malloc((n ? n : 1) * sizeof(*l));
	uint64_t *tmp = malloc((n ? n : 1) * sizeof(*tmp));
	if (!l || !tmp) {
		free(l);
		free(tmp);
		return GPR_E_NOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const struct gpr_trace_rec *r = &t->recs[i];
		l[i] = (struct lat){r->op, (r->flags & GPR_TRACE_R_WAIT) != 0,
				    r->dur_ns, r->wait_ns};
	}
	if (n)
		qsort(l, n, sizeof(*l), cmp_lat);
	/* Both l and s->ops are sorted by op: walk them together. */
	size_t k = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j < n && l[j].op == l[i].op)
			j++;
		while (k < s->n_ops && s->ops[k].op < l[i].op)
			k++;
		if (k < s->n_ops && s->ops[k].op == l[i].op)
			op_latency(l + i, j - i, tmp, &s->ops[k]);
		i = j;
	}
	free(l);
	free(tmp);
	return 0;
}

static int cmp_op(const void *a, const void *b)
{
	const struct gpr_trace_opstat *x = a, *y = b;
	return x->op < y->op ? -1 : x->op > y->op;
}

int gpr_trace_stats_compute(const struct gpr_trace *t,
			    struct gpr_trace_stats *s)
{
	memset(s, 0, sizeof(*s));
	s->dropped = t->hdr.dropped;
	struct acc a = {.t = t, .s = s};
	a.libs.elem = sizeof(struct gpr_trace_libstat);
	a.devs.elem = sizeof(struct gpr_trace_devstat);
	a.sites.elem = sizeof(struct gpr_trace_sitestat);
	a.ops.elem = sizeof(struct gpr_trace_opstat);
	int rc = gpr_trace_replay(t, on_step, &a, &s->live, &s->n_live);
	if (rc == 0) {
		s->held_end = clamp0(a.held);
		s->host_end = clamp0(a.host);
		s->libs = a.libs.v;
		s->n_libs = a.libs.n;
		for (size_t i = 0; i < s->n_libs; i++)
			s->libs[i].held_end =
			    i < a.lib_held_cap ? clamp0(a.lib_held[i]) : 0;
		s->devs = a.devs.v;
		s->n_devs = a.devs.n;
		for (size_t i = 0; i < s->n_devs; i++)
			s->devs[i].held_end =
			    i < a.dev_held_cap ? clamp0(a.dev_held[i]) : 0;
		s->sites = a.sites.v;
		s->n_sites = a.sites.n;
		s->ops = a.ops.v;
		s->n_ops = a.ops.n;
		a.libs.v = a.devs.v = a.sites.v = a.ops.v = NULL;
		if (s->n_ops)
			qsort(s->ops, s->n_ops, sizeof(*s->ops), cmp_op);
		rc = ops_latency(t, s);
		for (size_t i = 0; i < s->n_live; i++)
			if (!s->live[i].host)
				s->live_bytes += s->live[i].bytes;
		if (s->n_libs)
			qsort(s->libs, s->n_libs, sizeof(*s->libs), cmp_lib);
		if (s->n_devs)
			qsort(s->devs, s->n_devs, sizeof(*s->devs), cmp_dev);
		if (s->n_sites)
			qsort(s->sites, s->n_sites, sizeof(*s->sites),
			      cmp_site);
		if (s->n_live)
			qsort(s->live, s->n_live, sizeof(*s->live), cmp_live);
	}
	free(a.libs.v);
	free(a.devs.v);
	free(a.sites.v);
	free(a.ops.v);
	gpr_trace_map_free(&a.libs.map);
	gpr_trace_map_free(&a.devs.map);
	gpr_trace_map_free(&a.sites.map);
	gpr_trace_map_free(&a.ops.map);
	free(a.lib_held);
	free(a.dev_held);
	if (rc != 0)
		gpr_trace_stats_free(s);
	return rc;
}

void gpr_trace_stats_free(struct gpr_trace_stats *s)
{
	free(s->ops);
	free(s->libs);
	free(s->devs);
	free(s->sites);
	free(s->live);
	memset(s, 0, sizeof(*s));
}
