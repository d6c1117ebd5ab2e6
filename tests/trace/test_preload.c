/*
 * The interposer end to end on the simulated driver, no GPU: each
 * scenario runs in its own process with LD_PRELOAD=libgpureclaim_trace.so
 * (and the sim's libcuda), as `gpureclaim trace` runs a program; the
 * parent checks the exit status, stderr and the log.
 *
 *   dlsym    every entry point of the operations table, found with dlsym
 *            (as ctypes, NCCL, JAX find them), one call of each operation
 *            or more; the log has every operation, bytes balance;
 *   gpa      the same through cuGetProcAddress, fetched through itself
 *            and asked at the versions the CUDA runtime asks (the older
 *            ABIs of cuDevicePrimaryCtxRelease and _Reset at 7000),
 *            per-thread-stream (_ptsz) variants asked with flags 2;
 *   linked   a program linked with the sim's libcuda (calls through the
 *            PLT reach the exported entry points);
 *   next     dlsym(RTLD_NEXT) still answers relative to its caller;
 *   dormant  preloaded, not recording: the program starts and stops
 *            sessions (gpureclaim_trace.h), queries what is held, forks;
 *   nocuda   a process that never calls the driver writes no log;
 *   hooked   dlsym and gpa with HOOK_LIB preloaded after the tracer: a
 *            stand-in for HAMi-core, whose dlsym and cuGetProcAddress hand
 *            out its own functions for some entry points; every operation
 *            is still in the log, and every call still reaches its hooks
 *            (the chain wrappers call them), counted by the hook itself;
 *   crosscheck  GPURECLAIM_TRACE_CROSSCHECK with the fake CUPTI, which
 *            the program tells of each call and context event as CUPTI
 *            would see them: the counts agree, context events included
 *            (older ABIs of the context calls); a call only CUPTI saw
 *            makes them differ;
 *   early    a session started before the driver is loaded: devices known;
 *   closeall a daemon's close-all loop, then its own files on the freed
 *            numbers: they hold what it wrote, the tracer stopped once;
 *   dlclose  three loads and unloads of libcuda: each unloads, each new
 *            load (elsewhere) is traced;
 *   full     a write that fails mid-chunk: the log cut back to whole chunks;
 *   churn, threads  10,000 pairs, 64 threads of pairs, with each clock: no
 *            free before its allocation.
 *
 * Usage: test_preload TRACER_LIB SIM_DIR LINKED_APP NEXT_LIB FAKE_CUPTI
 *                     HOOK_LIB
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../trace/inject/cupti_abi.h"
#include "check.h"
#include "../../trace/format/log_read.h"
#include "../../trace/read/log_stats.h"
#include "gpureclaim_trace.h"

#define MiB (1024ull * 1024)

typedef unsigned long long CUhandle;

static const char *tracer, *sim_dir, *linked_app, *next_lib, *fake_cupti,
    *hook_lib;
static char dir[] = "/tmp/gpr-preload-test-XXXXXX";

/* ---------------- the traced side ---------------- */

/* The driver functions a scenario uses, found one way or the other. */
static struct {
	CUresult (*init)(unsigned);
	CUresult (*retain)(CUcontext *, int);
	CUresult (*release)(int);
	CUresult (*reset)(int);
	CUresult (*set)(CUcontext);
	CUresult (*ctx_create)(CUcontext *, unsigned, int);
	CUresult (*ctx_destroy)(CUcontext);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*free)(CUdeviceptr);
	CUresult (*pitch)(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
	CUresult (*managed)(CUdeviceptr *, size_t, unsigned);
	CUresult (*alloc_async)(CUdeviceptr *, size_t, void *);
	CUresult (*alloc_async_ptsz)(CUdeviceptr *, size_t, void *);
	CUresult (*free_async)(CUdeviceptr, void *);
	CUresult (*free_async_ptsz)(CUdeviceptr, void *);
	CUresult (*pool)(void **, int);
	CUresult (*from_pool)(CUdeviceptr *, size_t, void *, void *);
	CUresult (*from_pool_ptsz)(CUdeviceptr *, size_t, void *, void *);
	CUresult (*trim)(void *, size_t);
	CUresult (*create)(CUhandle *, size_t, const void *,
			   unsigned long long);
	CUresult (*mrelease)(CUhandle);
	CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr,
			    unsigned long long);
	CUresult (*va_free)(CUdeviceptr, size_t);
	CUresult (*map)(CUdeviceptr, size_t, size_t, CUhandle,
			unsigned long long);
	CUresult (*unmap)(CUdeviceptr, size_t);
	CUresult (*host_alloc)(void **, size_t, unsigned);
	CUresult (*alloc_host)(void **, size_t);
	CUresult (*free_host)(void *);
} cu;

struct prop {
	int type, handle_types;
	int loc_type, loc_id;
	char rest[32];
};

static void *lib_cuda(void)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/libcuda.so.1", sim_dir);
	void *h = dlopen(path, RTLD_NOW);
	if (!h)
		exit(90);
	return h;
}

#define FIND(field, name) *(void **)&cu.field = dlsym(h, name)

static int find_in(void *h)
{
	FIND(init, "cuInit");
	FIND(retain, "cuDevicePrimaryCtxRetain");
	FIND(release, "cuDevicePrimaryCtxRelease_v2");
	FIND(reset, "cuDevicePrimaryCtxReset_v2");
	FIND(set, "cuCtxSetCurrent");
	FIND(ctx_create, "cuCtxCreate_v2");
	FIND(ctx_destroy, "cuCtxDestroy_v2");
	FIND(alloc, "cuMemAlloc_v2");
	FIND(free, "cuMemFree_v2");
	FIND(pitch, "cuMemAllocPitch_v2");
	FIND(managed, "cuMemAllocManaged");
	FIND(alloc_async, "cuMemAllocAsync");
	FIND(alloc_async_ptsz, "cuMemAllocAsync_ptsz");
	FIND(free_async, "cuMemFreeAsync");
	FIND(free_async_ptsz, "cuMemFreeAsync_ptsz");
	FIND(pool, "cuDeviceGetDefaultMemPool");
	FIND(from_pool, "cuMemAllocFromPoolAsync");
	FIND(from_pool_ptsz, "cuMemAllocFromPoolAsync_ptsz");
	FIND(trim, "cuMemPoolTrimTo");
	FIND(create, "cuMemCreate");
	FIND(mrelease, "cuMemRelease");
	FIND(reserve, "cuMemAddressReserve");
	FIND(va_free, "cuMemAddressFree");
	FIND(map, "cuMemMap");
	FIND(unmap, "cuMemUnmap");
	FIND(host_alloc, "cuMemHostAlloc");
	FIND(alloc_host, "cuMemAllocHost_v2");
	FIND(free_host, "cuMemFreeHost");
	void **all = (void **)&cu;
	for (size_t i = 0; i < sizeof(cu) / sizeof(void *); i++)
		if (!all[i])
			return -1;
	return 0;
}

static int find_by_dlsym(void)
{
	return find_in(lib_cuda());
}

typedef CUresult (*gpa_fn)(const char *, void **, int, unsigned long long,
			   int *);
static gpa_fn gpa;

static void *by_gpa(const char *name, int version, unsigned long long flags)
{
	void *p = NULL;
	int status = -1;
	if (gpa(name, &p, version, flags, &status) != 0 || status != 0)
		return NULL;
	return p;
}

#define GPA(field, name, version, flags)                                       \
	*(void **)&cu.field = by_gpa(name, version, flags)

/*
 * As the runtime: cuGetProcAddress_v2 by dlsym, then through itself, and
 * the context calls at the versions libcudart 12.9 and 13.5 ask
 * (r14.md's probe); `legacy`: cuCtxCreate and cuCtxDestroy at 2000, their
 * older ABIs.
 */
static int find_by_gpa(int legacy)
{
	void *h = lib_cuda();
	*(void **)&gpa = dlsym(h, "cuGetProcAddress_v2");
	if (!gpa)
		return -1;
	*(void **)&gpa = by_gpa("cuGetProcAddress", 12000, 0);
	if (!gpa)
		return -1;
	GPA(init, "cuInit", 2000, 0);
	GPA(retain, "cuDevicePrimaryCtxRetain", 7000, 0);
	GPA(release, "cuDevicePrimaryCtxRelease", 7000, 0);
	GPA(reset, "cuDevicePrimaryCtxReset", 7000, 0);
	GPA(set, "cuCtxSetCurrent", 4000, 0);
	GPA(ctx_create, "cuCtxCreate", legacy ? 2000 : 3020, 0);
	GPA(ctx_destroy, "cuCtxDestroy", legacy ? 2000 : 4000, 0);
	GPA(alloc, "cuMemAlloc", 3020, 0);
	GPA(free, "cuMemFree", 3020, 0);
	GPA(pitch, "cuMemAllocPitch", 3020, 0);
	GPA(managed, "cuMemAllocManaged", 6000, 0);
	GPA(alloc_async, "cuMemAllocAsync", 11020, 0);
	GPA(alloc_async_ptsz, "cuMemAllocAsync", 11020, 2);
	GPA(free_async, "cuMemFreeAsync", 11020, 0);
	GPA(free_async_ptsz, "cuMemFreeAsync", 11020, 2);
	GPA(pool, "cuDeviceGetDefaultMemPool", 11020, 0);
	GPA(from_pool, "cuMemAllocFromPoolAsync", 11020, 0);
	GPA(from_pool_ptsz, "cuMemAllocFromPoolAsync", 11020, 2);
	GPA(trim, "cuMemPoolTrimTo", 11020, 0);
	GPA(create, "cuMemCreate", 10020, 0);
	GPA(mrelease, "cuMemRelease", 10020, 0);
	GPA(reserve, "cuMemAddressReserve", 10020, 0);
	GPA(va_free, "cuMemAddressFree", 10020, 0);
	GPA(map, "cuMemMap", 10020, 0);
	GPA(unmap, "cuMemUnmap", 10020, 0);
	GPA(host_alloc, "cuMemHostAlloc", 2020, 0);
	GPA(alloc_host, "cuMemAllocHost", 3020, 0);
	GPA(free_host, "cuMemFreeHost", 2000, 0);
	void **all = (void **)&cu;
	for (size_t i = 0; i < sizeof(cu) / sizeof(void *); i++)
		if (!all[i])
			return -1;
	/* the legacy-stream and per-thread variants are other functions */
	if ((void *)cu.alloc_async == (void *)cu.alloc_async_ptsz)
		return -1;
	return 0;
}

#define OK(call)                                                               \
	do {                                                                   \
		if ((call) != 0) {                                             \
			fprintf(stderr, "failed: %s\n", #call);                \
			return 80 + __LINE__ % 10;                             \
		}                                                              \
	} while (0)

/*
 * Every operation of the table at least once, on two GPUs. Left held at
 * the end: 5 MiB on GPU 1 (device bytes) and nothing else.
 */
static int every_operation(void)
{
	CUcontext c0, c1, other;
	CUdeviceptr p, q;
	OK(cu.init(0));
	OK(cu.retain(&c0, 0)); /* context_created */
	OK(cu.set(c0));
	OK(cu.alloc(&p, MiB));
	OK(cu.free(p));
	size_t pitch;
	OK(cu.pitch(&p, &pitch, 1000, 10, 4));
	OK(cu.free(p));
	OK(cu.managed(&p, 3 * MiB, 1));
	OK(cu.free(p));
	OK(cu.alloc_async(&p, MiB, NULL));
	OK(cu.free_async_ptsz(p, NULL));
	OK(cu.alloc_async_ptsz(&p, 2 * MiB, NULL));
	OK(cu.free_async(p, NULL));
	void *pool;
	OK(cu.pool(&pool, 0));
	OK(cu.from_pool(&p, MiB, pool, NULL));
	OK(cu.from_pool_ptsz(&q, MiB, pool, NULL));
	OK(cu.free_async(p, NULL));
	OK(cu.free_async_ptsz(q, NULL));
	OK(cu.trim(pool, 0));
	/* VMM on the device, then NCCL-style host memory through VMM */
	struct prop dev = {1, 0, 1, 0, {0}}, host = {1, 0, 2, 0, {0}};
	CUhandle h, hh;
	CUdeviceptr va;
	OK(cu.create(&h, 2 * MiB, &dev, 0));
	OK(cu.reserve(&va, 4 * MiB, 0, 0, 0));
	OK(cu.map(va, 2 * MiB, 0, h, 0));
	OK(cu.unmap(va, 2 * MiB));
	OK(cu.mrelease(h));
	OK(cu.va_free(va, 4 * MiB));
	OK(cu.create(&hh, 4 * MiB, &host, 0));
	OK(cu.mrelease(hh));
	/* pinned host memory, both ways */
	void *hp;
	OK(cu.host_alloc(&hp, MiB, 0));
	memset(hp, 1, MiB); /* real memory */
	OK(cu.free_host(hp));
	OK(cu.alloc_host(&hp, 2 * MiB));
	OK(cu.free_host(hp));
	/* a context of its own on GPU 1, destroyed */
	OK(cu.ctx_create(&other, 0, 1));
	OK(cu.alloc(&p, MiB));
	OK(cu.free(p));
	OK(cu.ctx_destroy(other)); /* context_destroy */
	/* GPU 1's primary context keeps 5 MiB to the end */
	OK(cu.retain(&c1, 1));
	OK(cu.set(c1));
	OK(cu.alloc(&p, 5 * MiB));
	/* GPU 0's primary context: released (destroyed), reset (nothing) */
	OK(cu.set(c0));
	OK(cu.release(0));
	OK(cu.reset(0));
	return 0;
}

static int scenario_dlsym(void)
{
	if (find_by_dlsym() < 0)
		return 70;
	return every_operation();
}

static int scenario_gpa(void)
{
	if (find_by_gpa(0) < 0)
		return 71;
	return every_operation();
}

/*
 * Through the stand-in of HAMi-core: each call of every_operation() that
 * it hooks reached it (alloc, free, alloc-async; by gpa both stream
 * variants of alloc-async, HAMi-core's way, and the look-ups).
 */
static int scenario_hooked(int by_gpa)
{
	int rc = by_gpa ? scenario_gpa() : scenario_dlsym();
	if (rc != 0)
		return rc;
	long *calls = dlsym(RTLD_DEFAULT, "gpr_test_hook_calls");
	if (!calls)
		return 76;
	if (calls[0] != 3 || calls[1] != 4 || calls[2] != (by_gpa ? 2 : 1) ||
	    (by_gpa && calls[3] < 20)) {
		fprintf(stderr, "hook calls: %ld %ld %ld %ld\n", calls[0],
			calls[1], calls[2], calls[3]);
		return 77;
	}
	return 0;
}

/* fake_call's work: one driver call through the interposer. */
struct one_call {
	CUdeviceptr p;
	CUresult r;
	int free;
};

static void do_call(void *arg)
{
	struct one_call *c = arg;
	c->r = c->free ? cu.free(c->p) : cu.alloc(&c->p, MiB);
}

/*
 * The driver's calls told to the fake CUPTI as CUPTI sees them: each
 * memory call inside fake_call (its callbacks around the real call), each
 * context event as a resource callback where the driver would give it.
 * With `differ`, one more call that only CUPTI sees, as a driver function
 * reached by a private path would be.
 */
static int scenario_crosscheck(int differ)
{
	typedef CUresult call_fn(unsigned, void *, CUresult, CUcontext,
				 void (*)(void *), void *);
	typedef void resource_fn(unsigned, CUcontext);
	call_fn *call;
	resource_fn *resource;
	void *f = dlopen(fake_cupti, RTLD_NOW);
	if (!f || find_by_gpa(1) < 0)
		return 74;
	*(void **)&call = dlsym(f, "fake_call");
	*(void **)&resource = dlsym(f, "fake_resource");
	if (!call || !resource)
		return 75;
	CUcontext c0, other;
	OK(cu.init(0));
	OK(cu.retain(&c0, 0)); /* the first call recorded: CUPTI attaches */
	resource(CUPTI_CBID_RESOURCE_CONTEXT_CREATED, c0);
	OK(cu.set(c0));
	struct one_call a = {0, -1, 0};
	call(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, NULL, 0, c0, do_call, &a);
	a.free = 1;
	call(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, NULL, 0, c0, do_call, &a);
	OK(a.r);
	OK(cu.ctx_create(&other, 0, 1));
	resource(CUPTI_CBID_RESOURCE_CONTEXT_CREATED, other);
	resource(CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, other);
	OK(cu.ctx_destroy(other));
	OK(cu.set(c0));
	resource(CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, c0);
	OK(cu.release(0));
	if (differ)
		call(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, NULL, 0, c0, NULL,
		     NULL);
	return 0;
}

static int scenario_next(void)
{
	/* defined by NEXT_LIB, which comes before the tracer */
	return dlsym(RTLD_NEXT, "gpr_test_next") ? 0 : 72;
}

static int scenario_nocuda(void)
{
	/* names the tracer passes on; no driver call */
	return dlsym(RTLD_DEFAULT, "printf") && !dlsym(RTLD_DEFAULT, "cuInit")
		   ? 0
		   : 73;
}

/* ---- what the program owns: its descriptors, its libraries ---- */

static CUcontext primary; /* GPU 0's, current in the scenario's threads */

static int start_gpu(void)
{
	OK(cu.init(0));
	OK(cu.retain(&primary, 0));
	OK(cu.set(primary));
	return 0;
}

static int pairs(int n, size_t size)
{
	for (int i = 0; i < n; i++) {
		CUdeviceptr p;
		OK(cu.alloc(&p, size));
		OK(cu.free(p));
	}
	return 0;
}

/* The text of DIR/precious-i, which the program owns. */
static int precious(const char *dir_, int i, char *path, size_t plen,
		    char *text, size_t tlen)
{
	snprintf(path, plen, "%s/precious-%d", dir_, i);
	return snprintf(text, tlen, "precious %d\n", i);
}

/*
 * A daemon's start: after some allocations it closes every descriptor it
 * did not open (the tracer's among them), opens eight files of its own,
 * which get those numbers, and allocates on. Its files must hold what it
 * wrote, and nothing of the tracer's (checked by the parent, after the
 * tracer's exit handler has run).
 */
static int scenario_closeall(const char *data)
{
	if (find_by_dlsym() < 0 || start_gpu() != 0 || pairs(20, MiB) != 0)
		return 70;
	for (int fd = 3; fd < 1024; fd++)
		close(fd);
	for (int i = 0; i < 8; i++) {
		char path[600], text[32];
		int n =
		    precious(data, i, path, sizeof(path), text, sizeof(text));
		int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || write(fd, text, (size_t)n) != n)
			return 40;
		/* left open, the program's own */
	}
	return pairs(3000, MiB);
}

/*
 * A full disk, as far as the log goes: once the writer has written the
 * first 100 pairs, writes past 64 KiB fail (RLIMIT_FSIZE, SIGXFSZ
 * ignored: EFBIG), in the middle of the next chunk.
 */
static int scenario_full(const char *log)
{
	signal(SIGXFSZ, SIG_IGN);
	if (find_by_dlsym() < 0 || start_gpu() != 0 || pairs(100, MiB) != 0)
		return 70;
	for (;;) { /* until the writer has written them */
		struct gpr_trace t;
		char err[256];
		size_t n = 0;
		if (gpr_trace_load(log, &t, err, sizeof(err)) == 0) {
			n = t.n_recs;
			gpr_trace_free(&t);
		}
		if (n >= 200)
			break;
		struct timespec ts = {0, 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	struct rlimit rl = {64 << 10, 64 << 10};
	if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
		return 48;
	return pairs(5000, MiB);
}

/* 1 when the log at path is its header and whole chunks, nothing else. */
static int whole_chunks(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	struct stat st;
	int ok = fstat(fileno(f), &st) == 0 && st.st_size >= 64;
	uint64_t at = 64;
	while (ok && at < (uint64_t)st.st_size) {
		unsigned char h[16];
		uint64_t len;
		ok = fseek(f, (long)at, SEEK_SET) == 0 &&
		     fread(h, 1, sizeof(h), f) == sizeof(h);
		memcpy(&len, h + 8, 8);
		at += 16 + len;
	}
	fclose(f);
	return ok && at == (uint64_t)st.st_size;
}

/* Where the object loaded from `path` is mapped: [lo, hi). */
struct extent {
	const char *path;
	uintptr_t lo, hi;
};

static int find_extent(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct extent *e = arg;
	if (!info->dlpi_name || strcmp(info->dlpi_name, e->path) != 0)
		return 0;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (a < lo)
			lo = a;
		if (a + ph->p_memsz > hi)
			hi = a + ph->p_memsz;
	}
	long pg = sysconf(_SC_PAGESIZE);
	e->lo = lo & ~(uintptr_t)(pg - 1);
	e->hi = (hi + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1);
	return 1;
}

/*
 * A program that loads the driver, uses it, and unloads it, three times:
 * each dlclose unloads it (no reference of the tracer's keeps it), and
 * each load, at another address (the old one is taken meanwhile), is
 * traced as the first.
 */
static int scenario_dlclose(void)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/libcuda.so.1", sim_dir);
	for (int round = 0; round < 3; round++) {
		void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (!h || find_in(h) < 0)
			return 41;
		if (start_gpu() != 0 || pairs(1000, MiB) != 0)
			return 42;
		struct extent e = {path, 0, 0};
		if (!dl_iterate_phdr(find_extent, &e))
			return 43;
		if (dlclose(h) != 0)
			return 44;
		if (dlopen(path, RTLD_NOW | RTLD_NOLOAD))
			return 45; /* still loaded: someone holds it */
		/* the next load goes elsewhere: its first page taken */
		if (mmap((void *)e.lo, (size_t)sysconf(_SC_PAGESIZE), PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1,
			 0) != (void *)e.lo) {
			perror("mmap");
			return 46;
		}
	}
	return 0;
}

/* n pairs of 1 byte, one after the other (one thread's loop). */
static void *churn(void *arg)
{
	long n = (long)(intptr_t)arg;
	if (cu.set(primary) != 0)
		return (void *)1;
	return (void *)(intptr_t)pairs((int)n, 1);
}

/* `threads` threads, each `n` pairs of 1 byte at once. */
static int scenario_churn(int threads, long n)
{
	if (find_by_dlsym() < 0 || start_gpu() != 0)
		return 70;
	pthread_t t[64];
	for (int i = 0; i < threads; i++)
		if (pthread_create(&t[i], NULL, churn, (void *)(intptr_t)n))
			return 47;
	int rc = 0;
	for (int i = 0; i < threads; i++) {
		void *r;
		pthread_join(t[i], &r);
		rc |= (int)(intptr_t)r;
	}
	return rc;
}

/* ---- a program that starts and stops sessions itself ---- */

static struct {
	gpureclaim_trace_start_fn *start;
	gpureclaim_trace_stop_fn *stop;
	gpureclaim_trace_status_fn *status;
	gpureclaim_trace_live_fn *live;
	gpureclaim_trace_pause_fn *pause;
	gpureclaim_trace_resume_fn *resume;
} tr;

static int start(const char *path, int backend, char *why, size_t len)
{
	struct gpureclaim_trace_start_opts o = {sizeof(o), path, backend,
						NULL,	   why,	 len};
	return tr.start(&o);
}

static int scenario_dormant(const char *log1, const char *log2)
{
	*(void **)&tr.start = dlsym(RTLD_DEFAULT, "gpureclaim_trace_start");
	*(void **)&tr.stop = dlsym(RTLD_DEFAULT, "gpureclaim_trace_stop");
	*(void **)&tr.status = dlsym(RTLD_DEFAULT, "gpureclaim_trace_status");
	*(void **)&tr.live = dlsym(RTLD_DEFAULT, "gpureclaim_trace_live");
	*(void **)&tr.pause = dlsym(RTLD_DEFAULT, "gpureclaim_trace_pause");
	*(void **)&tr.resume = dlsym(RTLD_DEFAULT, "gpureclaim_trace_resume");
	if (!tr.start || !tr.stop || !tr.status || !tr.live || !tr.pause ||
	    !tr.resume || find_by_dlsym() < 0)
		return 60;
	char why[256], path[512];
	CUcontext c;
	CUdeviceptr before, p, q, host_vmm;
	void *hp;
	struct gpureclaim_trace_status st = {.sz = sizeof(st)};
	struct gpureclaim_trace_live rows[8];
	size_t n = 99;
	rows[0].sz = sizeof(rows[0]);
	OK(cu.init(0));
	OK(cu.retain(&c, 0));
	OK(cu.set(c));
	OK(cu.alloc(&before, MiB)); /* dormant: not recorded */
	if (tr.status(&st) != 0 || st.session != 0 || st.interposer != 1)
		return 61;
	if (tr.live(rows, 8, &n) != GPURECLAIM_TRACE_E_NOT_TRACED ||
	    tr.pause() != GPURECLAIM_TRACE_E_NOT_TRACED ||
	    tr.stop(path, 512) != GPURECLAIM_TRACE_E_NOT_TRACED)
		return 62; /* nothing to query, pause or stop */
	/* a newer caller's struct: a field this tracer does not know, set */
	struct {
		struct gpureclaim_trace_start_opts o;
		long later;
	} newer = {{sizeof(newer), log1, 0, NULL, why, sizeof(why)}, 1};
	struct gpureclaim_trace_status tiny = {.sz = sizeof(size_t)};
	if (tr.start(&newer.o) != GPURECLAIM_TRACE_E_ARGS ||
	    access(log1, F_OK) == 0 ||
	    tr.status(&tiny) != GPURECLAIM_TRACE_E_ARGS)
		return 57;
	if (start(log1, GPURECLAIM_TRACE_AUTO, why, sizeof(why)) != 0)
		return 63;
	if (tr.status(&st) != 0 || st.session != 1 ||
	    st.backend != GPURECLAIM_TRACE_INTERPOSE ||
	    strcmp(st.path, log1) != 0)
		return 64;
	/* a second start: the first one goes on */
	if (start(log2, GPURECLAIM_TRACE_AUTO, why, sizeof(why)) !=
		GPURECLAIM_TRACE_E_ACTIVE ||
	    !strstr(why, "already tracing to") || !strstr(why, log1))
		return 65;
	OK(cu.alloc(&p, 3 * MiB));
	OK(cu.alloc(&q, 2 * MiB));
	OK(cu.free(q));
	OK(cu.alloc_async(&q, 4 * MiB, NULL));
	OK(cu.host_alloc(&hp, MiB, 0));
	struct prop host = {1, 0, 2, 0, {0}};
	OK(cu.create(&host_vmm, 2 * MiB, &host, 0));
	OK(cu.free(before)); /* allocated before the session: size unknown */
	/* held now: 3 MiB device, 4 MiB pool, 1 MiB pinned, 2 MiB VMM host */
	if (tr.live(rows, 8, &n) != 0 || n != 4)
		return 66;
	int seen = 0;
	for (size_t i = 0; i < n; i++) {
		const struct gpureclaim_trace_live *r = &rows[i];
		int mine =
		    r->library && strcmp(r->library, "test_preload") == 0;
		if (mine && r->device == 0 && r->kind == 0 &&
		    r->bytes == 3 * MiB && r->count == 1)
			seen |= 1;
		if (mine && r->device == 0 && r->kind == 3 &&
		    r->bytes == 4 * MiB)
			seen |= 2;
		if (mine && r->device == -1 && r->kind == 1 && r->bytes == MiB)
			seen |= 4;
		if (mine && r->device == -1 && r->kind == 2 &&
		    r->bytes == 2 * MiB)
			seen |= 8;
	}
	if (seen != 15 || rows[0].bytes != 4 * MiB) /* largest first */
		return 67;
	/* a smaller caller's struct: only its fields are written */
	struct small {
		size_t sz;
		int device, kind;
	} sm[2] = {{sizeof(struct small), 0, 0}, {77, 77, 77}};
	if (tr.live((void *)sm, 1, &n) != 0 || n != 4 || sm[1].sz != 77)
		return 68;
	/* pause: these two are not in the log */
	if (tr.pause() != 0 || tr.pause() != 1)
		return 69;
	OK(cu.alloc(&q, 7 * MiB));
	OK(cu.free(q));
	if (tr.resume() != 0 || tr.resume() != 1)
		return 50;
	/* a child of a recording parent is not traced and cannot start */
	pid_t pid = fork();
	if (pid == 0) {
		char w[256];
		CUdeviceptr x;
		cu.alloc(&x, MiB); /* the sim: a child has no context */
		_exit(start(log2, 0, w, sizeof(w)) ==
				  GPURECLAIM_TRACE_E_FORKED &&
			      strstr(w, "forked")
			  ? 0
			  : 1);
	}
	int stc;
	waitpid(pid, &stc, 0);
	if (!WIFEXITED(stc) || WEXITSTATUS(stc) != 0)
		return 51;
	if (tr.stop(path, sizeof(path)) != 0 || strcmp(path, log1) != 0 ||
	    tr.stop(path, sizeof(path)) != GPURECLAIM_TRACE_E_NOT_TRACED)
		return 52;
	OK(cu.free(p)); /* between sessions: in no log */
	/* the first log is not written over; a second session */
	if (start(log1, 0, why, sizeof(why)) != GPURECLAIM_TRACE_E_LOG ||
	    !strstr(why, "exists"))
		return 53;
	/* an older caller's struct, without cupti and why: the defaults */
	struct {
		size_t sz;
		const char *path;
		int backend;
	} older = {sizeof(older), log2, GPURECLAIM_TRACE_AUTO};
	if (tr.start((const void *)&older) != 0)
		return 54;
	if (tr.live(rows, 8, &n) != 0 || n != 0) /* a session starts empty */
		return 55;
	OK(cu.alloc(&p, 6 * MiB));
	OK(cu.free(p));
	if (tr.stop(NULL, 0) != 0)
		return 56;
	return 0;
}

/*
 * Under `gpureclaim trace --dormant`, a session the program starts
 * before it first loads the driver (a `with gpureclaim.trace()` block
 * around its first CUDA use): every allocation has its device.
 */
static int scenario_early(const char *log)
{
	*(void **)&tr.start = dlsym(RTLD_DEFAULT, "gpureclaim_trace_start");
	*(void **)&tr.stop = dlsym(RTLD_DEFAULT, "gpureclaim_trace_stop");
	char path[600], why[256];
	snprintf(path, sizeof(path), "%s/libcuda.so.1", sim_dir);
	if (!tr.start || !tr.stop || dlopen(path, RTLD_NOW | RTLD_NOLOAD))
		return 60;
	if (start(log, GPURECLAIM_TRACE_AUTO, why, sizeof(why)) != 0)
		return 61;
	if (find_by_dlsym() < 0 || start_gpu() != 0 || pairs(2, MiB) != 0)
		return 62;
	CUcontext c1;
	OK(cu.retain(&c1, 1));
	OK(cu.set(c1));
	if (pairs(1, 2 * MiB) != 0)
		return 63;
	return tr.stop(NULL, 0) == 0 ? 0 : 64;
}

/* ---------------- the checking side ---------------- */

/* The sanitizer runtimes this test runs under, which must come first in
 * LD_PRELOAD, ASan's before all ("" in a normal build). */
static void sanitizers(char *out, size_t len)
{
	static const char *const names[] = {"/libasan.so", "/libubsan.so"};
	out[0] = '\0';
	for (int k = 0; k < 2; k++) {
		FILE *f = fopen("/proc/self/maps", "r");
		char line[1024];
		while (f && fgets(line, sizeof(line), f)) {
			char *p = strchr(line, '/');
			if (!p || !strstr(p, names[k]))
				continue;
			p[strcspn(p, "\n")] = '\0';
			size_t n = strlen(out);
			snprintf(out + n, len - n, "%s:", p);
			break;
		}
		if (f)
			fclose(f);
	}
}

static void run(const char *scenario, const char *exe, const char *env,
		const char *preload_first, const char *preload_after,
		struct gpr_test_run *r)
{
	char errpath[512];
	snprintf(errpath, sizeof(errpath), "%s/%s.stderr", dir, scenario);
	pid_t pid = fork();
	if (pid == 0) {
		FILE *e = freopen(errpath, "w", stderr);
		(void)e;
		char pre[4096], san[2048];
		sanitizers(san, sizeof(san));
		snprintf(pre, sizeof(pre), "%s%s%s%s%s%s", san,
			 preload_first ? preload_first : "",
			 preload_first ? ":" : "", tracer,
			 preload_after ? ":" : "",
			 preload_after ? preload_after : "");
		setenv("LD_PRELOAD", pre, 1);
		char cuda[600];
		snprintf(cuda, sizeof(cuda), "%s/libcuda.so.1", sim_dir);
		setenv("GPURECLAIM_CUDA_LIBRARY", cuda, 1);
		char state[64];
		snprintf(state, sizeof(state), "gpus=2;state=preload-%d",
			 (int)getpid());
		setenv("GPURECLAIM_SIM", state, 1);
		unsetenv("GPURECLAIM_TRACE_OUTPUT");
		unsetenv("GPURECLAIM_TRACE_DORMANT");
		if (gpr_test_setenv_list(env) < 0)
			_exit(96);
		if (exe)
			execl(exe, exe, (char *)NULL);
		else
			execl("/proc/self/exe", "test_preload", "--scenario",
			      scenario, tracer, sim_dir, linked_app, next_lib,
			      fake_cupti, hook_lib, (char *)NULL);
		_exit(99);
	}
	waitpid(pid, &r->status, 0);
	gpr_test_run_stderr(r, errpath);
	char shm[128];
	snprintf(shm, sizeof(shm), "/dev/shm/gpureclaim-sim-%d-preload-%d",
		 (int)getuid(), (int)pid);
	unlink(shm);
}

static size_t count(const struct gpr_trace *t, const char *op)
{
	size_t n = 0;
	for (size_t i = 0; i < t->n_recs; i++)
		n += strcmp(gpr_trace_str(t, t->recs[i].op, "?"), op) == 0;
	return n;
}

static const struct gpr_trace_rec *first(const struct gpr_trace *t,
					 const char *op)
{
	for (size_t i = 0; i < t->n_recs; i++)
		if (strcmp(gpr_trace_str(t, t->recs[i].op, "?"), op) == 0)
			return &t->recs[i];
	return NULL;
}

/* What every_operation() leaves in a log. */
static void check_every_operation(const char *name, const char *out,
				  const char *exe_env, const char *after)
{
	struct gpr_test_run r;
	run(name, NULL, exe_env, NULL, after, &r);
	CHECK(gpr_test_exited(&r, 0));
	CHECK(r.err[0] == '\0'); /* nothing said when all goes well */
	struct gpr_trace t;
	if (gpr_test_load(out, &t) < 0)
		return;
	CHECK(t.complete && t.hdr.dropped == 0);
	const char *be = gpr_trace_meta(&t, "backend");
	CHECK(be && strcmp(be, "interpose") == 0);
	const char *wait = gpr_trace_meta(&t, "wait");
	CHECK(wait && (strcmp(wait, "perf-gated") == 0 ||
		       strcmp(wait, "getrusage-gated") == 0));
	/* every operation of the table, as the CUPTI backend records them */
	for (unsigned op = 0; op < GPR_TRACE_N_OPS; op++) {
		size_t n = count(&t, gpr_trace_op_name(op));
		if (n == 0)
			fprintf(stderr, "%s: no %s\n", name,
				gpr_trace_op_name(op));
		CHECK(n > 0);
	}
	CHECK(count(&t, "cuMemAlloc_v2") == 3);
	CHECK(count(&t, "cuMemFree_v2") == 4);
	CHECK(count(&t, "cuMemAllocAsync") == 2);
	CHECK(count(&t, "cuMemAllocFromPoolAsync") == 2);
	CHECK(count(&t, "cuMemFreeAsync") == 4);
	CHECK(count(&t, "cuMemCreate") == 2);
	CHECK(count(&t, "context_created") == 3);
	CHECK(count(&t, "context_destroy") == 2); /* not the reset */
	/* sizes came from the maps; the pitch is the driver's */
	const struct gpr_trace_rec *pitch = first(&t, "cuMemAllocPitch_v2");
	CHECK(pitch && pitch->bytes == 1024 * 10);
	for (size_t i = 0; i < t.n_recs; i++) {
		const struct gpr_trace_rec *x = &t.recs[i];
		enum gpr_trace_kind k = gpr_trace_rec_kind(&t, x);
		if (k == GPR_K_FREE || k == GPR_K_RELEASE ||
		    k == GPR_K_HOST_FREE)
			CHECK(x->flags & GPR_TRACE_R_SIZE_MAP);
		if (k != GPR_K_CTX_CREATE && k != GPR_K_CTX_DESTROY)
			CHECK(strcmp(gpr_trace_str(&t, x->lib, "?"),
				     "test_preload") == 0);
	}
	/* the host VMM memory is booked as host, not on GPU 0 */
	int host_create = 0;
	for (size_t i = 0; i < t.n_recs; i++)
		if (gpr_trace_rec_kind(&t, &t.recs[i]) == GPR_K_CREATE &&
		    (t.recs[i].flags & GPR_TRACE_R_HOST))
			host_create += t.recs[i].device == -1 &&
				       t.recs[i].bytes == 4 * MiB;
	CHECK(host_create == 1);
	struct gpr_trace_stats s;
	CHECK(gpr_trace_stats_compute(&t, &s) == 0);
	CHECK(s.held_end == 5 * MiB); /* the bytes balance */
	CHECK(s.host_end == 0 && s.host_peak == 4 * MiB);
	CHECK(s.unmatched_frees == 0 && s.implied_frees == 0);
	CHECK(s.n_live == 1 && s.live[0].device == 1);
	CHECK(s.contexts_created == 3 && s.contexts_destroyed == 2);
	gpr_trace_stats_free(&s);
	/* the _ptsz variants went through wrappers of their own (through
	 * the hook's one cuMemAllocAsync, the chain wrapper of each) */
	const char *ep = gpr_trace_meta(&t, "entry_points");
	const char *ch = gpr_trace_meta(&t, "chained");
	CHECK(ep && strstr(ep, "cuMemFreeAsync_ptsz=1") &&
	      strstr(ep, "cuMemAllocFromPoolAsync_ptsz=1"));
	const char *ptsz = after && strcmp(name, "gpa") == 0 ? ch : ep;
	CHECK(ptsz && strstr(ptsz, "cuMemAllocAsync_ptsz=1"));
	const char *un = gpr_trace_meta(&t, "unrecognised");
	CHECK(un && un[0] == '\0');
	CHECK(ch &&
	      (after ? strstr(ch, "cuMemAlloc_v2=1,cuMemFree_v2=1") != NULL
		     : ch[0] == '\0'));
	gpr_trace_free(&t);
}

static void check_dlsym_gpa(void)
{
	char out[512], env[700];
	snprintf(out, sizeof(out), "%s/dlsym.trace", dir);
	snprintf(env, sizeof(env), "GPURECLAIM_TRACE_OUTPUT=%s", out);
	check_every_operation("dlsym", out, env, NULL);
	snprintf(out, sizeof(out), "%s/gpa.trace", dir);
	snprintf(env, sizeof(env), "GPURECLAIM_TRACE_OUTPUT=%s", out);
	check_every_operation("gpa", out, env, NULL);
	struct gpr_trace t;
	if (gpr_test_load(out, &t) == 0) {
		const char *ep = gpr_trace_meta(&t, "entry_points");
		/* by dlsym, then through itself, as the runtime does */
		CHECK(ep && strstr(ep, "cuGetProcAddress_v2=2"));
		/* the older ABIs the runtime's look-ups at 7000 get */
		CHECK(ep && strstr(ep, "cuDevicePrimaryCtxRelease=1") &&
		      strstr(ep, "cuDevicePrimaryCtxReset=1"));
		gpr_trace_free(&t);
	}
	/* the self time is reported; the waiting-time source can be chosen */
	snprintf(out, sizeof(out), "%s/self.trace", dir);
	snprintf(env, sizeof(env),
		 "GPURECLAIM_TRACE_OUTPUT=%s,GPURECLAIM_TRACE_SELFTIME=1,"
		 "GPURECLAIM_TRACE_WAIT=getrusage",
		 out);
	struct gpr_test_run r;
	run("dlsym", NULL, env, NULL, NULL, &r);
	CHECK(gpr_test_exited(&r, 0));
	CHECK(strstr(r.err, "gpureclaim-trace: self time: ") &&
	      strstr(r.err, " median ") && strstr(r.err, "(interposer)") &&
	      strstr(r.err, "getrusage-gated"));
	if (gpr_test_load(out, &t) == 0) {
		const char *w = gpr_trace_meta(&t, "wait");
		CHECK(w && strcmp(w, "getrusage-gated") == 0);
		gpr_trace_free(&t);
	}
	/* the library alone: a setting's typo said once, the default run */
	snprintf(out, sizeof(out), "%s/typo.trace", dir);
	snprintf(env, sizeof(env),
		 "GPURECLAIM_TRACE_OUTPUT=%s,GPURECLAIM_TRACE_WAIT=none_,"
		 "GPURECLAIM_TRACE_CLOCK=tsc",
		 out);
	run("dlsym", NULL, env, NULL, NULL, &r);
	CHECK(gpr_test_exited(&r, 0));
	CHECK(strstr(r.err, "gpureclaim-trace: GPURECLAIM_TRACE_WAIT='none_' "
			    "is not one of perf, getrusage or none; the "
			    "default is used\n"));
	CHECK(strstr(r.err, "gpureclaim-trace: GPURECLAIM_TRACE_CLOCK='tsc' "
			    "is not clock_gettime; the default is used\n"));
	if (gpr_test_load(out, &t) == 0) {
		const char *w = gpr_trace_meta(&t, "wait");
		CHECK(w && strcmp(w, "none") != 0);
		gpr_trace_free(&t);
	}
}

/* Another interposer after the tracer: the scenarios above through it. */
static void check_hooked(void)
{
	static const char *const modes[] = {"dlsym", "gpa"};
	for (int m = 0; m < 2; m++) {
		char out[512], env[700];
		snprintf(out, sizeof(out), "%s/hooked-%s.trace", dir, modes[m]);
		snprintf(env, sizeof(env),
			 "GPURECLAIM_TRACE_OUTPUT=%s,GPR_TEST_HOOKED=1", out);
		check_every_operation(modes[m], out, env, hook_lib);
		struct gpr_trace t;
		if (gpr_test_load(out, &t) < 0)
			continue;
		const char *ch = gpr_trace_meta(&t, "chained");
		if (m == 0)
			CHECK(ch && strcmp(ch, "cuMemAlloc_v2=1,cuMemFree_v2=1,"
					       "cuMemAllocAsync=1") == 0);
		else
			CHECK(ch && strcmp(ch, "cuGetProcAddress_v2=2,"
					       "cuMemAlloc_v2=1,cuMemFree_v2=1,"
					       "cuMemAllocAsync=1,"
					       "cuMemAllocAsync_ptsz=1") == 0);
		if (ch)
			fprintf(stderr, "hooked %s: chained=%s\n", modes[m],
				ch);
		gpr_trace_free(&t);
	}
}

static void check_linked(void)
{
	char out[512], env[700];
	struct gpr_test_run r;
	snprintf(out, sizeof(out), "%s/linked.trace", dir);
	snprintf(env, sizeof(env), "GPURECLAIM_TRACE_OUTPUT=%s", out);
	run("linked", linked_app, env, NULL, NULL, &r);
	CHECK(gpr_test_exited(&r, 0));
	struct gpr_trace t;
	if (gpr_test_load(out, &t) < 0)
		return;
	CHECK(count(&t, "cuMemAlloc_v2") == 11 &&
	      count(&t, "cuMemFree_v2") == 11);
	/* dlsym(RTLD_DEFAULT) found the tracer's exports: neither an unknown
	 * answer nor another interposer's */
	const char *un = gpr_trace_meta(&t, "unrecognised");
	const char *ch = gpr_trace_meta(&t, "chained");
	CHECK(un && un[0] == '\0' && ch && ch[0] == '\0');
	CHECK(count(&t, "context_created") == 1);
	struct gpr_trace_stats s;
	CHECK(gpr_trace_stats_compute(&t, &s) == 0 && s.held_end == 0 &&
	      s.peak == 10 * MiB);
	gpr_trace_stats_free(&s);
	const struct gpr_trace_rec *a = first(&t, "cuMemAlloc_v2");
	CHECK(a && strcmp(gpr_trace_str(&t, a->lib, "?"), "test_linked") == 0);
	gpr_trace_free(&t);
}

static void check_next_nocuda(void)
{
	struct gpr_test_run r;
	run("next", NULL, NULL, next_lib, NULL, &r);
	CHECK(gpr_test_exited(&r, 0));
	char out[512], env[700];
	snprintf(out, sizeof(out), "%s/nocuda.trace", dir);
	snprintf(env, sizeof(env), "GPURECLAIM_TRACE_OUTPUT=%s", out);
	run("nocuda", NULL, env, NULL, NULL, &r);
	CHECK(gpr_test_exited(&r, 0));
	CHECK(access(out, F_OK) != 0);
}

/*
 * Runs a crosscheck scenario into DIR/NAME.trace (path into out); the
 * crosscheck line it left on stderr, or "(none)".
 */
static const char *run_crosscheck(const char *scenario, const char *name,
				  char *out, size_t len, struct gpr_test_run *r)
{
	char env[1400];
	snprintf(out, len, "%s/%s.trace", dir, name);
	snprintf(env, sizeof(env),
		 "GPURECLAIM_TRACE_OUTPUT=%s,GPURECLAIM_TRACE_CROSSCHECK=1,"
		 "GPURECLAIM_CUPTI_LIBRARY=%s",
		 out, fake_cupti);
	run(scenario, NULL, env, NULL, NULL, r);
	CHECK(gpr_test_exited(r, 0));
	const char *l = strstr(r->err, "gpureclaim-trace: crosscheck ");
	return l ? l : "(none)";
}

static void check_crosscheck(void)
{
	static const char same[] = "): cuMemAlloc_v2=1/1,cuMemFree_v2=1/1,"
				   "context_created=2/2,context_destroy=2/2; "
				   "the same\n";
	char out[512];
	struct gpr_test_run r;
	const char *line =
	    run_crosscheck("crosscheck", "crosscheck", out, sizeof(out), &r);
	if (!strstr(line, same))
		fprintf(stderr, "crosscheck: %s\n", line);
	CHECK(strstr(line, same));
	struct gpr_trace t;
	if (gpr_test_load(out, &t) == 0) {
		CHECK(count(&t, "context_created") == 2 &&
		      count(&t, "context_destroy") == 2);
		const char *ep = gpr_trace_meta(&t, "entry_points");
		CHECK(ep && strstr(ep, "cuCtxCreate=1") &&
		      strstr(ep, "cuCtxDestroy=1") &&
		      strstr(ep, "cuDevicePrimaryCtxRelease=1"));
		const char *x = gpr_trace_meta(&t, "crosscheck");
		CHECK(x && strstr(x, "context_created=2/2"));
		gpr_trace_free(&t);
	}
	/* a call that reached the driver past the interposer */
	line =
	    run_crosscheck("crosscheck-differ", "differ", out, sizeof(out), &r);
	CHECK(strstr(line, "): cuMemAlloc_v2=1/2,") &&
	      strstr(line, "; THEY DIFFER\n"));
}

static void check_dormant(void)
{
	char log1[512], log2[512], env[1200];
	snprintf(log1, sizeof(log1), "%s/dormant1.trace", dir);
	snprintf(log2, sizeof(log2), "%s/dormant2.trace", dir);
	/* dormant: GPURECLAIM_TRACE_OUTPUT set, but nothing until start */
	snprintf(
	    env, sizeof(env),
	    "GPURECLAIM_TRACE_DORMANT=1,GPURECLAIM_TRACE_OUTPUT=%s/no.trace,"
	    "LOG1=%s,LOG2=%s",
	    dir, log1, log2);
	struct gpr_test_run r;
	run("dormant", NULL, env, NULL, NULL, &r);
	CHECK(gpr_test_exited(&r, 0));
	char no[600];
	snprintf(no, sizeof(no), "%s/no.trace", dir);
	CHECK(access(no, F_OK) != 0);
	struct gpr_trace t;
	if (gpr_test_load(log1, &t) == 0) {
		CHECK(t.complete);
		const char *by = gpr_trace_meta(&t, "started_by");
		CHECK(by && strcmp(by, "program") == 0);
		CHECK(count(&t, "cuMemAlloc_v2") == 2); /* not while paused */
		CHECK(count(&t, "cuMemFree_v2") == 2);
		CHECK(count(&t, "cuMemAllocAsync") == 1);
		CHECK(count(&t, "cuMemHostAlloc") == 1);
		CHECK(count(&t, "cuMemCreate") == 1);
		struct gpr_trace_stats s;
		CHECK(gpr_trace_stats_compute(&t, &s) == 0);
		CHECK(s.unmatched_frees == 1); /* allocated before the start */
		CHECK(s.held_end == 7 * MiB);  /* 3 MiB + the 4 MiB pool */
		gpr_trace_stats_free(&s);
		gpr_trace_free(&t);
	}
	if (gpr_test_load(log2, &t) == 0) {
		CHECK(t.complete && t.n_recs == 2);
		gpr_trace_free(&t);
	}
}

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GPR_TEST_TSAN 1
#endif
#endif

/* The program's own files after a run of scenario_closeall. */
static void check_closeall(void)
{
#ifdef GPR_TEST_TSAN
	/* the program closing the descriptor the writer thread uses is the
	 * race this scenario stages on purpose: TSan reports it */
	fprintf(stderr, "closeall: not run under TSan\n");
	return;
#endif
	char out[512], env[1400], data[600];
	snprintf(out, sizeof(out), "%s/closeall.trace", dir);
	snprintf(data, sizeof(data), "%s/closeall", dir);
	if (mkdir(data, 0700) != 0) {
		CHECK(!"mkdir");
		return;
	}
	snprintf(env, sizeof(env), "GPURECLAIM_TRACE_OUTPUT=%s,DATA=%s", out,
		 data);
	struct gpr_test_run r;
	run("closeall", NULL, env, NULL, NULL, &r);
	CHECK(gpr_test_exited(&r, 0));
	for (int i = 0; i < 8; i++) {
		char path[700], want[32], got[64] = "";
		int n =
		    precious(data, i, path, sizeof(path), want, sizeof(want));
		FILE *f = fopen(path, "r");
		size_t k = f ? fread(got, 1, sizeof(got) - 1, f) : 0;
		if (f)
			fclose(f);
		if (k != (size_t)n || memcmp(got, want, (size_t)n) != 0)
			fprintf(stderr, "closeall: %s holds %zu bytes: %.16s\n",
				path, k, got);
		CHECK(k == (size_t)n && memcmp(got, want, (size_t)n) == 0);
	}
	/* one line says so; the log is the tracer's, what it holds reads */
	const char *line = strstr(r.err, "gpureclaim-trace: ");
	CHECK(line && strstr(line, "no longer the trace log") &&
	      strstr(line, "tracing stopped") &&
	      !strstr(line + 1, "gpureclaim-trace: "));
	struct gpr_trace t;
	if (gpr_test_load(out, &t) == 0) {
		CHECK(!t.complete && t.hdr.pid != 0);
		gpr_trace_free(&t);
	}
}

/* A write that fails halfway: the log is cut back to whole chunks. */
static void check_full(void)
{
	char out[512], env[1200];
	snprintf(out, sizeof(out), "%s/full.trace", dir);
	snprintf(env, sizeof(env), "GPURECLAIM_TRACE_OUTPUT=%s,LOG1=%s", out,
		 out);
	struct gpr_test_run r;
	run("full", NULL, env, NULL, NULL, &r);
	CHECK(gpr_test_exited(&r, 0));
	CHECK(strstr(r.err, "gpureclaim-trace: writing ") &&
	      strstr(r.err, " failed: File too large; tracing stopped"));
	CHECK(whole_chunks(out));
	struct gpr_trace t;
	if (gpr_test_load(out, &t) == 0) {
		CHECK(!t.complete && t.n_recs >= 200 && t.n_recs < 10200);
		gpr_trace_free(&t);
	}
}

/* Three loads and unloads of the driver, each traced. */
static void check_dlclose(void)
{
	char out[512], env[700];
	snprintf(out, sizeof(out), "%s/dlclose.trace", dir);
	snprintf(env, sizeof(env), "GPURECLAIM_TRACE_OUTPUT=%s", out);
	struct gpr_test_run r;
	run("dlclose", NULL, env, NULL, NULL, &r);
	CHECK(gpr_test_exited(&r, 0));
	struct gpr_trace t;
	if (gpr_test_load(out, &t) < 0)
		return;
	CHECK(count(&t, "cuMemAlloc_v2") == 3000 &&
	      count(&t, "cuMemFree_v2") == 3000);
	const char *un = gpr_trace_meta(&t, "unrecognised");
	CHECK(un && un[0] == '\0');
	size_t on0 = 0;
	for (size_t i = 0; i < t.n_recs; i++)
		on0 += t.recs[i].device == 0;
	CHECK(on0 == t.n_recs);
	struct gpr_trace_stats s;
	CHECK(gpr_trace_stats_compute(&t, &s) == 0);
	CHECK(s.held_end == 0 && s.unmatched_frees == 0 && s.peak == MiB);
	gpr_trace_stats_free(&s);
	gpr_trace_free(&t);
}

/*
 * Alloc/free loops, one thread and 64 at once, in 1-byte pairs: with
 * either clock every free comes after its allocation, so nothing is left
 * held or unmatched, and the peak is what the threads held at most.
 */
static void check_churn(void)
{
	static const struct {
		const char *scenario, *clock;
		int threads;
		long pairs;
	} runs[] = {{"churn", NULL, 1, 10000},
		    {"threads", NULL, 64, 400},
		    {"churn", "clock_gettime", 1, 10000},
		    {"threads", "clock_gettime", 64, 400}};
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		char out[512], env[900];
		snprintf(out, sizeof(out), "%s/%s-%zu.trace", dir,
			 runs[i].scenario, i);
		snprintf(env, sizeof(env), "GPURECLAIM_TRACE_OUTPUT=%s%s%s",
			 out, runs[i].clock ? ",GPURECLAIM_TRACE_CLOCK=" : "",
			 runs[i].clock ? runs[i].clock : "");
		struct gpr_test_run r;
		run(runs[i].scenario, NULL, env, NULL, NULL, &r);
		CHECK(gpr_test_exited(&r, 0));
		struct gpr_trace t;
		if (gpr_test_load(out, &t) < 0)
			continue;
		size_t n = (size_t)(runs[i].threads * runs[i].pairs);
		CHECK(t.complete && t.hdr.dropped == 0);
		CHECK(count(&t, "cuMemAlloc_v2") == n &&
		      count(&t, "cuMemFree_v2") == n);
		struct gpr_trace_stats s;
		CHECK(gpr_trace_stats_compute(&t, &s) == 0);
		if (s.unmatched_frees || s.held_end || s.n_live ||
		    s.implied_frees)
			fprintf(stderr,
				"%s (clock %s): %llu unmatched frees, %llu "
				"implied, %zu never freed, peak %llu B\n",
				runs[i].scenario,
				gpr_trace_meta(&t, "clock")
				    ? gpr_trace_meta(&t, "clock")
				    : "?",
				(unsigned long long)s.unmatched_frees,
				(unsigned long long)s.implied_frees, s.n_live,
				(unsigned long long)s.peak);
		CHECK(s.unmatched_frees == 0 && s.implied_frees == 0);
		CHECK(s.held_end == 0 && s.n_live == 0);
		CHECK(runs[i].threads == 1
			  ? s.peak == 1
			  : s.peak >= 1 && s.peak <= (uint64_t)runs[i].threads);
		gpr_trace_stats_free(&s);
		gpr_trace_free(&t);
	}
}

/* A session started before the driver was loaded: devices known. */
static void check_early(void)
{
	char log[512], env[1200];
	snprintf(log, sizeof(log), "%s/early.trace", dir);
	snprintf(env, sizeof(env), "GPURECLAIM_TRACE_DORMANT=1,LOG1=%s", log);
	struct gpr_test_run r;
	run("early", NULL, env, NULL, NULL, &r);
	CHECK(gpr_test_exited(&r, 0));
	struct gpr_trace t;
	if (gpr_test_load(log, &t) < 0)
		return;
	CHECK(count(&t, "cuMemAlloc_v2") == 3 &&
	      count(&t, "context_created") == 2);
	for (size_t i = 0; i < t.n_recs; i++) {
		const struct gpr_trace_rec *x = &t.recs[i];
		const char *op = gpr_trace_str(&t, x->op, "?");
		int want = x->bytes == 2 * MiB ? 1 : 0;
		if (strcmp(op, "context_created") == 0)
			continue;
		if (x->device != want)
			fprintf(stderr, "early: %s of %llu B on device %d\n",
				op, (unsigned long long)x->bytes, x->device);
		CHECK(x->device == want);
	}
	gpr_trace_free(&t);
}

int main(int argc, char **argv)
{
	if (argc == 9 && strcmp(argv[1], "--scenario") == 0) {
		tracer = argv[3];
		sim_dir = argv[4];
		linked_app = argv[5];
		next_lib = argv[6];
		fake_cupti = argv[7];
		hook_lib = argv[8];
		const char *s = argv[2];
		int hooked = getenv("GPR_TEST_HOOKED") != NULL;
		if (strcmp(s, "dlsym") == 0)
			return hooked ? scenario_hooked(0) : scenario_dlsym();
		if (strcmp(s, "gpa") == 0)
			return hooked ? scenario_hooked(1) : scenario_gpa();
		if (strcmp(s, "next") == 0)
			return scenario_next();
		if (strcmp(s, "nocuda") == 0)
			return scenario_nocuda();
		if (strcmp(s, "crosscheck") == 0)
			return scenario_crosscheck(0);
		if (strcmp(s, "crosscheck-differ") == 0)
			return scenario_crosscheck(1);
		if (strcmp(s, "dormant") == 0)
			return scenario_dormant(getenv("LOG1"), getenv("LOG2"));
		if (strcmp(s, "early") == 0)
			return scenario_early(getenv("LOG1"));
		if (strcmp(s, "closeall") == 0)
			return scenario_closeall(getenv("DATA"));
		if (strcmp(s, "dlclose") == 0)
			return scenario_dlclose();
		if (strcmp(s, "full") == 0)
			return scenario_full(getenv("LOG1"));
		if (strcmp(s, "churn") == 0)
			return scenario_churn(1, 10000);
		if (strcmp(s, "threads") == 0)
			return scenario_churn(64, 400);
		return 98;
	}
	if (argc != 7) {
		fprintf(stderr, "usage: test_preload TRACER_LIB SIM_DIR "
				"LINKED_APP NEXT_LIB FAKE_CUPTI HOOK_LIB\n");
		return 2;
	}
	tracer = argv[1];
	sim_dir = argv[2];
	linked_app = argv[3];
	next_lib = argv[4];
	fake_cupti = argv[5];
	hook_lib = argv[6];
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	check_dlsym_gpa();
	check_hooked();
	check_linked();
	check_next_nocuda();
	check_crosscheck();
	check_dormant();
	check_early();
	check_closeall();
	check_dlclose();
	check_full();
	check_churn();
	return gpr_test_finish("test_preload", dir);
}
