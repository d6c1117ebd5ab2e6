/*
 * The two front ends, as the library's exports (inject.c) start, pause
 * and stop them: the interposer (inject_preload.c) and CUPTI
 * (inject_cupti.c).
 */
#ifndef GPR_TRACE_INJECT_FRONTEND_H
#define GPR_TRACE_INJECT_FRONTEND_H

#include <stddef.h>
#include <stdint.h>

/* ---- the interposer ---- */
/* 1 when this library's exports come first in the process (preloaded):
 * the driver calls handed out by dlsym/cuGetProcAddress are ours. */
int gpr_inj_preload_live(void);
/* An address inside the libcuda the interposer has seen (the driver of
 * its answers), or NULL before it has seen one. */
const void *gpr_inj_preload_driver(void);
/* The interposer's closing META lines (a gpr_inj_meta_fn). */
uint32_t gpr_inj_preload_meta(const char **kv, uint32_t max, char *buf,
			      size_t len);

/* ---- CUPTI ---- */
/* Loads CUPTI (path, else the one mapped, else the usual names),
 * subscribes and turns the callbacks on. 0, or -1 (said why). */
int gpr_inj_cupti_attach(const char *path);
/* 1 when GPURECLAIM_TRACE_SUBSCRIBE_ONLY holds CUPTI with no callback. */
int gpr_inj_cupti_subscribe_only(void);
/* Turns the callbacks off and unsubscribes (another tool may take CUPTI). */
void gpr_inj_cupti_detach(void);
/* Only counts calls per operation, records nothing
 * (GPURECLAIM_TRACE_CROSSCHECK, beside the interposer). */
int gpr_inj_cupti_attach_counting(const char *path);
/* The counts: calls[op] per GPR_TRACE_N_OPS. */
void gpr_inj_cupti_counts(uint64_t *calls);
int gpr_inj_cupti_pause(void);
int gpr_inj_cupti_resume(void);

#endif /* GPR_TRACE_INJECT_FRONTEND_H */
