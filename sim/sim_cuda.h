/*
 * Internals of the simulated libcuda shared by its files: cuda.c (init,
 * devices, contexts, cuMemAlloc/cuMemFree, the process's figures),
 * cuda_mem.c (the rest of the memory API) and cuda_proc.c
 * (cuGetProcAddress). Hidden, like everything of sim.h.
 */
#ifndef GPR_SIM_CUDA_H
#define GPR_SIM_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_abi.h"

/* The library's lock, taken by every driver call (cuda.c). */
void sim__cuda_lock(void);
void sim__cuda_unlock(void);

/* Under the lock: */
/* CUDA_SUCCESS and the current context's device, or why not. */
CUresult sim__cuda_current(int *dev);
/* Whether dev is a valid device of an initialised driver. */
CUresult sim__cuda_device(CUdevice dev);
/* cuMemAlloc_v2 / cuMemFree_v2 without the lock. */
CUresult sim__cuda_alloc(uint64_t size, CUdeviceptr *ptr);
CUresult sim__cuda_free(CUdeviceptr ptr);
/* Adds bytes to the process's figure on dev (OUT_OF_MEMORY when the GPU
 * is full), or takes them back. */
CUresult sim__cuda_charge(int dev, uint64_t bytes);
void sim__cuda_uncharge(int dev, uint64_t bytes);

/*
 * What cuGetProcAddress may answer (cuda_proc.c): a driver API name (as
 * cuda.h spells it before its _v2 define), the CUDA version that gave it
 * this ABI, the function and its per-thread-default-stream variant (NULL:
 * none). A name may have several rows, one per ABI. Each file lists its
 * own functions.
 */
struct sim__proc {
	const char *name;
	int since;
	void *fn;
	void *ptsz;
};
const struct sim__proc *sim__cuda_procs(size_t *n);	/* cuda.c */
const struct sim__proc *sim__cuda_mem_procs(size_t *n); /* cuda_mem.c */

#endif /* GPR_SIM_CUDA_H */
