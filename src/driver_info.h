/*
 * What the command (cli/) reads of the core beyond the public API, through
 * the handle's own NVML (gpus.c): the driver's version, so `gpureclaim ps`
 * loads NVML once, and which processes did work on a GPU lately (`top`'s
 * idle times, and any policy that picks idle processes). Internal
 * (gpr__), linked statically.
 */
#ifndef GPR_DRIVER_INFO_H
#define GPR_DRIVER_INFO_H

#include <stddef.h>
#include <stdint.h>

#include "gpureclaim.h"

/*
 * The NVIDIA driver's version ("580.65.06", NUL-terminated within len)
 * as the handle's NVML says it, NVML opened if it is not yet. 0, or the
 * error (recorded for gpr_last_error; out is then "").
 */
int gpr__driver_version(gpr_ctx *ctx, char *out, size_t len);

/* A process that did work on a GPU, and when it last did. */
struct gpr__work {
	uint32_t pid;	  /* as NVML reports it */
	uint64_t time_us; /* the driver's stamp of the latest sample that
			   * showed work: CPU time, us since the epoch */
	unsigned sm, mem; /* that sample's SM and memory utilization, % */
};

/*
 * The processes that did work on NVML GPU `index` (SM or memory
 * utilization above 0) in the samples the driver keeps that are newer
 * than since_us (0: every sample it keeps; how far back that reaches is
 * the driver's), one entry per pid; a process of the GPU's list that is
 * absent did no work there. From nvmlDeviceGetProcessUtilization, about
 * one sample per process per second. *out is allocated (free with
 * gpr_free; NULL when *n is 0). 0; GPR_E_NO_PER_PROCESS where NVML
 * cannot sample processes (MIG, no such call); GPR_E_RANGE, GPR_E_NVML.
 */
int gpr__gpu_work(gpr_ctx *ctx, int index, uint64_t since_us,
		  struct gpr__work **out, size_t *n);

#endif /* GPR_DRIVER_INFO_H */
