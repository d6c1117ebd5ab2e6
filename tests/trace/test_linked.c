/*
 * A CUDA program linked with libcuda (-lcuda): its driver calls go
 * through the PLT, so a preloaded tracer sees them at its exported entry
 * points (tests/trace/test_preload.c runs it on the simulated driver).
 * Ten 1 MiB allocations, then their frees; then one more pair through
 * the functions dlsym(RTLD_DEFAULT) finds, as ctypes.CDLL(None) would:
 * the tracer's own exports, which record as they are.
 */
#include <dlfcn.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;

CUresult cuInit(unsigned int flags);
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, int dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuMemAlloc_v2(CUdeviceptr *p, unsigned long bytes);
CUresult cuMemFree_v2(CUdeviceptr p);

int main(void)
{
	CUcontext ctx;
	CUdeviceptr p[10];
	if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) ||
	    cuCtxSetCurrent(ctx))
		return 1;
	for (int i = 0; i < 10; i++)
		if (cuMemAlloc_v2(&p[i], 1 << 20))
			return 2;
	for (int i = 0; i < 10; i++)
		if (cuMemFree_v2(p[i]))
			return 3;
	CUresult (*alloc)(CUdeviceptr *, unsigned long);
	CUresult (*mfree)(CUdeviceptr);
	*(void **)&alloc = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
	*(void **)&mfree = dlsym(RTLD_DEFAULT, "cuMemFree_v2");
	if (!alloc || !mfree || alloc(&p[0], 1 << 20) || mfree(p[0]))
		return 4;
	return 0;
}
