/*
 * Core library: handle, options, errors, the GPUs in use, queries and the
 * registry, against the simulated driver. Release semantics are in
 * test_core_release.c.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"
#include "test_core_pool.h"

static gpr_ctx *open_ctx(void)
{
	gpr_ctx *ctx = NULL;
	assert_int_equal(gpr_open(NULL, &ctx), 0);
	assert_non_null(ctx);
	return ctx;
}

static void t_errors(void **state)
{
	(void)state;
	sim_setup("");
	assert_string_equal(gpr_version(), GPR_VERSION_STRING);
	assert_string_equal(gpr_strerror(GPR_E_BUSY),
			    "operation not allowed from inside a release");
	assert_string_equal(gpr_strerror(12345), "unknown error");
	assert_int_equal(gpr_open(NULL, NULL), GPR_E_INVAL);

	/* options: too short, longer with unknown non-zero fields, longer
	 * with zeros (a newer caller that sets nothing new) */
	struct {
		struct gpr_opts o;
		long extra;
	} big = {{.sz = sizeof big}, 7};
	gpr_ctx *ctx = NULL;
	struct gpr_opts tiny = {.sz = 2};
	assert_int_equal(gpr_open(&tiny, &ctx), GPR_E_INVAL);
	assert_null(ctx);
	assert_int_equal(gpr_open(&big.o, &ctx), GPR_E_INVAL);
	big.extra = 0;
	assert_int_equal(gpr_open(&big.o, &ctx), 0);
	gpr_close(ctx);
	/* an older, shorter struct: the fields past sz take defaults */
	struct gpr_opts old = {.sz = offsetof(struct gpr_opts, log)};
	assert_int_equal(gpr_open(&old, &ctx), 0);

	int n = -1, dev[4];
	uint64_t bytes;
	struct gpr_gpu g;
	gpr_report *r = (gpr_report *)&n;
	assert_int_equal(gpr_devices_in_use(NULL, dev, 4, &n), GPR_E_INVAL);
	assert_int_equal(gpr_devices_in_use(ctx, dev, 4, NULL), GPR_E_INVAL);
	assert_int_equal(gpr_devices_in_use(ctx, NULL, 4, &n), GPR_E_INVAL);
	assert_int_equal(gpr_devices_in_use(ctx, dev, -1, &n), GPR_E_INVAL);
	assert_int_equal(gpr_gpu_count(ctx, NULL), GPR_E_INVAL);
	assert_int_equal(gpr_gpu_info(ctx, 0, NULL), GPR_E_INVAL);
	assert_int_equal(gpr_gpu_processes(ctx, 0, NULL, NULL), GPR_E_INVAL);
	assert_int_equal(gpr_process_bytes(NULL, 0, &bytes), GPR_E_INVAL);
	assert_int_equal(gpr_nvml_index(ctx, 0, NULL), GPR_E_INVAL);
	assert_int_equal(gpr_cuda_loaded(NULL), GPR_E_INVAL);
	assert_int_equal(gpr_release(NULL, NULL, &r), GPR_E_INVAL);
	assert_int_equal(gpr_release(ctx, NULL, NULL), GPR_E_INVAL);
	assert_int_equal(gpr_register(ctx, NULL), GPR_E_INVAL);
	assert_int_equal(gpr_unregister(ctx, NULL), GPR_E_INVAL);
	struct gpr_releaser nameless = {.sz = sizeof nameless};
	assert_int_equal(gpr_register(ctx, &nameless), GPR_E_INVAL);
	struct gpr_releaser short_sz = {.sz = 3, .name = "x"};
	assert_int_equal(gpr_register(ctx, &short_sz), GPR_E_INVAL);

	struct gpr_release_opts ro = {.sz = 1};
	assert_int_equal(gpr_release(ctx, &ro, &r), GPR_E_INVAL);
	assert_null(r);
	ro = (struct gpr_release_opts){.sz = sizeof ro, .n_devices = 2};
	assert_int_equal(gpr_release(ctx, &ro, &r), GPR_E_INVAL);
	ro = (struct gpr_release_opts){.sz = sizeof ro, .collect = 9};
	assert_int_equal(gpr_release(ctx, &ro, &r), GPR_E_INVAL);
	assert_string_not_equal(gpr_last_error(ctx), "");

	/* NVML answers even though CUDA is not loaded */
	assert_int_equal(gpr_gpu_count(ctx, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(gpr_gpu_info(ctx, 5, &g), GPR_E_RANGE);
	assert_non_null(strstr(gpr_last_error(ctx), "5"));
	assert_int_equal(gpr_nvml_index(ctx, 0, &n), GPR_E_NOT_LOADED);

	/* accessors are NULL-safe */
	assert_int_equal(gpr_report_bytes(NULL), 0);
	assert_null(gpr_report_text(NULL));
	assert_null(gpr_report_json(NULL));
	assert_null(gpr_report_note(NULL, 0));
	gpr_report_free(NULL);
	gpr_free(NULL);
	gpr_close(ctx);
	gpr_close(NULL);
}

static void *other_thread_error(void *arg)
{
	return (void *)gpr_last_error(arg);
}

/* The last error belongs to the thread and the handle that made it. */
static void t_last_error_per_thread(void **state)
{
	(void)state;
	sim_setup("gpus=2");
	gpr_ctx *a = open_ctx(), *b = open_ctx();
	struct gpr_gpu g;
	assert_string_equal(gpr_last_error(a), "");
	assert_int_equal(gpr_gpu_info(a, 9, &g), GPR_E_RANGE);
	assert_non_null(strstr(gpr_last_error(a), "9"));
	assert_string_equal(gpr_last_error(b), "");
	pthread_t t;
	void *res = NULL;
	pthread_create(&t, NULL, other_thread_error, a);
	pthread_join(t, &res);
	assert_string_equal((const char *)res, "");
	gpr_close(a);
	gpr_close(b);
}

/* A process that never loaded CUDA: nothing gets loaded or opened. */
static void t_never_loaded(void **state)
{
	(void)state;
	sim_setup("gpus=2");
	gpr_ctx *ctx = open_ctx();
	int dev[4] = {-1, -1, -1, -1}, n = -1;
	assert_int_equal(gpr_cuda_loaded(ctx), 0);
	assert_int_equal(gpr_devices_in_use(ctx, dev, 4, &n), 0);
	assert_int_equal(n, 0);
	uint64_t bytes = 1;
	assert_int_equal(gpr_process_bytes(ctx, 0, &bytes), 0);
	assert_int_equal(bytes, 0);
	gpr_report *r = NULL;
	assert_int_equal(gpr_release(ctx, NULL, &r), 0);
	assert_int_equal(gpr_report_bytes(r), 0);
	assert_string_equal(gpr_report_source(r), "none");
	assert_true(has_note(r, "CUDA driver not loaded"));
	/* at once: nothing asked of any library (below); how fast that is
	 * depends on the machine and is not looked at */
	assert_true(gpr_report_seconds(r) >= 0);
	gpr_report_free(r);
	/* neither library came into the process */
	assert_null(dlopen(sim_path("libcuda.so.1"), RTLD_NOW | RTLD_NOLOAD));
	assert_null(
	    dlopen(sim_path("libnvidia-ml.so.1"), RTLD_NOW | RTLD_NOLOAD));
	gpr_close(ctx);
	assert_null(dlopen(sim_path("libcuda.so.1"), RTLD_NOW | RTLD_NOLOAD));
}

/* Loaded by a framework but never initialised: no cuInit, no context. */
static void t_loaded_uninitialised(void **state)
{
	(void)state;
	sim_setup("gpus=2");
	void *lib = dlopen(sim_path("libcuda.so.1"), RTLD_NOW | RTLD_GLOBAL);
	assert_non_null(lib);
	int (*init_calls)(void) =
	    (int (*)(void))sim_sym(lib, "gprsim_init_calls");
	int (*ctx_calls)(void) =
	    (int (*)(void))sim_sym(lib, "gprsim_ctx_calls");
	gpr_ctx *ctx = open_ctx();
	int dev[4], n = -1;
	assert_int_equal(gpr_cuda_loaded(ctx), 1);
	assert_int_equal(gpr_devices_in_use(ctx, dev, 4, &n), 0);
	assert_int_equal(n, 0);
	gpr_report *r = NULL;
	assert_int_equal(gpr_release(ctx, NULL, &r), 0);
	assert_int_equal(gpr_report_bytes(r), 0);
	assert_int_equal(gpr_report_gpu_count(r), 0);
	assert_true(has_note(r, "not initialised"));
	gpr_report_free(r);
	assert_int_equal(init_calls(), 0);
	assert_int_equal(ctx_calls(), 0);
	gpr_close(ctx);
	dlclose(lib);
}

/* Only the GPUs with a context are in use; our queries open none. */
static void t_only_opened(void **state)
{
	(void)state;
	sim_setup("gpus=4");
	void *lib = sim_cuda_load();
	int (*ctx_calls)(void) =
	    (int (*)(void))sim_sym(lib, "gprsim_ctx_calls");
	int (*init_calls)(void) =
	    (int (*)(void))sim_sym(lib, "gprsim_init_calls");
	assert_int_equal(sim_cuda_open_device(lib, 1), 0);
	assert_int_equal(sim_cuda_open_device(lib, 3), 0);
	int before = ctx_calls();
	gpr_ctx *ctx = open_ctx();
	int dev[4] = {-1, -1, -1, -1}, n = -1;
	assert_int_equal(gpr_devices_in_use(ctx, dev, 4, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(dev[0], 1);
	assert_int_equal(dev[1], 3);
	/* cap smaller than the answer: n still says how many */
	dev[0] = -1;
	assert_int_equal(gpr_devices_in_use(ctx, dev, 1, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(dev[0], 1);
	assert_int_equal(gpr_devices_in_use(ctx, NULL, 0, &n), 0);
	assert_int_equal(n, 2);

	uint64_t bytes = 0;
	assert_int_equal(gpr_process_bytes(ctx, 1, &bytes), 0);
	assert_int_equal(bytes, 512 * MiB);
	assert_int_equal(gpr_process_bytes(ctx, 0, &bytes), 0);
	assert_int_equal(bytes, 0);
	assert_int_equal(gpr_process_bytes(ctx, 4, &bytes), GPR_E_RANGE);
	int idx = -1;
	assert_int_equal(gpr_nvml_index(ctx, 3, &idx), 0);
	assert_int_equal(idx, 3);
	struct gpr_gpu g;
	assert_int_equal(gpr_gpu_info(ctx, 2, &g), 0);
	assert_int_equal(g.index, 2);
	assert_int_equal(g.cuda_ordinal, 2);
	assert_int_equal(g.total, 80 * GiB);
	assert_string_equal(g.uuid, "GPU-5111a000-0000-4000-8000-000000000002");
	struct gpr_process *procs = NULL;
	size_t np = 0;
	assert_int_equal(gpr_gpu_processes(ctx, 3, &procs, &np), 0);
	assert_int_equal(np, 1);
	assert_int_equal(procs[0].pid, (uint32_t)getpid());
	assert_true(procs[0].bytes_known);
	assert_int_equal(procs[0].bytes, 512 * MiB);
	assert_true(procs[0].compute);
	gpr_free(procs);
	assert_int_equal(gpr_gpu_processes(ctx, 0, &procs, &np), 0);
	assert_int_equal(np, 0);
	gpr_free(procs);

	gpr_report *r = NULL;
	assert_int_equal(gpr_release(ctx, NULL, &r), 0);
	assert_int_equal(gpr_report_gpu_count(r), 2);
	struct gpr_report_gpu rg;
	assert_int_equal(gpr_report_gpu(r, 0, &rg), 0);
	assert_int_equal(rg.device, 1);
	assert_int_equal(gpr_report_gpu(r, 1, &rg), 0);
	assert_int_equal(rg.device, 3);
	assert_int_equal(gpr_report_gpu(r, 2, &rg), GPR_E_RANGE);
	gpr_report_free(r);

	assert_int_equal(ctx_calls(), before);
	assert_int_equal(init_calls(), 1);
	gpr_close(ctx);
}

/* A context made with cuCtxCreate is found through NVML's list. */
static void t_non_primary(void **state)
{
	(void)state;
	sim_setup("gpus=3");
	void *lib = sim_cuda_load();
	int (*get)(int *, int) =
	    (int (*)(int *, int))sim_sym(lib, "cuDeviceGet");
	int (*create)(void **, unsigned, int) =
	    (int (*)(void **, unsigned, int))sim_sym(lib, "cuCtxCreate_v2");
	int d = -1;
	void *c = NULL;
	assert_int_equal(get(&d, 2), 0);
	assert_int_equal(create(&c, 0, d), 0);
	gpr_ctx *ctx = open_ctx();
	int dev[3], n = -1;
	assert_int_equal(gpr_devices_in_use(ctx, dev, 3, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(dev[0], 2);
	gpr_close(ctx);
}

/*
 * gpr_primary_context_active: primary contexts only (what the CUDA runtime
 * would use), nothing before the driver is loaded and initialised.
 */
static void t_primary_active(void **state)
{
	(void)state;
	sim_setup("gpus=3");
	gpr_ctx *ctx = open_ctx();
	int on = -1;
	assert_int_equal(gpr_primary_context_active(ctx, 0, &on), 0);
	assert_int_equal(on, 0); /* libcuda not loaded */
	void *lib = dlopen(sim_path("libcuda.so.1"), RTLD_NOW | RTLD_GLOBAL);
	assert_non_null(lib);
	on = -1;
	assert_int_equal(gpr_primary_context_active(ctx, 0, &on), 0);
	assert_int_equal(on, 0); /* loaded, no cuInit */
	int (*init)(unsigned) = (int (*)(unsigned))sim_sym(lib, "cuInit");
	assert_int_equal(init(0), 0);
	assert_int_equal(sim_cuda_open_device(lib, 1), 0);
	int (*get)(int *, int) =
	    (int (*)(int *, int))sim_sym(lib, "cuDeviceGet");
	int (*create)(void **, unsigned, int) =
	    (int (*)(void **, unsigned, int))sim_sym(lib, "cuCtxCreate_v2");
	int d = -1;
	void *c = NULL;
	assert_int_equal(get(&d, 2), 0);
	assert_int_equal(create(&c, 0, d), 0); /* not a primary context */
	int want[3] = {0, 1, 0};
	for (int i = 0; i < 3; i++) {
		assert_int_equal(gpr_primary_context_active(ctx, i, &on), 0);
		assert_int_equal(on, want[i]);
	}
	assert_int_equal(gpr_primary_context_active(ctx, 3, &on), GPR_E_RANGE);
	assert_int_equal(gpr_primary_context_active(ctx, -1, &on), GPR_E_INVAL);
	assert_int_equal(gpr_primary_context_active(NULL, 0, &on), GPR_E_INVAL);
	assert_int_equal(gpr_primary_context_active(ctx, 0, NULL), GPR_E_INVAL);
	int (*ctx_calls)(void) =
	    (int (*)(void))sim_sym(lib, "gprsim_ctx_calls");
	assert_int_equal(ctx_calls(), 2); /* ours opened none */
	gpr_close(ctx);
}

/* A GPU that cannot be queried is skipped, with a note in the report. */
static void t_broken_gpu(void **state)
{
	(void)state;
	sim_setup("gpus=3;fault=broken:1");
	void *lib = sim_cuda_load();
	struct pool p;
	pool_init(&p, lib);
	pool_drop(&p, pool_alloc(&p, 0, 4 * MiB));
	pool_drop(&p, pool_alloc(&p, 2, 6 * MiB));
	assert_int_not_equal(sim_cuda_open_device(lib, 1), 0);
	gpr_ctx *ctx = open_ctx();
	struct gpr_releaser rel = pool_releaser(&p, "pool");
	assert_int_equal(gpr_register(ctx, &rel), 0);
	int dev[3], n = -1;
	assert_int_equal(gpr_devices_in_use(ctx, dev, 3, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(dev[0], 0);
	assert_int_equal(dev[1], 2);
	gpr_report *r = NULL;
	assert_int_equal(gpr_release(ctx, NULL, &r), 0);
	assert_true(has_note(r, "GPU 1: cannot be queried"));
	assert_int_equal(gpr_report_gpu_count(r), 2);
	assert_string_equal(gpr_report_source(r), "driver");
	assert_int_equal(gpr_report_bytes(r), 10 * MiB);
	gpr_report_free(r);
	gpr_close(ctx);
}

static void t_registry(void **state)
{
	(void)state;
	sim_setup("");
	gpr_ctx *ctx = open_ctx();
	struct pool a, b;
	pool_init(&a, NULL);
	pool_init(&b, NULL);
	char name[8] = "a";
	struct gpr_releaser ra = pool_releaser(&a, name);
	struct gpr_releaser rb = pool_releaser(&b, "b");
	assert_int_equal(gpr_register(ctx, &ra), 0);
	strcpy(name, "zz"); /* the registry kept its own copy */
	ra.name = "a";
	assert_int_equal(gpr_register(ctx, &ra), GPR_E_EXISTS);
	assert_int_equal(gpr_register(ctx, &rb), 0);
	assert_int_equal(gpr_unregister(ctx, "zz"), GPR_E_NOT_FOUND);
	assert_int_equal(gpr_unregister(ctx, "a"), 0);
	assert_int_equal(a.destroyed, 1);
	assert_int_equal(gpr_unregister(ctx, "a"), GPR_E_NOT_FOUND);
	assert_int_equal(gpr_register(ctx, &ra), 0);
	gpr_close(ctx);
	assert_int_equal(a.destroyed, 2);
	assert_int_equal(b.destroyed, 1);
}

static void log_count(void *user, int level, const char *msg)
{
	(void)level;
	assert_non_null(msg);
	(*(int *)user)++;
}

/* The log callback hears about the release; none above its level. */
static void t_log(void **state)
{
	(void)state;
	sim_setup("");
	int calls = 0;
	struct gpr_opts o = {.sz = sizeof o,
			     .log = log_count,
			     .log_user = &calls,
			     .log_level = GPR_LOG_INFO};
	gpr_ctx *ctx = NULL;
	assert_int_equal(gpr_open(&o, &ctx), 0);
	sim_cuda_load();
	gpr_report *r = NULL;
	assert_int_equal(gpr_release(ctx, NULL, &r), 0);
	gpr_report_free(r);
	assert_true(calls >= 1);
	gpr_close(ctx);
	calls = 0;
	o.log_level = -1;
	assert_int_equal(gpr_open(&o, &ctx), 0);
	assert_int_equal(gpr_release(ctx, NULL, &r), 0);
	gpr_report_free(r);
	assert_int_equal(calls, 0);
	gpr_close(ctx);
}

struct log_query {
	gpr_ctx *ctx;
	int calls;
	int inner; /* what the query made from the callback returned */
};

/* A log callback that asks the handle it logs for (once). */
static void log_query(void *user, int level, const char *msg)
{
	(void)level;
	(void)msg;
	struct log_query *q = user;
	if (q->calls++ == 0) {
		int n = 0;
		q->inner = gpr_gpu_count(q->ctx, &n);
	}
}

/* The log callback may query its own handle: NVML's failed open is logged
 * after the handle's init lock is dropped, not under it (a deadlock). */
static void t_log_reenter(void **state)
{
	(void)state;
	alarm(10); /* a deadlock fails instead of hanging */
	sim_setup("fault=nvml-absent");
	struct log_query q = {NULL, 0, 1};
	struct gpr_opts o = {.sz = sizeof o,
			     .log = log_query,
			     .log_user = &q,
			     .log_level = GPR_LOG_INFO};
	assert_int_equal(gpr_open(&o, &q.ctx), 0);
	int n = 0;
	assert_int_equal(gpr_gpu_count(q.ctx, &n), GPR_E_NVML);
	assert_true(q.calls >= 1);
	assert_int_equal(q.inner, GPR_E_NVML);
	gpr_close(q.ctx);
}

struct log_steps {
	gpr_ctx *ctx;
	int init, attach, lists, cuda, reentered;
	int inner; /* what the query made from the callback returned */
};

static int starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Counts the debug messages that time NVML's steps; re-enters the handle
 * from the message of nvmlInit_v2, which the opening thread times. */
static void log_steps(void *user, int level, const char *msg)
{
	struct log_steps *q = user;
	assert_int_equal(level, GPR_LOG_DEBUG);
	if (starts(msg, "NVML ")) {
		/* "NVML <call>[ GPU i]: <ms> ms[, why]" */
		const char *at = strstr(msg, ": ");
		double ms = -1;
		assert_non_null(at);
		assert_int_equal(sscanf(at, ": %lf ms", &ms), 1);
		assert_true(ms >= 0);
	}
	if (starts(msg, "NVML nvmlInit_v2: ") && !q->reentered++) {
		int n = 0;
		q->inner = gpr_gpu_count(q->ctx, &n);
	}
	q->init += starts(msg, "NVML nvmlInit_v2: ");
	q->attach += starts(msg, "NVML nvmlDeviceGetHandleByIndex_v2 GPU 1: ");
	q->lists +=
	    starts(msg, "NVML nvmlDeviceGetComputeRunningProcesses GPU 0: ");
	q->cuda += starts(msg, "CUDA look-up of ") &&
		   strstr(msg, "(RTLD_NOLOAD): ") && strstr(msg, " ms, ");
}

/* At GPR_LOG_DEBUG each NVML call is logged with its time (the load and
 * nvmlInit_v2 after the init lock is dropped: the callback may query);
 * at GPR_LOG_INFO none is. */
static void t_log_nvml_steps(void **state)
{
	(void)state;
	alarm(10); /* a deadlock fails instead of hanging */
	sim_setup("gpus=2");
	struct log_steps q = {0};
	q.inner = 1;
	struct gpr_opts o = {.sz = sizeof o,
			     .log = log_steps,
			     .log_user = &q,
			     .log_level = GPR_LOG_DEBUG};
	assert_int_equal(gpr_open(&o, &q.ctx), 0);
	struct gpr_gpu g;
	struct gpr_process *p = NULL;
	size_t n = 0;
	assert_int_equal(gpr_gpu_info(q.ctx, 1, &g), 0);
	assert_int_equal(gpr_gpu_processes(q.ctx, 0, &p, &n), 0);
	gpr_free(p);
	assert_int_equal(q.init, 1);
	assert_int_equal(q.inner, 0);
	assert_true(q.attach >= 1);
	assert_true(q.lists >= 1);
	assert_true(q.cuda >= 1);
	gpr_close(q.ctx);

	struct log_steps none = {0};
	o.log_user = &none;
	o.log_level = GPR_LOG_INFO;
	assert_int_equal(gpr_open(&o, &none.ctx), 0);
	assert_int_equal(gpr_gpu_info(none.ctx, 1, &g), 0);
	assert_int_equal(none.init + none.attach + none.cuda, 0);
	gpr_close(none.ctx);
}

/* Library paths from the options win over the environment. */
static void t_paths(void **state)
{
	(void)state;
	sim_setup("");
	struct gpr_opts o = {.sz = sizeof o,
			     .nvml_library = "/nonexistent/libnvidia-ml.so.1"};
	gpr_ctx *ctx = NULL;
	assert_int_equal(gpr_open(&o, &ctx), 0);
	int n = 0;
	assert_int_equal(gpr_gpu_count(ctx, &n), GPR_E_NO_NVML);
	assert_non_null(strstr(gpr_last_error(ctx), "nonexistent"));
	/* sticky: not looked for again, same answer */
	assert_int_equal(gpr_gpu_count(ctx, &n), GPR_E_NO_NVML);
	gpr_close(ctx);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_errors),
	    cmocka_unit_test(t_last_error_per_thread),
	    cmocka_unit_test(t_never_loaded),
	    cmocka_unit_test(t_loaded_uninitialised),
	    cmocka_unit_test(t_only_opened),
	    cmocka_unit_test(t_non_primary),
	    cmocka_unit_test(t_primary_active),
	    cmocka_unit_test(t_broken_gpu),
	    cmocka_unit_test(t_registry),
	    cmocka_unit_test(t_log),
	    cmocka_unit_test(t_log_reenter),
	    cmocka_unit_test(t_log_nvml_steps),
	    cmocka_unit_test(t_paths),
	};
	return gpr_test_main(argc, argv, "core", tests,
			     sizeof tests / sizeof tests[0]);
}
