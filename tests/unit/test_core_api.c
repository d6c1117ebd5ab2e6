/*
 * The public header's rules, against the simulated driver: error codes and
 * their names, the version calls, structs that grow (a caller compiled
 * with a smaller or a larger struct than the library's), the releaser
 * listing.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support.h"
#include "test_core_pool.h"

static gpr_ctx *open_ctx(void)
{
	gpr_ctx *ctx = NULL;
	assert_int_equal(gpr_open(NULL, &ctx), 0);
	return ctx;
}

/* Every code has a name, a message and a value apart from -errno. */
static void t_error_table(void **state)
{
	(void)state;
	static const struct {
		int value;
		const char *name;
	} codes[] = {
#define X(name, value, kind, msg) {value, #name},
	    GPR_ERRORS(X)
#undef X
	};
	size_t n = sizeof codes / sizeof codes[0];
	assert_true(n >= 18);
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(gpr_errname(codes[i].value), codes[i].name);
		assert_string_not_equal(gpr_strerror(codes[i].value),
					"unknown error");
		if (codes[i].value != GPR_OK)
			assert_true(codes[i].value < -4095);
		for (size_t j = 0; j < i; j++)
			assert_int_not_equal(codes[i].value, codes[j].value);
	}
	assert_string_equal(gpr_errname(GPR_E_INVAL), "GPR_E_INVAL");
	assert_string_equal(gpr_errname(0), "GPR_OK");
	/* -errno values and other numbers are not ours */
	for (int e = 1; e <= 4095; e++) {
		assert_null(gpr_errname(-e));
		assert_string_equal(gpr_strerror(-e), "unknown error");
	}
	assert_null(gpr_errname(12345));
}

static void t_versions(void **state)
{
	(void)state;
	assert_int_equal(gpr_version_major(), GPR_VERSION_MAJOR);
	assert_int_equal(gpr_version_minor(), GPR_VERSION_MINOR);
	char want[32];
	snprintf(want, sizeof want, "%d.%d.%d", GPR_VERSION_MAJOR,
		 GPR_VERSION_MINOR, GPR_VERSION_PATCH);
	assert_string_equal(gpr_version(), want);
	assert_string_equal(GPR_VERSION_STRING, want);
}

/*
 * Input structs: the struct as a 0.1 caller compiled it (gpr_release_opts
 * ending at collect_user, gpr_releaser at destroy) with bytes after it
 * that are not ours to read; a newer caller's larger struct.
 */
static int young_calls;
static int count_young(void *user)
{
	(void)user;
	young_calls++;
	return 0;
}
static int full_calls;
static int count_full(void *user)
{
	struct pool *p = user;
	full_calls++;
	for (int i = 0; i < p->n; i++)
		if (p->b[i].state == BLK_LIVE)
			pool_drop(p, i);
	return 0;
}

static void t_input_structs(void **state)
{
	(void)state;
	sim_setup("gpus=1");
	struct pool p;
	pool_init(&p, sim_cuda_load());
	gpr_ctx *ctx = open_ctx();

	/* an older releaser: device_name and figure are past its sz, and the
	 * garbage there must not make it a named-GPU releaser */
	struct gpr_releaser old = pool_releaser(&p, "pool");
	old.sz = offsetof(struct gpr_releaser, device_name);
	old.device_name = "garbage";
	assert_int_equal(gpr_register(ctx, &old), 0);
	/* a newer one: unknown fields zero is fine, non-zero is not */
	struct {
		struct gpr_releaser r;
		void *later;
	} newer = {pool_releaser(&p, "newer"), (void *)&p};
	newer.r.sz = sizeof newer;
	assert_int_equal(gpr_register(ctx, &newer.r), GPR_E_INVAL);
	newer.later = NULL;
	assert_int_equal(gpr_register(ctx, &newer.r), 0);
	assert_int_equal(gpr_unregister(ctx, "newer"), 0);

	/* 0.1's release options: no young collector, whatever follows */
	int live = pool_alloc(&p, 0, 4 * MiB);
	(void)live;
	struct gpr_release_opts o = {
	    .sz = offsetof(struct gpr_release_opts, collect_young_fn),
	    .collect_fn = count_full,
	    .collect_user = &p,
	    .collect_young_fn = count_young};
	gpr_report *r = NULL;
	assert_int_equal(gpr_release(ctx, &o, &r), 0);
	assert_int_equal(young_calls, 0);
	assert_int_equal(full_calls, 1);
	assert_int_equal(gpr_report_bytes(r), 4 * MiB);
	gpr_report_free(r);
	/* the whole struct: the young one runs first */
	pool_alloc(&p, 0, 2 * MiB);
	o.sz = sizeof o;
	assert_int_equal(gpr_release(ctx, &o, &r), 0);
	assert_int_equal(young_calls, 1);
	assert_int_equal(full_calls, 2);
	gpr_report_free(r);
	/* a newer caller's options with a field we do not know set */
	struct {
		struct gpr_release_opts o;
		long later;
	} big = {.o = {.sz = sizeof big}, .later = 1};
	assert_int_equal(gpr_release(ctx, &big.o, &r), GPR_E_INVAL);
	big.later = 0;
	assert_int_equal(gpr_release(ctx, &big.o, &r), 0);
	gpr_report_free(r);

	/* GPR_OPTS sets sz and the fields named, the rest zero */
	GPR_OPTS(gpr_release_opts, m, .collect = GPR_COLLECT_NEVER);
	assert_int_equal(m.sz, sizeof(struct gpr_release_opts));
	assert_int_equal(m.collect, GPR_COLLECT_NEVER);
	assert_null(m.collect_fn);
	GPR_OPTS(gpr_opts, empty);
	assert_int_equal(empty.sz, sizeof(struct gpr_opts));
	gpr_ctx *c2 = NULL;
	assert_int_equal(gpr_open(&empty, &c2), 0);
	gpr_close(c2);
	gpr_close(ctx);
}

/* Bytes [from, to) of p all equal v. */
static void assert_bytes(const void *p, size_t from, size_t to, int v)
{
	for (size_t i = from; i < to; i++)
		assert_int_equal(((const unsigned char *)p)[i], v);
}

/* Output structs: a smaller caller gets its part, no byte more; a larger
 * one gets its unknown tail zeroed; *sz says what was filled. */
static void t_output_structs(void **state)
{
	(void)state;
	sim_setup("gpus=2");
	struct pool p;
	pool_init(&p, sim_cuda_load());
	pool_drop(&p, pool_alloc(&p, 0, 2 * MiB));
	gpr_ctx *ctx = pool_ctx(&p, "pool");

	struct {
		struct gpr_gpu g;
		unsigned char tail[16];
	} big;
	memset(&big, 0xAA, sizeof big);
	size_t sz = sizeof big;
	assert_int_equal(gpr_gpu_info_sz(ctx, 1, &big.g, &sz), 0);
	assert_int_equal(sz, sizeof(struct gpr_gpu));
	assert_int_equal(big.g.index, 1);
	assert_int_equal(big.g.total, 80 * GiB);
	assert_bytes(big.tail, 0, sizeof big.tail, 0);
	/* an older caller that knew the fields up to `total` */
	unsigned char small[sizeof(struct gpr_gpu)];
	memset(small, 0xAA, sizeof small);
	sz = offsetof(struct gpr_gpu, used);
	assert_int_equal(
	    gpr_gpu_info_sz(ctx, 1, (struct gpr_gpu *)(void *)small, &sz), 0);
	assert_int_equal(sz, offsetof(struct gpr_gpu, used));
	struct gpr_gpu head;
	memcpy(&head, small, sz);
	assert_int_equal(head.index, 1);
	assert_int_equal(head.total, 80 * GiB);
	assert_bytes(small, sz, sizeof small, 0xAA);
	sz = 0;
	assert_int_equal(gpr_gpu_info_sz(ctx, 1, &big.g, &sz), GPR_E_INVAL);
	assert_int_equal(gpr_gpu_info_sz(ctx, 1, &big.g, NULL), GPR_E_INVAL);
	/* the inline call passes the struct this file was compiled with */
	struct gpr_gpu g;
	memset(&g, 0xAA, sizeof g);
	assert_int_equal(gpr_gpu_info(ctx, 0, &g), 0);
	assert_int_equal(g.index, 0);

	gpr_report *r = NULL;
	assert_int_equal(gpr_release(ctx, NULL, &r), 0);
	struct {
		struct gpr_report_gpu g;
		uint64_t later;
	} rg;
	memset(&rg, 0xAA, sizeof rg);
	sz = sizeof rg;
	assert_int_equal(gpr_report_gpu_sz(r, 0, &rg.g, &sz), 0);
	assert_int_equal(sz, sizeof(struct gpr_report_gpu));
	assert_int_equal(rg.g.released, 2 * MiB);
	assert_null(rg.g.name);
	assert_int_equal(rg.later, 0);
	/* a 0.1 caller: no name field */
	struct gpr_report_gpu rg01;
	memset(&rg01, 0xAA, sizeof rg01);
	sz = offsetof(struct gpr_report_gpu, name);
	assert_int_equal(gpr_report_gpu_sz(r, 0, &rg01, &sz), 0);
	assert_int_equal(sz, offsetof(struct gpr_report_gpu, name));
	assert_int_equal(rg01.released, 2 * MiB);
	assert_bytes(&rg01, sz, sizeof rg01, 0xAA);
	struct {
		struct gpr_report_releaser x;
		int later;
	} rr;
	memset(&rr, 0xAA, sizeof rr);
	sz = sizeof rr;
	assert_int_equal(gpr_report_releaser_sz(r, 0, &rr.x, &sz), 0);
	assert_int_equal(sz, sizeof(struct gpr_report_releaser));
	assert_string_equal(rr.x.name, "pool");
	assert_int_equal(rr.x.before.cached, 2 * MiB);
	assert_int_equal(rr.later, 0);
	assert_int_equal(gpr_report_releaser_sz(r, 99, &rr.x, &sz),
			 GPR_E_RANGE);
	gpr_report_free(r);
	gpr_close(ctx);
}

/* A releaser that lists the releasers from inside a release. */
struct lister {
	gpr_ctx *ctx;
	size_t n;
	char *first;
	int rc;
};

static int list_release(void *data, int dev, char *note, size_t note_sz)
{
	(void)note;
	(void)note_sz;
	struct lister *l = data;
	if (dev == GPR_DEVICE_ONCE) {
		l->rc = gpr_releaser_count(l->ctx, &l->n);
		if (!l->rc)
			l->rc = gpr_releaser_name(l->ctx, 0, &l->first);
	}
	return 0;
}

static void *release_thread(void *ctx)
{
	gpr_report *r = NULL;
	assert_int_equal(gpr_release(ctx, NULL, &r), 0);
	gpr_report_free(r);
	return NULL;
}

static void t_releaser_list(void **state)
{
	(void)state;
	alarm(30); /* a deadlock fails instead of hanging */
	sim_setup("gpus=1");
	struct pool p;
	pool_init(&p, sim_cuda_load());
	gpr_ctx *ctx = open_ctx();
	size_t n = 99;
	char *name = NULL;
	assert_int_equal(gpr_releaser_count(ctx, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(gpr_releaser_name(ctx, 0, &name), GPR_E_RANGE);
	assert_null(name);
	assert_int_equal(gpr_releaser_count(ctx, NULL), GPR_E_INVAL);
	assert_int_equal(gpr_releaser_name(ctx, 0, NULL), GPR_E_INVAL);
	assert_int_equal(gpr_releaser_count(NULL, &n), GPR_E_INVAL);

	struct lister l = {.ctx = ctx};
	struct gpr_releaser a = pool_releaser(&p, "a");
	struct gpr_releaser b = {
	    .sz = sizeof b, .name = "b", .data = &l, .release = list_release};
	struct gpr_releaser c = pool_releaser(&p, "c");
	assert_int_equal(gpr_register(ctx, &a), 0);
	assert_int_equal(gpr_register(ctx, &b), 0);
	assert_int_equal(gpr_register(ctx, &c), 0);
	assert_int_equal(gpr_unregister(ctx, "a"), 0);
	assert_int_equal(gpr_register(ctx, &a), 0);
	const char *want[] = {"b", "c", "a"};
	assert_int_equal(gpr_releaser_count(ctx, &n), 0);
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(gpr_releaser_name(ctx, i, &name), 0);
		assert_string_equal(name, want[i]);
		gpr_free(name);
	}
	assert_int_equal(gpr_releaser_name(ctx, 3, &name), GPR_E_RANGE);
	assert_non_null(strstr(gpr_last_error(ctx), "3 of 3"));

	/* from inside a releaser callback: no GPR_E_BUSY, no deadlock */
	gpr_report *r = NULL;
	assert_int_equal(gpr_release(ctx, NULL, &r), 0);
	gpr_report_free(r);
	assert_int_equal(l.rc, 0);
	assert_int_equal(l.n, 3);
	assert_string_equal(l.first, "b");
	gpr_free(l.first);

	/* from another thread while a release is running: no waiting */
	assert_int_equal(gpr_unregister(ctx, "b"), 0);
	pool_drop(&p, pool_alloc(&p, 0, 2 * MiB));
	/* the release waits at the pool's gate until the list was read: a
	 * list that waited for the release would never return (alarm) */
	atomic_store(&p.gate, 1);
	pthread_t t;
	int e0 = atomic_load(&p.entered);
	pthread_create(&t, NULL, release_thread, ctx);
	while (atomic_load(&p.entered) == e0)
		sleep_ms(1);
	assert_int_equal(gpr_releaser_count(ctx, &n), 0);
	assert_int_equal(gpr_releaser_name(ctx, 1, &name), 0);
	assert_int_equal(atomic_load(&p.inside), 1); /* still releasing */
	atomic_store(&p.gate, 0);
	assert_int_equal(n, 2);
	assert_string_equal(name, "a");
	gpr_free(name);
	pthread_join(t, NULL);

	/* in a forked child the parent's list is off limits */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(gpr_releaser_count(ctx, &n) == GPR_E_FORKED &&
			      gpr_releaser_name(ctx, 0, &name) == GPR_E_FORKED
			  ? 0
			  : 1);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	gpr_close(ctx);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_error_table),
	    cmocka_unit_test(t_versions),
	    cmocka_unit_test(t_input_structs),
	    cmocka_unit_test(t_output_structs),
	    cmocka_unit_test(t_releaser_list),
	};
	return gpr_test_main(argc, argv, "core-api", tests,
			     sizeof tests / sizeof tests[0]);
}
