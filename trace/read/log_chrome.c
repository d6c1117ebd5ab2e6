/*
 * The Chrome/Perfetto timeline of a trace (log_export.h): a slice per call,
 * counters of the device bytes held; with a cap on its size, the calls
 * beyond it merged into counters per time bucket. It walks the memory
 * replay of log_stats.c, so the timeline and the report agree on who held
 * what.
 */
#include "log_export.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gpureclaim.h"
#include "log_stats.h"
#include "log_view.h"
#include "out/buf.h"
#include "out/fmt.h"
#include "out/json.h"
#include "u64map.h"

/* ---------------- Chrome / Perfetto JSON ---------------- */

struct chrome {
	const struct gpr_trace *t;
	FILE *f;
	struct gpr__buf b; /* written out every 64 KiB */
	struct gpr__json j;
	struct gpr_trace_map held; /* owner string id -> index in v */
	int64_t *v;
	size_t n, cap;
	int64_t total;
};

/* A time in the trace's microseconds (3 decimals: ns exact). */
static void us(struct gpr__json *j, const char *key, uint64_t ns_since_start)
{
	gpr__json_key(j, key);
	gpr__json_ufixed(j, ns_since_start, 3);
}

/* A number as the string "0x..." (JSON has no hexadecimal). */
static void hex(struct gpr__json *j, const char *key, uint64_t v)
{
	char s[24];
	snprintf(s, sizeof(s), "0x%" PRIx64, v);
	gpr__json_kv_str(j, key, s);
}

static int chrome_flush(struct chrome *c, int force)
{
	if (c->b.oom)
		return GPR_E_NOMEM;
	if (!force && c->b.len < (1u << 16))
		return 0;
	if (gpr__buf_write(&c->b, c->f) != 0)
		return GPR_E_IO;
	gpr__buf_reset(&c->b);
	return 0;
}

static void counter(struct chrome *c, const char *name, uint64_t ts, int64_t v)
{
	struct gpr__json *j = &c->j;
	gpr__json_object(j);
	gpr__json_kv_str(j, "ph", "C");
	gpr__json_kv_str(j, "name", name);
	gpr__json_kv_u64(j, "pid", c->t->hdr.pid);
	us(j, "ts", ts);
	gpr__json_key(j, "args");
	gpr__json_object(j);
	gpr__json_kv_i64(j, "bytes", v < 0 ? 0 : v);
	gpr__json_object_end(j);
	gpr__json_object_end(j);
}

/*
 * A free the log lacks, inferred from r allocating the same address or
 * handle again: an instant event on r's thread, where the user sees it.
 */
static void implied_free(struct chrome *c, const struct gpr_trace_step *s)
{
	const struct gpr_trace *t = c->t;
	const struct gpr_trace_rec *r = s->r;
	struct gpr__json *j = &c->j;
	int vmm = s->kind == GPR_K_RELEASE;
	int64_t d = s->dev_delta ? s->dev_delta : s->host_delta;
	gpr__json_object(j);
	gpr__json_kv_str(j, "ph", "i");
	gpr__json_kv_str(j, "s", "t");
	gpr__json_kv_str(j, "cat", "cuda");
	gpr__json_kv_str(j, "name", "free not in the log");
	gpr__json_kv_u64(j, "pid", t->hdr.pid);
	gpr__json_kv_u64(j, "tid", r->tid);
	us(j, "ts", gpr_trace_since_start(t, gpr_trace_key(t, r)));
	gpr__json_key(j, "args");
	gpr__json_object(j);
	gpr__json_kv_u64(j, "bytes", d < 0 ? -(uint64_t)d : 0);
	hex(j, vmm ? "handle" : "addr", vmm ? r->aux : r->addr);
	gpr__json_kv_i64(j, "device", s->device);
	gpr__json_kv_bool(j, "host", s->host_delta != 0);
	gpr__json_kv_str(j, "lib", gpr_trace_str(t, s->owner, "[unknown]"));
	gpr__json_kv_str(j, "why",
			 "allocated again while held: the free was dropped "
			 "or made while paused");
	gpr__json_object_end(j);
	gpr__json_object_end(j);
}

/* The call: a slice on its thread. */
static void slice(struct chrome *c, const struct gpr_trace_rec *r)
{
	const struct gpr_trace *t = c->t;
	struct gpr__json *j = &c->j;
	gpr__json_object(j);
	gpr__json_kv_str(j, "ph", "X");
	gpr__json_kv_str(j, "cat", "cuda");
	gpr__json_kv_str(j, "name", gpr_trace_str(t, r->op, "?"));
	gpr__json_kv_u64(j, "pid", t->hdr.pid);
	gpr__json_kv_u64(j, "tid", r->tid);
	us(j, "ts", gpr_trace_since_start(t, r->t_ns));
	us(j, "dur", r->dur_ns);
	gpr__json_key(j, "args");
	gpr__json_object(j);
	gpr__json_kv_u64(j, "bytes", r->bytes);
	hex(j, "addr", r->addr);
	gpr__json_kv_i64(j, "device", r->device);
	gpr__json_kv_i64(j, "result", r->result);
	us(j, "wait_us", r->wait_ns);
	gpr__json_kv_str(j, "lib", gpr_trace_str(t, r->lib, "[unknown]"));
	gpr__json_kv_str(j, "site", gpr_trace_str(t, r->site, "[unknown]"));
	gpr__json_object_end(j);
	gpr__json_object_end(j);
}

/* The counters of the owner's and the total device bytes, when they move. */
static int held_counters(struct chrome *c, const struct gpr_trace_step *s)
{
	if (s->dev_delta == 0)
		return 0;
	uint32_t *ip = gpr_trace_map_get(&c->held, s->owner);
	size_t i;
	if (ip) {
		i = *ip;
	} else {
		if (c->n == c->cap) {
			size_t cap = c->cap ? c->cap * 2 : 16;
			int64_t *p = realloc(c->v, cap * sizeof(*p));
			if (!p)
				return GPR_E_NOMEM;
			c->v = p;
			c->cap = cap;
		}
		i = c->n++;
		c->v[i] = 0;
		if (gpr_trace_map_put(&c->held, s->owner, (uint32_t)i) < 0)
			return GPR_E_NOMEM;
	}
	c->v[i] = gpr_trace_sadd(c->v[i], s->dev_delta);
	c->total = gpr_trace_sadd(c->total, s->dev_delta);
	uint64_t ts = gpr_trace_since_start(c->t, gpr_trace_key(c->t, s->r));
	char name[300];
	snprintf(name, sizeof(name), "device bytes: %s",
		 gpr_trace_str(c->t, s->owner, "[unknown]"));
	counter(c, name, ts, c->v[i]);
	counter(c, "device bytes: total", ts, c->total);
	return 0;
}

static int chrome_step(void *ctx, const struct gpr_trace_step *s)
{
	struct chrome *c = ctx;
	if (s->implied)
		implied_free(c, s);
	else
		slice(c, s->r);
	int rc = held_counters(c, s);
	return rc ? rc : chrome_flush(c, 0);
}

/* The file's head: what wrote it, and the process's name. */
static void chrome_open(struct chrome *c)
{
	const struct gpr_trace *t = c->t;
	struct gpr__json *j = &c->j;
	char name[64];
	gpr__json_init(j, &c->b);
	gpr__json_object(j);
	gpr__json_kv_str(j, "displayTimeUnit", "ns");
	gpr__json_key(j, "otherData");
	gpr__json_object(j);
	gpr__json_kv_str(j, "tool", "gpureclaim trace");
	gpr__json_kv_u64(j, "format_version", t->hdr.version);
	gpr__json_kv_u64(j, "pid", t->hdr.pid);
	gpr__json_object_end(j);
	gpr__json_key(j, "traceEvents");
	gpr__json_array_lines(j);
	gpr__json_object(j);
	gpr__json_kv_str(j, "ph", "M");
	gpr__json_kv_str(j, "name", "process_name");
	gpr__json_kv_u64(j, "pid", t->hdr.pid);
	gpr__json_key(j, "args");
	gpr__json_object(j);
	snprintf(name, sizeof(name), "traced process %u", t->hdr.pid);
	gpr__json_kv_str(j, "name", name);
	gpr__json_object_end(j);
	gpr__json_object_end(j);
}

static int chrome_close(struct chrome *c, int rc)
{
	if (rc == 0) {
		gpr__json_array_end(&c->j);
		gpr__json_object_end(&c->j);
		gpr__buf_puts(&c->b, "\n");
		rc = chrome_flush(c, 1);
	}
	if (rc == 0 && fflush(c->f) != 0)
		rc = GPR_E_IO;
	gpr__buf_free(&c->b);
	gpr_trace_map_free(&c->held);
	free(c->v);
	return rc;
}

int gpr_trace_export_chrome(const struct gpr_trace *t, FILE *f)
{
	return gpr_trace_export_chrome_max(t, f, 0, NULL);
}

/* ---------------- the size, and the cap ---------------- */

/* Sizes of one event of each kind in the file, measured on real logs. */
#define SLICE_BYTES 280
#define COUNTER_BYTES 85
#define INSTANT_BYTES 330

struct sizing {
	uint64_t slices, instants, counters;
};

static int size_step(void *ctx, const struct gpr_trace_step *s)
{
	struct sizing *z = ctx;
	if (s->implied)
		z->instants++;
	else
		z->slices++;
	if (s->dev_delta)
		z->counters += 2;
	return 0;
}

int gpr_trace_chrome_size(const struct gpr_trace *t,
			  struct gpr_trace_chrome_size *out)
{
	struct sizing z = {0};
	int rc = gpr_trace_replay(t, size_step, &z, NULL, NULL);
	out->events = z.slices + z.instants + z.counters;
	out->bytes = 512 + z.slices * SLICE_BYTES + z.instants * INSTANT_BYTES +
		     z.counters * COUNTER_BYTES;
	return rc;
}

/* One counter track in buckets: per bucket its maximum and last value. */
struct point {
	int64_t max, last;
	uint64_t max_t, last_t;
	int seen;
};

/* One thread's merged calls: per bucket their count and busy time. */
struct busy {
	uint64_t calls, ns;
};

struct merge {
	struct chrome *c;
	const unsigned char *keep; /* per record: a slice of its own */
	uint64_t t0, span;	   /* of the buckets, trace clock */
	size_t buckets;
	/* held-bytes tracks: 0 total, then one per owning library */
	struct gpr_trace_map track_of; /* owner string id -> track */
	uint32_t *owner;	       /* track -> owner string id */
	int64_t *value;		       /* track -> bytes held now */
	size_t tracks, cap_tracks;
	struct point *points; /* [track][bucket], NULL while counting */
	/* merged calls: one track per thread */
	struct gpr_trace_map thread_of; /* tid -> thread index */
	uint32_t *tid;
	size_t threads, cap_threads;
	struct busy *busy; /* [thread][bucket], NULL while counting */
	uint64_t merged;
};

static size_t bucket(const struct merge *m, uint64_t ts)
{
	uint64_t off = ts > m->t0 ? ts - m->t0 : 0;
	size_t b = (size_t)((unsigned __int128)off * m->buckets /
			    (m->span ? m->span : 1));
	return b < m->buckets ? b : m->buckets - 1;
}

/* The index of key in map, added (with *n, growing arr) when new. */
static int index_of(struct gpr_trace_map *map, uint64_t key, uint32_t **arr,
		    size_t *n, size_t *cap, size_t *out)
{
	uint32_t *ip = gpr_trace_map_get(map, key);
	if (ip) {
		*out = *ip;
		return 0;
	}
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 16;
		uint32_t *p = realloc(*arr, c * sizeof(*p));
		if (!p)
			return GPR_E_NOMEM;
		*arr = p;
		*cap = c;
	}
	if (gpr_trace_map_put(map, key, (uint32_t)*n) < 0)
		return GPR_E_NOMEM;
	(*arr)[*n] = (uint32_t)key;
	*out = (*n)++;
	return 0;
}

static void note_point(struct merge *m, size_t track, uint64_t ts)
{
	struct point *p = &m->points[track * m->buckets + bucket(m, ts)];
	int64_t v = m->value[track] < 0 ? 0 : m->value[track];
	if (!p->seen || v > p->max) {
		p->max = v;
		p->max_t = ts;
	}
	p->last = v;
	p->last_t = ts;
	p->seen = 1;
}

/* The replay, twice: first counting tracks and threads, then filling. */
static int merge_step(void *ctx, const struct gpr_trace_step *s)
{
	struct merge *m = ctx;
	const struct gpr_trace *t = m->c->t;
	const struct gpr_trace_rec *r = s->r;
	size_t i;
	int rc;
	if (s->dev_delta) {
		if (m->tracks == 0) { /* track 0: the total */
			rc = index_of(&m->track_of, UINT64_MAX, &m->owner,
				      &m->tracks, &m->cap_tracks, &i);
			if (rc)
				return rc;
		}
		rc = index_of(&m->track_of, s->owner, &m->owner, &m->tracks,
			      &m->cap_tracks, &i);
		if (rc)
			return rc;
		if (m->points) {
			uint64_t ts = gpr_trace_key(t, r);
			m->value[i] = gpr_trace_sadd(m->value[i], s->dev_delta);
			m->value[0] = gpr_trace_sadd(m->value[0], s->dev_delta);
			note_point(m, i, ts);
			note_point(m, 0, ts);
		}
	}
	if (s->implied) {
		if (m->points)
			implied_free(m->c, s);
		return m->points ? chrome_flush(m->c, 0) : 0;
	}
	size_t ri = (size_t)(r - t->recs);
	if (m->keep[ri]) {
		if (m->points)
			slice(m->c, r);
		return m->points ? chrome_flush(m->c, 0) : 0;
	}
	rc = index_of(&m->thread_of, r->tid, &m->tid, &m->threads,
		      &m->cap_threads, &i);
	if (rc || !m->busy)
		return rc;
	struct busy *b = &m->busy[i * m->buckets + bucket(m, r->t_ns)];
	b->calls++;
	b->ns += r->dur_ns;
	m->merged++;
	return chrome_flush(m->c, 0);
}

static void counter_args(struct chrome *c, const char *name, uint64_t ts,
			 const char *k1, uint64_t v1, const char *k2,
			 uint64_t v2)
{
	struct gpr__json *j = &c->j;
	gpr__json_object(j);
	gpr__json_kv_str(j, "ph", "C");
	gpr__json_kv_str(j, "name", name);
	gpr__json_kv_u64(j, "pid", c->t->hdr.pid);
	us(j, "ts", gpr_trace_since_start(c->t, ts));
	gpr__json_key(j, "args");
	gpr__json_object(j);
	gpr__json_kv_u64(j, k1, v1);
	if (k2)
		us(j, k2, v2);
	gpr__json_object_end(j);
	gpr__json_object_end(j);
}

/* The buckets, written out: held bytes, then each thread's merged calls. */
static int merge_write(struct merge *m)
{
	struct chrome *c = m->c;
	char name[300];
	for (size_t k = 0; k < m->tracks; k++) {
		if (k == 0)
			snprintf(name, sizeof(name), "device bytes: total");
		else
			snprintf(name, sizeof(name), "device bytes: %s",
				 gpr_trace_str(c->t, m->owner[k], "[unknown]"));
		for (size_t b = 0; b < m->buckets; b++) {
			const struct point *p = &m->points[k * m->buckets + b];
			if (!p->seen)
				continue;
			counter(c, name, gpr_trace_since_start(c->t, p->max_t),
				p->max);
			if (p->last_t != p->max_t || p->last != p->max)
				counter(c, name,
					gpr_trace_since_start(c->t, p->last_t),
					p->last);
			int rc = chrome_flush(c, 0);
			if (rc)
				return rc;
		}
	}
	uint64_t width = m->span / m->buckets + 1;
	for (size_t k = 0; k < m->threads; k++) {
		snprintf(name, sizeof(name), "driver calls (merged), thread %u",
			 m->tid[k]);
		int was = 0;
		for (size_t b = 0; b < m->buckets; b++) {
			const struct busy *x = &m->busy[k * m->buckets + b];
			uint64_t ts = m->t0 + b * width;
			if (x->calls || was)
				counter_args(c, name, ts, "calls", x->calls,
					     "busy_us", x->ns);
			was = x->calls != 0;
			int rc = chrome_flush(c, 0);
			if (rc)
				return rc;
		}
	}
	return 0;
}

static const struct gpr_trace *order_t;

static int by_dur(const void *a, const void *b)
{
	const struct gpr_trace_rec *x = &order_t->recs[*(const size_t *)a];
	const struct gpr_trace_rec *y = &order_t->recs[*(const size_t *)b];
	return x->dur_ns < y->dur_ns ? 1 : x->dur_ns > y->dur_ns ? -1 : 0;
}

static int by_bytes(const void *a, const void *b)
{
	const struct gpr_trace_rec *x = &order_t->recs[*(const size_t *)a];
	const struct gpr_trace_rec *y = &order_t->recs[*(const size_t *)b];
	return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

/*
 * The calls kept as slices, at most `budget`: every failed call, then
 * half of what is left to the slowest, the rest to the largest
 * allocations. keep[i] for record i.
 */
static int choose(const struct gpr_trace *t, uint64_t budget,
		  unsigned char *keep)
{
	size_t n = t->n_recs, *idx = malloc((n ? n : 1) * sizeof(*idx));
	if (!idx)
		return GPR_E_NOMEM;
	uint64_t used = 0;
	for (size_t i = 0; i < n && used < budget; i++)
		if (t->recs[i].result != 0) {
			keep[i] = 1;
			used++;
		}
	for (size_t i = 0; i < n; i++)
		idx[i] = i;
	order_t = t;
	qsort(idx, n, sizeof(*idx), by_dur);
	uint64_t slow = (budget - used) / 2;
	for (size_t i = 0; i < n && slow; i++)
		if (!keep[idx[i]]) {
			keep[idx[i]] = 1;
			used++;
			slow--;
		}
	qsort(idx, n, sizeof(*idx), by_bytes);
	for (size_t i = 0; i < n && used < budget; i++) {
		enum gpr_trace_kind k = gpr_trace_rec_kind(t, &t->recs[idx[i]]);
		if (!keep[idx[i]] && (k == GPR_K_ALLOC || k == GPR_K_CREATE ||
				      k == GPR_K_HOST_ALLOC)) {
			keep[idx[i]] = 1;
			used++;
		}
	}
	order_t = NULL;
	free(idx);
	return 0;
}

/* The instant at time 0 that tells what was merged. */
static void merged_note(struct chrome *c, const struct merge *m)
{
	struct gpr__json *j = &c->j;
	char what[200], n[64], b[32];
	snprintf(what, sizeof(what),
		 "gpureclaim: %s merged into counters of %s buckets (failed, "
		 "slowest and largest calls kept)",
		 gpr__fmt_count(m->merged, "call", "calls", n, sizeof n),
		 gpr_trace_fmt_ns(m->span / m->buckets, b, sizeof b));
	gpr__json_object(j);
	gpr__json_kv_str(j, "ph", "i");
	gpr__json_kv_str(j, "s", "g");
	gpr__json_kv_str(j, "name", what);
	gpr__json_kv_u64(j, "pid", c->t->hdr.pid);
	gpr__json_kv_u64(j, "tid", 0);
	us(j, "ts", 0);
	gpr__json_object_end(j);
}

static int export_merged(struct chrome *c, uint64_t max_events,
			 uint64_t *merged)
{
	const struct gpr_trace *t = c->t;
	struct merge m = {.c = c};
	int rc = GPR_E_NOMEM;
	unsigned char *keep = calloc(t->n_recs ? t->n_recs : 1, 1);
	if (!keep)
		return rc;
	m.keep = keep;
	rc = choose(t, max_events / 2, keep);
	/* counting: the tracks and threads */
	if (rc == 0)
		rc = gpr_trace_replay(t, merge_step, &m, NULL, NULL);
	uint64_t lo = UINT64_MAX, hi = 0;
	for (size_t i = 0; i < t->n_recs; i++) {
		const struct gpr_trace_rec *r = &t->recs[i];
		uint64_t end = r->t_ns + r->dur_ns < r->t_ns
				   ? UINT64_MAX
				   : r->t_ns + r->dur_ns;
		lo = r->t_ns < lo ? r->t_ns : lo;
		hi = end > hi ? end : hi;
	}
	m.t0 = lo == UINT64_MAX ? 0 : lo;
	m.span = hi > m.t0 ? hi - m.t0 : 1;
	/* a quarter of the events each to held bytes and merged calls, two
	 * points per bucket at most */
	uint64_t quarter = max_events / 4 ? max_events / 4 : 1;
	uint64_t b1 = quarter / (2 * (m.tracks ? m.tracks : 1));
	uint64_t b2 = quarter / (2 * (m.threads ? m.threads : 1));
	m.buckets = (size_t)(b1 < b2 ? b1 : b2);
	if (m.buckets < 1)
		m.buckets = 1;
	if (m.buckets > m.span)
		m.buckets = (size_t)m.span;
	if (rc == 0) {
		m.points = calloc((m.tracks ? m.tracks : 1) * m.buckets,
				  sizeof(*m.points));
		m.value = calloc(m.tracks ? m.tracks : 1, sizeof(*m.value));
		m.busy = calloc((m.threads ? m.threads : 1) * m.buckets,
				sizeof(*m.busy));
		if (!m.points || !m.value || !m.busy)
			rc = GPR_E_NOMEM;
	}
	if (rc == 0) {
		m.merged = 0;
		/* the note first, its count from the first pass's choice */
		for (size_t i = 0; i < t->n_recs; i++)
			m.merged += !keep[i];
		merged_note(c, &m);
		m.merged = 0;
		rc = gpr_trace_replay(t, merge_step, &m, NULL, NULL);
	}
	if (rc == 0)
		rc = merge_write(&m);
	if (merged)
		*merged = m.merged;
	free(keep);
	free(m.points);
	free(m.value);
	free(m.busy);
	free(m.owner);
	free(m.tid);
	gpr_trace_map_free(&m.track_of);
	gpr_trace_map_free(&m.thread_of);
	return rc;
}

int gpr_trace_export_chrome_max(const struct gpr_trace *t, FILE *f,
				uint64_t max_events, uint64_t *merged)
{
	struct chrome c = {.t = t, .f = f};
	struct gpr_trace_chrome_size size = {0, 0};
	int rc = 0;
	if (merged)
		*merged = 0;
	if (max_events)
		rc = gpr_trace_chrome_size(t, &size);
	if (rc)
		return rc;
	chrome_open(&c);
	if (max_events && size.events > max_events)
		rc = export_merged(&c, max_events, merged);
	else
		rc = gpr_trace_replay(t, chrome_step, &c, NULL, NULL);
	return chrome_close(&c, rc);
}
