/*
 * The report as one JSON document (shape in docs/c-api.md), written with
 * the output toolkit's JSON writer (src/out/json.h): strings from
 * releasers and vendor messages escaped by its one rule, numbers
 * independent of the locale. Out of memory gives NULL, never half a
 * document.
 */
#include <stdint.h>

#include "out/json.h"
#include "report.h"

static void held(struct gpr__json *j, const struct gpr_held *h)
{
	if (!h->known) {
		gpr__json_null(j);
		return;
	}
	gpr__json_object(j);
	gpr__json_kv_u64(j, "live", h->live);
	gpr__json_kv_u64(j, "cached", h->cached);
	gpr__json_object_end(j);
}

/* An unsigned figure, or null when unknown. */
static void num(struct gpr__json *j, const char *key, int known, uint64_t v)
{
	gpr__json_key(j, key);
	if (known)
		gpr__json_u64(j, v);
	else
		gpr__json_null(j);
}

/* Seconds with 6 decimals; negative or not a number: 0. */
static void secs(struct gpr__json *j, const char *key, double s)
{
	double us = s * 1e6 + 0.5;
	uint64_t u =
	    us >= 1.0 ? (us < 1e18 ? (uint64_t)us : 1000000000000000000u) : 0;
	gpr__json_key(j, key);
	gpr__json_ufixed(j, u, 6);
}

static void gpus(struct gpr__json *j, const gpr_report *r)
{
	gpr__json_key(j, "gpus");
	gpr__json_array(j);
	for (size_t i = 0; i < r->n_gpus; i++) {
		const struct gpr_report_gpu *g = &r->gpus[i];
		int mem = g->total > 0;
		gpr__json_object(j);
		if (g->name) /* a GPU CUDA does not see: its name */
			gpr__json_kv_str(j, "device", g->name);
		else
			gpr__json_kv_i64(j, "device", g->device);
		gpr__json_kv_i64(j, "gpu", g->nvml_index);
		/* the key of the release before (docs/naming.md, "Words") */
		gpr__json_kv_i64(j, "nvml_index", g->nvml_index);
		gpr__json_kv_bool(j, "known", g->known);
		gpr__json_kv_i64(j, "released", g->released);
		num(j, "before", g->known, g->before);
		num(j, "after", g->known, g->after);
		num(j, "used", mem, g->used);
		num(j, "free", mem, g->free);
		num(j, "total", mem, g->total);
		gpr__json_object_end(j);
	}
	gpr__json_array_end(j);
}

static void releasers(struct gpr__json *j, const gpr_report *r)
{
	gpr__json_key(j, "releasers");
	gpr__json_array(j);
	for (size_t i = 0; i < r->n_rel; i++) {
		const struct gpr__rrow *x = &r->rel[i];
		gpr__json_object(j);
		gpr__json_kv_str(j, "name", x->name);
		gpr__json_kv_i64(j, "device", x->device);
		gpr__json_kv_bool(j, "known", x->known);
		gpr__json_key(j, "before");
		held(j, &x->before);
		gpr__json_key(j, "after");
		held(j, &x->after);
		gpr__json_kv_i64(j, "status", x->status);
		gpr__json_object_end(j);
	}
	gpr__json_array_end(j);
}

char *gpr_report_json(const gpr_report *r)
{
	if (!r)
		return NULL;
	struct gpr__buf b = {0};
	struct gpr__json j;
	gpr__json_init(&j, &b);
	gpr__json_object(&j);
	gpr__json_kv_i64(&j, "released", r->bytes);
	/* the key of the release before (docs/naming.md, "Words") */
	gpr__json_kv_i64(&j, "bytes", r->bytes);
	gpr__json_key(&j, "gb");
	gpr__json_fixed(&j, r->bytes, 9);
	gpr__json_kv_str(&j, "source", r->source ? r->source : "");
	secs(&j, "seconds", r->seconds);
	gpr__json_kv_bool(&j, "collected", r->collected);
	secs(&j, "collect_seconds", r->collect_seconds);
	gpus(&j, r);
	releasers(&j, r);
	gpr__json_key(&j, "notes");
	gpr__json_array(&j);
	for (size_t i = 0; i < r->n_notes; i++)
		gpr__json_str(&j, r->notes[i]);
	gpr__json_array_end(&j);
	gpr__json_object_end(&j);
	gpr__buf_puts(&b, "\n");
	return gpr__buf_finish(&b);
}
