/*
 * CUDA ordinals and NVML indices, both ways. CUDA and NVML number the same
 * GPUs differently (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER): an ordinal is
 * matched to an NVML index by UUID, then by PCI bus id, and the answer is
 * cached per handle; the reverse direction reads the same cache.
 */
#include <pthread.h>

#include "core.h"
#include "gpu_map.h"

static int lookup_index(gpr_ctx *ctx, int ordinal, int *index, char *err,
			size_t errlen)
{
	char id[128];
	int rc =
	    gpr__cuda_uuid(&ctx->cuda, ordinal, id, sizeof id, err, errlen);
	if (rc == 0 &&
	    gpr__nvml_index_by_uuid(&ctx->nvml, id, index, err, errlen) == 0)
		return 0;
	rc = gpr__cuda_pci_bus_id(&ctx->cuda, ordinal, id, sizeof id, err,
				  errlen);
	if (rc)
		return rc;
	rc = gpr__nvml_index_by_pci(&ctx->nvml, id, index, err, errlen);
	if (rc == GPR_E_NOT_FOUND) {
		/* NVML answered and no GPU matches: kept as -1 for good */
		*index = -1;
		return 0;
	}
	/* 0, or NVML failing now: then nothing is cached, a later call asks
	 * again */
	return rc;
}

int gpr__nvml_index_of(gpr_ctx *ctx, int ordinal, int *index, char *err,
		       size_t errlen)
{
	if (ordinal < 0)
		return GPR_E_RANGE;
	if (ordinal >= GPR__MAP_CAP)
		return lookup_index(ctx, ordinal, index, err, errlen);
	pthread_mutex_lock(&ctx->map_lock);
	int rc = 0;
	if (ctx->nvml_of[ordinal] == GPR__MAP_UNKNOWN) {
		int idx = -1;
		rc = lookup_index(ctx, ordinal, &idx, err, errlen);
		if (rc == 0)
			ctx->nvml_of[ordinal] = idx;
	}
	*index = rc ? -1 : ctx->nvml_of[ordinal];
	pthread_mutex_unlock(&ctx->map_lock);
	return rc;
}

int gpr__ordinal_of(gpr_ctx *ctx, int count, int index)
{
	char err[GPR__ERRLEN];
	for (int d = 0; d < count; d++) {
		int idx = -1;
		if (gpr__nvml_index_of(ctx, d, &idx, err, sizeof err) == 0 &&
		    idx == index)
			return d;
	}
	return -1;
}

int gpr__check_ordinal(gpr_ctx *ctx, int device)
{
	int count = 0;
	int rc = gpr__cuda_count(ctx, &count);
	if (rc == GPR_E_NOT_LOADED)
		return gpr__fail(ctx, rc, "no CUDA ordinals without libcuda");
	if (rc)
		return rc;
	if (device < 0 || device >= count)
		return gpr__fail(ctx, GPR_E_RANGE, "CUDA ordinal %d of %d",
				 device, count);
	return 0;
}

int gpr_nvml_index(gpr_ctx *ctx, int device, int *index)
{
	if (!ctx || !index)
		return GPR_E_INVAL;
	*index = -1;
	int rc = gpr__fork_check(ctx);
	if (!rc)
		rc = gpr__check_ordinal(ctx, device);
	if (rc)
		return rc;
	char err[GPR__ERRLEN] = "";
	rc = gpr__ensure_nvml(ctx, err, sizeof err);
	if (rc == 0)
		rc = gpr__nvml_index_of(ctx, device, index, err, sizeof err);
	if (rc)
		return gpr__fail(ctx, rc, "GPU %d: %s", device, err);
	if (*index < 0)
		return gpr__fail(ctx, GPR_E_NOT_FOUND,
				 "GPU %d: no NVML GPU with its UUID or bus id",
				 device);
	return 0;
}
