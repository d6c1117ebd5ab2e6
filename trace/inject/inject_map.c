/*
 * Lock-free maps from an address (or VMM handle) to the size allocated
 * there, so a free can record what it gave back. Open addressing in a fixed
 * table: a key, once placed, keeps its slot (allocators reuse addresses, so
 * the table stays small); a size of 0 means "not allocated now". A full
 * table only costs the size of later frees.
 */
#include "inject.h"

#include <sys/mman.h>

#define PROBES 64

struct slot {
	_Atomic uint64_t key;
	_Atomic uint64_t size;
};

static struct {
	struct slot *s;
	size_t cap;
} maps[2] = {{NULL, 1u << 18}, {NULL, 1u << 14}};

int gpr_inj_map_init(void)
{
	for (int i = 0; i < 2; i++) {
		/* Anonymous memory is zero: every slot empty. */
		void *p =
		    mmap(NULL, maps[i].cap * sizeof(struct slot),
			 PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED)
			return -1;
		maps[i].s = p;
	}
	return 0;
}

static size_t hash(uint64_t k)
{
	k ^= k >> 31;
	k *= 0x9e3779b97f4a7c15ULL;
	return (size_t)(k >> 17);
}

void gpr_inj_map_put(int which, uint64_t key, uint64_t size)
{
	struct slot *s = maps[which].s;
	size_t mask = maps[which].cap - 1;
	if (!s || key == 0)
		return;
	size_t h = hash(key);
	for (size_t i = 0; i < PROBES; i++) {
		struct slot *e = &s[(h + i) & mask];
		uint64_t k =
		    atomic_load_explicit(&e->key, memory_order_acquire);
		if (k == 0) {
			uint64_t zero = 0;
			if (atomic_compare_exchange_strong(&e->key, &zero, key))
				k = key;
			else
				k = zero;
		}
		if (k == key) {
			atomic_store_explicit(&e->size, size,
					      memory_order_release);
			return;
		}
	}
}

uint64_t gpr_inj_map_take(int which, uint64_t key)
{
	struct slot *s = maps[which].s;
	size_t mask = maps[which].cap - 1;
	if (!s || key == 0)
		return 0;
	size_t h = hash(key);
	for (size_t i = 0; i < PROBES; i++) {
		struct slot *e = &s[(h + i) & mask];
		uint64_t k =
		    atomic_load_explicit(&e->key, memory_order_acquire);
		if (k == 0)
			return 0;
		if (k == key)
			return atomic_exchange(&e->size, 0);
	}
	return 0;
}
