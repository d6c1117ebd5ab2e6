/*
 * Lock-free maps from an address (or VMM handle) to what was allocated
 * there: its size, its caller and where it is (device and kind), so a free
 * can record what it gave back and the live query (inject.c) can say who
 * holds what. Open addressing in a fixed table: a key, once placed, keeps
 * its slot (allocators reuse addresses, so the table stays small); a size
 * of 0 means "not allocated now". A full table only costs the size of
 * later frees.
 */
#include "sizes.h"

#include <stdatomic.h>
#include <stddef.h>
#include <sys/mman.h>

#define PROBES 64

struct slot {
	_Atomic uint64_t key;
	_Atomic uint64_t size;
	/* written before size is published, read after it */
	uintptr_t ip;
	uint32_t meta;
	uint32_t pad;
};

static struct {
	struct slot *s;
	size_t cap;
} maps[2] = {{NULL, 1u << 18}, {NULL, 1u << 14}};

static void *zeroed(size_t bytes)
{
	/* Anonymous memory is zero: every slot empty. */
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

int gpr_inj_map_init(void)
{
	for (int i = 0; i < 2; i++) {
		maps[i].s = zeroed(maps[i].cap * sizeof(struct slot));
		if (!maps[i].s)
			return -1;
	}
	return 0;
}

void gpr_inj_map_clear(void)
{
	/* Called between sessions, while no call records. */
	for (int i = 0; i < 2; i++)
		if (maps[i].s)
			madvise(maps[i].s, maps[i].cap * sizeof(struct slot),
				MADV_DONTNEED);
}

static size_t hash(uint64_t k)
{
	k ^= k >> 31;
	k *= 0x9e3779b97f4a7c15ULL;
	return (size_t)(k >> 17);
}

/*
 * A slot whose size is 0 holds a key that is not allocated now (a
 * tombstone): an allocation at a new key takes it over rather than
 * growing the run, or a program whose addresses are never reused (VMM
 * handles never are) would fill the table. Taking one over: its size goes
 * 0 -> BUSY (so no other thread takes it, and a thread allocating its old
 * key looks elsewhere), then the key changes, then the size is published.
 */
#define BUSY UINT64_MAX

static void publish(struct slot *e, uint64_t size, uintptr_t ip, uint32_t meta)
{
	e->ip = ip;
	e->meta = meta;
	atomic_store_explicit(&e->size, size, memory_order_release);
}

void gpr_inj_map_put(int which, uint64_t key, uint64_t size, uintptr_t ip,
		     uint32_t meta)
{
	struct slot *s = maps[which].s;
	size_t mask = maps[which].cap - 1;
	if (!s || key == 0 || size == 0 || size == BUSY)
		return;
	size_t h = hash(key);
	struct slot *tomb = NULL;
	for (size_t i = 0; i < PROBES; i++) {
		struct slot *e = &s[(h + i) & mask];
		uint64_t k =
		    atomic_load_explicit(&e->key, memory_order_acquire);
		if (k == key) {
			/* taken over by another key meanwhile: not ours */
			if (atomic_load_explicit(&e->size,
						 memory_order_acquire) == BUSY)
				continue;
			publish(e, size, ip, meta);
			return;
		}
		if (k == 0) {
			/* the key is not further on: a tombstone first */
			if (tomb)
				break;
			uint64_t zero = 0;
			if (atomic_compare_exchange_strong(&e->key, &zero,
							   key)) {
				publish(e, size, ip, meta);
				return;
			}
			if (zero == key) {
				publish(e, size, ip, meta);
				return;
			}
			continue;
		}
		if (!tomb &&
		    atomic_load_explicit(&e->size, memory_order_relaxed) == 0)
			tomb = e;
	}
	uint64_t zero = 0;
	if (tomb && atomic_compare_exchange_strong(&tomb->size, &zero, BUSY)) {
		atomic_store_explicit(&tomb->key, key, memory_order_release);
		publish(tomb, size, ip, meta);
	}
}

uint64_t gpr_inj_map_take(int which, uint64_t key, uint32_t *meta)
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
		if (k != key)
			continue;
		uint64_t size =
		    atomic_load_explicit(&e->size, memory_order_acquire);
		while (size != 0 && size != BUSY) {
			uint32_t m = e->meta;
			if (atomic_compare_exchange_weak(&e->size, &size, 0)) {
				if (meta)
					*meta = m;
				return size;
			}
		}
		if (size == 0)
			return 0;
	}
	return 0;
}

void gpr_inj_map_each(void (*fn)(void *ctx, uint64_t size, uintptr_t ip,
				 uint32_t meta),
		      void *ctx)
{
	for (int m = 0; m < 2; m++) {
		struct slot *s = maps[m].s;
		for (size_t i = 0; s && i < maps[m].cap; i++) {
			if (!atomic_load_explicit(&s[i].key,
						  memory_order_relaxed))
				continue;
			uint64_t size = atomic_load_explicit(
			    &s[i].size, memory_order_acquire);
			if (size && size != BUSY)
				fn(ctx, size, s[i].ip, s[i].meta);
		}
	}
}
