/* The report object: construction for release.c, accessors for callers. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "sized.h"

gpr_report *gpr__report_new(void)
{
	gpr_report *r = calloc(1, sizeof *r);
	if (r)
		r->source = "none"; /* until a GPU is measured */
	return r;
}

/* Grows *arr (of *cap elements of size sz) to hold one more. */
static int grow(void **arr, size_t *cap, size_t n, size_t sz)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 4;
	void *p = realloc(*arr, c * sz);
	if (!p)
		return -1;
	*arr = p;
	*cap = c;
	return 0;
}

void gpr__report_note(gpr_report *r, const char *fmt, ...)
{
	if (!r)
		return;
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	int len = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (len >= 0)
		for (size_t i = 0; i < r->n_notes; i++)
			if (strcmp(r->notes[i], s) == 0) {
				free(s); /* a second pass says it again */
				return;
			}
	if (len < 0 || grow((void **)&r->notes, &r->cap_notes, r->n_notes,
			    sizeof *r->notes)) {
		if (len >= 0)
			free(s);
		r->oom = 1;
		return;
	}
	r->notes[r->n_notes++] = s;
}

struct gpr_report_gpu *gpr__report_add_gpu(gpr_report *r)
{
	if (grow((void **)&r->gpus, &r->cap_gpus, r->n_gpus, sizeof *r->gpus)) {
		r->oom = 1;
		return NULL;
	}
	struct gpr_report_gpu *g = &r->gpus[r->n_gpus++];
	memset(g, 0, sizeof *g);
	g->nvml_index = -1;
	return g;
}

struct gpr__rrow *gpr__report_add_releaser(gpr_report *r, const char *name,
					   int device)
{
	char *copy = strdup(name);
	if (!copy ||
	    grow((void **)&r->rel, &r->cap_rel, r->n_rel, sizeof *r->rel)) {
		free(copy);
		r->oom = 1;
		return NULL;
	}
	struct gpr__rrow *row = &r->rel[r->n_rel++];
	memset(row, 0, sizeof *row);
	row->name = copy;
	row->device = device;
	return row;
}

void gpr_report_free(gpr_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_rel; i++)
		free(r->rel[i].name);
	for (size_t i = 0; i < r->n_notes; i++)
		free(r->notes[i]);
	for (size_t i = 0; i < r->n_gpus; i++)
		free((char *)r->gpus[i].name);
	free(r->rel);
	free(r->notes);
	free(r->gpus);
	free(r);
}

int64_t gpr_report_bytes(const gpr_report *r)
{
	return r ? r->bytes : 0;
}

const char *gpr_report_source(const gpr_report *r)
{
	return r ? r->source : "none";
}

double gpr_report_seconds(const gpr_report *r)
{
	return r ? r->seconds : 0.0;
}

int gpr_report_collected(const gpr_report *r, double *seconds)
{
	if (seconds)
		*seconds = r ? r->collect_seconds : 0.0;
	return r ? r->collected : 0;
}

size_t gpr_report_gpu_count(const gpr_report *r)
{
	return r ? r->n_gpus : 0;
}

int gpr_report_gpu_sz(const gpr_report *r, size_t i, struct gpr_report_gpu *out,
		      size_t *sz)
{
	if (!r || !out || !sz)
		return GPR_E_INVAL;
	if (i >= r->n_gpus)
		return GPR_E_RANGE;
	return gpr__out_copy(out, sz, &r->gpus[i], sizeof r->gpus[i]);
}

size_t gpr_report_releaser_count(const gpr_report *r)
{
	return r ? r->n_rel : 0;
}

int gpr_report_releaser_sz(const gpr_report *r, size_t i,
			   struct gpr_report_releaser *out, size_t *sz)
{
	if (!r || !out || !sz)
		return GPR_E_INVAL;
	if (i >= r->n_rel)
		return GPR_E_RANGE;
	const struct gpr__rrow *row = &r->rel[i];
	struct gpr_report_releaser x;
	memset(&x, 0, sizeof x);
	x.name = row->name;
	x.device = row->device;
	x.known = row->known;
	x.before = row->before;
	x.after = row->after;
	x.status = row->status;
	return gpr__out_copy(out, sz, &x, sizeof x);
}

size_t gpr_report_note_count(const gpr_report *r)
{
	return r ? r->n_notes : 0;
}

const char *gpr_report_note(const gpr_report *r, size_t i)
{
	return r && i < r->n_notes ? r->notes[i] : NULL;
}
