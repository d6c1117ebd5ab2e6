/*
 * CUDA memory pools that this process's allocators keep (gpr_pool_*):
 * which pool an allocation came from, what a pool holds, trimming it. For
 * releasers of allocators whose framework does not expose its pool (RMM's
 * CudaAsyncMemoryResource); the driver work is in the driver layer.
 */
#include <stdint.h>

#include "core.h"

/* Fork check, then the driver; 0 or the error recorded for last_error. */
static int ready(gpr_ctx *ctx)
{
	int rc = gpr__fork_check(ctx);
	if (rc)
		return rc;
	char err[GPR__ERRLEN] = "";
	rc = gpr__ensure_cuda(ctx, err, sizeof err);
	return rc ? gpr__fail(ctx, rc, "CUDA driver: %s", err) : 0;
}

int gpr_pool_of(gpr_ctx *ctx, int device, uint64_t address, uint64_t *pool)
{
	if (!ctx || !pool || device < 0)
		return GPR_E_INVAL;
	*pool = 0;
	int rc = ready(ctx);
	if (rc)
		return rc;
	char err[GPR__ERRLEN] = "";
	CUmemoryPool p = NULL;
	rc = gpr__cuda_pool_of(&ctx->cuda, device, (CUdeviceptr)address, &p,
			       err, sizeof err);
	if (rc)
		return gpr__fail(ctx, rc, "GPU %d: %s", device, err);
	*pool = (uint64_t)(uintptr_t)p;
	return 0;
}

int gpr_pool_bytes(gpr_ctx *ctx, uint64_t pool, uint64_t *reserved,
		   uint64_t *used)
{
	if (!ctx || !pool || !reserved || !used)
		return GPR_E_INVAL;
	int rc = ready(ctx);
	if (rc)
		return rc;
	char err[GPR__ERRLEN] = "";
	rc = gpr__cuda_pool_bytes(&ctx->cuda, (CUmemoryPool)(uintptr_t)pool,
				  reserved, used, err, sizeof err);
	return rc ? gpr__fail(ctx, rc, "%s", err) : 0;
}

int gpr_pool_trim(gpr_ctx *ctx, int device, uint64_t pool, uint64_t keep)
{
	if (!ctx || !pool || device < 0)
		return GPR_E_INVAL;
	int rc = ready(ctx);
	if (rc)
		return rc;
	char err[GPR__ERRLEN] = "";
	rc = gpr__cuda_pool_trim(&ctx->cuda, device,
				 (CUmemoryPool)(uintptr_t)pool, keep, err,
				 sizeof err);
	return rc ? gpr__fail(ctx, rc, "GPU %d: %s", device, err) : 0;
}
