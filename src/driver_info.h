/*
 * What the command (cli/) reads of the core beyond the public API: the
 * driver's version through the handle's own NVML, so `gpureclaim ps`
 * loads NVML once (gpus.c). Internal (gpr__), linked statically.
 */
#ifndef GPR_DRIVER_INFO_H
#define GPR_DRIVER_INFO_H

#include <stddef.h>

#include "gpureclaim.h"

/*
 * The NVIDIA driver's version ("580.65.06", NUL-terminated within len)
 * as the handle's NVML says it, NVML opened if it is not yet. 0, or the
 * error (recorded for gpr_last_error; out is then "").
 */
int gpr__driver_version(gpr_ctx *ctx, char *out, size_t len);

#endif /* GPR_DRIVER_INFO_H */
