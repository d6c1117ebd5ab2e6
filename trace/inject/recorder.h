/*
 * One recorded call, for both front ends (inject_record.c): what the
 * interposer's wrappers and CUPTI's callbacks call around each driver
 * call.
 */
#ifndef GPR_TRACE_INJECT_RECORDER_H
#define GPR_TRACE_INJECT_RECORDER_H

#include <stdint.h>

#include "cuda_abi.h"
#include "threads.h"

/*
 * At a call's entry: the caller, what a free gives back, the waiting-time
 * reading, the entry time. `params` is the call's arguments as CUPTI lays
 * them out (cupti_abi.h: <name>_params).
 */
void gpr_inj_rec_enter(struct gpr_inj_tt *tt, struct gpr_inj_inflight *f,
		       int op, const void *params);
/*
 * At its exit: one record into the thread's ring. `ctx` is the call's
 * context where the front end knows it (CUPTI), NULL to ask the driver.
 */
void gpr_inj_rec_exit(struct gpr_inj_tt *tt, struct gpr_inj_inflight *f, int op,
		      const void *params, CUresult res, CUcontext ctx);
/* A context event (created, destroyed): one record, no duration. */
void gpr_inj_rec_event(struct gpr_inj_tt *tt, int op, CUcontext ctx,
		       int device);
/*
 * Finds again the functions of the driver the record asks (the current
 * context, its device) in the libcuda loaded now (the one holding `in`,
 * an address inside it, else libcuda.so.1 if loaded): at a session's
 * start, and whenever the interposer sees the driver (first loaded, or
 * loaded again after a dlclose). Holds no reference to the driver.
 */
void gpr_inj_rec_driver(const void *in);
/* selftime: adds one call's own time (a difference of stamps). */
void gpr_inj_rec_selftime(struct gpr_inj_tt *tt, uint64_t ticks);

#endif /* GPR_TRACE_INJECT_RECORDER_H */
