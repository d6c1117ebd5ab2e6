/*
 * The simulated driver's memory API beyond cuMemAlloc_v2/cuMemFree_v2
 * (cuda.c) and the pools and physical memory (mempool.c), docs/sim.md:
 * pitched and managed allocations (device memory, as cuMemAlloc_v2's),
 * VMM address ranges and their mappings (cuMemAddressReserve/Free,
 * cuMemMap/Unmap, cuMemSetAccess, cuMemGetAllocationGranularity: they
 * move no memory) and pinned host memory (real memory from malloc, so a
 * program may use it; not on any GPU's figure).
 */
#include "sim.h"

#include "cuda_abi.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef unsigned long long CUmemGenericAllocationHandle;

#define MAX_RANGES 1024
#define MAX_MAPS 4096
#define MAX_HOST 4096

static struct range {
	CUdeviceptr base; /* 0: free slot */
	uint64_t size;
} ranges[MAX_RANGES];
/* apart from cuMemAlloc_v2's and the pools' (cuda.c, mempool.c) */
static CUdeviceptr next_va = (CUdeviceptr)0x7e << 40;

static struct map {
	CUdeviceptr ptr; /* 0: free slot */
	uint64_t size;
} maps[MAX_MAPS];

static void *hosts[MAX_HOST];

/*
 * The library's lock, and this file's tables forgotten in a forked child
 * (like the rest of the driver's state: a child starts with nothing).
 */
static pid_t owner;

static void lock(void)
{
	sim__cuda_lock();
	if (owner == getpid())
		return;
	memset(ranges, 0, sizeof(ranges));
	memset(maps, 0, sizeof(maps));
	memset(hosts, 0, sizeof(hosts));
	owner = getpid();
}

static CUresult alloc_locked(uint64_t size, CUdeviceptr *dptr)
{
	lock();
	uint64_t p = 0;
	CUresult r = sim__cuda_alloc(size, dptr ? &p : NULL);
	if (!r)
		*dptr = p;
	sim__cuda_unlock();
	return r;
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
	CUresult r = alloc_locked(p * height, dptr);
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
	uint64_t p = 0;
	CUresult r = sim__cuda_alloc(size, dptr ? &p : NULL);
	if (!r) {
		*dptr = p;
		/* UVM: a checkpoint cannot move it (docs/sim.md) */
		sim__cuda_unmovable(SIM_UNMOVABLE_UVM);
	}
	sim__cuda_unlock();
	return r;
}

/* ---- VMM address ranges and mappings ---- */

SIM_API(CUresult, cuMemGetAllocationGranularity,
	(size_t * granularity, const void *prop, int option))
{
	(void)option;
	if (!granularity || !prop)
		return CUDA_ERROR_INVALID_VALUE;
	*granularity = SIM_GRANULE;
	return CUDA_SUCCESS;
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
			next_va += size + SIM_GRANULE;
			r = CUDA_SUCCESS;
			break;
		}
	sim__cuda_unlock();
	return r;
}

/* Whether [ptr, ptr + size) overlaps a mapping (*inside: lies in one). */
static int mapped(CUdeviceptr ptr, uint64_t size)
{
	for (int j = 0; j < MAX_MAPS; j++)
		if (maps[j].ptr && maps[j].ptr < ptr + size &&
		    ptr < maps[j].ptr + maps[j].size)
			return 1;
	return 0;
}

SIM_API(CUresult, cuMemAddressFree, (CUdeviceptr ptr, size_t size))
{
	lock();
	CUresult r = CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < MAX_RANGES; i++)
		if (ranges[i].base && ranges[i].base == ptr &&
		    ranges[i].size == size && !mapped(ptr, size)) {
			ranges[i].base = 0;
			r = CUDA_SUCCESS;
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
	uint64_t have = sim__vmm_size(handle);
	int inside = 0;
	for (int i = 0; i < MAX_RANGES; i++)
		inside |= ranges[i].base && ptr >= ranges[i].base &&
			  ptr + size <= ranges[i].base + ranges[i].size;
	CUresult r = CUDA_ERROR_INVALID_VALUE;
	if (have && inside && !flags && size && offset + size <= have &&
	    !mapped(ptr, size))
		for (int i = 0; i < MAX_MAPS; i++)
			if (!maps[i].ptr) {
				maps[i] = (struct map){ptr, size};
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
	for (int i = 0; ptr && i < MAX_MAPS; i++)
		if (maps[i].ptr == ptr && maps[i].size == size) {
			maps[i].ptr = 0;
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
    {"cuMemGetAllocationGranularity", 10020,
     (void *)sim_cuMemGetAllocationGranularity, NULL},
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
