/*
 * The simulated driver itself (docs/sim.md): configuration errors, context
 * and allocation accounting as NVML reports it, state shared between
 * processes, and every fault. Each test runs in its own process with its
 * own state (support.c), since the sim reads GPURECLAIM_SIM once.
 */
#include "support.h"

#include "cuda_abi.h"
#include "nvml_abi.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

typedef int (*fn_v)(void);
typedef int (*fn_procs)(nvmlDevice_t, unsigned int *, void *);

struct nvml {
	void *lib;
	fn_v init;
	int (*handle)(unsigned int, nvmlDevice_t *);
	fn_procs compute_v3, compute_v2, graphics_v3, graphics_v2;
	int (*mem_v1)(nvmlDevice_t, gpr_nvmlMemory_v1_t *);
	int (*mem_v2)(nvmlDevice_t, gpr_nvmlMemory_v2_t *);
	int (*mig)(nvmlDevice_t, unsigned int *, unsigned int *);
};

static struct nvml nvml_load(void)
{
	struct nvml n;
	n.lib = dlopen(sim_path("libnvidia-ml.so.1"), RTLD_NOW | RTLD_LOCAL);
	if (!n.lib)
		fail_msg("cannot load the sim's NVML: %s", dlerror());
	n.init = (fn_v)sim_sym(n.lib, "nvmlInit_v2");
	n.handle = (int (*)(unsigned int, nvmlDevice_t *))sim_sym(
	    n.lib, "nvmlDeviceGetHandleByIndex_v2");
	n.compute_v3 =
	    (fn_procs)sim_sym(n.lib, "nvmlDeviceGetComputeRunningProcesses_v3");
	n.compute_v2 =
	    (fn_procs)sim_sym(n.lib, "nvmlDeviceGetComputeRunningProcesses_v2");
	n.graphics_v3 = (fn_procs)sim_sym(
	    n.lib, "nvmlDeviceGetGraphicsRunningProcesses_v3");
	n.graphics_v2 = (fn_procs)sim_sym(
	    n.lib, "nvmlDeviceGetGraphicsRunningProcesses_v2");
	n.mem_v1 = (int (*)(nvmlDevice_t, gpr_nvmlMemory_v1_t *))sim_sym(
	    n.lib, "nvmlDeviceGetMemoryInfo");
	n.mem_v2 = (int (*)(nvmlDevice_t, gpr_nvmlMemory_v2_t *))sim_sym(
	    n.lib, "nvmlDeviceGetMemoryInfo_v2");
	n.mig = (int (*)(nvmlDevice_t, unsigned int *, unsigned int *))sim_sym(
	    n.lib, "nvmlDeviceGetMigMode");
	return n;
}

static nvmlDevice_t nvml_dev(struct nvml *n, unsigned int i)
{
	nvmlDevice_t d = NULL;
	assert_int_equal(n->handle(i, &d), NVML_SUCCESS);
	return d;
}

/* One process list call with room for `cap` 24-byte records. */
static int list(fn_procs f, nvmlDevice_t d, gpr_nvmlProcessInfo_v2_t *buf,
		unsigned int cap, unsigned int *count)
{
	*count = cap;
	return f(d, count, buf);
}

/* Bytes NVML reports for `pid` on `d` (v3 compute list), 0 if absent. */
static unsigned long long nvml_bytes_of(struct nvml *n, nvmlDevice_t d,
					pid_t pid)
{
	gpr_nvmlProcessInfo_v2_t buf[16];
	unsigned int count;
	assert_int_equal(list(n->compute_v3, d, buf, 16, &count), NVML_SUCCESS);
	for (unsigned int i = 0; i < count; i++) {
		if (buf[i].pid == (unsigned int)pid)
			return buf[i].usedGpuMemory;
	}
	return 0;
}

/* The file of this test's state (support.c names it unit-<pid>). */
static const char *state_path(void)
{
	static char path[256];
	snprintf(path, sizeof path, "/dev/shm/gpureclaim-sim-%u-unit-%ld",
		 (unsigned)getuid(), (long)getpid());
	return path;
}

/* ---------------- configuration ---------------- */

static void bad_config_fails_every_call(const char *config)
{
	sim_setup(config);
	void *lib = dlopen(sim_path("libcuda.so.1"), RTLD_NOW);
	assert_non_null(lib);
	int (*init)(unsigned) = (int (*)(unsigned))sim_sym(lib, "cuInit");
	int (*count)(int *) = (int (*)(int *))sim_sym(lib, "cuDeviceGetCount");
	assert_int_equal(init(0), CUDA_ERROR_NOT_INITIALIZED);
	int n = -1;
	assert_int_equal(count(&n), CUDA_ERROR_NOT_INITIALIZED);
	struct nvml nv = nvml_load();
	assert_int_equal(nv.init(), NVML_ERROR_UNINITIALIZED);
}

static void test_config_unknown_key(void **st)
{
	(void)st;
	bad_config_fails_every_call("gpus=2;colour=blue");
}

static void test_config_bad_size(void **st)
{
	(void)st;
	bad_config_fails_every_call("memory=80GX");
}

static void test_config_bad_gpus(void **st)
{
	(void)st;
	bad_config_fails_every_call("gpus=17");
}

static void test_config_bad_fault(void **st)
{
	(void)st;
	bad_config_fails_every_call("fault=stride33");
}

static void test_config_broken_out_of_range(void **st)
{
	(void)st;
	bad_config_fails_every_call("gpus=2;fault=broken:2");
}

static void test_config_bad_extra(void **st)
{
	(void)st;
	bad_config_fails_every_call("extra=0:12");
}

/*
 * As bad_config_fails_every_call, in a child of its own (the sim reads its
 * configuration once per process), and the one line the sim writes names
 * the item at fault: `says` is in it.
 */
static void bad_config_says(const char *config, const char *says)
{
	char path[] = "/tmp/gpr-sim-stderr-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fd, 2);
		sim_setup(config);
		void *lib = dlopen(sim_path("libcuda.so.1"), RTLD_NOW);
		if (!lib)
			_exit(3);
		int (*init)(unsigned) = (int (*)(unsigned))dlsym(lib, "cuInit");
		struct nvml nv = nvml_load();
		int ok = init && init(0) == CUDA_ERROR_NOT_INITIALIZED &&
			 nv.init() == NVML_ERROR_UNINITIALIZED;
		fflush(stderr);
		_exit(ok ? 0 : 1);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	char buf[1024] = "";
	ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	if (!strstr(buf, says))
		fprintf(stderr, "config '%s' said: %s(expected '%s')\n", config,
			buf, says);
	assert_non_null(strstr(buf, says));
}

/* Extra processes that no GPU could hold, or that make no sense. */
static void test_config_extra_nonsense(void **st)
{
	(void)st;
	/* two halves of 2^64 on one GPU: the sum must not wrap to 0 */
	bad_config_says("memory=16777215T;extra=0:1:8388608T,0:2:8388608T",
			"extra items on GPU 0 hold 18446744073709551615 bytes "
			"together, more than its memory");
	bad_config_says("memory=80GiB;extra=0:1:1GiB,0:2:100GiB",
			"extra item 2 holds 107374182400 bytes, more than the "
			"GPU's memory (85899345920)");
	bad_config_says(
	    "extra=0:5:1MiB,0:5:2MiB",
	    "extra item 2 ('0:5:2MiB'): pid 5 is already in GPU 0's "
	    "compute list (item 1)");
	bad_config_says("extra=0:5:1MiB,,0:6:1MiB", "extra item 2 is empty");
	bad_config_says("extra=0:5:1MiB;extra=0:6:2MiX",
			"extra item 2 ('0:6:2MiX'): bad size");
}

static void test_config_empty_fault(void **st)
{
	(void)st;
	bad_config_says("fault=,,", "fault item 1 is empty");
	bad_config_says("fault=mig,,stride32", "fault item 2 is empty");
	bad_config_says("fault=mig,stride33",
			"fault item 2 ('stride33') is not a fault");
	/* the reason stays one line whatever the text quoted */
	bad_config_says("gp\ns=2", "unknown key 'gp?s'\n");
}

/* The same pid in both lists of a GPU, or on two GPUs, is fine. */
static void test_config_extra_same_pid(void **st)
{
	(void)st;
	sim_setup("gpus=2;extra=0:5:1MiB,0:5g:2MiB,1:5:3MiB");
	struct nvml nv = nvml_load();
	assert_int_equal(nv.init(), 0);
	assert_int_equal(nvml_bytes_of(&nv, nvml_dev(&nv, 1), 5), 3 * MiB);
}

static void test_config_bad_state(void **st)
{
	(void)st;
	bad_config_fails_every_call("state=../etc");
}

static void test_config_bad_rate(void **st)
{
	(void)st;
	bad_config_fails_every_call("checkpoint_rate=fast");
}

static void test_config_no_equals(void **st)
{
	(void)st;
	bad_config_fails_every_call("gpus");
}

/* Sizes in every unit, white space around items, GPU count and name. */
static void test_config_good(void **st)
{
	(void)st;
	sim_setup(" gpus = 3 ; memory=2TB ; context=0;name=Test GPU X;"
		  "extra=2:77:1KB ");
	void *lib = sim_cuda_load();
	int n = 0;
	assert_int_equal(((int (*)(int *))sim_sym(lib, "cuDeviceGetCount"))(&n),
			 0);
	assert_int_equal(n, 3);
	size_t total = 0;
	assert_int_equal(((int (*)(size_t *, int))sim_sym(
			     lib, "cuDeviceTotalMem_v2"))(&total, 2),
			 0);
	assert_int_equal(total, 2000000000000ULL);
	char name[64];
	assert_int_equal(((int (*)(char *, int, int))sim_sym(
			     lib, "cuDeviceGetName"))(name, sizeof name, 1),
			 0);
	assert_string_equal(name, "Test GPU X");
	struct nvml nv = nvml_load();
	assert_int_equal(nv.init(), 0);
	assert_int_equal(nvml_bytes_of(&nv, nvml_dev(&nv, 2), 77), 1000);
}

/* ---------------- CUDA semantics ---------------- */

static void test_cuda_needs_init(void **st)
{
	(void)st;
	sim_setup("");
	void *lib = dlopen(sim_path("libcuda.so.1"), RTLD_NOW);
	assert_non_null(lib);
	int v = 0;
	assert_int_equal(
	    ((int (*)(int *))sim_sym(lib, "cuDriverGetVersion"))(&v), 0);
	assert_int_equal(v, 13000);
	unsigned int flags = 0;
	int active = 0;
	assert_int_equal(
	    ((int (*)(int, unsigned *, int *))sim_sym(
		lib, "cuDevicePrimaryCtxGetState"))(0, &flags, &active),
	    CUDA_ERROR_NOT_INITIALIZED);
	assert_int_equal(sim_cuda_open_device(lib, 0),
			 CUDA_ERROR_NOT_INITIALIZED);
	int (*init_calls)(void) = sim_sym(lib, "gprsim_init_calls");
	assert_int_equal(init_calls(), 0);
}

/* GetState opens nothing; the first context adds `context` bytes. */
static void test_cuda_context_accounting(void **st)
{
	(void)st;
	sim_setup("gpus=2;context=300MiB");
	void *lib = sim_cuda_load();
	struct nvml nv = nvml_load();
	assert_int_equal(nv.init(), 0);
	nvmlDevice_t d0 = nvml_dev(&nv, 0), d1 = nvml_dev(&nv, 1);
	int (*get_state)(int, unsigned *, int *) = (int (*)(
	    int, unsigned *, int *))sim_sym(lib, "cuDevicePrimaryCtxGetState");
	int (*ctx_calls)(void) = sim_sym(lib, "gprsim_ctx_calls");
	unsigned int flags = 1;
	int active = 1;
	assert_int_equal(get_state(0, &flags, &active), 0);
	assert_int_equal(active, 0);
	assert_int_equal(ctx_calls(), 0);
	unsigned int count = 5;
	assert_int_equal(nv.compute_v3(d0, &count, NULL), NVML_SUCCESS);
	assert_int_equal(count, 0);

	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	assert_int_equal(get_state(0, &flags, &active), 0);
	assert_int_equal(active, 1);
	assert_int_equal(ctx_calls(), 1);
	assert_int_equal(nvml_bytes_of(&nv, d0, getpid()), 300 * MiB);
	assert_int_equal(nvml_bytes_of(&nv, d1, getpid()), 0);

	/* a second context on the same GPU adds nothing */
	void *ctx = NULL;
	int (*create)(void **, unsigned, int) =
	    (int (*)(void **, unsigned, int))sim_sym(lib, "cuCtxCreate_v2");
	assert_int_equal(create(&ctx, 0, 0), 0);
	assert_int_equal(nvml_bytes_of(&nv, d0, getpid()), 300 * MiB);
	assert_int_equal(
	    ((int (*)(void *))sim_sym(lib, "cuCtxDestroy_v2"))(ctx), 0);
	assert_int_equal(nvml_bytes_of(&nv, d0, getpid()), 300 * MiB);

	/* the last release destroys the primary context and its figure */
	assert_int_equal(
	    ((int (*)(int))sim_sym(lib, "cuDevicePrimaryCtxRelease_v2"))(0), 0);
	assert_int_equal(get_state(0, &flags, &active), 0);
	assert_int_equal(active, 0);
	count = 0;
	assert_int_equal(nv.compute_v3(d0, &count, NULL), NVML_SUCCESS);
	assert_int_equal(count, 0);
	/* the file stays while this process, which called cuInit, keeps
	 * its checkpoint record there (docs/sim.md) */
	struct stat sb;
	assert_int_equal(stat(state_path(), &sb), 0);
}

/* A non-primary context: listed by NVML, primary state inactive. */
static void test_cuda_ctx_create_non_primary(void **st)
{
	(void)st;
	sim_setup("gpus=2");
	void *lib = sim_cuda_load();
	void *ctx = NULL;
	assert_int_equal(((int (*)(void **, unsigned, int))sim_sym(
			     lib, "cuCtxCreate_v2"))(&ctx, 0, 1),
			 0);
	int dev = -1;
	assert_int_equal(((int (*)(int *))sim_sym(lib, "cuCtxGetDevice"))(&dev),
			 0);
	assert_int_equal(dev, 1);
	unsigned int flags;
	int active = 1;
	assert_int_equal(
	    ((int (*)(int, unsigned *, int *))sim_sym(
		lib, "cuDevicePrimaryCtxGetState"))(1, &flags, &active),
	    0);
	assert_int_equal(active, 0);
	struct nvml nv = nvml_load();
	assert_int_equal(nv.init(), 0);
	assert_int_equal(nvml_bytes_of(&nv, nvml_dev(&nv, 1), getpid()),
			 512 * MiB);
}

static void *alloc_in_new_thread(void *lib)
{
	unsigned long long p;
	return (void *)(intptr_t)sim_cuda_alloc(lib, MiB, &p);
}

/* The current context is per thread, as in CUDA. */
static void test_cuda_current_is_per_thread(void **st)
{
	(void)st;
	sim_setup("");
	void *lib = sim_cuda_load();
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	pthread_t t;
	void *res = NULL;
	assert_int_equal(pthread_create(&t, NULL, alloc_in_new_thread, lib), 0);
	assert_int_equal(pthread_join(t, &res), 0);
	assert_int_equal((intptr_t)res, CUDA_ERROR_INVALID_CONTEXT);
	unsigned long long p;
	assert_int_equal(sim_cuda_alloc(lib, MiB, &p), 0);
	int (*init_calls)(void) = sim_sym(lib, "gprsim_init_calls");
	assert_int_equal(init_calls(), 1);
}

/* 2 MiB granularity, through NVML's per-process figure and cuMemGetInfo. */
static void test_cuda_alloc_rounding(void **st)
{
	(void)st;
	sim_setup("memory=1GiB;context=100MiB");
	void *lib = sim_cuda_load();
	unsigned long long p = 0;
	assert_int_equal(sim_cuda_alloc(lib, 1, &p),
			 CUDA_ERROR_INVALID_CONTEXT);
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	struct nvml nv = nvml_load();
	assert_int_equal(nv.init(), 0);
	nvmlDevice_t d = nvml_dev(&nv, 0);

	unsigned long long a, b, c;
	assert_int_equal(sim_cuda_alloc(lib, 1, &a), 0);
	assert_int_equal(nvml_bytes_of(&nv, d, getpid()), 102 * MiB);
	assert_int_equal(sim_cuda_alloc(lib, 2 * MiB, &b), 0);
	assert_int_equal(nvml_bytes_of(&nv, d, getpid()), 104 * MiB);
	assert_int_equal(sim_cuda_alloc(lib, 2 * MiB + 1, &c), 0);
	assert_int_equal(nvml_bytes_of(&nv, d, getpid()), 108 * MiB);
	assert_true(a != b && b != c && a != c && a && b && c);

	size_t freeb = 0, total = 0;
	assert_int_equal(((int (*)(size_t *, size_t *))sim_sym(
			     lib, "cuMemGetInfo_v2"))(&freeb, &total),
			 0);
	assert_int_equal(total, GiB);
	assert_int_equal(freeb, GiB - 108 * MiB);

	assert_int_equal(sim_cuda_free(lib, b), 0);
	assert_int_equal(nvml_bytes_of(&nv, d, getpid()), 106 * MiB);
	assert_int_equal(sim_cuda_free(lib, b), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(sim_cuda_free(lib, 12345), CUDA_ERROR_INVALID_VALUE);

	/* out of memory: the GPU's total cannot be exceeded */
	assert_int_equal(sim_cuda_alloc(lib, GiB, &p),
			 CUDA_ERROR_OUT_OF_MEMORY);
	assert_int_equal(sim_cuda_alloc(lib, GiB - 106 * MiB, &p), 0);
	assert_int_equal(sim_cuda_alloc(lib, 1, &p), CUDA_ERROR_OUT_OF_MEMORY);
	gpr_nvmlMemory_v1_t m1;
	assert_int_equal(nv.mem_v1(d, &m1), 0);
	assert_int_equal(m1.used, GiB);
	assert_int_equal(m1.free, 0);
}

/* ---------------- processes sharing a state ---------------- */

static void test_state_shared_between_processes(void **st)
{
	(void)st;
	sim_setup("context=10MiB");
	void *lib = sim_cuda_load();
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	struct nvml nv = nvml_load();
	assert_int_equal(nv.init(), 0);
	nvmlDevice_t d = nvml_dev(&nv, 0);

	int to_child[2], to_parent[2];
	assert_int_equal(pipe(to_child), 0);
	assert_int_equal(pipe(to_parent), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* EOF instead of a hang when the parent fails and exits */
		close(to_child[1]);
		close(to_parent[0]);
		/* a fresh process as far as CUDA goes: no inherited context */
		unsigned long long p;
		char c = 'x';
		int ok = sim_cuda_alloc(lib, MiB, &p) ==
			     CUDA_ERROR_NOT_INITIALIZED &&
			 ((int (*)(unsigned))sim_sym(lib, "cuInit"))(0) == 0 &&
			 sim_cuda_open_device(lib, 0) == 0 &&
			 sim_cuda_alloc(lib, 5 * MiB, &p) == 0;
		c = ok ? 'y' : 'n';
		if (write(to_parent[1], &c, 1) != 1 ||
		    read(to_child[0], &c, 1) != 1)
			_exit(3);
		_exit(ok ? 0 : 2);
	}
	close(to_child[0]);
	close(to_parent[1]);
	char c = 0;
	assert_int_equal(read(to_parent[0], &c, 1), 1);
	assert_int_equal(c, 'y');
	assert_int_equal(nvml_bytes_of(&nv, d, getpid()), 10 * MiB);
	assert_int_equal(nvml_bytes_of(&nv, d, pid), 16 * MiB);
	size_t freeb = 0, total = 0;
	assert_int_equal(((int (*)(size_t *, size_t *))sim_sym(
			     lib, "cuMemGetInfo_v2"))(&freeb, &total),
			 0);
	assert_int_equal(total - freeb, 26 * MiB);

	assert_int_equal(write(to_child[1], "q", 1), 1);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* the child's entry went with it */
	assert_int_equal(nvml_bytes_of(&nv, d, pid), 0);
	unsigned int count = 0;
	assert_int_equal(nv.compute_v3(d, &count, NULL),
			 NVML_ERROR_INSUFFICIENT_SIZE);
	assert_int_equal(count, 1);
}

static void test_state_reset_and_stale_file(void **st)
{
	(void)st;
	sim_setup("");
	/* a foreign or stale file under our state name is not trusted */
	const char *path = state_path();
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("garbage, not a sim state", f);
	fclose(f);
	void *lib = sim_cuda_load();
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	struct nvml nv = nvml_load();
	assert_int_equal(nv.init(), 0);
	nvmlDevice_t d = nvml_dev(&nv, 0);
	assert_int_equal(nvml_bytes_of(&nv, d, getpid()), 512 * MiB);
	struct stat sb;
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);

	assert_int_equal(((int (*)(void))sim_sym(lib, "gprsim_reset_state"))(),
			 0);
	unsigned int count = 0;
	assert_int_equal(nv.compute_v3(d, &count, NULL), NVML_SUCCESS);
	assert_int_equal(count, 0);
	assert_int_equal(stat(path, &sb), -1);
}

/* ---------------- NVML calling convention and faults ---------------- */

static void test_nvml_list_convention(void **st)
{
	(void)st;
	sim_setup("extra=0:101:4GiB,0:102:1MiB,0:103g:6MiB");
	struct nvml nv = nvml_load();
	assert_int_equal(nv.init(), 0);
	nvmlDevice_t d = nvml_dev(&nv, 0);
	gpr_nvmlProcessInfo_v2_t buf[4];
	unsigned int count = 0;
	assert_int_equal(nv.compute_v3(d, &count, NULL),
			 NVML_ERROR_INSUFFICIENT_SIZE);
	assert_int_equal(count, 2);
	assert_int_equal(list(nv.compute_v2, d, buf, 1, &count),
			 NVML_ERROR_INSUFFICIENT_SIZE);
	assert_int_equal(count, 2);
	assert_int_equal(list(nv.compute_v3, d, buf, 4, &count), 0);
	assert_int_equal(count, 2);
	assert_int_equal(buf[0].pid, 101);
	assert_int_equal(buf[0].usedGpuMemory, 4 * GiB);
	assert_int_equal(buf[1].pid, 102);
	assert_int_equal(buf[1].usedGpuMemory, MiB);
	assert_int_equal(list(nv.graphics_v3, d, buf, 4, &count), 0);
	assert_int_equal(count, 1);
	assert_int_equal(buf[0].pid, 103);
	assert_int_equal(buf[0].usedGpuMemory, 6 * MiB);

	/* the memory figures count the extras; v2 checks its version */
	gpr_nvmlMemory_v2_t m2 = {0};
	m2.version = 2;
	assert_int_equal(nv.mem_v2(d, &m2),
			 NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
	m2.version = GPR_NVML_STRUCT_VERSION(gpr_nvmlMemory_v2_t, 2);
	assert_int_equal(nv.mem_v2(d, &m2), 0);
	assert_int_equal(m2.used, 4 * GiB + 7 * MiB);
	assert_int_equal(m2.total, 80 * GiB);
	assert_int_equal(m2.free, 80 * GiB - m2.used);
}

/* NVML works without libcuda and never loads it. */
static void test_nvml_does_not_load_cuda(void **st)
{
	(void)st;
	sim_setup("");
	struct nvml nv = nvml_load();
	assert_int_equal(nv.init(), 0);
	unsigned int count = 0;
	assert_int_equal(nv.compute_v3(nvml_dev(&nv, 0), &count, NULL), 0);
	assert_null(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD));
	assert_null(dlopen(sim_path("libcuda.so.1"), RTLD_NOW | RTLD_NOLOAD));
}

static void test_fault_broken(void **st)
{
	(void)st;
	sim_setup("gpus=3;fault=broken:1,broken:2");
	void *lib = sim_cuda_load();
	assert_int_equal(sim_cuda_open_device(lib, 1),
			 CUDA_ERROR_DEVICE_UNAVAILABLE);
	void *ctx;
	assert_int_equal(((int (*)(void **, unsigned, int))sim_sym(
			     lib, "cuCtxCreate_v2"))(&ctx, 0, 2),
			 CUDA_ERROR_DEVICE_UNAVAILABLE);
	unsigned int flags;
	int active;
	int (*get_state)(int, unsigned *, int *) = (int (*)(
	    int, unsigned *, int *))sim_sym(lib, "cuDevicePrimaryCtxGetState");
	assert_int_equal(get_state(1, &flags, &active),
			 CUDA_ERROR_INVALID_DEVICE);
	assert_int_equal(get_state(0, &flags, &active), 0);
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);

	struct nvml nv = nvml_load();
	assert_int_equal(nv.init(), 0);
	nvmlDevice_t d = NULL;
	assert_int_equal(nv.handle(1, &d), NVML_ERROR_GPU_IS_LOST);
	assert_int_equal(nv.handle(0, &d), 0);
	assert_int_equal(nvml_bytes_of(&nv, d, getpid()), 512 * MiB);
}

static void test_fault_nvml_absent(void **st)
{
	(void)st;
	sim_setup("fault=nvml-absent");
	struct nvml nv = nvml_load();
	assert_int_equal(nv.init(), NVML_ERROR_DRIVER_NOT_LOADED);
	nvmlDevice_t d;
	assert_int_equal(nv.handle(0, &d), NVML_ERROR_UNINITIALIZED);
	/* CUDA is unaffected */
	void *lib = sim_cuda_load();
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
}

static void test_fault_stride32(void **st)
{
	(void)st;
	sim_setup("fault=stride32;extra=0:7:3MiB,0:8:5MiB");
	struct nvml nv = nvml_load();
	assert_int_equal(nv.init(), 0);
	gpr_nvmlProcessInfo_cc_t buf[3];
	memset(buf, 0xab, sizeof buf);
	unsigned int count = 3;
	assert_int_equal(nv.compute_v3(nvml_dev(&nv, 0), &count, buf), 0);
	assert_int_equal(count, 2);
	assert_int_equal(buf[0].pid, 7);
	assert_int_equal(buf[0].usedGpuMemory, 3 * MiB);
	assert_int_equal(buf[0].usedGpuCcProtectedMemory, 0);
	assert_int_equal(buf[1].pid, 8);
	assert_int_equal(buf[1].usedGpuMemory, 5 * MiB);
	/* the third record is untouched */
	assert_int_equal(buf[2].pid, 0xabababab);
}

static void test_fault_insufficient_once(void **st)
{
	(void)st;
	sim_setup("fault=insufficient-once;extra=0:7:3MiB");
	struct nvml nv = nvml_load();
	assert_int_equal(nv.init(), 0);
	nvmlDevice_t d = nvml_dev(&nv, 0);
	gpr_nvmlProcessInfo_v2_t buf[8];
	unsigned int count;
	assert_int_equal(list(nv.compute_v3, d, buf, 8, &count),
			 NVML_ERROR_INSUFFICIENT_SIZE);
	assert_int_equal(count, 3);
	assert_int_equal(list(nv.compute_v3, d, buf, 8, &count), 0);
	assert_int_equal(count, 1);
	assert_int_equal(buf[0].pid, 7);
}

static void test_fault_mig(void **st)
{
	(void)st;
	sim_setup("fault=mig");
	void *lib = sim_cuda_load();
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	struct nvml nv = nvml_load();
	assert_int_equal(nv.init(), 0);
	nvmlDevice_t d = nvml_dev(&nv, 0);
	unsigned int cur = 0, pend = 0;
	assert_int_equal(nv.mig(d, &cur, &pend), 0);
	assert_int_equal(cur, 1);
	gpr_nvmlProcessInfo_v2_t buf[2];
	unsigned int count;
	assert_int_equal(list(nv.compute_v3, d, buf, 2, &count), 0);
	assert_int_equal(count, 1);
	assert_int_equal(buf[0].pid, getpid());
	assert_true(buf[0].usedGpuMemory == GPR_NVML_VALUE_NOT_AVAILABLE);
}

static void test_no_mig_by_default(void **st)
{
	(void)st;
	sim_setup("");
	struct nvml nv = nvml_load();
	assert_int_equal(nv.init(), 0);
	unsigned int cur = 7, pend = 7;
	assert_int_equal(nv.mig(nvml_dev(&nv, 0), &cur, &pend), 0);
	assert_int_equal(cur, 0);
}

static void test_fault_foreign_pid(void **st)
{
	(void)st;
	sim_setup("fault=foreign-pid");
	void *lib = sim_cuda_load();
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	struct nvml nv = nvml_load();
	assert_int_equal(nv.init(), 0);
	gpr_nvmlProcessInfo_v2_t buf[2];
	unsigned int count;
	assert_int_equal(list(nv.compute_v3, nvml_dev(&nv, 0), buf, 2, &count),
			 0);
	assert_int_equal(count, 1);
	assert_int_equal(buf[0].pid, getpid() + 1000000);
	assert_int_equal(buf[0].usedGpuMemory, 512 * MiB);
}

static void test_fault_memory_v1(void **st)
{
	(void)st;
	sim_setup("fault=memory-v1");
	struct nvml nv = nvml_load();
	assert_int_equal(nv.init(), 0);
	nvmlDevice_t d = nvml_dev(&nv, 0);
	gpr_nvmlMemory_v2_t m2 = {0};
	m2.version = GPR_NVML_STRUCT_VERSION(gpr_nvmlMemory_v2_t, 2);
	assert_int_equal(nv.mem_v2(d, &m2), NVML_ERROR_FUNCTION_NOT_FOUND);
	gpr_nvmlMemory_v1_t m1;
	assert_int_equal(nv.mem_v1(d, &m1), 0);
	assert_int_equal(m1.total, 80 * GiB);
}

static void test_fault_procs_v2(void **st)
{
	(void)st;
	sim_setup("fault=procs-v2;extra=0:9:2MiB,0:10g:4MiB");
	struct nvml nv = nvml_load();
	assert_int_equal(nv.init(), 0);
	nvmlDevice_t d = nvml_dev(&nv, 0);
	gpr_nvmlProcessInfo_v2_t buf[2];
	unsigned int count;
	assert_int_equal(list(nv.compute_v3, d, buf, 2, &count),
			 NVML_ERROR_FUNCTION_NOT_FOUND);
	assert_int_equal(list(nv.graphics_v3, d, buf, 2, &count),
			 NVML_ERROR_FUNCTION_NOT_FOUND);
	assert_int_equal(list(nv.compute_v2, d, buf, 2, &count), 0);
	assert_int_equal(count, 1);
	assert_int_equal(buf[0].pid, 9);
	assert_int_equal(list(nv.graphics_v2, d, buf, 2, &count), 0);
	assert_int_equal(count, 1);
	assert_int_equal(buf[0].pid, 10);
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_config_unknown_key),
	    cmocka_unit_test(test_config_bad_size),
	    cmocka_unit_test(test_config_bad_gpus),
	    cmocka_unit_test(test_config_bad_fault),
	    cmocka_unit_test(test_config_broken_out_of_range),
	    cmocka_unit_test(test_config_bad_extra),
	    cmocka_unit_test(test_config_extra_nonsense),
	    cmocka_unit_test(test_config_empty_fault),
	    cmocka_unit_test(test_config_extra_same_pid),
	    cmocka_unit_test(test_config_bad_state),
	    cmocka_unit_test(test_config_bad_rate),
	    cmocka_unit_test(test_config_no_equals),
	    cmocka_unit_test(test_config_good),
	    cmocka_unit_test(test_cuda_needs_init),
	    cmocka_unit_test(test_cuda_context_accounting),
	    cmocka_unit_test(test_cuda_ctx_create_non_primary),
	    cmocka_unit_test(test_cuda_current_is_per_thread),
	    cmocka_unit_test(test_cuda_alloc_rounding),
	    cmocka_unit_test(test_state_shared_between_processes),
	    cmocka_unit_test(test_state_reset_and_stale_file),
	    cmocka_unit_test(test_nvml_list_convention),
	    cmocka_unit_test(test_nvml_does_not_load_cuda),
	    cmocka_unit_test(test_fault_broken),
	    cmocka_unit_test(test_fault_nvml_absent),
	    cmocka_unit_test(test_fault_stride32),
	    cmocka_unit_test(test_fault_insufficient_once),
	    cmocka_unit_test(test_fault_mig),
	    cmocka_unit_test(test_no_mig_by_default),
	    cmocka_unit_test(test_fault_foreign_pid),
	    cmocka_unit_test(test_fault_memory_v1),
	    cmocka_unit_test(test_fault_procs_v2),
	};
	return gpr_test_main(argc, argv, "sim", tests,
			     sizeof tests / sizeof tests[0]);
}
