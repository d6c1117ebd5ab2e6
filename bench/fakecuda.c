/*
 * A driver that does nothing, for the tracer's CPU figures without a GPU
 * (bench/trace_cpu.sh): libcuda.so.1 with the few calls bench/trace_churn
 * makes, each returning at once, so what a traced pair costs over an
 * untraced one is the tracer. FAKECUDA_EVICT_BYTES=N makes each
 * allocation and free first walk N bytes of memory, as a framework's and
 * the real driver's work between two calls would evict what the tracer
 * touched (its cold-cache cost).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

#define EXPORT __attribute__((visibility("default")))

static __thread void *current;
static int context;
static CUdeviceptr next = 0x10000000;
static unsigned char *junk;
static size_t junk_len;

static void evict(void)
{
	static int ready;
	if (!ready) {
		const char *e = getenv("FAKECUDA_EVICT_BYTES");
		junk_len = e ? strtoull(e, NULL, 10) : 0;
		junk = junk_len ? calloc(junk_len, 1) : NULL;
		ready = 1;
	}
	for (size_t i = 0; junk && i < junk_len; i += 64)
		junk[i]++;
}

EXPORT CUresult cuInit(unsigned flags)
{
	return flags ? 1 : 0;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
	*ctx = &context;
	return dev == 0 ? 0 : 101;
}

EXPORT CUresult cuDevicePrimaryCtxGetState(int dev, unsigned *flags,
					   int *active)
{
	*flags = 0;
	*active = current != NULL;
	return dev == 0 ? 0 : 101;
}

EXPORT CUresult cuCtxSetCurrent(void *ctx)
{
	current = ctx;
	return 0;
}

EXPORT CUresult cuCtxGetCurrent(void **ctx)
{
	*ctx = current;
	return 0;
}

EXPORT CUresult cuCtxGetDevice(int *dev)
{
	*dev = 0;
	return current ? 0 : 201;
}

/* The same address each time, as a caching-off allocator gets it back. */
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes)
{
	evict();
	*p = next;
	return bytes ? 0 : 1;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
	evict();
	return p ? 0 : 1;
}
