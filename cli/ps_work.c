/*
 * Which processes of a round did GPU work lately, for `ps --explain` and
 * `top` (the state column: running, idle for how long). The fact is the
 * core's (gpr__gpu_work: NVML's per-process utilization samples, about
 * one a second while a process keeps the GPU busy, none while it does
 * not); this file puts it on the rows.
 *
 * A one-shot reading asks for every sample the driver keeps, so a
 * process's latest work is known as far back as the driver's buffer
 * reaches. A watching top asks each round only for what is newer than
 * the latest stamp it saw on that GPU (NVML's lastSeenTimeStamp, as nvtop
 * does: otherwise the driver answers with figures over its whole buffer),
 * and keeps in its memo each process's latest work across rounds, so an
 * idle time grows while the process stays idle.
 */
#include "ps.h"

#include <stdlib.h>
#include <string.h>

#include "driver_info.h"

#define MEMO_GPUS 64

struct seen {
	int gpu;
	uint32_t pid;
	uint64_t us;
	unsigned sm;
};

struct gpr_cli_ps_memo {
	uint64_t since[MEMO_GPUS]; /* per NVML index: the latest stamp */
	struct seen *seen;
	size_t n, cap;
};

struct gpr_cli_ps_memo *gpr_cli_ps_memo_new(void)
{
	return calloc(1, sizeof(struct gpr_cli_ps_memo));
}

void gpr_cli_ps_memo_free(struct gpr_cli_ps_memo *m)
{
	if (m)
		free(m->seen);
	free(m);
}

static struct seen *seen_of(struct gpr_cli_ps_memo *m, int gpu, uint32_t pid)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->seen[i].gpu == gpu && m->seen[i].pid == pid)
			return &m->seen[i];
	return NULL;
}

/* Records a sample in the memo (the later one wins); NULL when full and
 * no room can be had. */
static struct seen *remember(struct gpr_cli_ps_memo *m, int gpu,
			     const struct gpr__work *w)
{
	struct seen *s = seen_of(m, gpu, w->pid);
	if (!s) {
		if (m->n == m->cap) {
			size_t cap = m->cap ? 2 * m->cap : 64;
			struct seen *grown =
			    realloc(m->seen, cap * sizeof *grown);
			if (!grown)
				return NULL;
			m->seen = grown;
			m->cap = cap;
		}
		s = &m->seen[m->n++];
		*s = (struct seen){.gpu = gpu, .pid = w->pid};
	}
	if (w->time_us >= s->us) {
		s->us = w->time_us;
		s->sm = w->sm;
	}
	return s;
}

/* Forgets the processes of GPU g that its rows no longer list. */
static void forget_gone(struct gpr_cli_ps_memo *m,
			const struct gpr_cli_ps_gpu *g)
{
	size_t w = 0;
	for (size_t i = 0; i < m->n; i++) {
		int keep = m->seen[i].gpu != g->index;
		for (size_t p = 0; !keep && p < g->n; p++)
			keep = g->rows[p].pid == m->seen[i].pid;
		if (keep)
			m->seen[w++] = m->seen[i];
	}
	m->n = w;
}

static const struct gpr__work *sample_of(const struct gpr__work *w, size_t n,
					 uint32_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (w[i].pid == pid)
			return &w[i];
	return NULL;
}

static void read_gpu(gpr_ctx *ctx, struct gpr_cli_ps_gpu *g,
		     struct gpr_cli_ps_memo *memo)
{
	int slot = g->index >= 0 && g->index < MEMO_GPUS ? g->index : -1;
	uint64_t since = memo && slot >= 0 ? memo->since[slot] : 0;
	struct gpr__work *w = NULL;
	size_t n = 0;
	int known = gpr__gpu_work(ctx, g->index, since, &w, &n) == 0 ? 1 : -1;
	for (size_t i = 0; memo && slot >= 0 && i < n; i++) {
		if (w[i].time_us > memo->since[slot])
			memo->since[slot] = w[i].time_us;
		remember(memo, g->index, &w[i]);
	}
	for (size_t p = 0; p < g->n; p++) {
		struct gpr_cli_ps_row *row = &g->rows[p];
		row->work = known;
		row->work_us = 0;
		row->sm = 0;
		const struct seen *s =
		    memo ? seen_of(memo, g->index, row->pid) : NULL;
		const struct gpr__work *x = sample_of(w, n, row->pid);
		if (s) {
			row->work_us = s->us;
			row->sm = s->sm;
		} else if (x) {
			row->work_us = x->time_us;
			row->sm = x->sm;
		}
	}
	if (memo)
		forget_gone(memo, g);
	gpr_free(w);
}

void gpr_cli_ps_work(gpr_ctx *ctx, struct gpr_cli_ps_round *r,
		     struct gpr_cli_ps_memo *memo)
{
	for (size_t k = 0; k < r->n; k++)
		if (!r->gpus[k].err)
			read_gpu(ctx, &r->gpus[k], memo);
}

double gpr_cli_ps_idle(const struct gpr_cli_ps_round *r,
		       const struct gpr_cli_ps_row *row)
{
	if (row->work != 1 || !row->work_us)
		return -1;
	uint64_t at = (uint64_t)r->when.tv_sec * 1000000u +
		      (uint64_t)r->when.tv_nsec / 1000u;
	return at > row->work_us ? (double)(at - row->work_us) / 1e6 : 0;
}
