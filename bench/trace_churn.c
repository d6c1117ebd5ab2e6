/*
 * Allocation churn for the trace overhead benchmark (bench/trace_bench.py).
 *
 *   trace_churn cuda N BYTES   N cuMemAlloc_v2/cuMemFree_v2 pairs through the
 *                              real driver (libcuda.so.1, dlopen); prints
 *                              microseconds per pair. Run it plain and under
 *                              `gpureclaim trace` to see the tracer's cost.
 *   trace_churn fake N         the same through tests/trace's fake CUPTI
 *                              ($GPURECLAIM_CUPTI_LIBRARY, and the injection
 *                              library at $CUDA_INJECTION64_PATH, loaded as
 *                              libcuda would): the tracer's own cost per
 *                              call, no GPU needed. Without the two
 *                              variables the calls go untraced.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int run_cuda(long n, size_t bytes)
{
	void *cu = dlopen("libcuda.so.1", RTLD_NOW);
	if (!cu) {
		printf("skipped: no libcuda.so.1 (%s)\n", dlerror());
		return 0;
	}
	CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(cu, "cuInit");
	CUresult (*retain)(void **, int) =
	    (CUresult(*)(void **, int))dlsym(cu, "cuDevicePrimaryCtxRetain");
	CUresult (*set)(void *) =
	    (CUresult(*)(void *))dlsym(cu, "cuCtxSetCurrent");
	CUresult (*alloc)(CUdeviceptr *, size_t) =
	    (CUresult(*)(CUdeviceptr *, size_t))dlsym(cu, "cuMemAlloc_v2");
	CUresult (*mfree)(CUdeviceptr) =
	    (CUresult(*)(CUdeviceptr))dlsym(cu, "cuMemFree_v2");
	void *ctx;
	if (!init || !retain || !set || !alloc || !mfree || init(0) != 0 ||
	    retain(&ctx, 0) != 0 || set(ctx) != 0) {
		printf("skipped: no usable GPU\n");
		return 0;
	}
	CUdeviceptr p;
	for (int i = 0; i < 100; i++) /* warm up */
		if (alloc(&p, bytes) == 0)
			mfree(p);
	double t0 = now_us();
	for (long i = 0; i < n; i++) {
		if (alloc(&p, bytes) != 0) {
			fprintf(stderr, "cuMemAlloc_v2 failed\n");
			return 1;
		}
		mfree(p);
	}
	double t1 = now_us();
	printf("%.3f us/pair (%ld pairs of %zu bytes)\n", (t1 - t0) / (double)n,
	       n, bytes);
	return 0;
}

struct alloc_params {
	CUdeviceptr *dptr;
	size_t bytes;
};

static int run_fake(long n)
{
	const char *inj = getenv("CUDA_INJECTION64_PATH");
	const char *fake = getenv("GPURECLAIM_CUPTI_LIBRARY");
	if (!fake) {
		fprintf(stderr, "set GPURECLAIM_CUPTI_LIBRARY to the fake\n");
		return 2;
	}
	if (inj && *inj) {
		void *h = dlopen(inj, RTLD_NOW);
		int (*init)(void) =
		    h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;
		if (!init) {
			fprintf(stderr, "cannot load %s\n", inj);
			return 1;
		}
		init();
	}
	void *f = dlopen(fake, RTLD_NOW);
	CUresult (*call)(unsigned, void *, CUresult, void *, void (*)(void *),
			 void *) =
	    f ? (CUresult(*)(unsigned, void *, CUresult, void *,
			     void (*)(void *), void *))dlsym(f, "fake_call")
	      : NULL;
	if (!call)
		return 1;
	double t0 = now_us();
	for (long i = 0; i < n; i++) {
		CUdeviceptr p = 0x7f0000000000ull + (uint64_t)(i & 1023) * 4096;
		struct alloc_params a = {&p, 4096};
		call(243, &a, 0, (void *)1, NULL, NULL);
		CUdeviceptr q = p;
		call(245, &q, 0, (void *)1, NULL, NULL);
	}
	double t1 = now_us();
	printf("%.3f us/pair (%ld pairs, %s)\n", (t1 - t0) / (double)n, n,
	       inj && *inj ? "traced" : "untraced");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "cuda") == 0)
		return run_cuda(atol(argv[2]),
				argc > 3 ? (size_t)atol(argv[3]) : 1 << 20);
	if (argc >= 3 && strcmp(argv[1], "fake") == 0)
		return run_fake(atol(argv[2]));
	fprintf(stderr, "usage: trace_churn cuda N [BYTES] | fake N\n");
	return 2;
}
