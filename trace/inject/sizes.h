/*
 * Lock-free maps from an address (or VMM handle) to what was allocated
 * there (inject_map.c): the size a free gives back, and what the live
 * query (inject.c) sums.
 */
#ifndef GPR_TRACE_INJECT_SIZES_H
#define GPR_TRACE_INJECT_SIZES_H

#include <stdint.h>

enum { GPR_MAP_ADDR = 0, GPR_MAP_HANDLE = 1 };
/* What the maps keep besides the size: device + 1 (0 unknown) in the low
 * 16 bits, the live query's kind (gpureclaim_trace.h) above. */
#define GPR_INJ_META(device, kind)                                             \
	((uint32_t)((device) + 1) & 0xffffu) | ((uint32_t)(kind) << 16)
#define GPR_INJ_META_DEVICE(m) ((int)((m)&0xffffu) - 1)
#define GPR_INJ_META_KIND(m) ((int)((m) >> 16))
void gpr_inj_map_put(int which, uint64_t key, uint64_t size, uintptr_t ip,
		     uint32_t meta);
/* Removes key; its size (0 when absent) and, when found, its meta. */
uint64_t gpr_inj_map_take(int which, uint64_t key, uint32_t *meta);
int gpr_inj_map_init(void);
/* Forgets everything (a new session). */
void gpr_inj_map_clear(void);
/* Calls fn for every allocation held (a snapshot, racing with calls). */
void gpr_inj_map_each(void (*fn)(void *ctx, uint64_t size, uintptr_t ip,
				 uint32_t meta),
		      void *ctx);

#endif /* GPR_TRACE_INJECT_SIZES_H */
