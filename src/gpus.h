/* NVML's memory figures of a GPU (gpus.c), for the release. Internal. */
#ifndef GPR_GPUS_H
#define GPR_GPUS_H

#include "core.h"

/* NVML's memory figures of NVML GPU `index` (used, free, total), 0 or a
 * GPR_E_* code. */
int gpr__gpu_memory(gpr_ctx *ctx, int index, struct gpr__nvml_gpu *out);

#endif /* GPR_GPUS_H */
