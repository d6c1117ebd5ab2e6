/* Linear probing with backward-shift deletion (no tombstones). */
#include "u64map.h"

#include <stdlib.h>
#include <string.h>

static size_t slot(uint64_t key, size_t cap)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdULL;
	key ^= key >> 33;
	return (size_t)key & (cap - 1);
}

uint32_t *gpr_trace_map_get(const struct gpr_trace_map *m, uint64_t key)
{
	if (m->cap == 0)
		return NULL;
	for (size_t i = slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (!m->used[i])
			return NULL;
		if (m->keys[i] == key)
			return &m->vals[i];
	}
}

static int grow(struct gpr_trace_map *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	struct gpr_trace_map g = {0};
	g.keys = malloc(cap * sizeof(*g.keys));
	g.vals = malloc(cap * sizeof(*g.vals));
	g.used = calloc(cap, 1);
	g.cap = cap;
	if (!g.keys || !g.vals || !g.used) {
		gpr_trace_map_free(&g);
		return -1;
	}
	for (size_t i = 0; i < m->cap; i++)
		if (m->used[i])
			gpr_trace_map_put(&g, m->keys[i], m->vals[i]);
	gpr_trace_map_free(m);
	*m = g;
	return 0;
}

int gpr_trace_map_put(struct gpr_trace_map *m, uint64_t key, uint32_t val)
{
	if ((m->n + 1) * 2 > m->cap && grow(m) < 0)
		return -1;
	size_t i = slot(key, m->cap);
	while (m->used[i] && m->keys[i] != key)
		i = (i + 1) & (m->cap - 1);
	if (!m->used[i]) {
		m->used[i] = 1;
		m->keys[i] = key;
		m->n++;
	}
	m->vals[i] = val;
	return 0;
}

int gpr_trace_map_del(struct gpr_trace_map *m, uint64_t key)
{
	if (m->cap == 0)
		return 0;
	size_t mask = m->cap - 1;
	size_t i = slot(key, m->cap);
	while (m->used[i] && m->keys[i] != key)
		i = (i + 1) & mask;
	if (!m->used[i])
		return 0;
	/* Shift later members of the run back into the hole. */
	size_t j = i;
	for (;;) {
		j = (j + 1) & mask;
		if (!m->used[j])
			break;
		size_t home = slot(m->keys[j], m->cap);
		/* Move j to i unless its home lies cyclically in (i, j]. */
		int stays =
		    i <= j ? (home > i && home <= j) : (home > i || home <= j);
		if (stays)
			continue;
		m->keys[i] = m->keys[j];
		m->vals[i] = m->vals[j];
		i = j;
	}
	m->used[i] = 0;
	m->n--;
	return 1;
}

void gpr_trace_map_free(struct gpr_trace_map *m)
{
	free(m->keys);
	free(m->vals);
	free(m->used);
	memset(m, 0, sizeof(*m));
}
