/*
 * A caching pool over the simulated driver, as a framework's allocator:
 * freed blocks stay cached (not cuMemFree'd) until the pool's releaser
 * runs. Test knobs make it fail, sleep, wait at a gate, or call back into
 * the handle.
 * Header-only: shared by the test_core*.c programs.
 */
#ifndef GPR_TEST_CORE_POOL_H
#define GPR_TEST_CORE_POOL_H

#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "gpureclaim.h"
#include "support.h"

#define POOL_MAX 64
#define MiB (1024ULL * 1024ULL)
#define GiB (1024ULL * MiB)
#define GRANULE (2 * MiB)

enum { BLK_GONE, BLK_LIVE, BLK_CACHED };

struct pool {
	void *lib;
	struct {
		int dev;
		unsigned long long ptr;
		size_t size;
		int state;
	} b[POOL_MAX];
	int n;
	int fail_dev;	    /* release(fail_dev) fails; -99: never */
	int sleep_ms;	    /* each release(dev) sleeps this long */
	atomic_int gate;    /* 1: each release(dev) waits until it is 0 */
	atomic_int entered; /* release calls started */
	atomic_int held_calls;
	atomic_int inside; /* releases running now */
	atomic_int max_inside;
	gpr_ctx *reenter; /* if set, release calls back into it */
	int reenter_rc[3];
	int destroyed;
};

static inline void pool_init(struct pool *p, void *lib)
{
	memset(p, 0, sizeof *p);
	p->lib = lib;
	p->fail_dev = -99;
}

/* Allocates `size` bytes on `dev` (opening its primary context); index. */
static inline int pool_alloc(struct pool *p, int dev, size_t size)
{
	assert_true(p->n < POOL_MAX);
	assert_int_equal(sim_cuda_open_device(p->lib, dev), 0);
	int i = p->n++;
	p->b[i].dev = dev;
	p->b[i].size = size;
	p->b[i].state = BLK_LIVE;
	assert_int_equal(sim_cuda_alloc(p->lib, size, &p->b[i].ptr), 0);
	return i;
}

/* The framework's free: the block goes to the cache. */
static inline void pool_drop(struct pool *p, int i)
{
	assert_int_equal(p->b[i].state, BLK_LIVE);
	p->b[i].state = BLK_CACHED;
}

static inline void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts))
		;
}

static int pool_held(void *data, int dev, struct gpr_held *out)
{
	struct pool *p = data;
	atomic_fetch_add(&p->held_calls, 1);
	memset(out, 0, sizeof *out);
	out->known = 1;
	for (int i = 0; i < p->n; i++) {
		if (p->b[i].dev != dev)
			continue;
		if (p->b[i].state == BLK_LIVE)
			out->live += p->b[i].size;
		else if (p->b[i].state == BLK_CACHED)
			out->cached += p->b[i].size;
	}
	return 0;
}

static int pool_release(void *data, int dev, char *note, size_t note_sz)
{
	struct pool *p = data;
	atomic_fetch_add(&p->entered, 1);
	int in = atomic_fetch_add(&p->inside, 1) + 1;
	int mx = atomic_load(&p->max_inside);
	while (in > mx &&
	       !atomic_compare_exchange_weak(&p->max_inside, &mx, in))
		;
	/* a test's "still inside a release" is then a fact, not a race */
	while (atomic_load(&p->gate) && dev != GPR_DEVICE_ONCE)
		sleep_ms(1);
	if (p->sleep_ms && dev != GPR_DEVICE_ONCE)
		sleep_ms(p->sleep_ms);
	if (p->reenter && dev != GPR_DEVICE_ONCE) {
		gpr_report *r = NULL;
		p->reenter_rc[0] = gpr_release(p->reenter, NULL, &r);
		gpr_report_free(r);
		struct gpr_releaser x = {.sz = sizeof x, .name = "x"};
		p->reenter_rc[1] = gpr_register(p->reenter, &x);
		p->reenter_rc[2] = gpr_unregister(p->reenter, "pool");
	}
	int rc = 0;
	if (dev == p->fail_dev) {
		snprintf(note, note_sz, "boom on %d", dev);
		rc = -5;
	} else {
		for (int i = 0; i < p->n; i++)
			if (p->b[i].dev == dev && p->b[i].state == BLK_CACHED) {
				assert_int_equal(
				    sim_cuda_free(p->lib, p->b[i].ptr), 0);
				p->b[i].state = BLK_GONE;
			}
	}
	atomic_fetch_sub(&p->inside, 1);
	return rc;
}

static void pool_destroy(void *data)
{
	((struct pool *)data)->destroyed++;
}

static inline struct gpr_releaser pool_releaser(struct pool *p,
						const char *name)
{
	struct gpr_releaser r = {.sz = sizeof r,
				 .name = name,
				 .data = p,
				 .held = pool_held,
				 .release = pool_release,
				 .destroy = pool_destroy};
	return r;
}

/* A new handle with p registered as `name`. */
static inline gpr_ctx *pool_ctx(struct pool *p, const char *name)
{
	gpr_ctx *ctx = NULL;
	assert_int_equal(gpr_open(NULL, &ctx), 0);
	struct gpr_releaser rel = pool_releaser(p, name);
	assert_int_equal(gpr_register(ctx, &rel), 0);
	return ctx;
}

/* The size the sim (and the driver) charges: 2 MiB granules. */
static inline uint64_t rounded(uint64_t size)
{
	return (size + GRANULE - 1) / GRANULE * GRANULE;
}

/* 1 if some note of r contains `needle`. */
static inline int has_note(const gpr_report *r, const char *needle)
{
	for (size_t i = 0; i < gpr_report_note_count(r); i++)
		if (strstr(gpr_report_note(r, i), needle))
			return 1;
	return 0;
}

#endif
