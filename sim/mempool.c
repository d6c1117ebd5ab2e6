/*
 * The simulated libcuda's memory pools (the stream-ordered allocator:
 * cuMemPoolCreate, cuDeviceGetDefaultMemPool, cuMemAllocAsync and
 * cuMemAllocFromPoolAsync, cuMemFreeAsync (each with its _ptsz
 * per-thread-stream variant), cuMemPoolTrimTo, attributes,
 * cuPointerGetAttribute MEMPOOL_HANDLE) and physical VMM allocations
 * (cuMemCreate, cuMemRelease), docs/sim.md.
 *
 * What a pool holds from the driver, its reserve, is on the process's
 * figure as cuMemAlloc_v2 bytes are, so NVML sees it. The model: every
 * allocation takes a chunk of its size rounded up to 2 MiB; a freed chunk
 * is pending until a synchronisation (cuCtxSynchronize,
 * cuStreamSynchronize) observes the free, then free for reuse by an
 * allocation of the same chunk size; a synchronisation also trims each
 * pool to its release threshold (0 unless set, as for a pool the driver
 * creates), and cuMemPoolTrimTo returns free chunks to the driver. A
 * pending chunk counts as used: the driver cannot return it.
 */
#include "sim.h"

#include "cuda_abi.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_POOLS 64
#define MAX_PHYS 4096
#define LOCATION_DEVICE 1 /* CU_MEM_LOCATION_TYPE_DEVICE */

/* cuda.h: the head of CUmemPoolProps and of CUmemAllocationProp (the
 * same first three fields: type, handle types, CUmemLocation). */
struct props_head {
	int type;
	int handle_types;
	int location_type;
	int location_id;
};

enum chunk_state { CHUNK_FREE, CHUNK_USED, CHUNK_PENDING };

struct chunk {
	CUdeviceptr ptr;
	uint64_t size;
	enum chunk_state state;
};

struct CUmemPoolHandle_st {
	int dev;
	int live;
	unsigned epoch; /* sim__cuda_epoch(dev) at creation */
	uint64_t threshold;
	uint64_t reserved_high, used_high;
	struct chunk *chunks;
	size_t n, cap;
};

struct phys {
	unsigned long long handle; /* 0: free slot */
	int dev;		   /* -1: host memory, not on a GPU */
	unsigned epoch;
	uint64_t size;
};

static struct CUmemPoolHandle_st pools[MAX_POOLS];
/* cuDeviceGetDefaultMemPool's pool of each GPU, made when first asked */
static struct CUmemPoolHandle_st *defaults[SIM_MAX_GPUS];
static struct phys phys[MAX_PHYS];
static unsigned long long next_handle = 1;
static CUdeviceptr next_ptr[SIM_MAX_GPUS];
static pid_t owner; /* the process the tables describe */

/*
 * Takes the library's lock and brings the tables up to date: a forked
 * child starts with none (cuda.c forgets its own), and what a GPU's last
 * context took with it (sim__cuda_epoch) is gone.
 */
static void lock(void)
{
	sim__cuda_lock();
	if (owner != getpid()) {
		for (int i = 0; i < MAX_POOLS; i++)
			free(pools[i].chunks);
		memset(pools, 0, sizeof pools);
		memset(defaults, 0, sizeof defaults);
		memset(phys, 0, sizeof phys);
		next_handle = 1;
		/* apart from cuMemAlloc_v2's, which start at (i + 1) << 40 */
		for (int i = 0; i < SIM_MAX_GPUS; i++)
			next_ptr[i] =
			    ((CUdeviceptr)(i + 1) << 40) + (1ULL << 39);
		owner = getpid();
	}
	for (int i = 0; i < MAX_POOLS; i++) {
		struct CUmemPoolHandle_st *p = &pools[i];
		if (p->live && p->epoch != sim__cuda_epoch(p->dev)) {
			if (defaults[p->dev] == p)
				defaults[p->dev] = NULL;
			free(p->chunks);
			memset(p, 0, sizeof *p);
		}
	}
	for (int i = 0; i < MAX_PHYS; i++)
		if (phys[i].handle && phys[i].dev >= 0 &&
		    phys[i].epoch != sim__cuda_epoch(phys[i].dev))
			phys[i].handle = 0;
}

static uint64_t reserved(const struct CUmemPoolHandle_st *p)
{
	uint64_t n = 0;
	for (size_t i = 0; i < p->n; i++)
		n += p->chunks[i].size;
	return n;
}

static uint64_t used(const struct CUmemPoolHandle_st *p)
{
	uint64_t n = 0;
	for (size_t i = 0; i < p->n; i++)
		if (p->chunks[i].state != CHUNK_FREE)
			n += p->chunks[i].size;
	return n;
}

static int pool_valid(const struct CUmemPoolHandle_st *p)
{
	return p >= pools && p < pools + MAX_POOLS && p->live;
}

/* Returns free chunks to the driver while more than `keep` is reserved. */
static void trim(struct CUmemPoolHandle_st *p, uint64_t keep)
{
	uint64_t have = reserved(p);
	size_t j = 0;
	for (size_t i = 0; i < p->n; i++) {
		struct chunk c = p->chunks[i];
		if (c.state == CHUNK_FREE && have - c.size >= keep) {
			have -= c.size;
			sim__cuda_charge(p->dev, -(int64_t)c.size);
			continue;
		}
		p->chunks[j++] = c;
	}
	p->n = j;
}

/* A synchronisation on `dev` (-1: every GPU): pending frees complete,
 * then each pool keeps no more than its release threshold. */
static void observe_frees(int dev)
{
	for (int i = 0; i < MAX_POOLS; i++) {
		struct CUmemPoolHandle_st *p = &pools[i];
		if (!p->live || (dev >= 0 && p->dev != dev))
			continue;
		for (size_t k = 0; k < p->n; k++)
			if (p->chunks[k].state == CHUNK_PENDING)
				p->chunks[k].state = CHUNK_FREE;
		trim(p, p->threshold);
	}
}

/* Under the lock: a new pool on dev, or NULL when none is left. */
static struct CUmemPoolHandle_st *new_pool(int dev)
{
	for (int i = 0; i < MAX_POOLS; i++)
		if (!pools[i].live) {
			struct CUmemPoolHandle_st *p = &pools[i];
			memset(p, 0, sizeof *p);
			p->dev = dev;
			p->live = 1;
			p->epoch = sim__cuda_epoch(dev);
			return p;
		}
	return NULL;
}

SIM_API(CUresult, cuMemPoolCreate, (CUmemoryPool * pool, const void *props))
{
	lock();
	const struct props_head *h = props;
	CUresult r = pool && h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	if (!r && h->location_type != LOCATION_DEVICE)
		r = CUDA_ERROR_NOT_SUPPORTED;
	if (!r)
		r = sim__cuda_device(h->location_id);
	struct CUmemPoolHandle_st *p = r ? NULL : new_pool(h->location_id);
	if (!r && !p)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (!r)
		*pool = p;
	sim__cuda_unlock();
	return r;
}

SIM_API(CUresult, cuDeviceGetDefaultMemPool,
	(CUmemoryPool * pool, CUdevice dev))
{
	lock();
	CUresult r = pool ? sim__cuda_device(dev) : CUDA_ERROR_INVALID_VALUE;
	if (!r && !defaults[dev] && !(defaults[dev] = new_pool(dev)))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (!r)
		*pool = defaults[dev];
	sim__cuda_unlock();
	return r;
}

SIM_API(CUresult, cuMemPoolDestroy, (CUmemoryPool pool))
{
	lock();
	CUresult r = pool_valid(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	if (!r) {
		sim__cuda_charge(pool->dev, -(int64_t)reserved(pool));
		free(pool->chunks);
		memset(pool, 0, sizeof *pool);
	}
	sim__cuda_unlock();
	return r;
}

/* Under the lock: an allocation of size from pool. */
static CUresult alloc_from(CUdeviceptr *ptr, size_t size,
			   struct CUmemPoolHandle_st *pool)
{
	int dev;
	CUresult r = sim__cuda_current(&dev);
	if (!r && (!ptr || size == 0 || !pool_valid(pool)))
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r && (uint64_t)size > UINT64_MAX / 2)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	uint64_t want = ((uint64_t)size + SIM_GRANULE - 1) & ~(SIM_GRANULE - 1);
	struct chunk *c = NULL;
	for (size_t i = 0; !r && !c && i < pool->n; i++)
		if (pool->chunks[i].state == CHUNK_FREE &&
		    pool->chunks[i].size == want)
			c = &pool->chunks[i];
	if (!r && !c && pool->n == pool->cap) {
		size_t cap = pool->cap ? pool->cap * 2 : 16;
		struct chunk *a = realloc(pool->chunks, cap * sizeof *a);
		if (!a)
			r = CUDA_ERROR_OUT_OF_MEMORY;
		else {
			pool->chunks = a;
			pool->cap = cap;
		}
	}
	if (!r && !c) {
		r = sim__cuda_charge(pool->dev, (int64_t)want);
		if (!r) {
			c = &pool->chunks[pool->n++];
			*c = (struct chunk){next_ptr[pool->dev], want,
					    CHUNK_FREE};
			next_ptr[pool->dev] += want;
		}
	}
	if (!r) {
		c->state = CHUNK_USED;
		*ptr = c->ptr;
		uint64_t res = reserved(pool), u = used(pool);
		if (res > pool->reserved_high)
			pool->reserved_high = res;
		if (u > pool->used_high)
			pool->used_high = u;
	}
	return r;
}

SIM_API(CUresult, cuMemAllocFromPoolAsync,
	(CUdeviceptr * ptr, size_t size, CUmemoryPool pool, CUstream stream))
{
	(void)stream;
	lock();
	CUresult r = alloc_from(ptr, size, pool);
	sim__cuda_unlock();
	return r;
}

SIM_API(CUresult, cuMemAllocFromPoolAsync_ptsz,
	(CUdeviceptr * ptr, size_t size, CUmemoryPool pool, CUstream stream))
{
	return sim_cuMemAllocFromPoolAsync(ptr, size, pool, stream);
}

/* cuMemAllocAsync: from the current GPU's default pool. */
static CUresult alloc_async(CUdeviceptr *ptr, size_t size)
{
	lock();
	int dev;
	CUresult r = sim__cuda_current(&dev);
	if (!r && !defaults[dev] && !(defaults[dev] = new_pool(dev)))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (!r)
		r = alloc_from(ptr, size, defaults[dev]);
	sim__cuda_unlock();
	return r;
}

SIM_API(CUresult, cuMemAllocAsync,
	(CUdeviceptr * ptr, size_t size, CUstream stream))
{
	(void)stream;
	return alloc_async(ptr, size);
}

SIM_API(CUresult, cuMemAllocAsync_ptsz,
	(CUdeviceptr * ptr, size_t size, CUstream stream))
{
	(void)stream;
	return alloc_async(ptr, size);
}

/* The pool chunk in use at ptr, or NULL. */
static struct chunk *chunk_at(CUdeviceptr ptr,
			      struct CUmemPoolHandle_st **owner)
{
	for (int i = 0; i < MAX_POOLS; i++)
		for (size_t k = 0; pools[i].live && k < pools[i].n; k++) {
			struct chunk *c = &pools[i].chunks[k];
			if (c->state != CHUNK_FREE && ptr >= c->ptr &&
			    ptr < c->ptr + c->size) {
				*owner = &pools[i];
				return c;
			}
		}
	return NULL;
}

SIM_API(CUresult, cuMemFreeAsync, (CUdeviceptr ptr, CUstream stream))
{
	(void)stream;
	lock();
	struct CUmemPoolHandle_st *p;
	struct chunk *c = chunk_at(ptr, &p);
	CUresult r = c && c->ptr == ptr && c->state == CHUNK_USED
			 ? CUDA_SUCCESS
			 : CUDA_ERROR_INVALID_VALUE;
	if (!r)
		c->state = CHUNK_PENDING;
	sim__cuda_unlock();
	return r;
}

SIM_API(CUresult, cuMemFreeAsync_ptsz, (CUdeviceptr ptr, CUstream stream))
{
	return sim_cuMemFreeAsync(ptr, stream);
}

SIM_API(CUresult, cuMemPoolTrimTo, (CUmemoryPool pool, size_t keep))
{
	lock();
	CUresult r = pool_valid(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	if (!r)
		trim(pool, keep);
	sim__cuda_unlock();
	return r;
}

SIM_API(CUresult, cuMemPoolGetAttribute,
	(CUmemoryPool pool, int attr, void *value))
{
	lock();
	CUresult r =
	    pool_valid(pool) && value ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	uint64_t v = 0;
	switch (r ? 0 : attr) {
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
		v = pool->threshold;
		break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
		v = reserved(pool);
		break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
		v = pool->reserved_high;
		break;
	case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
		v = used(pool);
		break;
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
		v = pool->used_high;
		break;
	default:
		r = CUDA_ERROR_INVALID_VALUE;
	}
	if (!r)
		memcpy(value, &v, sizeof v);
	sim__cuda_unlock();
	return r;
}

SIM_API(CUresult, cuMemPoolSetAttribute,
	(CUmemoryPool pool, int attr, void *value))
{
	lock();
	CUresult r = pool_valid(pool) && value &&
			     attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
			 ? CUDA_SUCCESS
			 : CUDA_ERROR_INVALID_VALUE;
	if (!r)
		memcpy(&pool->threshold, value, sizeof pool->threshold);
	sim__cuda_unlock();
	return r;
}

/* Only MEMPOOL_HANDLE: the pool of an allocation in use, NULL for any
 * other pointer (cuMemAlloc_v2's). */
SIM_API(CUresult, cuPointerGetAttribute,
	(void *data, int attr, CUdeviceptr ptr))
{
	lock();
	int dev;
	CUresult r = sim__cuda_current(&dev);
	if (!r && (!data || attr != CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE))
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r) {
		struct CUmemPoolHandle_st *p = NULL;
		CUmemoryPool found = chunk_at(ptr, &p) ? p : NULL;
		memcpy(data, &found, sizeof found);
	}
	sim__cuda_unlock();
	return r;
}

SIM_API(CUresult, cuCtxSynchronize, (void))
{
	lock();
	int dev;
	CUresult r = sim__cuda_current(&dev);
	if (!r)
		observe_frees(dev);
	sim__cuda_unlock();
	return r;
}

/* Streams are not modelled: a stream's synchronisation observes every
 * free of the process. */
SIM_API(CUresult, cuStreamSynchronize, (CUstream stream))
{
	(void)stream;
	lock();
	int dev;
	CUresult r = sim__cuda_current(&dev);
	if (!r)
		observe_frees(-1);
	sim__cuda_unlock();
	return r;
}

SIM_API(CUresult, cuMemCreate,
	(unsigned long long *handle, size_t size, const void *prop,
	 unsigned long long flags))
{
	lock();
	const struct props_head *h = prop;
	CUresult r =
	    handle && h && size && flags == 0 && size % SIM_GRANULE == 0
		? CUDA_SUCCESS
		: CUDA_ERROR_INVALID_VALUE;
	int dev = -1;
	if (!r && h->location_type == LOCATION_DEVICE)
		dev = h->location_id;
	if (!r) /* host memory needs cuInit too */
		r = sim__cuda_device(dev >= 0 ? dev : 0);
	struct phys *slot = NULL;
	for (int i = 0; !r && !slot && i < MAX_PHYS; i++)
		if (!phys[i].handle)
			slot = &phys[i];
	if (!r && !slot)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (!r && dev >= 0)
		r = sim__cuda_charge(dev, (int64_t)size);
	if (!r) {
		*slot = (struct phys){next_handle++, dev,
				      dev >= 0 ? sim__cuda_epoch(dev) : 0,
				      (uint64_t)size};
		*handle = slot->handle;
	}
	sim__cuda_unlock();
	return r;
}

SIM_API(CUresult, cuMemRelease, (unsigned long long handle))
{
	lock();
	CUresult r = CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; handle && i < MAX_PHYS; i++) {
		if (phys[i].handle != handle)
			continue;
		if (phys[i].dev >= 0)
			sim__cuda_charge(phys[i].dev, -(int64_t)phys[i].size);
		phys[i].handle = 0;
		r = CUDA_SUCCESS;
		break;
	}
	sim__cuda_unlock();
	return r;
}

uint64_t sim__vmm_size(unsigned long long handle)
{
	if (owner != getpid()) /* a forked child's tables are not its own */
		return 0;
	for (int i = 0; handle && i < MAX_PHYS; i++)
		if (phys[i].handle == handle)
			return phys[i].size;
	return 0;
}

static const struct sim__proc procs[] = {
    {"cuMemPoolCreate", 11020, (void *)sim_cuMemPoolCreate, NULL},
    {"cuMemPoolDestroy", 11020, (void *)sim_cuMemPoolDestroy, NULL},
    {"cuDeviceGetDefaultMemPool", 11020, (void *)sim_cuDeviceGetDefaultMemPool,
     NULL},
    {"cuMemAllocAsync", 11020, (void *)sim_cuMemAllocAsync,
     (void *)sim_cuMemAllocAsync_ptsz},
    {"cuMemAllocFromPoolAsync", 11020, (void *)sim_cuMemAllocFromPoolAsync,
     (void *)sim_cuMemAllocFromPoolAsync_ptsz},
    {"cuMemFreeAsync", 11020, (void *)sim_cuMemFreeAsync,
     (void *)sim_cuMemFreeAsync_ptsz},
    {"cuMemPoolTrimTo", 11020, (void *)sim_cuMemPoolTrimTo, NULL},
    {"cuMemPoolGetAttribute", 11020, (void *)sim_cuMemPoolGetAttribute, NULL},
    {"cuMemPoolSetAttribute", 11020, (void *)sim_cuMemPoolSetAttribute, NULL},
    {"cuPointerGetAttribute", 4000, (void *)sim_cuPointerGetAttribute, NULL},
    {"cuCtxSynchronize", 2000, (void *)sim_cuCtxSynchronize, NULL},
    {"cuStreamSynchronize", 2000, (void *)sim_cuStreamSynchronize, NULL},
    {"cuMemCreate", 10020, (void *)sim_cuMemCreate, NULL},
    {"cuMemRelease", 10020, (void *)sim_cuMemRelease, NULL},
};

const struct sim__proc *sim__cuda_mempool_procs(size_t *n)
{
	*n = sizeof(procs) / sizeof(procs[0]);
	return procs;
}
