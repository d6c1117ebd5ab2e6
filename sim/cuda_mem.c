/*
 * The simulated driver's memory API beyond cuMemAlloc_v2/cuMemFree_v2
 * (docs/sim.md): pitched and managed allocations, stream-ordered ones
 * (the pool keeps nothing: a free gives the bytes back at once), VMM
 * (cuMemCreate/Release, cuMemAddressReserve/Free, cuMemMap/Unmap) and
 * pinned host memory (real memory from malloc, so a program may use it).
 * Device memory counts in the process's figure on its GPU as cuMemAlloc's
 * does; VMM memory at a host location and pinned host memory do not.
 */
#include "sim.h"
#include "sim_cuda.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef unsigned long long CUmemGenericAllocationHandle;
typedef void *CUstream;
typedef void *CUmemoryPool;

/* cuda.h: CUmemLocation and the head of CUmemAllocationProp. */
typedef struct {
	int type; /* 1 device; 2, 3, 4 host (plain, NUMA node, current) */
	int id;
} sim_location;
typedef struct {
	int type;
	int requestedHandleTypes;
	sim_location location;
} sim_prop;

#define MAX_HANDLES 4096
#define MAX_RANGES 1024
#define MAX_MAPS 4096
#define MAX_HOST 4096

/* cuMemCreate memory: live until released and unmapped everywhere. */
static struct handle {
	CUmemGenericAllocationHandle h; /* 0: free slot */
	int dev;			/* -1: on the host */
	uint64_t bytes;
	int refs;     /* 1 until released, + 1 per mapping */
	int released; /* cuMemRelease was called */
} handles[MAX_HANDLES];
static CUmemGenericAllocationHandle next_handle = 0x1000;

static struct range {
	CUdeviceptr base; /* 0: free slot */
	uint64_t size;
} ranges[MAX_RANGES];
static CUdeviceptr next_va = (CUdeviceptr)0x7e << 40;

static struct map {
	CUdeviceptr ptr; /* 0: free slot */
	uint64_t size;
	struct handle *h;
} maps[MAX_MAPS];

static void *hosts[MAX_HOST];

/*
 * The library's lock, and this file's tables forgotten in a forked child
 * (like the rest of the driver's state, cuda.c: a child starts with
 * nothing).
 */
static pid_t owner;

static void lock(void)
{
	sim__cuda_lock();
	if (owner == getpid())
		return;
	memset(handles, 0, sizeof(handles));
	memset(ranges, 0, sizeof(ranges));
	memset(maps, 0, sizeof(maps));
	memset(hosts, 0, sizeof(hosts));
	owner = getpid();
}

static uint64_t granules(uint64_t size)
{
	return (size + SIM_GRANULE - 1) & ~(SIM_GRANULE - 1);
}

SIM_API(CUresult, cuMemAllocPitch_v2,
	(CUdeviceptr * dptr, size_t *pitch, size_t width, size_t height,
	 unsigned int elem))
{
	if (!pitch || !width || !height ||
	    (elem != 4 && elem != 8 && elem != 16))
		return CUDA_ERROR_INVALID_VALUE;
	uint64_t p = ((uint64_t)width + 511) & ~(uint64_t)511;
	if (p / 512 > UINT64_MAX / 512 / height)
		return CUDA_ERROR_OUT_OF_MEMORY;
	lock();
	CUresult r = sim__cuda_alloc(p * height, dptr);
	sim__cuda_unlock();
	if (!r)
		*pitch = (size_t)p;
	return r;
}

SIM_API(CUresult, cuMemAllocManaged,
	(CUdeviceptr * dptr, size_t size, unsigned int flags))
{
	if (flags != 1 && flags != 2) /* CU_MEM_ATTACH_GLOBAL / _HOST */
		return CUDA_ERROR_INVALID_VALUE;
	lock();
	CUresult r = sim__cuda_alloc(size, dptr);
	sim__cuda_unlock();
	return r;
}

/* ---- stream-ordered ---- */

static CUresult alloc_async(CUdeviceptr *dptr, size_t size)
{
	lock();
	CUresult r = sim__cuda_alloc(size, dptr);
	sim__cuda_unlock();
	return r;
}

static CUresult free_async(CUdeviceptr dptr)
{
	lock();
	CUresult r = sim__cuda_free(dptr);
	sim__cuda_unlock();
	return r;
}

/* A pool of device d is the handle 0x900 + d. */
static int pool_ok(CUmemoryPool pool)
{
	uintptr_t p = (uintptr_t)pool;
	return p >= 0x900 && p < 0x900 + SIM_MAX_GPUS &&
	       sim__cuda_device((CUdevice)(p - 0x900)) == CUDA_SUCCESS;
}

SIM_API(CUresult, cuDeviceGetDefaultMemPool,
	(CUmemoryPool * pool, CUdevice dev))
{
	lock();
	CUresult r = sim__cuda_device(dev);
	sim__cuda_unlock();
	if (!r && !pool)
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r)
		*pool = (CUmemoryPool)(uintptr_t)(0x900 + dev);
	return r;
}

SIM_API(CUresult, cuMemAllocAsync,
	(CUdeviceptr * dptr, size_t size, CUstream stream))
{
	(void)stream;
	return alloc_async(dptr, size);
}

SIM_API(CUresult, cuMemAllocAsync_ptsz,
	(CUdeviceptr * dptr, size_t size, CUstream stream))
{
	(void)stream;
	return alloc_async(dptr, size);
}

SIM_API(CUresult, cuMemAllocFromPoolAsync,
	(CUdeviceptr * dptr, size_t size, CUmemoryPool pool, CUstream stream))
{
	(void)stream;
	lock();
	int ok = pool_ok(pool);
	sim__cuda_unlock();
	return ok ? alloc_async(dptr, size) : CUDA_ERROR_INVALID_VALUE;
}

SIM_API(CUresult, cuMemAllocFromPoolAsync_ptsz,
	(CUdeviceptr * dptr, size_t size, CUmemoryPool pool, CUstream stream))
{
	return sim_cuMemAllocFromPoolAsync(dptr, size, pool, stream);
}

SIM_API(CUresult, cuMemFreeAsync, (CUdeviceptr dptr, CUstream stream))
{
	(void)stream;
	return free_async(dptr);
}

SIM_API(CUresult, cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream stream))
{
	(void)stream;
	return free_async(dptr);
}

SIM_API(CUresult, cuMemPoolTrimTo, (CUmemoryPool pool, size_t keep))
{
	(void)keep;
	lock();
	int ok = pool_ok(pool);
	sim__cuda_unlock();
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- VMM ---- */

SIM_API(CUresult, cuMemGetAllocationGranularity,
	(size_t * granularity, const sim_prop *prop, int option))
{
	(void)option;
	if (!granularity || !prop)
		return CUDA_ERROR_INVALID_VALUE;
	*granularity = SIM_GRANULE;
	return CUDA_SUCCESS;
}

static struct handle *find_handle(CUmemGenericAllocationHandle h)
{
	for (int i = 0; h && i < MAX_HANDLES; i++)
		if (handles[i].h == h)
			return &handles[i];
	return NULL;
}

/* Drops one reference; the memory goes with the last. */
static void unref(struct handle *h)
{
	if (--h->refs > 0)
		return;
	if (h->dev >= 0)
		sim__cuda_uncharge(h->dev, h->bytes);
	memset(h, 0, sizeof(*h));
}

SIM_API(CUresult, cuMemCreate,
	(CUmemGenericAllocationHandle * handle, size_t size,
	 const sim_prop *prop, unsigned long long flags))
{
	if (!handle || !prop || flags || size == 0 || size % SIM_GRANULE)
		return CUDA_ERROR_INVALID_VALUE;
	int host = prop->location.type >= 2 && prop->location.type <= 4;
	if (!host && prop->location.type != 1)
		return CUDA_ERROR_INVALID_VALUE;
	lock();
	CUresult r = sim__cuda_device(host ? 0 : prop->location.id);
	struct handle *h = NULL;
	for (int i = 0; !r && i < MAX_HANDLES && !h; i++)
		if (!handles[i].h)
			h = &handles[i];
	if (!r && !h)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (!r && !host)
		r = sim__cuda_charge(prop->location.id, size);
	if (!r) {
		*h = (struct handle){next_handle++,
				     host ? -1 : prop->location.id, size, 1, 0};
		*handle = h->h;
	}
	sim__cuda_unlock();
	return r;
}

SIM_API(CUresult, cuMemRelease, (CUmemGenericAllocationHandle handle))
{
	lock();
	struct handle *h = find_handle(handle);
	CUresult r = CUDA_ERROR_INVALID_VALUE;
	if (h && !h->released) {
		h->released = 1;
		unref(h);
		r = CUDA_SUCCESS;
	}
	sim__cuda_unlock();
	return r;
}

SIM_API(CUresult, cuMemAddressReserve,
	(CUdeviceptr * ptr, size_t size, size_t align, CUdeviceptr addr,
	 unsigned long long flags))
{
	(void)align;
	(void)addr;
	if (!ptr || size == 0 || size % SIM_GRANULE || flags)
		return CUDA_ERROR_INVALID_VALUE;
	lock();
	CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
	for (int i = 0; i < MAX_RANGES; i++)
		if (!ranges[i].base) {
			ranges[i] = (struct range){next_va, size};
			*ptr = next_va;
			next_va += granules(size) + SIM_GRANULE;
			r = CUDA_SUCCESS;
			break;
		}
	sim__cuda_unlock();
	return r;
}

SIM_API(CUresult, cuMemAddressFree, (CUdeviceptr ptr, size_t size))
{
	lock();
	CUresult r = CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < MAX_RANGES; i++)
		if (ranges[i].base && ranges[i].base == ptr &&
		    ranges[i].size == size) {
			int mapped = 0;
			for (int j = 0; j < MAX_MAPS; j++)
				mapped |= maps[j].ptr >= ptr &&
					  maps[j].ptr < ptr + size;
			if (!mapped) {
				ranges[i].base = 0;
				r = CUDA_SUCCESS;
			}
			break;
		}
	sim__cuda_unlock();
	return r;
}

SIM_API(CUresult, cuMemMap,
	(CUdeviceptr ptr, size_t size, size_t offset,
	 CUmemGenericAllocationHandle handle, unsigned long long flags))
{
	lock();
	struct handle *h = find_handle(handle);
	CUresult r = CUDA_ERROR_INVALID_VALUE;
	int inside = 0;
	for (int i = 0; i < MAX_RANGES; i++)
		inside |= ranges[i].base && ptr >= ranges[i].base &&
			  ptr + size <= ranges[i].base + ranges[i].size;
	if (h && inside && !flags && size && offset + size <= h->bytes)
		for (int i = 0; i < MAX_MAPS; i++)
			if (!maps[i].ptr) {
				maps[i] = (struct map){ptr, size, h};
				h->refs++;
				r = CUDA_SUCCESS;
				break;
			}
	sim__cuda_unlock();
	return r;
}

SIM_API(CUresult, cuMemUnmap, (CUdeviceptr ptr, size_t size))
{
	lock();
	CUresult r = CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < MAX_MAPS; i++)
		if (maps[i].ptr == ptr && maps[i].size == size && ptr) {
			struct handle *h = maps[i].h;
			maps[i].ptr = 0;
			maps[i].h = NULL;
			unref(h);
			r = CUDA_SUCCESS;
			break;
		}
	sim__cuda_unlock();
	return r;
}

SIM_API(CUresult, cuMemSetAccess,
	(CUdeviceptr ptr, size_t size, const void *desc, size_t count))
{
	(void)ptr;
	(void)size;
	return desc && count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- pinned host memory ---- */

static CUresult host_alloc(void **pp, size_t size)
{
	if (!pp || size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	lock();
	int dev;
	CUresult r = sim__cuda_current(&dev);
	int slot = -1;
	for (int i = 0; !r && i < MAX_HOST && slot < 0; i++)
		if (!hosts[i])
			slot = i;
	if (!r && slot < 0)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	void *p = NULL;
	if (!r && posix_memalign(&p, 4096, size) != 0)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (!r) {
		hosts[slot] = p;
		*pp = p;
	}
	sim__cuda_unlock();
	return r;
}

SIM_API(CUresult, cuMemHostAlloc, (void **pp, size_t size, unsigned int flags))
{
	if (flags & ~0xfu)
		return CUDA_ERROR_INVALID_VALUE;
	return host_alloc(pp, size);
}

SIM_API(CUresult, cuMemAllocHost_v2, (void **pp, size_t size))
{
	return host_alloc(pp, size);
}

SIM_API(CUresult, cuMemFreeHost, (void *p))
{
	lock();
	CUresult r = CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; p && i < MAX_HOST; i++)
		if (hosts[i] == p) {
			hosts[i] = NULL;
			free(p);
			r = CUDA_SUCCESS;
			break;
		}
	sim__cuda_unlock();
	return r;
}

static const struct sim__proc procs[] = {
    {"cuMemAllocPitch", 3020, (void *)sim_cuMemAllocPitch_v2, NULL},
    {"cuMemAllocManaged", 6000, (void *)sim_cuMemAllocManaged, NULL},
    {"cuDeviceGetDefaultMemPool", 11020, (void *)sim_cuDeviceGetDefaultMemPool,
     NULL},
    {"cuMemAllocAsync", 11020, (void *)sim_cuMemAllocAsync,
     (void *)sim_cuMemAllocAsync_ptsz},
    {"cuMemAllocFromPoolAsync", 11020, (void *)sim_cuMemAllocFromPoolAsync,
     (void *)sim_cuMemAllocFromPoolAsync_ptsz},
    {"cuMemFreeAsync", 11020, (void *)sim_cuMemFreeAsync,
     (void *)sim_cuMemFreeAsync_ptsz},
    {"cuMemPoolTrimTo", 11020, (void *)sim_cuMemPoolTrimTo, NULL},
    {"cuMemGetAllocationGranularity", 10020,
     (void *)sim_cuMemGetAllocationGranularity, NULL},
    {"cuMemCreate", 10020, (void *)sim_cuMemCreate, NULL},
    {"cuMemRelease", 10020, (void *)sim_cuMemRelease, NULL},
    {"cuMemAddressReserve", 10020, (void *)sim_cuMemAddressReserve, NULL},
    {"cuMemAddressFree", 10020, (void *)sim_cuMemAddressFree, NULL},
    {"cuMemMap", 10020, (void *)sim_cuMemMap, NULL},
    {"cuMemUnmap", 10020, (void *)sim_cuMemUnmap, NULL},
    {"cuMemSetAccess", 10020, (void *)sim_cuMemSetAccess, NULL},
    {"cuMemHostAlloc", 2020, (void *)sim_cuMemHostAlloc, NULL},
    {"cuMemAllocHost", 3020, (void *)sim_cuMemAllocHost_v2, NULL},
    {"cuMemFreeHost", 2000, (void *)sim_cuMemFreeHost, NULL},
};

const struct sim__proc *sim__cuda_mem_procs(size_t *n)
{
	*n = sizeof(procs) / sizeof(procs[0]);
	return procs;
}
