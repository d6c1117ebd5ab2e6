/*
 * CUDA ordinal <-> NVML index, both ways, cached in the handle
 * (gpu_map.c). Internal.
 */
#ifndef GPR_GPU_MAP_H
#define GPR_GPU_MAP_H

#include <stddef.h>

#include "core.h"

/*
 * The NVML index of CUDA ordinal `ordinal` (UUID first, then PCI bus id),
 * -1 if no NVML GPU matches. Needs CUDA and NVML open.
 */
int gpr__nvml_index_of(gpr_ctx *ctx, int ordinal, int *index, char *err,
		       size_t errlen);

/* The CUDA ordinal (of `count`) whose NVML index is `index`, -1 if none.
 * Needs CUDA and NVML open. */
int gpr__ordinal_of(gpr_ctx *ctx, int count, int index);

/* Checks that CUDA is usable and `device` is one of its ordinals; records
 * the failure for gpr_last_error. */
int gpr__check_ordinal(gpr_ctx *ctx, int device);

#endif /* GPR_GPU_MAP_H */
