/*
 * The driver layer (src/driver/) against the simulated driver: loading
 * without loading, never initialising CUDA, the vendor quirks (versioned
 * structs and symbols, record stride, INSUFFICIENT_SIZE) and every sim
 * fault. Each test runs in its own process (gpr_test_main).
 */
#include "support.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"
#include "gpureclaim.h"
#include "loader.h"

#define GiB (1ULL << 30)
#define MiB (1ULL << 20)
#define SIM_CONTEXT (512 * MiB) /* the sim's default `context` */
#define FOREIGN 1000000u	/* the sim's foreign-pid offset */

static char err[GPR__ERRLEN];

static int sim_hook(void *lib, const char *name)
{
	int (*fn)(void) = (int (*)(void))sim_sym(lib, name);
	return fn();
}

static int cuda_is_loaded(void)
{
	void *h = dlopen(sim_path("libcuda.so.1"), RTLD_NOW | RTLD_NOLOAD);
	void *s = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (h)
		dlclose(h);
	if (s)
		dlclose(s);
	return h || s;
}

static void nvml_open_ok(struct gpr__nvml *m)
{
	int r = gpr__nvml_open(m, NULL, err, sizeof err);
	if (r)
		fail_msg("gpr__nvml_open: %d %s", r, err);
	assert_non_null(m->lib);
	assert_true(m->initialised);
}

static void cuda_open_ok(struct gpr__cuda *c)
{
	int r = gpr__cuda_open(c, NULL, err, sizeof err);
	if (r)
		fail_msg("gpr__cuda_open: %d %s", r, err);
	assert_non_null(c->lib);
}

static const struct gpr__nvml_proc *find_proc(const struct gpr__nvml_proc *p,
					      size_t n, uint32_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (p[i].pid == pid)
			return &p[i];
	return NULL;
}

/* Processes of GPU `gpu`, failing the test on an error. */
static struct gpr__nvml_proc *procs_ok(struct gpr__nvml *m, int gpu, size_t *n)
{
	struct gpr__nvml_proc *p = NULL;
	int r = gpr__nvml_processes(m, gpu, &p, n, err, sizeof err);
	if (r)
		fail_msg("gpr__nvml_processes(%d): %d %s", gpu, r, err);
	return p;
}

/* ---------------- loader ---------------- */

struct fake_api {
	size_t (*len)(const char *);
	int (*cmp)(const char *, const char *);
};

static void test_loader_first_resolvable_wins(void **state)
{
	(void)state;
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	assert_non_null(libc);
	const struct gpr__dl_sym syms[] = {
	    GPR__DL_ROW(struct fake_api, len, "strlen_v99_absent", 1)
		GPR__DL_ROW(struct fake_api, len, "strlen", 1)
		    GPR__DL_ROW(struct fake_api, len, "strnlen", 1)
			GPR__DL_ROW(struct fake_api, cmp, "strcmp", 0)};
	struct fake_api api;
	memset(&api, 0xff, sizeof api);
	assert_int_equal(gpr__dl_resolve(libc, "libc.so.6", "libc", syms, 4,
					 &api, sizeof api, err, sizeof err),
			 0);
	assert_ptr_equal((void *)api.len, dlsym(libc, "strlen"));
	assert_ptr_equal((void *)api.cmp, dlsym(libc, "strcmp"));
	assert_int_equal(api.len("four"), 4);

	/* a required field none of whose rows resolves: named by its newest */
	const struct gpr__dl_sym bad[] = {
	    GPR__DL_ROW(struct fake_api, len, "strlen", 1)
		GPR__DL_ROW(struct fake_api, cmp, "strcmp_v3_absent", 1)
		    GPR__DL_ROW(struct fake_api, cmp, "strcmp_v2_absent", 1)};
	assert_int_equal(gpr__dl_resolve(libc, "libc.so.6", "libc", bad, 3,
					 &api, sizeof api, err, sizeof err),
			 GPR_E_BAD_LIBRARY);
	assert_string_equal(err,
			    "libc.so.6 is not libc: strcmp_v3_absent missing");
	assert_null((void *)api.cmp);
	dlclose(libc);
}

static void test_loader_choose(void **state)
{
	(void)state;
	unsetenv("GPR_TEST_LIB");
	assert_string_equal(gpr__dl_choose(NULL, "GPR_TEST_LIB", "dflt"),
			    "dflt");
	setenv("GPR_TEST_LIB", "", 1);
	assert_string_equal(gpr__dl_choose("", "GPR_TEST_LIB", "dflt"), "dflt");
	setenv("GPR_TEST_LIB", "/x/env.so", 1);
	assert_string_equal(gpr__dl_choose(NULL, "GPR_TEST_LIB", "dflt"),
			    "/x/env.so");
	assert_string_equal(gpr__dl_choose("/x/arg.so", "GPR_TEST_LIB", "d"),
			    "/x/arg.so");
	/* errf truncates and terminates */
	char small[8];
	gpr__errf(small, sizeof small, "%s", "0123456789");
	assert_string_equal(small, "0123456");
	gpr__errf(NULL, 0, "%d", 1);
}

/* ---------------- CUDA ---------------- */

static void test_cuda_not_loaded(void **state)
{
	(void)state;
	sim_setup("");
	assert_false(cuda_is_loaded());
	struct gpr__cuda c;
	assert_int_equal(gpr__cuda_open(&c, NULL, err, sizeof err),
			 GPR_E_NOT_LOADED);
	assert_null(c.lib);
	assert_string_equal(c.path, sim_path("libcuda.so.1"));
	assert_non_null(strstr(err, "not loaded"));
	/* looking did not load it */
	assert_false(cuda_is_loaded());
	int n = 7;
	assert_int_equal(gpr__cuda_device_count(&c, &n, err, sizeof err),
			 GPR_E_NOT_LOADED);
	assert_int_equal(n, 0);
	gpr__cuda_close(&c);
	/* the default soname, not loaded either */
	unsetenv("GPURECLAIM_CUDA_LIBRARY");
	assert_int_equal(gpr__cuda_open(&c, NULL, err, sizeof err),
			 GPR_E_NOT_LOADED);
	assert_string_equal(c.path, "libcuda.so.1");
	assert_false(cuda_is_loaded());
}

static void test_cuda_loaded_not_initialised(void **state)
{
	(void)state;
	sim_setup("gpus=2");
	/* a library that links libcuda but never calls cuInit */
	void *lib = dlopen(sim_path("libcuda.so.1"), RTLD_NOW | RTLD_GLOBAL);
	assert_non_null(lib);
	struct gpr__cuda c;
	cuda_open_ok(&c);
	int n = -1;
	assert_int_equal(gpr__cuda_device_count(&c, &n, err, sizeof err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(sim_hook(lib, "gprsim_init_calls"), 0);
	assert_int_equal(sim_hook(lib, "gprsim_ctx_calls"), 0);
	/* cuInit is not in our table at all */
	gpr__cuda_close(&c);
	assert_null(c.lib);
	/* still loaded: we dropped only our own reference */
	assert_true(cuda_is_loaded());
	dlclose(lib);
}

static void test_cuda_primary_state(void **state)
{
	(void)state;
	sim_setup("gpus=3");
	void *lib = sim_cuda_load();
	struct gpr__cuda c;
	cuda_open_ok(&c);
	int n = 0, on = -1;
	assert_int_equal(gpr__cuda_device_count(&c, &n, err, sizeof err), 0);
	assert_int_equal(n, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(
		    gpr__cuda_primary_active(&c, i, &on, err, sizeof err), 0);
		assert_int_equal(on, 0);
	}
	assert_int_equal(sim_cuda_open_device(lib, 1), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(
		    gpr__cuda_primary_active(&c, i, &on, err, sizeof err), 0);
		assert_int_equal(on, i == 1);
	}
	/* our queries created nothing and initialised nothing */
	assert_int_equal(sim_hook(lib, "gprsim_ctx_calls"), 1);
	assert_int_equal(sim_hook(lib, "gprsim_init_calls"), 1);
	assert_int_equal(gpr__cuda_primary_active(&c, 3, &on, err, sizeof err),
			 GPR_E_RANGE);
	assert_int_equal(gpr__cuda_primary_active(&c, -1, &on, err, sizeof err),
			 GPR_E_RANGE);
	int v = 0;
	assert_int_equal(c.api.driver_get_version(&v), CUDA_SUCCESS);
	assert_true(v > 0);
	gpr__cuda_close(&c);
}

static void test_cuda_describe(void **state)
{
	(void)state;
	sim_setup("");
	sim_cuda_load();
	struct gpr__cuda c;
	cuda_open_ok(&c);
	char buf[GPR__ERRLEN];
	gpr__cuda_describe(&c, CUDA_ERROR_INVALID_DEVICE, buf, sizeof buf);
	assert_memory_equal(buf, "CUDA_ERROR_INVALID_DEVICE (", 27);
	assert_int_equal(buf[strlen(buf) - 1], ')');
	gpr__cuda_describe(NULL, CUDA_ERROR_INVALID_DEVICE, buf, sizeof buf);
	assert_string_equal(buf, "CUresult 101");
	/* without cuGetErrorName/String: the number */
	c.api.get_error_name = NULL;
	c.api.get_error_string = NULL;
	gpr__cuda_describe(&c, 12345, buf, sizeof buf);
	assert_string_equal(buf, "CUresult 12345");
	gpr__cuda_close(&c);
}

static void test_cuda_bad_library(void **state)
{
	(void)state;
	sim_setup("");
	/* libc is loaded in every process; it is no CUDA driver */
	setenv("GPURECLAIM_CUDA_LIBRARY", "libc.so.6", 1);
	struct gpr__cuda c;
	assert_int_equal(gpr__cuda_open(&c, NULL, err, sizeof err),
			 GPR_E_BAD_LIBRARY);
	assert_null(c.lib);
	assert_string_equal(
	    err, "libc.so.6 is not a CUDA driver: cuDriverGetVersion missing");
	/* a path argument wins over the environment */
	void *libm = dlopen("libm.so.6", RTLD_NOW);
	assert_non_null(libm);
	assert_int_equal(gpr__cuda_open(&c, "libm.so.6", err, sizeof err),
			 GPR_E_BAD_LIBRARY);
	assert_non_null(strstr(err, "libm.so.6 is not a CUDA driver: "));
	dlclose(libm);
}

static void test_cuda_env_paths(void **state)
{
	(void)state;
	sim_setup("");
	struct gpr__cuda c;
	setenv("GPURECLAIM_CUDA_LIBRARY", "/nonexistent/\x01garbage.so", 1);
	assert_int_equal(gpr__cuda_open(&c, NULL, err, sizeof err),
			 GPR_E_NOT_LOADED);
	/* empty: the default soname, never dlopen("") (the main program) */
	setenv("GPURECLAIM_CUDA_LIBRARY", "", 1);
	assert_int_equal(gpr__cuda_open(&c, NULL, err, sizeof err),
			 GPR_E_NOT_LOADED);
	assert_string_equal(c.path, "libcuda.so.1");
	/* the sim, loaded by path, is found by its soname */
	void *lib = sim_cuda_load();
	assert_int_equal(gpr__cuda_open(&c, "", err, sizeof err), 0);
	assert_string_equal(c.path, "libcuda.so.1");
	int n = 0;
	assert_int_equal(gpr__cuda_device_count(&c, &n, err, sizeof err), 0);
	assert_int_equal(n, 1);
	gpr__cuda_close(&c);
	(void)lib;
}

/* ---------------- CUDA and NVML together ---------------- */

static unsigned int bus_field(const char *bus, int k)
{
	unsigned int v[4] = {0};
	assert_int_equal(sscanf(bus, "%x:%x:%x.%x", &v[0], &v[1], &v[2], &v[3]),
			 4);
	return v[k];
}

static void test_uuid_and_bus_match(void **state)
{
	(void)state;
	sim_setup("gpus=3");
	sim_cuda_load();
	struct gpr__cuda c;
	struct gpr__nvml m;
	cuda_open_ok(&c);
	nvml_open_ok(&m);
	int n = 0;
	assert_int_equal(gpr__nvml_count(&m, &n, err, sizeof err), 0);
	assert_int_equal(n, 3);
	for (int i = 0; i < 3; i++) {
		char uuid[96], bus[32], want[64];
		struct gpr__nvml_gpu g;
		assert_int_equal(
		    gpr__cuda_uuid(&c, i, uuid, sizeof uuid, err, sizeof err),
		    0);
		snprintf(want, sizeof want,
			 "GPU-5111a000-0000-4000-8000-00000000000%x", i);
		assert_string_equal(uuid, want);
		assert_int_equal(gpr__nvml_gpu_info(&m, i, &g, err, sizeof err),
				 0);
		assert_string_equal(uuid, g.uuid);
		assert_int_equal(gpr__cuda_pci_bus_id(&c, i, bus, sizeof bus,
						      err, sizeof err),
				 0);
		for (int k = 0; k < 4; k++)
			assert_int_equal(bus_field(bus, k),
					 bus_field(g.pci_bus_id, k));
		assert_int_equal(bus_field(bus, 1), i + 1);
		int idx = -1;
		assert_int_equal(
		    gpr__nvml_index_by_uuid(&m, uuid, &idx, err, sizeof err),
		    0);
		assert_int_equal(idx, i);
		assert_int_equal(
		    gpr__nvml_index_by_pci(&m, bus, &idx, err, sizeof err), 0);
		assert_int_equal(idx, i);
		assert_string_equal(g.name, "Simulated GPU");
		assert_int_equal(g.total, 80 * GiB);
		assert_int_equal(g.mig, 0);
	}
	char small[16];
	assert_int_equal(
	    gpr__cuda_uuid(&c, 0, small, sizeof small, err, sizeof err),
	    GPR_E_INVAL);
	int idx = 0;
	assert_int_equal(gpr__nvml_index_by_uuid(
			     &m, "GPU-00000000-0000-0000-0000-000000000000",
			     &idx, err, sizeof err),
			 GPR_E_NOT_FOUND);
	assert_int_equal(idx, -1);
	assert_int_equal(
	    gpr__nvml_index_by_pci(&m, "0000:7f:00.0", &idx, err, sizeof err),
	    GPR_E_NOT_FOUND);
	assert_int_equal(
	    gpr__nvml_index_by_pci(&m, "not a bus", &idx, err, sizeof err),
	    GPR_E_INVAL);
	gpr__nvml_close(&m);
	gpr__cuda_close(&c);
}

static void test_broken_gpu(void **state)
{
	(void)state;
	sim_setup("gpus=3;fault=broken:1");
	void *lib = sim_cuda_load();
	struct gpr__cuda c;
	struct gpr__nvml m;
	cuda_open_ok(&c);
	nvml_open_ok(&m);
	int on = -1;
	assert_int_equal(gpr__cuda_primary_active(&c, 1, &on, err, sizeof err),
			 GPR_E_DRIVER);
	assert_non_null(strstr(err, "cuDevicePrimaryCtxGetState"));
	assert_non_null(strstr(err, "CUDA_ERROR_INVALID_DEVICE"));
	assert_int_equal(on, 0);
	assert_int_not_equal(sim_cuda_open_device(lib, 1), 0);
	assert_int_equal(sim_cuda_open_device(lib, 2), 0);
	assert_int_equal(gpr__cuda_primary_active(&c, 2, &on, err, sizeof err),
			 0);
	assert_int_equal(on, 1);

	struct gpr__nvml_gpu g;
	assert_int_equal(gpr__nvml_gpu_info(&m, 1, &g, err, sizeof err),
			 GPR_E_NVML);
	assert_non_null(strstr(err, "NVML_ERROR_GPU_IS_LOST"));
	assert_int_equal(gpr__nvml_memory(&m, 1, &g, err, sizeof err),
			 GPR_E_NVML);
	struct gpr__nvml_proc *p = (void *)1;
	size_t n = 9;
	assert_int_equal(gpr__nvml_processes(&m, 1, &p, &n, err, sizeof err),
			 GPR_E_NVML);
	assert_null(p);
	assert_int_equal(n, 0);
	assert_non_null(strstr(err, "GPU 1"));
	/* the others still answer; lookups skip the lost one */
	assert_int_equal(gpr__nvml_gpu_info(&m, 2, &g, err, sizeof err), 0);
	int idx = -1;
	assert_int_equal(
	    gpr__nvml_index_by_uuid(&m, g.uuid, &idx, err, sizeof err), 0);
	assert_int_equal(idx, 2);
	p = procs_ok(&m, 2, &n);
	assert_non_null(find_proc(p, n, (uint32_t)getpid()));
	free(p);
	gpr__nvml_close(&m);
	gpr__cuda_close(&c);
}

/* ---------------- NVML ---------------- */

static void test_nvml_absent(void **state)
{
	(void)state;
	sim_setup("fault=nvml-absent");
	struct gpr__nvml m;
	assert_int_equal(gpr__nvml_open(&m, NULL, err, sizeof err), GPR_E_NVML);
	assert_null(m.lib);
	assert_false(m.initialised);
	assert_non_null(strstr(err, "nvmlInit_v2"));
	assert_non_null(strstr(err, "NVML_ERROR_DRIVER_NOT_LOADED"));
	int n = 5;
	assert_int_equal(gpr__nvml_count(&m, &n, err, sizeof err),
			 GPR_E_NO_NVML);
	gpr__nvml_close(&m);
}

static void test_nvml_bad_library(void **state)
{
	(void)state;
	sim_setup("");
	struct gpr__nvml m;
	assert_int_equal(gpr__nvml_open(&m, "libm.so.6", err, sizeof err),
			 GPR_E_BAD_LIBRARY);
	assert_string_equal(err, "libm.so.6 is not NVML: nvmlInit_v2 missing");
	assert_null(m.lib);
	/* the sim's libcuda is a library, but not NVML */
	assert_int_equal(
	    gpr__nvml_open(&m, sim_path("libcuda.so.1"), err, sizeof err),
	    GPR_E_BAD_LIBRARY);
	assert_int_equal(gpr__nvml_open(&m, "/nonexistent/libnvidia-ml.so.1",
					err, sizeof err),
			 GPR_E_NO_NVML);
	assert_non_null(strstr(err, "/nonexistent/libnvidia-ml.so.1"));
	setenv("GPURECLAIM_NVML_LIBRARY", "\x01\x02garbage", 1);
	assert_int_equal(gpr__nvml_open(&m, NULL, err, sizeof err),
			 GPR_E_NO_NVML);
	/* empty: the default soname (absent here, or a real NVML) */
	setenv("GPURECLAIM_NVML_LIBRARY", "", 1);
	int r = gpr__nvml_open(&m, NULL, err, sizeof err);
	assert_string_equal(m.path, "libnvidia-ml.so.1");
	assert_true(r == GPR_E_NO_NVML || r == 0 || r == GPR_E_NVML);
	gpr__nvml_close(&m);
}

struct steps {
	int n;
	char call[32][96];
	int index[32];
	nvmlReturn_t r[32];
};

static void note_step(void *user, const char *call, int index, double ms,
		      nvmlReturn_t r)
{
	struct steps *s = user;
	assert_true(ms >= 0);
	if (s->n == 32)
		return;
	snprintf(s->call[s->n], sizeof s->call[s->n], "%s", call);
	s->index[s->n] = index;
	s->r[s->n++] = r;
}

/* The step of `call` on GPU `index`, or -1. */
static int step_of(const struct steps *s, const char *call, int index)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->call[i], call) == 0 && s->index[i] == index)
			return i;
	return -1;
}

/* A listener hears every NVML step, in order, with its answer: the load,
 * the init, then each call on a GPU; a failed load as
 * NVML_ERROR_LIBRARY_NOT_FOUND. */
static void test_nvml_steps_timed(void **state)
{
	(void)state;
	sim_setup("gpus=2;fault=mig");
	struct steps s = {0};
	struct gpr__nvml m;
	int r = gpr__nvml_open_timed(&m, NULL, note_step, &s, err, sizeof err);
	assert_int_equal(r, 0);
	char load[600];
	snprintf(load, sizeof load, "dlopen %s", m.path);
	assert_int_equal(step_of(&s, load, -1), 0);
	assert_int_equal(step_of(&s, "nvmlInit_v2", -1), 1);
	assert_int_equal(s.r[0], NVML_SUCCESS);
	struct gpr__nvml_gpu g;
	assert_int_equal(gpr__nvml_gpu_info(&m, 1, &g, err, sizeof err), 0);
	static const char *calls[] = {
	    "nvmlDeviceGetHandleByIndex_v2",
	    "nvmlDeviceGetName",
	    "nvmlDeviceGetUUID",
	    "nvmlDeviceGetPciInfo_v3",
	    "nvmlDeviceGetMemoryInfo_v2",
	    "nvmlDeviceGetMigMode",
	};
	int prev = 1;
	for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
		int at = step_of(&s, calls[i], 1);
		assert_true(at > prev);
		assert_int_equal(s.r[at], NVML_SUCCESS);
		prev = at;
	}
	struct gpr__nvml_proc *p = NULL;
	size_t n = 0;
	assert_int_equal(gpr__nvml_processes(&m, 0, &p, &n, err, sizeof err),
			 0);
	free(p);
	assert_true(step_of(&s, "nvmlDeviceGetComputeRunningProcesses", 0) >
		    prev);
	/* an error is heard as NVML's answer */
	assert_int_equal(gpr__nvml_memory(&m, 7, &g, err, sizeof err),
			 GPR_E_RANGE);
	int bad = step_of(&s, "nvmlDeviceGetHandleByIndex_v2", 7);
	assert_true(bad > 0);
	assert_int_equal(s.r[bad], NVML_ERROR_INVALID_ARGUMENT);
	gpr__nvml_close(&m);
	assert_null(m.step); /* closed: nobody is told any more */

	struct steps f = {0};
	assert_int_equal(gpr__nvml_open_timed(&m, "/nonexistent/libnvml.so",
					      note_step, &f, err, sizeof err),
			 GPR_E_NO_NVML);
	assert_int_equal(f.n, 1);
	assert_string_equal(f.call[0], "dlopen /nonexistent/libnvml.so");
	assert_int_equal(f.r[0], NVML_ERROR_LIBRARY_NOT_FOUND);
}

static void test_nvml_describe(void **state)
{
	(void)state;
	sim_setup("");
	struct gpr__nvml m;
	nvml_open_ok(&m);
	char buf[GPR__ERRLEN];
	gpr__nvml_describe(&m, NVML_ERROR_GPU_IS_LOST, buf, sizeof buf);
	assert_memory_equal(buf, "NVML_ERROR_GPU_IS_LOST (", 24);
	gpr__nvml_describe(NULL, NVML_ERROR_INSUFFICIENT_SIZE, buf, sizeof buf);
	assert_string_equal(buf, "NVML_ERROR_INSUFFICIENT_SIZE");
	gpr__nvml_describe(NULL, 4242, buf, sizeof buf);
	assert_string_equal(buf, "nvmlReturn_t 4242");
	int idx;
	assert_int_equal(
	    gpr__nvml_index_by_uuid(&m, "x", &idx, err, sizeof err),
	    GPR_E_NOT_FOUND);
	struct gpr__nvml_gpu g;
	assert_int_equal(gpr__nvml_gpu_info(&m, 1, &g, err, sizeof err),
			 GPR_E_RANGE);
	assert_int_equal(gpr__nvml_gpu_info(&m, -1, &g, err, sizeof err),
			 GPR_E_RANGE);
	gpr__nvml_close(&m);
	assert_null(m.lib);
	/* NVML counts init/shutdown: open twice, close twice */
	struct gpr__nvml a, b;
	nvml_open_ok(&a);
	nvml_open_ok(&b);
	gpr__nvml_close(&a);
	int n = 0;
	assert_int_equal(gpr__nvml_count(&b, &n, err, sizeof err), 0);
	assert_int_equal(n, 1);
	gpr__nvml_close(&b);
}

static void test_memory_info_v2(void **state)
{
	(void)state;
	sim_setup("memory=40GiB");
	void *lib = sim_cuda_load();
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	struct gpr__nvml m;
	nvml_open_ok(&m);
	assert_non_null((void *)m.api.device_get_memory_info_v2);
	struct gpr__nvml_gpu g;
	assert_int_equal(gpr__nvml_memory(&m, 0, &g, err, sizeof err), 0);
	assert_int_equal(g.memory_info_v2, 1);
	assert_int_equal(g.total, 40 * GiB);
	assert_true(g.used >= SIM_CONTEXT);
	assert_true(g.used + g.free + g.reserved <= g.total);

	/* the sim checks the version word: a bare 2 or a v1 size is refused */
	nvmlDevice_t dev;
	assert_int_equal(m.api.device_get_handle_by_index(0, &dev), 0);
	gpr_nvmlMemory_v2_t v2;
	memset(&v2, 0, sizeof v2);
	v2.version = 2;
	assert_int_not_equal(m.api.device_get_memory_info_v2(dev, &v2), 0);
	v2.version = (unsigned)sizeof(gpr_nvmlMemory_v1_t) | 2u << 24;
	assert_int_not_equal(m.api.device_get_memory_info_v2(dev, &v2), 0);
	v2.version = GPR_NVML_STRUCT_VERSION(gpr_nvmlMemory_v2_t, 2);
	assert_int_equal(v2.version, 0x02000028u);
	assert_int_equal(m.api.device_get_memory_info_v2(dev, &v2), 0);
	assert_int_equal(v2.total, 40 * GiB);
	gpr__nvml_close(&m);
}

static void test_memory_info_v1_fallback(void **state)
{
	(void)state;
	sim_setup("fault=memory-v1;memory=24GiB");
	void *lib = sim_cuda_load();
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	struct gpr__nvml m;
	nvml_open_ok(&m);
	struct gpr__nvml_gpu g;
	assert_int_equal(gpr__nvml_gpu_info(&m, 0, &g, err, sizeof err), 0);
	assert_int_equal(g.memory_info_v2, 0);
	assert_int_equal(g.total, 24 * GiB);
	assert_int_equal(g.reserved, 0);
	assert_true(g.used >= SIM_CONTEXT);
	assert_int_equal(g.used + g.free, g.total);
	gpr__nvml_close(&m);
}

static void test_processes_own_pid(void **state)
{
	(void)state;
	sim_setup("gpus=2");
	void *lib = sim_cuda_load();
	struct gpr__nvml m;
	nvml_open_ok(&m);
	size_t n = 9;
	struct gpr__nvml_proc *p = procs_ok(&m, 0, &n);
	assert_int_equal(n, 0);
	assert_null(p);
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	unsigned long long ptr = 0;
	assert_int_equal(sim_cuda_alloc(lib, 100 * MiB + 1, &ptr), 0);
	p = procs_ok(&m, 0, &n);
	assert_int_equal(n, 1);
	assert_int_equal(p[0].pid, getpid());
	assert_int_equal(p[0].bytes, SIM_CONTEXT + 102 * MiB);
	assert_int_equal(p[0].compute, 1);
	assert_int_equal(p[0].graphics, 0);
	free(p);
	/* GPU 1 was never opened */
	p = procs_ok(&m, 1, &n);
	assert_int_equal(n, 0);
	assert_int_equal(sim_cuda_free(lib, ptr), 0);
	p = procs_ok(&m, 0, &n);
	assert_int_equal(n, 1);
	assert_int_equal(p[0].bytes, SIM_CONTEXT);
	free(p);
	assert_int_equal(gpr__nvml_processes(&m, 2, &p, &n, err, sizeof err),
			 GPR_E_RANGE);
	gpr__nvml_close(&m);
}

/* Our pid with a context plus extras 1 (3 GiB) and 2 (1 GiB) on GPU 0. */
static void check_three(struct gpr__nvml *m)
{
	size_t n = 0;
	struct gpr__nvml_proc *p = procs_ok(m, 0, &n);
	assert_int_equal(n, 3);
	const struct gpr__nvml_proc *me = find_proc(p, n, (uint32_t)getpid());
	const struct gpr__nvml_proc *one = find_proc(p, n, 1);
	const struct gpr__nvml_proc *two = find_proc(p, n, 2);
	assert_non_null(me);
	assert_non_null(one);
	assert_non_null(two);
	assert_int_equal(me->bytes, SIM_CONTEXT);
	assert_int_equal(one->bytes, 3 * GiB);
	assert_int_equal(two->bytes, 1 * GiB);
	assert_true(one->compute && !one->graphics);
	free(p);
}

static void test_stride24(void **state)
{
	(void)state;
	sim_setup("extra=0:1:3GiB,0:2:1GiB");
	void *lib = sim_cuda_load();
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	struct gpr__nvml m;
	nvml_open_ok(&m);
	assert_int_equal(m.stride, 0);
	check_three(&m);
	assert_int_equal(m.stride, 24);
	check_three(&m);
	gpr__nvml_close(&m);
}

static void test_stride32(void **state)
{
	(void)state;
	sim_setup("fault=stride32;extra=0:1:3GiB,0:2:1GiB");
	void *lib = sim_cuda_load();
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	struct gpr__nvml m;
	nvml_open_ok(&m);
	check_three(&m);
	assert_int_equal(m.stride, 32);
	check_three(&m);
	gpr__nvml_close(&m);
}

static void test_stride32_single_record(void **state)
{
	(void)state;
	/* one record reads the same with either stride: nothing is cached */
	sim_setup("fault=stride32");
	void *lib = sim_cuda_load();
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	struct gpr__nvml m;
	nvml_open_ok(&m);
	size_t n = 0;
	struct gpr__nvml_proc *p = procs_ok(&m, 0, &n);
	assert_int_equal(n, 1);
	assert_int_equal(p[0].pid, getpid());
	assert_int_equal(p[0].bytes, SIM_CONTEXT);
	assert_int_equal(m.stride, 0);
	free(p);
	gpr__nvml_close(&m);
}

static void test_insufficient_once(void **state)
{
	(void)state;
	sim_setup("fault=insufficient-once;extra=0:1:3GiB,0:2:1GiB");
	void *lib = sim_cuda_load();
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	struct gpr__nvml m;
	nvml_open_ok(&m);
	check_three(&m);
	check_three(&m);
	gpr__nvml_close(&m);
}

/* More processes than the first guess: the list must grow. */
static void test_many_processes(void **state)
{
	(void)state;
	char cfg[2048] = "fault=stride32,insufficient-once;extra=";
	for (int i = 0; i < 40; i++) {
		char item[32];
		snprintf(item, sizeof item, "%s0:%d:%dMiB", i ? "," : "",
			 100 + i, 2 * (i + 1));
		strcat(cfg, item);
	}
	sim_setup(cfg);
	struct gpr__nvml m;
	nvml_open_ok(&m);
	size_t n = 0;
	struct gpr__nvml_proc *p = procs_ok(&m, 0, &n);
	assert_int_equal(n, 40);
	for (int i = 0; i < 40; i++) {
		const struct gpr__nvml_proc *q =
		    find_proc(p, n, (uint32_t)(100 + i));
		assert_non_null(q);
		assert_int_equal(q->bytes, 2 * (uint64_t)(i + 1) * MiB);
	}
	assert_int_equal(m.stride, 32);
	free(p);
	gpr__nvml_close(&m);
}

static void test_mig(void **state)
{
	(void)state;
	sim_setup("fault=mig;extra=0:1:3GiB");
	void *lib = sim_cuda_load();
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	struct gpr__nvml m;
	nvml_open_ok(&m);
	struct gpr__nvml_gpu g;
	assert_int_equal(gpr__nvml_gpu_info(&m, 0, &g, err, sizeof err), 0);
	assert_int_equal(g.mig, 1);
	size_t n = 0;
	struct gpr__nvml_proc *p = procs_ok(&m, 0, &n);
	assert_int_equal(n, 2);
	const struct gpr__nvml_proc *me = find_proc(p, n, (uint32_t)getpid());
	assert_non_null(me);
	assert_true(me->bytes == GPR_NVML_VALUE_NOT_AVAILABLE);
	assert_true(find_proc(p, n, 1)->bytes == GPR_NVML_VALUE_NOT_AVAILABLE);
	free(p);
	gpr__nvml_close(&m);
}

static void test_foreign_pid(void **state)
{
	(void)state;
	sim_setup("fault=foreign-pid");
	void *lib = sim_cuda_load();
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	struct gpr__nvml m;
	nvml_open_ok(&m);
	size_t n = 0;
	struct gpr__nvml_proc *p = procs_ok(&m, 0, &n);
	assert_int_equal(n, 1);
	assert_null(find_proc(p, n, (uint32_t)getpid()));
	assert_int_equal(p[0].pid, (uint32_t)getpid() + FOREIGN);
	assert_int_equal(p[0].bytes, SIM_CONTEXT);
	free(p);
	gpr__nvml_close(&m);
}

static void test_procs_v2(void **state)
{
	(void)state;
	sim_setup("fault=procs-v2;extra=0:1:3GiB,0:2:1GiB");
	void *lib = sim_cuda_load();
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	struct gpr__nvml m;
	nvml_open_ok(&m);
	void *nvml = dlopen(sim_path("libnvidia-ml.so.1"), RTLD_NOW);
	assert_non_null(nvml);
	void *v2 = dlsym(nvml, "nvmlDeviceGetComputeRunningProcesses_v2");
	assert_ptr_equal((void *)m.api.device_get_compute_procs_v2, v2);
	/*
	 * The fault either drops the _v3 export (then _v2 fills the field)
	 * or keeps it answering NVML_ERROR_FUNCTION_NOT_FOUND (then the
	 * call is retried with _v2): both must give the full list.
	 */
	if (!dlsym(nvml, "nvmlDeviceGetComputeRunningProcesses_v3"))
		assert_ptr_equal((void *)m.api.device_get_compute_procs, v2);
	check_three(&m);
	dlclose(nvml);
	gpr__nvml_close(&m);
}

static void test_procs_v3_preferred(void **state)
{
	(void)state;
	sim_setup("");
	struct gpr__nvml m;
	nvml_open_ok(&m);
	void *nvml = dlopen(sim_path("libnvidia-ml.so.1"), RTLD_NOW);
	assert_non_null(nvml);
	assert_ptr_equal(
	    (void *)m.api.device_get_compute_procs,
	    dlsym(nvml, "nvmlDeviceGetComputeRunningProcesses_v3"));
	assert_ptr_equal(
	    (void *)m.api.device_get_graphics_procs_v2,
	    dlsym(nvml, "nvmlDeviceGetGraphicsRunningProcesses_v2"));
	dlclose(nvml);
	gpr__nvml_close(&m);
}

static nvmlReturn_t v3_not_found(nvmlDevice_t d, unsigned int *n, void *b)
{
	(void)d;
	(void)b;
	*n = 0;
	return NVML_ERROR_FUNCTION_NOT_FOUND;
}

static void test_procs_v3_function_not_found(void **state)
{
	(void)state;
	sim_setup("extra=0:1:3GiB,0:2:1GiB");
	void *lib = sim_cuda_load();
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	struct gpr__nvml m;
	nvml_open_ok(&m);
	/* a driver that exports _v3 but answers FUNCTION_NOT_FOUND */
	m.api.device_get_compute_procs = v3_not_found;
	m.api.device_get_graphics_procs = v3_not_found;
	check_three(&m);
	/* and without a _v2 to fall back to, the error is reported */
	m.api.device_get_compute_procs_v2 = NULL;
	struct gpr__nvml_proc *p;
	size_t n;
	assert_int_equal(gpr__nvml_processes(&m, 0, &p, &n, err, sizeof err),
			 GPR_E_NVML);
	assert_non_null(strstr(err, "NVML_ERROR_FUNCTION_NOT_FOUND"));
	gpr__nvml_close(&m);
}

static int always_insufficient_calls;
static nvmlReturn_t always_insufficient(nvmlDevice_t d, unsigned int *n,
					void *b)
{
	(void)d;
	(void)b;
	always_insufficient_calls++;
	*n += 3; /* a list that grows faster than we can follow */
	return NVML_ERROR_INSUFFICIENT_SIZE;
}

static void test_procs_give_up(void **state)
{
	(void)state;
	sim_setup("");
	struct gpr__nvml m;
	nvml_open_ok(&m);
	m.api.device_get_compute_procs = always_insufficient;
	struct gpr__nvml_proc *p;
	size_t n;
	assert_int_equal(gpr__nvml_processes(&m, 0, &p, &n, err, sizeof err),
			 GPR_E_NVML);
	assert_int_equal(always_insufficient_calls, 8);
	assert_non_null(strstr(err, "NVML_ERROR_INSUFFICIENT_SIZE"));
	assert_non_null(strstr(err, "8 rounds"));
	gpr__nvml_close(&m);
}

static void test_graphics_merged(void **state)
{
	(void)state;
	sim_setup("extra=0:77:1GiB,0:77g:2GiB,0:78g:5GiB");
	void *lib = sim_cuda_load();
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	struct gpr__nvml m;
	nvml_open_ok(&m);
	size_t n = 0;
	struct gpr__nvml_proc *p = procs_ok(&m, 0, &n);
	assert_int_equal(n, 3);
	const struct gpr__nvml_proc *a = find_proc(p, n, 77);
	const struct gpr__nvml_proc *b = find_proc(p, n, 78);
	const struct gpr__nvml_proc *me = find_proc(p, n, (uint32_t)getpid());
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(me);
	assert_true(a->compute && a->graphics);
	assert_int_equal(a->bytes, 2 * GiB); /* the same memory, seen twice */
	assert_true(!b->compute && b->graphics);
	assert_int_equal(b->bytes, 5 * GiB);
	assert_true(me->compute && !me->graphics);
	free(p);
	gpr__nvml_close(&m);
}

struct worker {
	struct gpr__nvml *m;
	int bad;
};

static void *worker(void *arg)
{
	struct worker *w = arg;
	for (int i = 0; i < 200; i++) {
		char e[GPR__ERRLEN];
		struct gpr__nvml_proc *p = NULL;
		size_t n = 0;
		if (gpr__nvml_processes(w->m, 0, &p, &n, e, sizeof e) ||
		    n != 3 || !find_proc(p, n, 1) ||
		    find_proc(p, n, 1)->bytes != 3 * GiB)
			w->bad++;
		struct gpr__nvml_gpu g;
		if (gpr__nvml_gpu_info(w->m, 0, &g, e, sizeof e))
			w->bad++;
		free(p);
	}
	return NULL;
}

static void test_threads(void **state)
{
	(void)state;
	sim_setup("fault=stride32;extra=0:1:3GiB,0:2:1GiB");
	void *lib = sim_cuda_load();
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	struct gpr__nvml m;
	nvml_open_ok(&m);
	pthread_t t[4];
	struct worker w[4];
	for (int i = 0; i < 4; i++) {
		w[i].m = &m;
		w[i].bad = 0;
		assert_int_equal(pthread_create(&t[i], NULL, worker, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].bad, 0);
	}
	assert_int_equal(m.stride, 32);
	gpr__nvml_close(&m);
}

/* ---------------- which processes did work ---------------- */

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static struct gpr__nvml_work *work_ok(struct gpr__nvml *m, int gpu,
				      uint64_t since, size_t *n)
{
	struct gpr__nvml_work *w = NULL;
	int r = gpr__nvml_work(m, gpu, since, &w, n, err, sizeof err);
	if (r)
		fail_msg("gpr__nvml_work(%d): %d %s", gpu, r, err);
	return w;
}

static void test_work_busy_then_idle(void **state)
{
	(void)state;
	sim_setup("gpus=2;extra=0:1:3GiB");
	void *lib = sim_cuda_load();
	int (*busy)(int, unsigned) =
	    (int (*)(int, unsigned))sim_sym(lib, "gprsim_busy");
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	struct gpr__nvml m;
	nvml_open_ok(&m);
	size_t n = 9;
	/* no work yet: the driver's "no sample" is an empty list */
	assert_null(work_ok(&m, 0, 0, &n));
	assert_int_equal(n, 0);
	uint64_t t0 = now_us();
	assert_int_equal(busy(0, 80), 0);
	struct gpr__nvml_work *w = work_ok(&m, 0, 0, &n);
	assert_int_equal(n, 1);
	assert_int_equal(w[0].pid, getpid());
	assert_int_equal(w[0].sm, 80);
	assert_int_equal(w[0].mem, 40);
	assert_true(w[0].time_us >= t0 && w[0].time_us <= now_us());
	free(w);
	assert_int_equal(busy(0, 0), 0);
	uint64_t t1 = now_us();
	w = work_ok(&m, 0, 0, &n);
	assert_int_equal(n, 1);
	/* stamped when the work ended, with the last busy period's figure */
	assert_int_equal(w[0].sm, 80);
	assert_true(w[0].time_us >= t0 && w[0].time_us <= t1);
	uint64_t ended = w[0].time_us;
	free(w);
	/* nothing newer than that: the process did no work since */
	assert_null(work_ok(&m, 0, ended, &n));
	assert_int_equal(n, 0);
	assert_null(work_ok(&m, 1, 0, &n));
	assert_int_equal(n, 0);
	/* no context on GPU 1: nothing to be busy with */
	assert_int_equal(busy(1, 50), -ENOENT);
	assert_int_equal(busy(0, 101), -EINVAL);
	assert_int_equal(gpr__nvml_work(&m, 2, 0, &w, &n, err, sizeof err),
			 GPR_E_RANGE);
	gpr__nvml_close(&m);
}

static void test_work_mig_not_supported(void **state)
{
	(void)state;
	sim_setup("fault=mig");
	void *lib = sim_cuda_load();
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	struct gpr__nvml m;
	nvml_open_ok(&m);
	struct gpr__nvml_work *w = NULL;
	size_t n = 0;
	assert_int_equal(gpr__nvml_work(&m, 0, 0, &w, &n, err, sizeof err),
			 GPR_E_NO_PER_PROCESS);
	assert_non_null(strstr(err, "not supported"));
	assert_null(w);
	gpr__nvml_close(&m);
}

static void test_work_foreign_pid(void **state)
{
	(void)state;
	sim_setup("fault=foreign-pid");
	void *lib = sim_cuda_load();
	int (*busy)(int, unsigned) =
	    (int (*)(int, unsigned))sim_sym(lib, "gprsim_busy");
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	assert_int_equal(busy(0, 30), 0);
	struct gpr__nvml m;
	nvml_open_ok(&m);
	size_t n = 0;
	struct gpr__nvml_work *w = work_ok(&m, 0, 0, &n);
	assert_int_equal(n, 1);
	assert_int_equal(w[0].pid, (uint32_t)getpid() + FOREIGN);
	free(w);
	gpr__nvml_close(&m);
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_loader_first_resolvable_wins),
	    cmocka_unit_test(test_loader_choose),
	    cmocka_unit_test(test_nvml_steps_timed),
	    cmocka_unit_test(test_cuda_not_loaded),
	    cmocka_unit_test(test_cuda_loaded_not_initialised),
	    cmocka_unit_test(test_cuda_primary_state),
	    cmocka_unit_test(test_cuda_describe),
	    cmocka_unit_test(test_cuda_bad_library),
	    cmocka_unit_test(test_cuda_env_paths),
	    cmocka_unit_test(test_uuid_and_bus_match),
	    cmocka_unit_test(test_broken_gpu),
	    cmocka_unit_test(test_nvml_absent),
	    cmocka_unit_test(test_nvml_bad_library),
	    cmocka_unit_test(test_nvml_describe),
	    cmocka_unit_test(test_memory_info_v2),
	    cmocka_unit_test(test_memory_info_v1_fallback),
	    cmocka_unit_test(test_processes_own_pid),
	    cmocka_unit_test(test_stride24),
	    cmocka_unit_test(test_stride32),
	    cmocka_unit_test(test_stride32_single_record),
	    cmocka_unit_test(test_insufficient_once),
	    cmocka_unit_test(test_many_processes),
	    cmocka_unit_test(test_mig),
	    cmocka_unit_test(test_foreign_pid),
	    cmocka_unit_test(test_procs_v2),
	    cmocka_unit_test(test_procs_v3_preferred),
	    cmocka_unit_test(test_procs_v3_function_not_found),
	    cmocka_unit_test(test_procs_give_up),
	    cmocka_unit_test(test_graphics_merged),
	    cmocka_unit_test(test_work_busy_then_idle),
	    cmocka_unit_test(test_work_mig_not_supported),
	    cmocka_unit_test(test_work_foreign_pid),
	    cmocka_unit_test(test_threads),
	};
	return gpr_test_main(argc, argv, "driver", tests,
			     sizeof tests / sizeof tests[0]);
}
