/*
 * A stand-in for HAMi-core, preloaded after the tracer by
 * tests/trace/test_preload.c (the "hooked" scenarios), as a container's
 * /etc/ld.so.preload comes after LD_PRELOAD. Like HAMi-core it defines
 * dlsym and hands out its own functions for a few driver entry points,
 * and its cuGetProcAddress_v2 does the same for their base names (for
 * cuMemAllocAsync whatever the stream flags ask, as HAMi-core does). Each
 * of its functions counts its calls (gpr_test_hook_calls) and calls the
 * driver's: a program traced through it must still reach it, or the
 * limits it enforces would be bypassed.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef CUresult (*gpa_fn)(const char *, void **, int, unsigned long long,
			   int *);

enum { ALLOC, FREE, ALLOC_ASYNC, GPA, N_HOOKS };

/* Calls of each hook, read by the traced program. */
__attribute__((
    visibility("default"))) _Atomic long gpr_test_hook_calls[N_HOOKS];

static void *real[N_HOOKS]; /* the driver's functions */

static void *libc_dlsym(void *handle, const char *name)
{
	static void *(*fn)(void *, const char *);
	if (!fn) {
		*(void **)&fn = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
		if (!fn)
			*(void **)&fn =
			    dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	}
	return fn ? fn(handle, name) : NULL;
}

static CUresult hook_alloc(CUdeviceptr *p, size_t bytes)
{
	gpr_test_hook_calls[ALLOC]++;
	return ((CUresult(*)(CUdeviceptr *, size_t))real[ALLOC])(p, bytes);
}

static CUresult hook_free(CUdeviceptr p)
{
	gpr_test_hook_calls[FREE]++;
	return ((CUresult(*)(CUdeviceptr))real[FREE])(p);
}

static CUresult hook_alloc_async(CUdeviceptr *p, size_t bytes, void *stream)
{
	gpr_test_hook_calls[ALLOC_ASYNC]++;
	return ((CUresult(*)(CUdeviceptr *, size_t, void *))real[ALLOC_ASYNC])(
	    p, bytes, stream);
}

static void *hooks[N_HOOKS];

/* The hook for (name, version) asked of cuGetProcAddress; -1: none. */
static int by_base_name(const char *name, int version)
{
	if (strcmp(name, "cuMemAlloc") == 0 && version >= 3020)
		return ALLOC;
	if (strcmp(name, "cuMemFree") == 0 && version >= 3020)
		return FREE;
	if (strcmp(name, "cuMemAllocAsync") == 0)
		return ALLOC_ASYNC;
	if (strcmp(name, "cuGetProcAddress") == 0 && version >= 12000)
		return GPA;
	return -1;
}

static CUresult hook_gpa(const char *name, void **pfn, int version,
			 unsigned long long flags, int *status)
{
	gpr_test_hook_calls[GPA]++;
	CUresult r = ((gpa_fn)real[GPA])(name, pfn, version, flags, status);
	int k = r == 0 && *pfn ? by_base_name(name, version) : -1;
	if (k >= 0) {
		if (!real[k])
			real[k] = *pfn;
		*pfn = hooks[k];
	}
	return r;
}

static void *hooks[N_HOOKS] = {(void *)hook_alloc, (void *)hook_free,
			       (void *)hook_alloc_async, (void *)hook_gpa};
static const char *const names[N_HOOKS] = {
    "cuMemAlloc_v2", "cuMemFree_v2", "cuMemAllocAsync", "cuGetProcAddress_v2"};

__attribute__((visibility("default"))) void *dlsym(void *handle,
						   const char *name)
{
	void *p = libc_dlsym(handle, name);
	if (!p || handle == RTLD_NEXT || handle == RTLD_DEFAULT)
		return p;
	for (int k = 0; k < N_HOOKS; k++)
		if (strcmp(name, names[k]) == 0) {
			if (!real[k])
				real[k] = p;
			return hooks[k];
		}
	return p;
}
