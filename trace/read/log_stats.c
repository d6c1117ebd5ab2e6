/*
 * Trace aggregation. The replay is the one place that decides what a record
 * does to the bytes held; the statistics and the exports both walk it.
 */
#include "log_stats.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpureclaim.h"
#include "u64map.h"

/*
 * What the replay holds: key -> index of the allocating record, by address
 * and by VMM handle. Everything else about an allocation is in its record,
 * so a held allocation costs one map slot (at most 35 bytes).
 */
struct live_set {
	struct gpr_trace_map addr;
	struct gpr_trace_map handle;
};

static struct gpr_trace_live live_of(const struct gpr_trace *t, uint32_t i)
{
	const struct gpr_trace_rec *r = &t->recs[i];
	enum gpr_trace_kind k = gpr_trace_rec_kind(t, r);
	struct gpr_trace_live e = {.addr = k == GPR_K_CREATE ? r->aux : r->addr,
				   .bytes = r->bytes,
				   .t_ns = r->t_ns,
				   .owner = r->lib,
				   .op = r->op,
				   .device = r->device,
				   .vmm = k == GPR_K_CREATE,
				   /* NCCL creates host memory with cuMemCreate
				      too */
				   .host = k == GPR_K_HOST_ALLOC ||
					   (r->flags & GPR_TRACE_R_HOST) != 0};
	return e;
}

/* Removes key from m; 1 and its record's index in *idx if it was there. */
static int live_take(struct gpr_trace_map *m, uint64_t key, uint32_t *idx)
{
	uint32_t *ip = gpr_trace_map_get(m, key);
	if (!ip)
		return 0;
	*idx = *ip;
	gpr_trace_map_del(m, key);
	return 1;
}

/* A held allocation's place in the list: size, then record order. */
struct live_key {
	uint64_t bytes;
	uint32_t idx;
};

/* Largest first, then in the order they took effect. */
static int cmp_live(const void *a, const void *b)
{
	const struct live_key *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* What a replay leaves: the allocations still held (the first `keep` of
 * them listed) and their totals. */
struct held_out {
	size_t keep;
	struct gpr_trace_live **live;
	size_t *n_live;
	uint64_t count, host_bytes, dev_bytes;
	int saturated;
};

/*
 * The allocations still held, largest first, as an array (malloc'ed) of
 * at most o->keep; their count and sums over all of them. The maps are
 * freed before the array is made, and the order is found on 16-byte
 * keys, so the array is the only large thing left.
 */
static int live_list(const struct gpr_trace *t, struct live_set *ls,
		     struct held_out *o)
{
	size_t n = ls->addr.n + ls->handle.n, k = 0;
	struct live_key *key = malloc((n ? n : 1) * sizeof(*key));
	if (!key)
		return GPR_E_NOMEM;
	const struct gpr_trace_map *maps[2] = {&ls->addr, &ls->handle};
	for (int m = 0; m < 2; m++)
		for (size_t i = 0; i < maps[m]->cap; i++)
			if (maps[m]->used[i])
				key[k++] = (struct live_key){
				    t->recs[maps[m]->vals[i]].bytes,
				    maps[m]->vals[i]};
	gpr_trace_map_free(&ls->addr);
	gpr_trace_map_free(&ls->handle);
	o->count = n;
	for (size_t i = 0; i < n; i++) {
		struct gpr_trace_live e = live_of(t, key[i].idx);
		o->saturated |= gpr_trace_usum(
		    e.host ? &o->host_bytes : &o->dev_bytes, e.bytes);
	}
	qsort(key, n, sizeof(*key), cmp_live);
	size_t listed = n < o->keep ? n : o->keep;
	struct gpr_trace_live *v = malloc((listed ? listed : 1) * sizeof(*v));
	if (!v) {
		free(key);
		return GPR_E_NOMEM;
	}
	for (size_t i = 0; i < listed; i++)
		v[i] = live_of(t, key[i].idx);
	free(key);
	*o->live = v;
	*o->n_live = listed;
	return 0;
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

static int replay(const struct gpr_trace *t, gpr_trace_step_fn fn, void *ctx,
		  struct held_out *held)
{
	struct live_set ls = {0};
	int rc = 0;
	atomic_store_explicit(&gpr_trace_progress.total, t->n_recs,
			      memory_order_relaxed);
	atomic_fetch_add_explicit(&gpr_trace_progress.replays, 1,
				  memory_order_relaxed);
	for (size_t i = 0; i < t->n_recs && rc == 0; i++) {
		const struct gpr_trace_rec *r = &t->recs[i];
		if ((i & 0xffff) == 0)
			atomic_store_explicit(&gpr_trace_progress.done, i,
					      memory_order_relaxed);
		enum gpr_trace_kind kind = gpr_trace_rec_kind(t, r);
		struct gpr_trace_step s = {
		    .r = r, .kind = kind, .owner = r->lib, .device = r->device};
		struct gpr_trace_map *m = &ls.addr;
		uint64_t key = r->addr;
		uint32_t old;
		switch (r->result == 0 ? kind : GPR_K_OTHER) {
		case GPR_K_CREATE:
			key = r->aux;
			m = &ls.handle;
			/* fall through */
		case GPR_K_ALLOC:
		case GPR_K_HOST_ALLOC:
			/*
			 * A key still held: its free is not in the log (a
			 * dropped record, or made while paused). The earlier
			 * allocation ends here, against its own owner and
			 * device, before this one begins.
			 */
			if (live_take(m, key, &old) && fn) {
				struct gpr_trace_live e = live_of(t, old);
				struct gpr_trace_step f =
				    free_step(r,
					      e.vmm    ? GPR_K_RELEASE
					      : e.host ? GPR_K_HOST_FREE
						       : GPR_K_FREE,
					      &e);
				f.implied = 1;
				rc = fn(ctx, &f);
			}
			if (rc == 0 &&
			    gpr_trace_map_put(m, key, (uint32_t)i) < 0)
				rc = GPR_E_NOMEM;
			if (kind == GPR_K_HOST_ALLOC ||
			    (r->flags & GPR_TRACE_R_HOST))
				s.host_delta = signed_bytes(r->bytes);
			else
				s.dev_delta = signed_bytes(r->bytes);
			break;
		case GPR_K_RELEASE:
			m = &ls.handle;
			key = r->aux;
			/* fall through */
		case GPR_K_FREE:
		case GPR_K_HOST_FREE:
			if (live_take(m, key, &old)) {
				struct gpr_trace_live e = live_of(t, old);
				s = free_step(r, kind, &e);
			} else {
				s.unmatched = key != 0;
			}
			break;
		default:
			break;
		}
		if (rc == 0 && fn)
			rc = fn(ctx, &s);
	}
	if (rc == 0)
		atomic_store_explicit(&gpr_trace_progress.done, t->n_recs,
				      memory_order_relaxed);
	if (rc == 0 && held)
		rc = live_list(t, &ls, held);
	gpr_trace_map_free(&ls.addr);
	gpr_trace_map_free(&ls.handle);
	return rc;
}

int gpr_trace_replay(const struct gpr_trace *t, gpr_trace_step_fn fn, void *ctx,
		     struct gpr_trace_live **live, size_t *n_live)
{
	struct held_out held = {
	    .keep = SIZE_MAX, .live = live, .n_live = n_live};
	return replay(t, fn, ctx, live ? &held : NULL);
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

/* h + d for a figure of bytes held, noting when it saturates. */
static int64_t held_add(struct acc *a, int64_t h, int64_t d)
{
	int64_t r;
	if (__builtin_add_overflow(h, d, &r)) {
		a->s->saturated = 1;
		return d > 0 ? INT64_MAX : INT64_MIN;
	}
	return r;
}

/* *acc += v, noting when it saturates. */
static void sum(struct acc *a, uint64_t *acc, uint64_t v)
{
	a->s->saturated |= gpr_trace_usum(acc, v);
}

/* The bytes held: by owning library, by device, in total. */
static int on_held(struct acc *a, const struct gpr_trace_step *st)
{
	struct gpr_trace_stats *s = a->s;
	const struct gpr_trace_rec *r = st->r;
	int fresh;
	/* a size beyond INT64_MAX was held at INT64_MAX by the replay */
	if (st->dev_delta == INT64_MAX || st->dev_delta == -INT64_MAX ||
	    st->host_delta == INT64_MAX || st->host_delta == -INT64_MAX)
		s->saturated = 1;
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
		*h = held_add(a, *h, st->dev_delta);
		if (st->dev_delta < 0) {
			o->frees++;
			sum(a, &o->freed_bytes, (uint64_t)-st->dev_delta);
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
		*h = held_add(a, *h, st->dev_delta);
		if (st->dev_delta > 0)
			sum(a, &d->alloc_bytes, (uint64_t)st->dev_delta);
		else
			sum(a, &d->freed_bytes, (uint64_t)-st->dev_delta);
		if (clamp0(*h) > d->peak) {
			d->peak = clamp0(*h);
			d->peak_t = gpr_trace_key(a->t, r);
		}
	}
	a->held = held_add(a, a->held, st->dev_delta);
	a->host = held_add(a, a->host, st->host_delta);
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
		sum(a, &l->alloc_bytes, r->bytes);
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
			sum(a, &c->bytes, r->bytes);
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
		sum(a, &o->bytes, r->bytes);
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

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t sat128(unsigned __int128 v)
{
	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

/*
 * Fills the latency figures of every operation (s->ops, sorted by op):
 * the durations grouped by operation in one array of 8 bytes a record,
 * each group sorted for its percentiles, then one pass for the waiting
 * shares (exact 128-bit sums).
 */
static int ops_latency(const struct gpr_trace *t, struct gpr_trace_stats *s)
{
	size_t n = t->n_recs, k = s->n_ops;
	uint32_t *op_index =
	    malloc((t->n_strs ? t->n_strs : 1) * sizeof(*op_index));
	size_t *start = calloc(k + 1, sizeof(*start));
	uint64_t *dur = malloc((n ? n : 1) * sizeof(*dur));
	unsigned __int128(*sums)[4] = calloc(k ? k : 1, sizeof(*sums));
	int rc = GPR_E_NOMEM;
	if (!op_index || !start || !dur || !sums)
		goto out;
	for (size_t j = 0; j < k; j++)
		op_index[s->ops[j].op] = (uint32_t)j;
	for (size_t i = 0; i < n; i++)
		start[op_index[t->recs[i].op] + 1]++;
	for (size_t j = 0; j < k; j++)
		start[j + 1] += start[j];
	for (size_t i = 0; i < n; i++)
		dur[start[op_index[t->recs[i].op]]++] = t->recs[i].dur_ns;
	for (size_t j = k; j > 0; j--) /* back to each group's start */
		start[j] = start[j - 1];
	start[0] = 0;
	for (size_t j = 0; j < k; j++) {
		uint64_t *g = dur + start[j];
		size_t m = start[j + 1] - start[j];
		qsort(g, m, sizeof(*g), cmp_u64);
		s->ops[j].p50 = gpr_trace_percentile(g, m, 50);
		s->ops[j].p90 = gpr_trace_percentile(g, m, 90);
		s->ops[j].p99 = gpr_trace_percentile(g, m, 99);
	}
	free(dur);
	dur = NULL;
	/* [0] time and [1] waiting of all waited calls, [2] [3] at >= p99 */
	for (size_t i = 0; i < n; i++) {
		const struct gpr_trace_rec *r = &t->recs[i];
		if (!(r->flags & GPR_TRACE_R_WAIT))
			continue;
		size_t j = op_index[r->op];
		struct gpr_trace_opstat *o = &s->ops[j];
		uint64_t w = r->wait_ns < r->dur_ns ? r->wait_ns : r->dur_ns;
		o->waited_calls++;
		sums[j][0] += r->dur_ns;
		sums[j][1] += w;
		if (r->dur_ns >= o->p99) {
			sums[j][2] += r->dur_ns;
			sums[j][3] += w;
		}
	}
	for (size_t j = 0; j < k; j++) {
		struct gpr_trace_opstat *o = &s->ops[j];
		o->dur_sum = sat128(sums[j][0]);
		o->wait_sum = sat128(sums[j][1]);
		o->wait_share = sums[j][0] ? (double)((long double)sums[j][1] /
						      (long double)sums[j][0])
					   : 0;
		o->tail_wait_share = sums[j][2]
					 ? (double)((long double)sums[j][3] /
						    (long double)sums[j][2])
					 : 0;
	}
	rc = 0;
out:
	free(op_index);
	free(start);
	free(dur);
	free(sums);
	return rc;
}

static int cmp_op(const void *a, const void *b)
{
	const struct gpr_trace_opstat *x = a, *y = b;
	return x->op < y->op ? -1 : x->op > y->op;
}

int gpr_trace_stats_compute(const struct gpr_trace *t,
			    struct gpr_trace_stats *s)
{
	return gpr_trace_stats_compute_top(t, s, SIZE_MAX);
}

int gpr_trace_stats_compute_top(const struct gpr_trace *t,
				struct gpr_trace_stats *s, size_t keep_live)
{
	memset(s, 0, sizeof(*s));
	s->dropped = t->hdr.dropped;
	struct acc a = {.t = t, .s = s};
	a.libs.elem = sizeof(struct gpr_trace_libstat);
	a.devs.elem = sizeof(struct gpr_trace_devstat);
	a.sites.elem = sizeof(struct gpr_trace_sitestat);
	a.ops.elem = sizeof(struct gpr_trace_opstat);
	struct held_out held = {
	    .keep = keep_live, .live = &s->live, .n_live = &s->n_live};
	int rc = replay(t, on_step, &a, &held);
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
		s->live_count = held.count;
		s->live_bytes = held.dev_bytes;
		s->live_host_bytes = held.host_bytes;
		s->saturated |= held.saturated;
		if (s->n_libs)
			qsort(s->libs, s->n_libs, sizeof(*s->libs), cmp_lib);
		if (s->n_devs)
			qsort(s->devs, s->n_devs, sizeof(*s->devs), cmp_dev);
		if (s->n_sites)
			qsort(s->sites, s->n_sites, sizeof(*s->sites),
			      cmp_site);
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
