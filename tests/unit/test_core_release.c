/*
 * gpr_release against the simulated driver: exact bytes from the driver's
 * per-process figure, the allocator fallback, collection, failures,
 * re-entrancy, threads, fork, and the rendered report.
 */
#include <dlfcn.h>
#include <locale.h>
#include <pthread.h>
#include <signal.h>
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

/* GPU 0: 1 GiB + 3 MiB (charged 4 MiB) + 100 B (2 MiB); GPU 1: 5 MiB
 * (6 MiB) and a live 8 MiB block; all but the live one dropped. Returns
 * what the driver will get back from the cache. */
static uint64_t fill(struct pool *p)
{
	pool_drop(p, pool_alloc(p, 0, GiB));
	pool_drop(p, pool_alloc(p, 0, 3 * MiB));
	pool_drop(p, pool_alloc(p, 0, 100));
	pool_drop(p, pool_alloc(p, 1, 5 * MiB));
	pool_alloc(p, 1, 8 * MiB);
	return rounded(GiB) + rounded(3 * MiB) + rounded(100) +
	       rounded(5 * MiB);
}

static void t_exact_bytes(void **state)
{
	(void)state;
	sim_setup("gpus=2");
	struct pool p;
	pool_init(&p, sim_cuda_load());
	uint64_t want = fill(&p);
	gpr_ctx *ctx = open_ctx();
	struct gpr_releaser rel = pool_releaser(&p, "pool");
	assert_int_equal(gpr_register(ctx, &rel), 0);
	uint64_t b0 = 0, b1 = 0;
	assert_int_equal(gpr_process_bytes(ctx, 0, &b0), 0);
	assert_int_equal(b0, 512 * MiB + GiB + 4 * MiB + 2 * MiB);
	assert_int_equal(gpr_process_bytes(ctx, 1, &b1), 0);

	gpr_report *r = NULL;
	assert_int_equal(gpr_release(ctx, NULL, &r), 0);
	assert_string_equal(gpr_report_source(r), "driver");
	assert_int_equal(gpr_report_bytes(r), (int64_t)want);
	assert_true(gpr_report_seconds(r) > 0);
	assert_int_equal(gpr_report_collected(r, NULL), 0);
	assert_int_equal(gpr_report_gpu_count(r), 2);
	struct gpr_report_gpu g;
	assert_int_equal(gpr_report_gpu(r, 0, &g), 0);
	assert_true(g.known);
	assert_int_equal(g.nvml_index, 0);
	assert_int_equal(g.before, b0);
	assert_int_equal(g.after, 512 * MiB);
	assert_int_equal(g.released, (int64_t)(b0 - 512 * MiB));
	assert_int_equal(g.total, 80 * GiB);
	assert_int_equal(g.used, 512 * MiB);
	assert_int_equal(g.free, 80 * GiB - 512 * MiB);
	assert_int_equal(gpr_report_gpu(r, 1, &g), 0);
	assert_int_equal(g.after, 512 * MiB + 8 * MiB);

	/* releaser rows: GPU 0, GPU 1, once */
	assert_int_equal(gpr_report_releaser_count(r), 3);
	struct gpr_report_releaser rr;
	assert_int_equal(gpr_report_releaser(r, 0, &rr), 0);
	assert_string_equal(rr.name, "pool");
	assert_int_equal(rr.device, 0);
	assert_true(rr.known);
	assert_int_equal(rr.before.cached, GiB + 3 * MiB + 100);
	assert_int_equal(rr.after.cached, 0);
	assert_int_equal(rr.status, 0);
	assert_int_equal(gpr_report_releaser(r, 1, &rr), 0);
	assert_int_equal(rr.before.live, 8 * MiB);
	assert_int_equal(rr.after.live, 8 * MiB);
	assert_int_equal(gpr_report_releaser(r, 2, &rr), 0);
	assert_int_equal(rr.device, GPR_DEVICE_ONCE);
	gpr_report_free(r);

	/* nothing left: a second call returns exactly 0 */
	assert_int_equal(gpr_release(ctx, NULL, &r), 0);
	assert_int_equal(gpr_report_bytes(r), 0);
	gpr_report_free(r);
	gpr_close(ctx);
}

/* Where NVML has no figure for us, the allocators' counters are summed
 * (without the driver's 2 MiB rounding) and the report says why. */
static void fallback(const char *fault, const char *why, int query_rc)
{
	char cfg[128];
	snprintf(cfg, sizeof cfg, "gpus=2;fault=%s", fault);
	sim_setup(cfg);
	struct pool p;
	pool_init(&p, sim_cuda_load());
	fill(&p);
	gpr_ctx *ctx = open_ctx();
	struct gpr_releaser rel = pool_releaser(&p, "pool");
	assert_int_equal(gpr_register(ctx, &rel), 0);
	uint64_t b = 0;
	assert_int_equal(gpr_process_bytes(ctx, 0, &b), query_rc);
	int dev[2], n = 0;
	assert_int_equal(gpr_devices_in_use(ctx, dev, 2, &n), 0);
	assert_int_equal(n, 2);
	gpr_report *r = NULL;
	assert_int_equal(gpr_release(ctx, NULL, &r), 0);
	assert_string_equal(gpr_report_source(r), "allocators");
	assert_int_equal(gpr_report_bytes(r),
			 (int64_t)(GiB + 3 * MiB + 100 + 5 * MiB));
	assert_true(has_note(r, "GPU 0: no driver figure"));
	assert_true(has_note(r, why));
	struct gpr_report_gpu g;
	assert_int_equal(gpr_report_gpu(r, 0, &g), 0);
	assert_false(g.known);
	assert_int_equal(g.released, (int64_t)(GiB + 3 * MiB + 100));
	char *text = gpr_report_text(r);
	assert_non_null(strstr(text, "allocators"));
	gpr_free(text);
	gpr_report_free(r);
	gpr_close(ctx);
}

static void t_fallback_mig(void **state)
{
	(void)state;
	fallback("mig", "MIG", GPR_E_NO_PER_PROCESS);
}

static void t_fallback_foreign_pid(void **state)
{
	(void)state;
	fallback("foreign-pid", "absent from NVML's process list",
		 GPR_E_NO_PER_PROCESS);
}

static void t_fallback_nvml_absent(void **state)
{
	(void)state;
	fallback("nvml-absent", "NVML unavailable", GPR_E_NVML);
}

struct gc {
	struct pool *p;
	int calls;
	int block; /* the live block the collector frees, -1: none */
};

static int collect(void *user)
{
	struct gc *g = user;
	g->calls++;
	if (g->block >= 0 && g->p->b[g->block].state == BLK_LIVE)
		pool_drop(g->p, g->block);
	return 0;
}

/* Runs one release with the given mode; returns its bytes. */
static int64_t release_with(gpr_ctx *ctx, int mode, struct gc *g,
			    int *collected)
{
	struct gpr_release_opts o = {.sz = sizeof o,
				     .collect = mode,
				     .collect_fn = collect,
				     .collect_user = g};
	gpr_report *r = NULL;
	assert_int_equal(gpr_release(ctx, &o, &r), 0);
	int64_t bytes = gpr_report_bytes(r);
	double s = -1;
	*collected = gpr_report_collected(r, &s);
	assert_true(s >= 0);
	gpr_report_free(r);
	return bytes;
}

static void t_collect_auto(void **state)
{
	(void)state;
	sim_setup("gpus=1");
	struct pool p;
	pool_init(&p, sim_cuda_load());
	pool_drop(&p, pool_alloc(&p, 0, 10 * MiB));
	gpr_ctx *ctx = open_ctx();
	struct gpr_releaser rel = pool_releaser(&p, "pool");
	assert_int_equal(gpr_register(ctx, &rel), 0);
	struct gc g = {&p, 0, -1};
	int collected = -1;
	/* nothing live after the pass: no collection */
	assert_int_equal(release_with(ctx, GPR_COLLECT_AUTO, &g, &collected),
			 10 * MiB);
	assert_int_equal(g.calls, 0);
	assert_int_equal(collected, 0);
	/*
	 * a live block that only the collector frees (a reference cycle): the
	 * collection runs before the one pass, so each releaser runs once on
	 * GPU 0 and once in its once step, the idle pool as well
	 */
	struct pool idle;
	pool_init(&idle, p.lib);
	struct gpr_releaser rel2 = pool_releaser(&idle, "idle");
	assert_int_equal(gpr_register(ctx, &rel2), 0);
	g.block = pool_alloc(&p, 0, 64 * MiB + 1);
	int entered = atomic_load(&p.entered);
	assert_int_equal(release_with(ctx, GPR_COLLECT_AUTO, &g, &collected),
			 (int64_t)rounded(64 * MiB + 1));
	assert_int_equal(g.calls, 1);
	assert_int_equal(collected, 1);
	assert_int_equal(atomic_load(&p.entered) - entered, 2); /* one pass */
	assert_int_equal(atomic_load(&idle.entered), 2); /* GPU 0, once */
	assert_int_equal(gpr_unregister(ctx, "idle"), 0);
	/* a block still live after collecting: one collection, not a loop */
	g.calls = 0;
	g.block = -1;
	pool_alloc(&p, 0, 2 * MiB);
	assert_int_equal(release_with(ctx, GPR_COLLECT_AUTO, &g, &collected),
			 0);
	assert_int_equal(g.calls, 1);
	gpr_close(ctx);
}

static void t_collect_always_never(void **state)
{
	(void)state;
	sim_setup("gpus=1");
	struct pool p;
	pool_init(&p, sim_cuda_load());
	gpr_ctx *ctx = open_ctx();
	struct gpr_releaser rel = pool_releaser(&p, "pool");
	assert_int_equal(gpr_register(ctx, &rel), 0);
	struct gc g = {&p, 0, -1};
	int collected = -1;
	/* ALWAYS: collected even with nothing live, before the pass */
	g.block = pool_alloc(&p, 0, 4 * MiB);
	assert_int_equal(release_with(ctx, GPR_COLLECT_ALWAYS, &g, &collected),
			 4 * MiB);
	assert_int_equal(g.calls, 1);
	assert_int_equal(collected, 1);
	assert_int_equal(release_with(ctx, GPR_COLLECT_ALWAYS, &g, &collected),
			 0);
	assert_int_equal(g.calls, 2);
	/* NEVER: the live block stays */
	g.calls = 0;
	g.block = pool_alloc(&p, 0, 4 * MiB);
	assert_int_equal(release_with(ctx, GPR_COLLECT_NEVER, &g, &collected),
			 0);
	assert_int_equal(g.calls, 0);
	assert_int_equal(collected, 0);
	gpr_close(ctx);
}

/* A failing releaser is noted; the others still run. */
static void t_failing_releaser(void **state)
{
	(void)state;
	sim_setup("gpus=2");
	void *lib = sim_cuda_load();
	struct pool bad, good;
	pool_init(&bad, lib);
	pool_init(&good, lib);
	pool_drop(&bad, pool_alloc(&bad, 0, 2 * MiB));
	pool_drop(&bad, pool_alloc(&bad, 1, 2 * MiB));
	pool_drop(&good, pool_alloc(&good, 0, 4 * MiB));
	bad.fail_dev = 0;
	gpr_ctx *ctx = open_ctx();
	struct gpr_releaser rb = pool_releaser(&bad, "bad");
	struct gpr_releaser rg = pool_releaser(&good, "good");
	assert_int_equal(gpr_register(ctx, &rb), 0);
	assert_int_equal(gpr_register(ctx, &rg), 0);
	gpr_report *r = NULL;
	assert_int_equal(gpr_release(ctx, NULL, &r), 0);
	assert_true(has_note(r, "bad: release on GPU 0 failed: boom on 0"));
	/* bad's GPU 1 block and good's block came back; bad's GPU 0 not */
	assert_int_equal(gpr_report_bytes(r), 6 * MiB);
	struct gpr_report_releaser rr;
	assert_int_equal(gpr_report_releaser(r, 0, &rr), 0);
	assert_string_equal(rr.name, "bad");
	assert_int_equal(rr.device, 0);
	assert_int_equal(rr.status, -5);
	assert_int_equal(gpr_report_releaser(r, 1, &rr), 0);
	assert_int_equal(rr.status, 0);
	char *text = gpr_report_text(r);
	assert_non_null(strstr(text, "failed (-5)"));
	gpr_free(text);
	gpr_report_free(r);
	gpr_close(ctx);
}

/* A releaser calling back into its own handle gets GPR_E_BUSY; another
 * handle is fine. */
static void t_busy(void **state)
{
	(void)state;
	alarm(30); /* a deadlock fails instead of hanging */
	sim_setup("gpus=1");
	struct pool p;
	pool_init(&p, sim_cuda_load());
	pool_drop(&p, pool_alloc(&p, 0, 2 * MiB));
	gpr_ctx *ctx = open_ctx(), *other = open_ctx();
	struct gpr_releaser rel = pool_releaser(&p, "pool");
	assert_int_equal(gpr_register(ctx, &rel), 0);
	p.reenter = ctx;
	gpr_report *r = NULL;
	assert_int_equal(gpr_release(ctx, NULL, &r), 0);
	assert_int_equal(p.reenter_rc[0], GPR_E_BUSY);
	assert_int_equal(p.reenter_rc[1], GPR_E_BUSY);
	assert_int_equal(p.reenter_rc[2], GPR_E_BUSY);
	assert_int_equal(gpr_report_bytes(r), 2 * MiB);
	gpr_report_free(r);
	p.reenter = other;
	assert_int_equal(gpr_release(ctx, NULL, &r), 0);
	assert_int_equal(p.reenter_rc[0], 0);
	assert_int_equal(p.reenter_rc[1], 0);
	assert_int_equal(p.reenter_rc[2], GPR_E_NOT_FOUND);
	gpr_report_free(r);
	/* after the release, the same calls work again */
	assert_int_equal(gpr_unregister(ctx, "pool"), 0);
	gpr_close(ctx);
	gpr_close(other);
}

enum { THREADS = 8, ROUNDS = 25 };

struct shared {
	gpr_ctx *ctx;
	int64_t bytes; /* summed over this thread's releases */
	int failed;
	pthread_barrier_t *go, *done;
};

/* ROUNDS releases, all threads at once each round. */
static void *releaser_thread(void *arg)
{
	struct shared *s = arg;
	for (int k = 0; k < ROUNDS; k++) {
		pthread_barrier_wait(s->go);
		gpr_report *r = NULL;
		if (gpr_release(s->ctx, NULL, &r) == 0)
			s->bytes += gpr_report_bytes(r);
		else
			s->failed++;
		gpr_report_free(r);
		pthread_barrier_wait(s->done);
	}
	return NULL;
}

/* The cache filled again: what fill() cached, allocated anew. */
static void refill(struct pool *p)
{
	for (int i = 0; i < p->n; i++) {
		if (p->b[i].state != BLK_GONE)
			continue;
		assert_int_equal(sim_cuda_open_device(p->lib, p->b[i].dev), 0);
		assert_int_equal(
		    sim_cuda_alloc(p->lib, p->b[i].size, &p->b[i].ptr), 0);
		p->b[i].state = BLK_CACHED;
	}
}

/*
 * Eight threads release at once, 25 times each, the cache filled again
 * between rounds: the releases serialize, and their sum is exactly what
 * was cached, every round.
 */
static void t_threads(void **state)
{
	(void)state;
	alarm(120); /* a deadlock fails instead of hanging */
	sim_setup("gpus=2");
	struct pool p;
	pool_init(&p, sim_cuda_load());
	uint64_t want = fill(&p);
	p.sleep_ms = 1;
	gpr_ctx *ctx = open_ctx();
	struct gpr_releaser rel = pool_releaser(&p, "pool");
	assert_int_equal(gpr_register(ctx, &rel), 0);
	struct shared s[THREADS];
	pthread_t t[THREADS];
	pthread_barrier_t go, done;
	pthread_barrier_init(&go, NULL, THREADS + 1);
	pthread_barrier_init(&done, NULL, THREADS + 1);
	for (int i = 0; i < THREADS; i++) {
		s[i] = (struct shared){ctx, 0, 0, &go, &done};
		pthread_create(&t[i], NULL, releaser_thread, &s[i]);
	}
	for (int k = 0; k < ROUNDS; k++) {
		if (k > 0)
			refill(&p);
		pthread_barrier_wait(&go);
		pthread_barrier_wait(&done);
	}
	int64_t total = 0;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(s[i].failed, 0);
		total += s[i].bytes;
	}
	pthread_barrier_destroy(&go);
	pthread_barrier_destroy(&done);
	assert_int_equal(total, (int64_t)want * ROUNDS);
	assert_int_equal(atomic_load(&p.max_inside), 1);
	assert_int_equal(atomic_load(&p.entered), THREADS * ROUNDS * 3);
	gpr_close(ctx);
}

struct slow {
	gpr_ctx *ctx;
	gpr_report *r;
};

static void *slow_release(void *arg)
{
	struct slow *s = arg;
	assert_int_equal(gpr_release(s->ctx, NULL, &s->r), 0);
	return NULL;
}

/*
 * A handle over two simulated GPUs whose pool sleeps 300 ms a GPU, and a
 * thread *t inside a release of it (s->r gets its report) when this
 * returns, held there at the pool's gate until the caller opens it
 * (p->gate = 0): "inside a release" is a fact for as long as the caller
 * needs, however slow the machine.
 */
static void start_slow_release(struct pool *p, struct slow *s, pthread_t *t)
{
	sim_setup("gpus=2");
	pool_init(p, sim_cuda_load());
	fill(p);
	p->sleep_ms = 300;
	atomic_store(&p->gate, 1);
	gpr_ctx *ctx = open_ctx();
	struct gpr_releaser rel = pool_releaser(p, "pool");
	assert_int_equal(gpr_register(ctx, &rel), 0);
	s->ctx = ctx;
	s->r = NULL;
	pthread_create(t, NULL, slow_release, s);
	while (atomic_load(&p->entered) == 0)
		sleep_ms(1);
}

/* Queries do not wait for a release in progress. */
static void t_queries_not_blocked(void **state)
{
	(void)state;
	alarm(30); /* a deadlock fails instead of hanging */
	struct pool p;
	struct slow s;
	pthread_t t;
	start_slow_release(&p, &s, &t);
	gpr_ctx *ctx = s.ctx;
	/* a query that waited for the release would never return (alarm) */
	int dev[2], n = 0, cnt = 0, idx = -1;
	uint64_t b = 0;
	struct gpr_gpu g;
	assert_int_equal(gpr_devices_in_use(ctx, dev, 2, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(gpr_process_bytes(ctx, 1, &b), 0);
	assert_int_equal(gpr_gpu_count(ctx, &cnt), 0);
	assert_int_equal(gpr_gpu_info(ctx, 1, &g), 0);
	assert_int_equal(gpr_nvml_index(ctx, 1, &idx), 0);
	assert_int_equal(atomic_load(&p.inside), 1); /* still releasing */
	atomic_store(&p.gate, 0);
	pthread_join(t, NULL);
	/* a lower bound the pool's sleeps guarantee */
	assert_true(gpr_report_seconds(s.r) >= 0.6);
	gpr_report_free(s.r);
	gpr_close(ctx);
}

/* A child forked while a parent thread is inside a release: its release
 * touches nothing (and does not wait on the parent's lock). */
static void t_fork(void **state)
{
	(void)state;
	alarm(30); /* a deadlock fails instead of hanging */
	struct pool p;
	struct slow s;
	pthread_t t;
	start_slow_release(&p, &s, &t);
	gpr_ctx *ctx = s.ctx;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(5); /* a deadlock fails the test instead of hanging */
		int entered = atomic_load(&p.entered);
		gpr_report *r = NULL;
		int ok = gpr_release(ctx, NULL, &r) == 0 &&
			 gpr_report_bytes(r) == 0 &&
			 strcmp(gpr_report_source(r), "none") == 0 &&
			 has_note(r, "forked child") &&
			 atomic_load(&p.entered) == entered;
		gpr_report_free(r);
		int n = 0;
		uint64_t b = 0;
		ok = ok && gpr_devices_in_use(ctx, NULL, 0, &n) == GPR_E_FORKED;
		ok = ok && gpr_process_bytes(ctx, 0, &b) == GPR_E_FORKED;
		struct gpr_releaser rel = pool_releaser(&p, "pool");
		ok = ok && gpr_register(ctx, &rel) == GPR_E_FORKED;
		gpr_close(ctx);
		_exit(ok ? 0 : 1);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	atomic_store(&p.gate, 0);
	pthread_join(t, NULL);
	assert_true(gpr_report_bytes(s.r) > 0);
	gpr_report_free(s.r);
	gpr_close(ctx);
}

/* Requested devices: only those in use are visited, the rest noted. */
static void t_requested_devices(void **state)
{
	(void)state;
	sim_setup("gpus=2");
	struct pool p;
	pool_init(&p, sim_cuda_load());
	pool_drop(&p, pool_alloc(&p, 0, 2 * MiB));
	gpr_ctx *ctx = open_ctx();
	struct gpr_releaser rel = pool_releaser(&p, "pool");
	assert_int_equal(gpr_register(ctx, &rel), 0);
	int want[] = {1, 0, 7, 0, -3};
	struct gpr_release_opts o = {
	    .sz = sizeof o, .devices = want, .n_devices = 5};
	gpr_report *r = NULL;
	assert_int_equal(gpr_release(ctx, &o, &r), 0);
	assert_int_equal(gpr_report_gpu_count(r), 1);
	assert_int_equal(gpr_report_bytes(r), 2 * MiB);
	assert_true(has_note(r, "GPU 1: no context in this process, not "
				"visited"));
	assert_true(has_note(r, "GPU 7: no such CUDA device"));
	assert_true(has_note(r, "GPU -3: no such CUDA device"));
	gpr_report_free(r);
	gpr_close(ctx);
}

static int json_ok(const char *json, const char *check)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd,
		 "python3 -c 'import json,sys; d=json.load(sys.stdin); "
		 "assert %s, d'",
		 check);
	FILE *f = popen(cmd, "w");
	assert_non_null(f);
	fputs(json, f);
	return pclose(f);
}

static int odd_release(void *data, int dev, char *note, size_t note_sz)
{
	(void)data;
	if (dev == GPR_DEVICE_ONCE)
		snprintf(note, note_sz,
			 "tab\there \"quoted\" \\ \x01 \xff\xfe "
			 "caf\xc3\xa9");
	return 0;
}

/* JSON is a valid document whatever the names and notes hold; the text
 * carries the numbers. */
static void t_render(void **state)
{
	(void)state;
	sim_setup("gpus=2");
	struct pool p;
	pool_init(&p, sim_cuda_load());
	uint64_t want = fill(&p);
	gpr_ctx *ctx = open_ctx();
	struct gpr_releaser rel = pool_releaser(&p, "pool");
	struct gpr_releaser odd = {
	    .sz = sizeof odd, .name = "we\"ird\n\xff", .release = odd_release};
	assert_int_equal(gpr_register(ctx, &rel), 0);
	assert_int_equal(gpr_register(ctx, &odd), 0);
	gpr_report *r = NULL;
	assert_int_equal(gpr_release(ctx, NULL, &r), 0);
	char *json = gpr_report_json(r);
	assert_non_null(json);
	char check[512];
	snprintf(check, sizeof check,
		 "d[\"bytes\"] == %llu and d[\"source\"] == \"driver\" and "
		 "len(d[\"gpus\"]) == 2 and d[\"gpus\"][1][\"device\"] == 1 "
		 "and len(d[\"releasers\"]) == 6 and "
		 "d[\"releasers\"][3][\"name\"] == \"we\\\"ird\\n\\ufffd\" "
		 "and d[\"releasers\"][3][\"before\"] is None and "
		 "any(\"caf\\xe9\" in n for n in d[\"notes\"]) and "
		 "abs(d[\"gb\"] - %llu / 1e9) < 1e-9",
		 (unsigned long long)want, (unsigned long long)want);
	assert_int_equal(json_ok(json, check), 0);
	gpr_free(json);

	char *text = gpr_report_text(r);
	assert_non_null(text);
	char num[64];
	snprintf(num, sizeof num, "(%llu bytes) from the driver",
		 (unsigned long long)want);
	assert_non_null(strstr(text, num));
	assert_non_null(strstr(text, "released 1.0 GiB"));
	assert_non_null(strstr(text, "80.0 GiB")); /* total column */
	assert_non_null(strstr(text, "notes:"));
	if (getenv("GPR_TEST_SHOW"))
		fputs(text, stderr);
	gpr_free(text);
	gpr_report_free(r);

	/* an empty report is a valid document too */
	gpr_ctx *c2 = open_ctx();
	assert_int_equal(gpr_unregister(ctx, "pool"), 0);
	gpr_close(ctx);
	assert_int_equal(gpr_release(c2, NULL, &r), 0);
	json = gpr_report_json(r);
	assert_int_equal(json_ok(json, "d[\"gpus\"][0][\"released\"] == 0"), 0);
	gpr_free(json);
	gpr_report_free(r);
	gpr_close(c2);
}

/* The JSON report stays a document when the host program's LC_NUMERIC
 * writes decimals with a comma (setlocale(LC_ALL, "") in de_DE). */
static void t_json_locale(void **state)
{
	(void)state;
	sim_setup("gpus=2");
	struct pool p;
	pool_init(&p, sim_cuda_load());
	uint64_t want = fill(&p);
	gpr_ctx *ctx = open_ctx();
	struct gpr_releaser rel = pool_releaser(&p, "pool");
	assert_int_equal(gpr_register(ctx, &rel), 0);
	gpr_report *r = NULL;
	assert_int_equal(gpr_release(ctx, NULL, &r), 0);
	char gb[64];
	snprintf(gb, sizeof gb, "\"gb\":%llu.%09llu,",
		 (unsigned long long)(want / 1000000000u),
		 (unsigned long long)(want % 1000000000u));
	if (!comma_locale())
		skip();
	char *json = gpr_report_json(r);
	setlocale(LC_NUMERIC, "C");
	assert_non_null(json);
	assert_non_null(strstr(json, gb));
	assert_int_equal(json_ok(json,
				 "d[\"seconds\"] > 0 and "
				 "isinstance(d[\"collect_seconds\"], float)"),
			 0);
	gpr_free(json);
	gpr_report_free(r);
	gpr_close(ctx);
}

/*
 * A release reads each GPU's NVML list twice: once in the scan that finds
 * the GPUs in use, whose reading is also the "before" figure, and once
 * after; a second read before would cost ~0.35 ms a GPU on real hardware.
 */
static void t_nvml_reads(void **state)
{
	(void)state;
	sim_setup("gpus=2");
	struct pool p;
	pool_init(&p, sim_cuda_load());
	uint64_t want = fill(&p);
	gpr_ctx *ctx = open_ctx();
	struct gpr_releaser rel = pool_releaser(&p, "pool");
	assert_int_equal(gpr_register(ctx, &rel), 0);
	int n = 0, devs[4];
	assert_int_equal(gpr_devices_in_use(ctx, devs, 4, &n), 0); /* NVML up */
	void *nvml =
	    dlopen(sim_path("libnvidia-ml.so.1"), RTLD_NOW | RTLD_NOLOAD);
	assert_non_null(nvml);
	int (*calls)(void) =
	    (int (*)(void))sim_sym(nvml, "gprsim_nvml_list_calls");
	int c0 = calls();
	gpr_report *r = NULL;
	assert_int_equal(gpr_release(ctx, NULL, &r), 0);
	assert_int_equal(gpr_report_bytes(r), (int64_t)want);
	assert_int_equal(calls() - c0, 2 * 2);
	gpr_report_free(r);
	dlclose(nvml);
	gpr_close(ctx);
}

struct young {
	struct gc *full; /* the full collector's state */
	int calls;
	int frees; /* 1: the young collection frees full->block */
};

static int collect_young(void *user)
{
	struct young *y = user;
	struct gc *g = y->full;
	y->calls++;
	if (y->frees && g->block >= 0 && g->p->b[g->block].state == BLK_LIVE)
		pool_drop(g->p, g->block);
	return 0;
}

static int collect_full(void *user)
{
	return collect(((struct young *)user)->full);
}

/*
 * AUTO with a young collector: it runs first; where it frees every live
 * byte the full one does not run, else the full one follows. ALWAYS runs
 * the full one only.
 */
static void t_collect_young(void **state)
{
	(void)state;
	sim_setup("gpus=1");
	struct pool p;
	pool_init(&p, sim_cuda_load());
	gpr_ctx *ctx = pool_ctx(&p, "pool");
	struct gc g = {&p, 0, -1};
	struct young y = {&g, 0, 1};
	struct gpr_release_opts o = {.sz = sizeof o,
				     .collect_fn = collect_full,
				     .collect_young_fn = collect_young,
				     .collect_user = &y};
	gpr_report *r = NULL;
	/* the young collection frees the cycle: no full collection */
	g.block = pool_alloc(&p, 0, 8 * MiB);
	assert_int_equal(gpr_release(ctx, &o, &r), 0);
	assert_int_equal(gpr_report_bytes(r), 8 * MiB);
	assert_int_equal(gpr_report_collected(r, NULL), 1);
	assert_int_equal(y.calls, 1);
	assert_int_equal(g.calls, 0);
	gpr_report_free(r);
	/* it does not: the full one runs after it */
	y.calls = g.calls = 0;
	y.frees = 0;
	g.block = pool_alloc(&p, 0, 8 * MiB);
	assert_int_equal(gpr_release(ctx, &o, &r), 0);
	assert_int_equal(gpr_report_bytes(r), 8 * MiB);
	assert_int_equal(y.calls, 1);
	assert_int_equal(g.calls, 1);
	gpr_report_free(r);
	/* nothing live: neither runs */
	y.calls = g.calls = 0;
	pool_drop(&p, pool_alloc(&p, 0, 2 * MiB));
	assert_int_equal(gpr_release(ctx, &o, &r), 0);
	assert_int_equal(gpr_report_collected(r, NULL), 0);
	assert_int_equal(y.calls + g.calls, 0);
	gpr_report_free(r);
	/* ALWAYS: the full one, not the young one */
	o.collect = GPR_COLLECT_ALWAYS;
	assert_int_equal(gpr_release(ctx, &o, &r), 0);
	assert_int_equal(y.calls, 0);
	assert_int_equal(g.calls, 1);
	gpr_report_free(r);
	gpr_close(ctx);
}

/*
 * What one release costs in calls, on two GPUs with a collector set: each
 * releaser's held() twice a row (before and after), the pass once, NVML's
 * list twice a GPU. With live bytes, the collection comes first and only
 * the rows that held live bytes are asked again after the young one.
 */
static void t_release_calls(void **state)
{
	(void)state;
	sim_setup("gpus=2");
	struct pool p;
	pool_init(&p, sim_cuda_load());
	fill(&p); /* cached on both GPUs, one block live on GPU 1 */
	gpr_ctx *ctx = pool_ctx(&p, "pool");
	int n = 0, devs[2];
	assert_int_equal(gpr_devices_in_use(ctx, devs, 2, &n), 0); /* NVML up */
	void *nvml =
	    dlopen(sim_path("libnvidia-ml.so.1"), RTLD_NOW | RTLD_NOLOAD);
	assert_non_null(nvml);
	int (*lists)(void) =
	    (int (*)(void))sim_sym(nvml, "gprsim_nvml_list_calls");
	struct gc g = {&p, 0, -1};
	struct young y = {&g, 0, 0};
	struct gpr_release_opts o = {.sz = sizeof o,
				     .collect_fn = collect_full,
				     .collect_young_fn = collect_young,
				     .collect_user = &y};
	/* the live block on GPU 1 is really live: both collections run */
	int l0 = lists(), h0 = atomic_load(&p.held_calls),
	    e0 = atomic_load(&p.entered);
	gpr_report *r = NULL;
	assert_int_equal(gpr_release(ctx, &o, &r), 0);
	gpr_report_free(r);
	assert_int_equal(y.calls, 1);
	assert_int_equal(g.calls, 1);
	/* 3 rows (GPU 0, GPU 1, once) x before/after, + the live row once */
	assert_int_equal(atomic_load(&p.held_calls) - h0, 3 * 2 + 1);
	assert_int_equal(atomic_load(&p.entered) - e0, 3);
	assert_int_equal(lists() - l0, 2 * 2);
	/* nothing live (the collector dropped it): no collection, held()
	 * before and after only */
	g.block = 4; /* fill()'s live block */
	collect(&g);
	y.calls = g.calls = 0;
	l0 = lists();
	h0 = atomic_load(&p.held_calls);
	e0 = atomic_load(&p.entered);
	assert_int_equal(gpr_release(ctx, &o, &r), 0);
	assert_int_equal(gpr_report_bytes(r), (int64_t)rounded(8 * MiB));
	gpr_report_free(r);
	assert_int_equal(y.calls + g.calls, 0);
	assert_int_equal(atomic_load(&p.held_calls) - h0, 3 * 2);
	assert_int_equal(atomic_load(&p.entered) - e0, 3);
	assert_int_equal(lists() - l0, 2 * 2);
	dlclose(nvml);
	gpr_close(ctx);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_exact_bytes),
	    cmocka_unit_test(t_fallback_mig),
	    cmocka_unit_test(t_fallback_foreign_pid),
	    cmocka_unit_test(t_fallback_nvml_absent),
	    cmocka_unit_test(t_collect_auto),
	    cmocka_unit_test(t_collect_always_never),
	    cmocka_unit_test(t_failing_releaser),
	    cmocka_unit_test(t_busy),
	    cmocka_unit_test(t_threads),
	    cmocka_unit_test(t_queries_not_blocked),
	    cmocka_unit_test(t_fork),
	    cmocka_unit_test(t_requested_devices),
	    cmocka_unit_test(t_render),
	    cmocka_unit_test(t_json_locale),
	    cmocka_unit_test(t_nvml_reads),
	    cmocka_unit_test(t_collect_young),
	    cmocka_unit_test(t_release_calls),
	};
	return gpr_test_main(argc, argv, "core-release", tests,
			     sizeof tests / sizeof tests[0]);
}
