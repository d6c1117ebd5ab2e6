/*
 * The cost of a warm in-process query: what a framework integration pays
 * to ask "what do I hold on this GPU?" once NVML is loaded. Times
 * gpr_gpu_processes + gpr_process_bytes on GPU 0, repeated, after one
 * warm-up. Target: at most 0.2 ms per query.
 *
 * The process first holds a context and 64 MiB on CUDA ordinal 0 (as a
 * framework would), so its pid is in NVML's list and gpr_process_bytes
 * answers from it.
 *
 * usage: ps_query_bench [ITERATIONS]   (default 10000)
 * Without an NVIDIA driver: prints "skipped: no NVIDIA driver" and exits 0.
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gpureclaim.h"
#include "cuda_abi.h"

#define TARGET_US 200.0

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Opens a context on ordinal 0 and allocates 64 MiB; 0 on success. */
static int hold_memory(void)
{
	const char *path = getenv("GPURECLAIM_CUDA_LIBRARY");
	void *lib = dlopen(path && *path ? path : "libcuda.so.1",
			   RTLD_NOW | RTLD_GLOBAL);
	if (!lib)
		return -1;
	CUresult (*init)(unsigned int) =
	    (CUresult(*)(unsigned int))dlsym(lib, "cuInit");
	CUresult (*get)(CUdevice *, int) =
	    (CUresult(*)(CUdevice *, int))dlsym(lib, "cuDeviceGet");
	CUresult (*retain)(CUcontext *, CUdevice) = (CUresult(*)(
	    CUcontext *, CUdevice))dlsym(lib, "cuDevicePrimaryCtxRetain");
	CUresult (*set)(CUcontext) =
	    (CUresult(*)(CUcontext))dlsym(lib, "cuCtxSetCurrent");
	CUresult (*alloc)(CUdeviceptr *, size_t) =
	    (CUresult(*)(CUdeviceptr *, size_t))dlsym(lib, "cuMemAlloc_v2");
	CUdevice dev;
	CUcontext ctx;
	CUdeviceptr ptr;
	if (!init || !get || !retain || !set || !alloc || init(0) != 0 ||
	    get(&dev, 0) != 0 || retain(&ctx, dev) != 0 || set(ctx) != 0 ||
	    alloc(&ptr, 64u << 20) != 0)
		return -1;
	return 0; /* held until exit, on purpose */
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? strtol(argv[1], NULL, 10) : 10000;
	if (iters <= 0) {
		fprintf(stderr, "usage: ps_query_bench [ITERATIONS > 0]\n");
		return 2;
	}
	gpr_ctx *ctx = NULL;
	int n_gpus = 0, err = gpr_open(NULL, &ctx);
	if (err == 0)
		err = gpr_gpu_count(ctx, &n_gpus);
	if (err != 0 || n_gpus == 0) {
		printf("skipped: no NVIDIA driver (%s%s%s)\n",
		       err ? gpr_strerror(err) : "no GPU",
		       err && ctx ? ": " : "",
		       err && ctx ? gpr_last_error(ctx) : "");
		gpr_close(ctx);
		return 0;
	}
	int held = hold_memory() == 0;

	struct gpr_process *procs = NULL;
	size_t n = 0;
	uint64_t bytes = 0;
	int nvml0 = 0;
	if (gpr_nvml_index(ctx, 0, &nvml0) != 0)
		nvml0 = 0;
	/* warm-up: NVML loaded and initialised, lists sized */
	err = gpr_gpu_processes(ctx, nvml0, &procs, &n);
	gpr_free(procs);
	int bytes_err = gpr_process_bytes(ctx, 0, &bytes);
	if (err != 0) {
		fprintf(stderr, "ps_query_bench: gpr_gpu_processes: %s (%s)\n",
			gpr_strerror(err), gpr_last_error(ctx));
		gpr_close(ctx);
		return 1;
	}

	double t0 = now_s();
	for (long i = 0; i < iters; i++) {
		procs = NULL;
		gpr_gpu_processes(ctx, nvml0, &procs, &n);
		gpr_free(procs);
		if (bytes_err == 0)
			gpr_process_bytes(ctx, 0, &bytes);
	}
	double per_us = (now_s() - t0) / (double)iters * 1e6;

	printf("processes on GPU %d: %zu; this process holds a context: %s\n",
	       nvml0, n, held ? "yes" : "no");
	if (bytes_err == 0)
		printf("gpr_process_bytes(0) = %" PRIu64 " bytes\n", bytes);
	else
		printf("gpr_process_bytes(0): %s (not timed)\n",
		       gpr_strerror(bytes_err));
	printf("warm query (gpr_gpu_processes%s): %.1f us per query over "
	       "%ld, target <= %.0f us: %s\n",
	       bytes_err == 0 ? " + gpr_process_bytes" : "", per_us, iters,
	       TARGET_US, per_us <= TARGET_US ? "met" : "MISSED");
	gpr_close(ctx);
	return 0;
}
