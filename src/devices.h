/* Which CUDA GPUs this process holds a context on (devices.c), for the
 * release. Internal. */
#ifndef GPR_DEVICES_H
#define GPR_DEVICES_H

#include "core.h"
#include "figure.h"

/*
 * The CUDA ordinals on which this process holds a context (*devs malloc'ed,
 * *n entries, *count the CUDA device count). GPR_E_NOT_LOADED when libcuda
 * is not loaded; 0 with *n = 0 when it is not initialised. GPUs that cannot
 * be queried are skipped, each with a note in `notes` (may be NULL).
 * With `mine` non-NULL, *mine gets the scan of every NVML index
 * (malloc'ed, *n_mine entries; NULL and 0 where NVML is unavailable).
 */
int gpr__devices_in_use(gpr_ctx *ctx, int **devs, int *n, int *count,
			gpr_report *notes, struct gpr__mine **mine,
			int *n_mine);

#endif /* GPR_DEVICES_H */
