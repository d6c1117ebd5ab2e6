/*
 * Memory pools (gpr_pool_of, gpr_pool_bytes, gpr_pool_trim) against the
 * simulated driver's stream-ordered allocator, and that model itself
 * (docs/sim.md): a pool's reserve is on NVML's per-process figure, frees
 * are pending until a synchronisation, a trim returns exact bytes, physical
 * VMM memory on the host is not on the GPU.
 */
#include <stdint.h>
#include <string.h>

#include "support.h"

#include "cuda_abi.h"
#include "gpureclaim.h"

#define MiB (1ULL << 20)

/* cuda.h: the head of CUmemPoolProps / CUmemAllocationProp, padded to the
 * 88 bytes of the real CUmemPoolProps. */
struct props {
	int type, handle_types, location_type, location_id;
	unsigned char rest[72];
};

struct cu {
	void *lib;
	int (*pool_create)(CUmemoryPool *, const struct props *);
	int (*alloc)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
	int (*free_async)(CUdeviceptr, CUstream);
	int (*set_attr)(CUmemoryPool, int, void *);
	int (*get_attr)(CUmemoryPool, int, void *);
	int (*sync)(void);
	int (*get_current)(CUcontext *);
	int (*create)(unsigned long long *, size_t, const struct props *,
		      unsigned long long);
	int (*release)(unsigned long long);
};

static struct cu load(void)
{
	struct cu c;
	c.lib = sim_cuda_load();
	*(void **)&c.pool_create = sim_sym(c.lib, "cuMemPoolCreate");
	*(void **)&c.alloc = sim_sym(c.lib, "cuMemAllocFromPoolAsync");
	*(void **)&c.free_async = sim_sym(c.lib, "cuMemFreeAsync");
	*(void **)&c.set_attr = sim_sym(c.lib, "cuMemPoolSetAttribute");
	*(void **)&c.get_attr = sim_sym(c.lib, "cuMemPoolGetAttribute");
	*(void **)&c.sync = sim_sym(c.lib, "cuCtxSynchronize");
	*(void **)&c.get_current = sim_sym(c.lib, "cuCtxGetCurrent");
	*(void **)&c.create = sim_sym(c.lib, "cuMemCreate");
	*(void **)&c.release = sim_sym(c.lib, "cuMemRelease");
	return c;
}

/* A pool on GPU `dev` that keeps its memory (RMM's threshold). */
static CUmemoryPool keeping_pool(struct cu *c, int dev)
{
	struct props p = {.type = 1, .location_type = 1, .location_id = dev};
	CUmemoryPool pool = NULL;
	assert_int_equal(c->pool_create(&pool, &p), 0);
	uint64_t never = UINT64_MAX;
	assert_int_equal(
	    c->set_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &never), 0);
	return pool;
}

static uint64_t figure(gpr_ctx *ctx, int dev)
{
	uint64_t b = 0;
	assert_int_equal(gpr_process_bytes(ctx, dev, &b), 0);
	return b;
}

static void t_trim_returns_exact_bytes(void **state)
{
	(void)state;
	sim_setup("gpus=2;context=100MiB");
	struct cu c = load();
	assert_int_equal(sim_cuda_open_device(c.lib, 0), 0);
	gpr_ctx *ctx = NULL;
	assert_int_equal(gpr_open(NULL, &ctx), 0);
	CUmemoryPool pool = keeping_pool(&c, 0);
	CUdeviceptr p[3];
	for (int i = 0; i < 3; i++)
		assert_int_equal(c.alloc(&p[i], 64 * MiB - 7, pool, NULL), 0);
	assert_int_equal(figure(ctx, 0), 100 * MiB + 192 * MiB);
	assert_int_equal(c.free_async(p[0], NULL), 0);
	assert_int_equal(c.free_async(p[2], NULL), 0);

	uint64_t found = 0, reserved = 0, used = 0;
	assert_int_equal(gpr_pool_of(ctx, 0, p[1] + 4096, &found), 0);
	assert_int_equal(found, (uint64_t)(uintptr_t)pool);
	/* frees not yet observed are still in use */
	assert_int_equal(gpr_pool_bytes(ctx, found, &reserved, &used), 0);
	assert_int_equal(reserved, 192 * MiB);
	assert_int_equal(used, 192 * MiB);

	CUcontext before = NULL, after = (CUcontext)1;
	assert_int_equal(c.get_current(&before), 0);
	assert_int_equal(gpr_pool_trim(ctx, 0, found, 0), 0);
	assert_int_equal(c.get_current(&after), 0);
	assert_ptr_equal(before, after);
	assert_int_equal(gpr_pool_bytes(ctx, found, &reserved, &used), 0);
	assert_int_equal(reserved, 64 * MiB);
	assert_int_equal(used, 64 * MiB);
	assert_int_equal(figure(ctx, 0), 100 * MiB + 64 * MiB);

	/* a trim keeps what it is asked to keep */
	assert_int_equal(c.free_async(p[1], NULL), 0);
	assert_int_equal(gpr_pool_trim(ctx, 0, found, 64 * MiB), 0);
	assert_int_equal(figure(ctx, 0), 100 * MiB + 64 * MiB);
	assert_int_equal(gpr_pool_trim(ctx, 0, found, 0), 0);
	assert_int_equal(figure(ctx, 0), 100 * MiB);
	gpr_close(ctx);
}

static void t_pool_of_other_memory_and_inactive_gpus(void **state)
{
	(void)state;
	sim_setup("gpus=2");
	struct cu c = load();
	assert_int_equal(sim_cuda_open_device(c.lib, 0), 0);
	int (*ctx_calls)(void) =
	    (int (*)(void))sim_sym(c.lib, "gprsim_ctx_calls");
	gpr_ctx *ctx = NULL;
	assert_int_equal(gpr_open(NULL, &ctx), 0);
	unsigned long long plain = 0;
	assert_int_equal(sim_cuda_alloc(c.lib, 4 * MiB, &plain), 0);
	uint64_t pool = 7;
	assert_int_equal(gpr_pool_of(ctx, 0, plain, &pool), 0);
	assert_int_equal(pool, 0);
	/* GPU 1 has no context: nothing is opened to ask */
	int calls = ctx_calls();
	assert_int_equal(gpr_pool_of(ctx, 1, plain, &pool), GPR_E_NOT_FOUND);
	assert_int_equal(gpr_pool_trim(ctx, 1, 1, 0), GPR_E_NOT_FOUND);
	assert_non_null(strstr(gpr_last_error(ctx), "not active"));
	assert_int_equal(ctx_calls(), calls);
	uint64_t r, u;
	assert_int_equal(gpr_pool_of(NULL, 0, plain, &pool), GPR_E_INVAL);
	assert_int_equal(gpr_pool_bytes(ctx, 0, &r, &u), GPR_E_INVAL);
	assert_int_equal(gpr_pool_trim(ctx, -1, 1, 0), GPR_E_INVAL);
	gpr_close(ctx);
}

static void t_not_loaded(void **state)
{
	(void)state;
	sim_setup("gpus=1");
	gpr_ctx *ctx = NULL;
	assert_int_equal(gpr_open(NULL, &ctx), 0);
	uint64_t pool = 0;
	assert_int_equal(gpr_pool_of(ctx, 0, 4096, &pool), GPR_E_NOT_LOADED);
	assert_int_equal(gpr_pool_trim(ctx, 0, 1, 0), GPR_E_NOT_LOADED);
	gpr_close(ctx);
}

/* The sim's model: a synchronisation trims to the release threshold (0
 * for a new pool); physical memory on the host is not on the GPU. */
static void t_sim_threshold_and_physical_memory(void **state)
{
	(void)state;
	sim_setup("gpus=1;context=0");
	struct cu c = load();
	assert_int_equal(sim_cuda_open_device(c.lib, 0), 0);
	gpr_ctx *ctx = NULL;
	assert_int_equal(gpr_open(NULL, &ctx), 0);
	struct props p = {.type = 1, .location_type = 1, .location_id = 0};
	CUmemoryPool pool = NULL;
	assert_int_equal(c.pool_create(&pool, &p), 0);
	CUdeviceptr a;
	assert_int_equal(c.alloc(&a, 10 * MiB, pool, NULL), 0);
	assert_int_equal(figure(ctx, 0), 10 * MiB);
	assert_int_equal(c.free_async(a, NULL), 0);
	assert_int_equal(c.free_async(a, NULL), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(figure(ctx, 0), 10 * MiB);
	assert_int_equal(c.sync(), 0);
	assert_int_equal(figure(ctx, 0), 0);
	uint64_t high = 0;
	assert_int_equal(
	    c.get_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &high), 0);
	assert_int_equal(high, 10 * MiB);

	unsigned long long dev_h = 0, host_h = 0;
	struct props on_gpu = {.type = 1, .location_type = 1};
	struct props on_host = {.type = 1, .location_type = 3 /* NUMA */};
	assert_int_equal(c.create(&dev_h, 6 * MiB, &on_gpu, 0), 0);
	assert_int_equal(c.create(&host_h, 8 * MiB, &on_host, 0), 0);
	assert_int_equal(c.create(&host_h, 3 * MiB, &on_host, 0),
			 CUDA_ERROR_INVALID_VALUE); /* not a granule */
	assert_int_equal(figure(ctx, 0), 6 * MiB);
	assert_int_equal(c.release(dev_h), 0);
	assert_int_equal(c.release(dev_h), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(c.release(host_h), 0);
	assert_int_equal(figure(ctx, 0), 0);
	gpr_close(ctx);
}

/* A GPU's pools go with its last context, their bytes too. */
static void t_sim_pools_go_with_the_context(void **state)
{
	(void)state;
	sim_setup("gpus=1;context=0");
	struct cu c = load();
	assert_int_equal(sim_cuda_open_device(c.lib, 0), 0);
	gpr_ctx *ctx = NULL;
	assert_int_equal(gpr_open(NULL, &ctx), 0);
	CUmemoryPool pool = keeping_pool(&c, 0);
	CUdeviceptr a;
	assert_int_equal(c.alloc(&a, 4 * MiB, pool, NULL), 0);
	int (*release)(int) =
	    (int (*)(int))sim_sym(c.lib, "cuDevicePrimaryCtxRelease_v2");
	assert_int_equal(release(0), 0);
	uint64_t b = 1;
	int rc = gpr_process_bytes(ctx, 0, &b); /* not listed, or 0 bytes */
	assert_true(rc == GPR_E_NO_PER_PROCESS || (rc == 0 && b == 0));
	assert_int_equal(sim_cuda_open_device(c.lib, 0), 0);
	assert_int_equal(c.alloc(&a, 4 * MiB, pool, NULL),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(figure(ctx, 0), 0);
	gpr_close(ctx);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_trim_returns_exact_bytes),
	    cmocka_unit_test(t_pool_of_other_memory_and_inactive_gpus),
	    cmocka_unit_test(t_not_loaded),
	    cmocka_unit_test(t_sim_threshold_and_physical_memory),
	    cmocka_unit_test(t_sim_pools_go_with_the_context),
	};
	return gpr_test_main(argc, argv, "core-mempool", tests,
			     sizeof tests / sizeof tests[0]);
}
