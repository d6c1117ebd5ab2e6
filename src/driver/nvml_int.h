/*
 * Shared by nvml.c and nvml_procs.c only: device handles and the error
 * text of a failed NVML call.
 */
#ifndef GPR_DRIVER_NVML_INT_H
#define GPR_DRIVER_NVML_INT_H

#include "driver.h"

/*
 * The handle of NVML index `index`: 0, GPR_E_RANGE (negative or beyond the
 * count), GPR_E_NVML (err says why), GPR_E_NO_NVML when m is not open.
 */
int gpr__nvml_handle(struct gpr__nvml *m, int index, nvmlDevice_t *dev,
		     char *err, size_t errlen);

/* Writes "<call> on GPU <index>: NVML_ERROR_X (text)"; returns GPR_E_NVML. */
int gpr__nvml_fail(struct gpr__nvml *m, const char *call, int index,
		   nvmlReturn_t r, char *err, size_t errlen);

#endif /* GPR_DRIVER_NVML_INT_H */
