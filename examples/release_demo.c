/*
 * The demo: a program that uses the CUDA driver like a framework does
 * (dlopen of libcuda.so.1, cuInit, primary contexts on GPUs 0 and 1) with
 * a tiny caching pool: a "free" keeps the block for reuse instead of
 * calling cuMemFree, as PyTorch's and CuPy's allocators do. The pool takes
 * part in releases as a gpr_releaser; one gpr_release hands its cache
 * back, and the report says how much the driver got back per GPU.
 *
 * Run it on the simulated driver: bash scripts/demo.sh build
 * (GPURECLAIM_SIM and LD_LIBRARY_PATH point libcuda.so.1 at build/sim).
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpureclaim.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

/* The driver entry points a framework would use. */
static struct {
	CUresult (*init)(unsigned);
	CUresult (*device_get)(int *, int);
	CUresult (*retain)(void **, int);
	CUresult (*set_current)(void *);
	CUresult (*get_current)(void **);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*free)(CUdeviceptr);
} cu;

#define MAX_GPUS 2
#define MAX_BLOCKS 64

/* The pool: blocks per GPU, each live or cached. */
struct block {
	int dev;
	CUdeviceptr ptr;
	size_t size;
	int cached;
};
struct pool {
	void *ctx[MAX_GPUS]; /* primary context of each GPU */
	struct block b[MAX_BLOCKS];
	int n;
};

static int load_driver(void)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!lib) {
		fprintf(stderr, "cannot load libcuda.so.1: %s\n", dlerror());
		return -1;
	}
	*(void **)&cu.init = dlsym(lib, "cuInit");
	*(void **)&cu.device_get = dlsym(lib, "cuDeviceGet");
	*(void **)&cu.retain = dlsym(lib, "cuDevicePrimaryCtxRetain");
	*(void **)&cu.set_current = dlsym(lib, "cuCtxSetCurrent");
	*(void **)&cu.get_current = dlsym(lib, "cuCtxGetCurrent");
	*(void **)&cu.alloc = dlsym(lib, "cuMemAlloc_v2");
	*(void **)&cu.free = dlsym(lib, "cuMemFree_v2");
	if (!cu.init || !cu.device_get || !cu.retain || !cu.set_current ||
	    !cu.get_current || !cu.alloc || !cu.free) {
		fprintf(stderr, "libcuda.so.1 lacks a driver symbol\n");
		return -1;
	}
	return cu.init(0) ? -1 : 0;
}

static int open_gpu(struct pool *p, int ordinal)
{
	int dev = 0;
	if (cu.device_get(&dev, ordinal) || cu.retain(&p->ctx[ordinal], dev))
		return -1;
	return 0;
}

/* The framework's malloc: reuse a cached block that fits, else cuMemAlloc. */
static CUdeviceptr pool_malloc(struct pool *p, int dev, size_t size)
{
	for (int i = 0; i < p->n; i++)
		if (p->b[i].cached && p->b[i].dev == dev &&
		    p->b[i].size >= size) {
			p->b[i].cached = 0;
			return p->b[i].ptr;
		}
	if (p->n == MAX_BLOCKS || cu.set_current(p->ctx[dev]))
		return 0;
	struct block *b = &p->b[p->n];
	if (cu.alloc(&b->ptr, size))
		return 0;
	b->dev = dev;
	b->size = size;
	b->cached = 0;
	p->n++;
	return b->ptr;
}

/* The framework's free: the block stays cached, the driver still has it. */
static void pool_free(struct pool *p, CUdeviceptr ptr)
{
	for (int i = 0; i < p->n; i++)
		if (p->b[i].ptr == ptr)
			p->b[i].cached = 1;
}

/* gpr_releaser.held: live and cached bytes on one GPU. */
static int held(void *data, int dev, struct gpr_held *out)
{
	struct pool *p = data;
	memset(out, 0, sizeof *out);
	out->known = 1;
	for (int i = 0; i < p->n; i++)
		if (p->b[i].dev == dev) {
			if (p->b[i].cached)
				out->cached += p->b[i].size;
			else
				out->live += p->b[i].size;
		}
	return 0;
}

/* gpr_releaser.release: cuMemFree the cached blocks of `dev`, with its
 * context current, restoring the caller's current context after. */
static int release(void *data, int dev, char *note, size_t note_sz)
{
	struct pool *p = data;
	if (dev == GPR_DEVICE_ONCE)
		return 0; /* no host-side pool here */
	void *prev = NULL;
	cu.get_current(&prev);
	cu.set_current(p->ctx[dev]);
	int freed = 0, failed = 0;
	for (int i = 0; i < p->n;) {
		if (p->b[i].dev == dev && p->b[i].cached) {
			if (cu.free(p->b[i].ptr)) {
				failed++;
				i++;
				continue;
			}
			p->b[i] = p->b[--p->n];
			freed++;
		} else {
			i++;
		}
	}
	cu.set_current(prev);
	if (failed) {
		snprintf(note, note_sz, "%d block(s) could not be freed",
			 failed);
		return -1;
	}
	snprintf(note, note_sz, "%d cached block(s) freed", freed);
	return 0;
}

/* The demo's report: text, or with --json gpr_report_json's document
 * (docs/c-api.md shows both), or with --html the HTML view. */
int main(int argc, char **argv)
{
	static struct pool pool;
	const char *form = argc > 1 ? argv[1] : "";
	if (argc > 2 || (argc == 2 && strcmp(form, "--json") != 0 &&
			 strcmp(form, "--html") != 0)) {
		fprintf(stderr, "usage: release_demo [--json | --html]\n");
		return 2;
	}
	if (load_driver() || open_gpu(&pool, 0) || open_gpu(&pool, 1)) {
		fprintf(stderr, "demo: the CUDA driver did not start\n");
		return 1;
	}
	/* A workload: 1 GiB and 3 MiB on GPU 0, 512 MiB + 100 bytes on GPU 1
	 * (the driver charges 2 MiB granules), all freed into the cache but
	 * one 256 MiB block still in use on GPU 1. */
	CUdeviceptr a = pool_malloc(&pool, 0, 1u << 30);
	CUdeviceptr b = pool_malloc(&pool, 0, 3u << 20);
	CUdeviceptr c = pool_malloc(&pool, 1, (512u << 20) + 100);
	CUdeviceptr live = pool_malloc(&pool, 1, 256u << 20);
	if (!a || !b || !c || !live) {
		fprintf(stderr, "demo: allocation failed\n");
		return 1;
	}
	pool_free(&pool, a);
	pool_free(&pool, b);
	pool_free(&pool, c);

	gpr_ctx *ctx = NULL;
	int rc = gpr_open(NULL, &ctx);
	if (rc) {
		fprintf(stderr, "gpr_open: %s\n", gpr_strerror(rc));
		return 1;
	}
	struct gpr_releaser r = {.sz = sizeof r,
				 .name = "demo-pool",
				 .data = &pool,
				 .held = held,
				 .release = release};
	gpr_register(ctx, &r);

	int devs[8], n = 0;
	gpr_devices_in_use(ctx, devs, 8, &n);
	if (!*form)
		printf("GPUs with a context in this process: %d\n", n);
	for (int i = 0; !*form && i < n && i < 8; i++) {
		uint64_t bytes = 0;
		if (gpr_process_bytes(ctx, devs[i], &bytes) == 0)
			printf("  GPU %d: the driver holds %" PRIu64
			       " bytes for us\n",
			       devs[i], bytes);
	}

	gpr_report *rep = NULL;
	rc = gpr_release(ctx, NULL, &rep);
	if (rc) {
		fprintf(stderr, "gpr_release: %s (%s)\n", gpr_strerror(rc),
			gpr_last_error(ctx));
		gpr_close(ctx);
		return 1;
	}
	char *text = !strcmp(form, "--json")   ? gpr_report_json(rep)
		     : !strcmp(form, "--html") ? gpr_report_html(rep)
					       : gpr_report_text(rep);
	printf("%s%s", *form ? "" : "\n", text ? text : "(out of memory)\n");
	gpr_free(text);
	gpr_report_free(rep);
	gpr_close(ctx);
	return 0;
}
