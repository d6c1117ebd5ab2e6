/*
 * Who called the driver (inject_site.c): the caller's return address on
 * the traced thread, its library and call site (interned strings) on the
 * writer thread and in the live query.
 */
#ifndef GPR_TRACE_INJECT_CALLERS_H
#define GPR_TRACE_INJECT_CALLERS_H

#include <stdint.h>

#include "threads.h"

/*
 * The first caller, walking up from the function that calls this one,
 * outside libcuda/libcudart/libcupti/this library: its return address in
 * *ip, 0 when unknown. Returns how it walked: GPR_WALK_*.
 */
enum { GPR_WALK_NONE = 0, GPR_WALK_FAST = 1, GPR_WALK_FULL = 2 };
int gpr_inj_callsite(struct gpr_inj_tt *tt, uintptr_t *ip);
/* Fast walks found wrong by the periodic check and done again in full. */
uint64_t gpr_inj_callsite_redone(void);
/* Marks the object holding `addr` as not a caller (a CUDA library). */
void gpr_inj_callsite_exclude(const void *addr);
int gpr_inj_callsite_init(void);
/*
 * ip -> string ids of its library and call site, interned (the writer
 * thread and the live query; never a traced thread). lib may be NULL.
 */
void gpr_inj_resolve(uintptr_t ip, uint32_t *lib, uint32_t *site);
/* The library name of string id `id`, or NULL (valid while loaded). */
const char *gpr_inj_string(uint32_t id);
/* Strings interned so far: ids GPR_TRACE_N_OPS .. + *n - 1. */
const char *const *gpr_inj_interned(uint32_t *n);

#endif /* GPR_TRACE_INJECT_CALLERS_H */
