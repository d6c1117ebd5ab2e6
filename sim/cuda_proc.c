/*
 * cuGetProcAddress of the simulated driver: how the CUDA runtime (and
 * cudaGetDriverEntryPoint, so PyTorch's c10) finds driver functions. It
 * answers as the real driver does (CUDA 12 documentation of
 * cuGetProcAddress): `symbol` is the name without its _v2/_v3 suffix,
 * `version` picks the newest ABI introduced at or before it, flags bit 1
 * (CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) picks a _ptsz variant
 * where one exists, and the answer is the library's own definition (the
 * address a dlsym of its export name gives). A name this library does
 * not have: CUDA_ERROR_NOT_FOUND, *pfn NULL, status 1 (symbol not
 * found); known but only after `version`: status 2 (version not
 * sufficient). cuGetProcAddress itself answers too: 11030 the v1 ABI,
 * 12000 on the v2.
 */
#include "sim.h"

#include "cuda_abi.h"

#include <string.h>

typedef unsigned long long cuuint64_t;

#define PER_THREAD_DEFAULT_STREAM 2ull
enum { FOUND = 0, NOT_FOUND = 1, VERSION_NOT_SUFFICIENT = 2 };

static CUresult lookup(const char *symbol, void **pfn, int version,
		       cuuint64_t flags, int *status);

SIM_API(CUresult, cuGetProcAddress_v2,
	(const char *symbol, void **pfn, int version, cuuint64_t flags,
	 int *status))
{
	return lookup(symbol, pfn, version, flags, status);
}

SIM_API(CUresult, cuGetProcAddress,
	(const char *symbol, void **pfn, int version, cuuint64_t flags))
{
	return lookup(symbol, pfn, version, flags, NULL);
}

static const struct sim__proc self[] = {
    {"cuGetProcAddress", 11030, (void *)sim_cuGetProcAddress, NULL},
    {"cuGetProcAddress", 12000, (void *)sim_cuGetProcAddress_v2, NULL},
};

/* The best row of tab for symbol at version; *known when one names it. */
static const struct sim__proc *best(const struct sim__proc *tab, size_t n,
				    const char *symbol, int version,
				    const struct sim__proc *found, int *known)
{
	for (size_t i = 0; i < n; i++) {
		if (strcmp(tab[i].name, symbol) != 0)
			continue;
		*known = 1;
		if (tab[i].since <= version &&
		    (!found || tab[i].since > found->since))
			found = &tab[i];
	}
	return found;
}

static CUresult lookup(const char *symbol, void **pfn, int version,
		       cuuint64_t flags, int *status)
{
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	size_t n_core, n_mem, n_pool, n_ckpt;
	const struct sim__proc *core = sim__cuda_procs(&n_core);
	const struct sim__proc *mem = sim__cuda_mem_procs(&n_mem);
	const struct sim__proc *pool = sim__cuda_mempool_procs(&n_pool);
	const struct sim__proc *ckpt = sim__cuda_ckpt_procs(&n_ckpt);
	int known = 0;
	const struct sim__proc *p =
	    best(self, 2, symbol, version, NULL, &known);
	p = best(core, n_core, symbol, version, p, &known);
	p = best(mem, n_mem, symbol, version, p, &known);
	p = best(pool, n_pool, symbol, version, p, &known);
	p = best(ckpt, n_ckpt, symbol, version, p, &known);
	*pfn = NULL;
	if (!p) {
		if (status)
			*status = known ? VERSION_NOT_SUFFICIENT : NOT_FOUND;
		return CUDA_ERROR_NOT_FOUND;
	}
	*pfn = (flags & PER_THREAD_DEFAULT_STREAM) && p->ptsz ? p->ptsz : p->fn;
	if (status)
		*status = FOUND;
	return CUDA_SUCCESS;
}
