/*
 * Waiting time: how long a call's thread was runnable but not running
 * during the call (inject_wait.c says how it is measured).
 */
#ifndef GPR_TRACE_INJECT_WAIT_H
#define GPR_TRACE_INJECT_WAIT_H

#include <stdint.h>

#include "threads.h"

/* Decides the session's source (gpr_inj_state.wait: GPR_INJ_WAIT_*) on
 * this thread. */
int gpr_inj_wait_probe(void);
const char *gpr_inj_wait_name(int mode);
void gpr_inj_wait_enter(struct gpr_inj_tt *tt, struct gpr_inj_wait *w);
/* 1 and *ns when the call's waiting time was measured, else 0. */
int gpr_inj_wait_exit(struct gpr_inj_tt *tt, struct gpr_inj_wait *w,
		      uint64_t *ns);
/* A thread's sources, opened on its first call, closed at its exit. */
void gpr_inj_wait_thread_start(struct gpr_inj_tt *tt);
void gpr_inj_wait_thread_end(struct gpr_inj_tt *tt);

#endif /* GPR_TRACE_INJECT_WAIT_H */
