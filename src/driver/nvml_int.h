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

/*
 * Timing of one NVML call for m->step: t0 = gpr__nvml_step_start(m)
 * before it (0 and no clock read when nobody listens), then
 * gpr__nvml_step_end(m, call, index, t0, r) after it.
 */
double gpr__nvml_step_start(const struct gpr__nvml *m);
void gpr__nvml_step_end(const struct gpr__nvml *m, const char *call, int index,
			double t0, nvmlReturn_t r);

#endif /* GPR_DRIVER_NVML_INT_H */
