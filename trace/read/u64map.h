/*
 * A small open-addressing hash map from a 64-bit key to a 32-bit value, for
 * the reader's bookkeeping (live allocations, per-library and per-site
 * tables). Single-threaded; grows as needed.
 */
#ifndef GPR_TRACE_U64MAP_H
#define GPR_TRACE_U64MAP_H

#include <stddef.h>
#include <stdint.h>

struct gpr_trace_map {
	uint64_t *keys;
	uint32_t *vals;
	unsigned char *used;
	size_t cap; /* power of two, or 0 */
	size_t n;
};

/* Pointer to the value of key, or NULL. Valid until the next put/del. */
uint32_t *gpr_trace_map_get(const struct gpr_trace_map *m, uint64_t key);
/* Sets key to val. 0, or -1 when out of memory. */
int gpr_trace_map_put(struct gpr_trace_map *m, uint64_t key, uint32_t val);
/* Removes key; 1 if it was there, 0 otherwise. */
int gpr_trace_map_del(struct gpr_trace_map *m, uint64_t key);
void gpr_trace_map_free(struct gpr_trace_map *m);

#endif /* GPR_TRACE_U64MAP_H */
