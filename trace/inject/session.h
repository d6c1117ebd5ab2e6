/*
 * A recording session, from start to stop (inject_session.c): one at a
 * time in a process, under the session lock.
 */
#ifndef GPR_TRACE_INJECT_SESSION_H
#define GPR_TRACE_INJECT_SESSION_H

#include <stddef.h>

#include "writer.h"

/*
 * Starts recording with `backend` (GPR_INJ_*) into path (writer.h's
 * `shared`), the log saying who started it; `in_driver` an address inside
 * the libcuda the front end has seen (NULL: libcuda.so.1, if loaded). The
 * caller holds the session lock. 0, or -1 (said why).
 */
int gpr_inj_session_start(int backend, const char *path, int shared,
			  const char *started_by, gpr_inj_meta_fn closing,
			  const void *in_driver);
/* Ends the session (caller holds the lock). 0, or -1 when none is open. */
int gpr_inj_session_stop(void);
/* 1 when this process has a session open (paused or not). */
int gpr_inj_session_open(void);
/* 1 in a child forked while this process had a session open. */
int gpr_inj_session_forked(void);
void gpr_inj_session_lock(void);
void gpr_inj_session_unlock(void);
/* The log `gpureclaim trace` asked for ($GPURECLAIM_TRACE_OUTPUT, else
 * ./gpureclaim-<pid>.trace) into out (GPR_TRACE_MAX_PATH + 1 bytes). 0,
 * or -1 when the variable is longer than GPR_TRACE_MAX_PATH (said why:
 * refused, never cut). */
int gpr_inj_session_default_path(char *out, size_t len);
/* 1 in a setuid or setgid program (secure execution), which is never
 * traced: says so. 0 otherwise. */
int gpr_inj_session_secure(void);

#endif /* GPR_TRACE_INJECT_SESSION_H */
