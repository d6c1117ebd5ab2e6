/*
 * Allocation churn for the trace overhead benchmark (bench/trace_bench.py).
 *
 *   trace_churn cuda N BYTES   N cuMemAlloc_v2/cuMemFree_v2 pairs through the
 *                              real driver (libcuda.so.1, dlopen); prints
 *                              microseconds per pair. Run it plain and under
 *                              `gpureclaim trace` to see the tracer's cost.
 *   trace_churn cuda-async N BYTES
 *                              N cuMemAllocAsync/cuMemFreeAsync pairs on the
 *                              legacy stream, from the device's default
 *                              pool: the driver pair that stays fast (a
 *                              few us) on machines where cuMemAlloc_v2 and
 *                              cuMemFree_v2 take tens of us each.
 *   trace_churn fake N         the same through tests/trace's fake CUPTI
 *                              ($GPURECLAIM_CUPTI_LIBRARY, and the injection
 *                              library at $CUDA_INJECTION64_PATH, loaded as
 *                              libcuda would): the tracer's own cost per
 *                              call, no GPU needed. Without the two
 *                              variables the calls go untraced.
 *   trace_churn cuda-ab N BYTES BLOCKS
 *   trace_churn fake-ab N BLOCKS
 *                              under `gpureclaim trace`: BLOCKS blocks of N
 *                              pairs traced and BLOCKS paused
 *                              (gpureclaim_trace_pause), alternating in one
 *                              process, so that what differs between the
 *                              two is the tracing alone; prints both
 *                              medians and the median of the per-block
 *                              ratios.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpureclaim_trace.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* One way of making pairs: i counts pairs made so far. 0: ok. */
typedef int (*pair_fn)(long i);

static gpureclaim_trace_pause_fn *trace_pause;
static gpureclaim_trace_resume_fn *trace_resume;

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A block of n pairs after 20 untimed ones; microseconds per pair. */
static double block(pair_fn pair, long n, long *made)
{
	for (int i = 0; i < 20; i++)
		if (pair((*made)++) != 0)
			return -1;
	double t0 = now_us();
	for (long i = 0; i < n; i++)
		if (pair((*made)++) != 0)
			return -1;
	return (now_us() - t0) / (double)n;
}

/*
 * Traced and paused blocks alternating in the order ABBA, ABBA... so that
 * a drift over the run weighs on both alike.
 */
static int ab(pair_fn pair, long n, int blocks)
{
	/* as include/gpureclaim_trace.h shows: found when traced */
	*(void **)&trace_pause = dlsym(RTLD_DEFAULT, "gpureclaim_trace_pause");
	*(void **)&trace_resume =
	    dlsym(RTLD_DEFAULT, "gpureclaim_trace_resume");
	if (!trace_pause || !trace_resume || trace_pause() != 0 ||
	    trace_resume() != 0) {
		fprintf(stderr, "not traced: run this under `gpureclaim "
				"trace`\n");
		return 2;
	}
	double *on = calloc((size_t)blocks, sizeof(double));
	double *off = calloc((size_t)blocks, sizeof(double));
	double *ratio = calloc((size_t)blocks, sizeof(double));
	if (!on || !off || !ratio)
		return 1;
	long made = 0;
	for (int b = 0; b < blocks; b++) {
		for (int k = 0; k < 2; k++) {
			int traced = (b % 2 == 0) == (k == 0);
			if ((traced ? trace_resume() : trace_pause()) < 0) {
				fprintf(stderr, "pause/resume failed\n");
				return 1;
			}
			double us = block(pair, n, &made);
			if (us < 0) {
				fprintf(stderr, "a driver call failed\n");
				return 1;
			}
			(traced ? on : off)[b] = us;
		}
		ratio[b] = on[b] / off[b];
	}
	trace_resume();
	printf("traced %.3f us/pair, paused %.3f us/pair (medians of %d "
	       "blocks of %ld pairs each); traced/paused per block: median "
	       "%+.2f%%\n",
	       median(on, blocks), median(off, blocks), blocks, n,
	       (median(ratio, blocks) - 1) * 100);
	free(on);
	free(off);
	free(ratio);
	return 0;
}

static CUresult (*cu_alloc)(CUdeviceptr *, size_t);
static CUresult (*cu_free)(CUdeviceptr);
static size_t cu_bytes;

static int cuda_pair(long i)
{
	(void)i;
	CUdeviceptr p;
	if (cu_alloc(&p, cu_bytes) != 0)
		return -1;
	return cu_free(p) != 0 ? -1 : 0;
}

typedef CUresult (*async_alloc_fn)(CUdeviceptr *, size_t, void *);
typedef CUresult (*async_free_fn)(CUdeviceptr, void *);

static int run_cuda(long n, size_t bytes, int blocks, int async)
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
	async_alloc_fn aalloc =
	    (async_alloc_fn)(uintptr_t)dlsym(cu, "cuMemAllocAsync");
	async_free_fn afree =
	    (async_free_fn)(uintptr_t)dlsym(cu, "cuMemFreeAsync");
	void *ctx;
	if (async && (!aalloc || !afree)) {
		printf("skipped: this driver has no cuMemAllocAsync\n");
		return 0;
	}
	if (!init || !retain || !set || !alloc || !mfree || init(0) != 0 ||
	    retain(&ctx, 0) != 0 || set(ctx) != 0) {
		printf("skipped: no usable GPU\n");
		return 0;
	}
	if (blocks > 0) {
		cu_alloc = alloc;
		cu_free = mfree;
		cu_bytes = bytes;
		return ab(cuda_pair, n, blocks);
	}
	CUdeviceptr p;
	const char *what = async ? "cuMemAllocAsync" : "cuMemAlloc_v2";
	double t0 = 0;
	for (long i = -100; i < n; i++) { /* 100 untimed to warm up */
		if (i == 0)
			t0 = now_us();
		CUresult rc =
		    async ? aalloc(&p, bytes, NULL) : alloc(&p, bytes);
		if (rc != 0) {
			fprintf(stderr, "%s failed: %d\n", what, rc);
			return 1;
		}
		rc = async ? afree(p, NULL) : mfree(p);
		if (rc != 0) {
			fprintf(stderr, "the free after %s failed: %d\n", what,
				rc);
			return 1;
		}
	}
	double t1 = now_us();
	printf("%.3f us/pair (%ld pairs of %zu bytes, %s)\n",
	       (t1 - t0) / (double)n, n, bytes, what);
	return 0;
}

struct alloc_params {
	CUdeviceptr *dptr;
	size_t bytes;
};

static CUresult (*fake_call)(unsigned, void *, CUresult, void *,
			     void (*)(void *), void *);

static int fake_pair(long i)
{
	CUdeviceptr p = 0x7f0000000000ull + (uint64_t)(i & 1023) * 4096;
	struct alloc_params a = {&p, 4096};
	fake_call(243, &a, 0, (void *)1, NULL, NULL);
	CUdeviceptr q = p;
	fake_call(245, &q, 0, (void *)1, NULL, NULL);
	return 0;
}

static int run_fake(long n, int blocks)
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
	*(void **)&fake_call = f ? dlsym(f, "fake_call") : NULL;
	if (!fake_call)
		return 1;
	if (blocks > 0)
		return ab(fake_pair, n, blocks);
	double t0 = now_us();
	for (long i = 0; i < n; i++)
		fake_pair(i);
	double t1 = now_us();
	printf("%.3f us/pair (%ld pairs, %s)\n", (t1 - t0) / (double)n, n,
	       inj && *inj ? "traced" : "untraced");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "cuda") == 0)
		return run_cuda(atol(argv[2]),
				argc > 3 ? (size_t)atol(argv[3]) : 1 << 20, 0,
				0);
	if (argc >= 3 && strcmp(argv[1], "cuda-async") == 0)
		return run_cuda(atol(argv[2]),
				argc > 3 ? (size_t)atol(argv[3]) : 1 << 20, 0,
				1);
	if (argc == 5 && strcmp(argv[1], "cuda-ab") == 0 && atoi(argv[4]) > 0)
		return run_cuda(atol(argv[2]), (size_t)atol(argv[3]),
				atoi(argv[4]), 0);
	if (argc >= 3 && strcmp(argv[1], "fake") == 0)
		return run_fake(atol(argv[2]), 0);
	if (argc == 4 && strcmp(argv[1], "fake-ab") == 0 && atoi(argv[3]) > 0)
		return run_fake(atol(argv[2]), atoi(argv[3]));
	fprintf(stderr,
		"usage: trace_churn cuda N [BYTES] | cuda-async N [BYTES] | "
		"cuda-ab N BYTES "
		"BLOCKS | fake N | fake-ab N BLOCKS\n");
	return 2;
}
