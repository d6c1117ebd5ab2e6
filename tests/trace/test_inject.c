/*
 * The injection library end to end, without a GPU: libcupti-fake.so stands
 * in for CUPTI and the driver. Each scenario runs in its own process (the
 * library initialises once per process), as CUDA would run it: dlopen,
 * InitializeInjection, driver calls, exit or a signal. The parent checks
 * the exit status, the stderr and the log the scenario left.
 *
 * Usage: test_inject INJECTION_LIB FAKE_CUPTI
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

#define GiB (1024ull * 1024 * 1024)
#define THREADS 4
#define PAIRS 5000

static const char *inj_path, *fake_path;
static char dir[] = "/tmp/gpr-inject-test-XXXXXX";

/* ---------------- the traced side ---------------- */

static CUresult (*call)(unsigned, void *, CUresult, CUcontext, void (*)(void *),
			void *);
static CUresult (*call_padded)(size_t, unsigned, void *, CUresult, CUcontext);
static CUresult (*call_stale)(size_t, uintptr_t, unsigned, void *, CUresult,
			      CUcontext);
static void *(*last_caller)(void);
static void (*resource)(unsigned, CUcontext);
static int (*is_enabled)(int, unsigned);
/* The tracer's exports, typed by its header. */
static gpureclaim_trace_pause_fn *trace_pause;
static gpureclaim_trace_resume_fn *trace_resume;

#define CTX0 ((CUcontext)(uintptr_t)1) /* device 0 */
#define CTX1 ((CUcontext)(uintptr_t)2) /* device 1 */

/* The pair found as docs/trace.md shows, with the types of its header. */
static void find_pause_resume(void)
{
	const char *path = getenv("CUDA_INJECTION64_PATH");
	void *tracer = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
	if (tracer) {
		*(void **)&trace_pause =
		    dlsym(tracer, "gpureclaim_trace_pause");
		*(void **)&trace_resume =
		    dlsym(tracer, "gpureclaim_trace_resume");
	}
}

static void start(void)
{
	void *h = dlopen(inj_path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlopen %s: %s\n", inj_path, dlerror());
		exit(90);
	}
	int (*init)(void) = (int (*)(void))dlsym(h, "InitializeInjection");
	/* loaded as CUDA loads it, from the path `gpureclaim trace` sets */
	setenv("CUDA_INJECTION64_PATH", inj_path, 1);
	find_pause_resume();
	if (!trace_pause || !trace_resume)
		exit(94);
	if (!init || init() != 1)
		exit(91);
	void *f = dlopen(fake_path, RTLD_NOW);
	if (!f)
		exit(92);
	*(void **)&call = dlsym(f, "fake_call");
	*(void **)&resource = dlsym(f, "fake_resource");
	*(void **)&call_padded = dlsym(f, "fake_call_padded");
	*(void **)&call_stale = dlsym(f, "fake_call_stale");
	*(void **)&last_caller = dlsym(f, "fake_last_caller");
	*(void **)&is_enabled = dlsym(f, "fake_enabled");
	if (!call || !resource || !is_enabled || !call_padded || !call_stale ||
	    !last_caller)
		exit(93);
}

static CUresult alloc(CUdeviceptr addr, size_t bytes, CUresult res,
		      CUcontext ctx)
{
	CUdeviceptr out = addr;
	cuMemAlloc_v2_params p = {&out, bytes};
	return call(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &p, res, ctx, NULL,
		    NULL);
}

static CUresult mfree(CUdeviceptr addr, CUcontext ctx)
{
	cuMemFree_v2_params p = {addr};
	return call(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &p, 0, ctx, NULL,
		    NULL);
}

static void spin(void *arg)
{
	/* a call that takes a while: 2 ms of sleeping */
	(void)arg;
	struct timespec ts = {0, 2000000};
	nanosleep(&ts, NULL);
}

/* Records the churn threads made so far. */
static _Atomic uint64_t churned;

/*
 * Waits until the log (GPURECLAIM_TRACE_OUTPUT) holds all but CHURN_SLACK
 * of the records the churn threads made: the writer keeps up however slow
 * the machine, by waiting for it rather than for a time. The log's size is
 * its records plus a header, chunk headers and a few strings, so size /
 * record size over-counts the records written by those few hundred bytes'
 * worth: with the slack, fewer than 3,000 records wait in the rings, each
 * of which holds 8192, while a burst adds 1000.
 */
#define CHURN_SLACK 2048
static void wait_for_writer(void)
{
	const char *log = getenv("GPURECLAIM_TRACE_OUTPUT");
	for (;;) {
		struct stat st;
		uint64_t made = atomic_load(&churned);
		if (!log || (stat(log, &st) == 0 &&
			     (uint64_t)st.st_size / GPR_TRACE_RECORD_SIZE +
				     CHURN_SLACK >=
				 made))
			return;
		usleep(1000);
	}
}

static void *churn(void *arg)
{
	uintptr_t k = (uintptr_t)arg;
	for (int i = 0; i < PAIRS; i++) {
		CUdeviceptr a = 0x10000000000ull * (k + 1) + (uint64_t)i * 4096;
		alloc(a, 4096 + k, 0, CTX0);
		mfree(a, CTX0);
		atomic_fetch_add(&churned, 2);
		if (i % 500 == 499)
			wait_for_writer();
	}
	return NULL;
}

static int scenario_basic(void)
{
	start();
	if (!is_enabled(CUPTI_CB_DOMAIN_DRIVER_API,
			CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2) ||
	    !is_enabled(CUPTI_CB_DOMAIN_DRIVER_API,
			CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz) ||
	    !is_enabled(CUPTI_CB_DOMAIN_RESOURCE,
			CUPTI_CBID_RESOURCE_CONTEXT_CREATED))
		return 80;
	resource(CUPTI_CBID_RESOURCE_CONTEXT_CREATED, CTX0);
	/* 1 GiB allocated and freed; the free's size comes from the map */
	alloc(0x7f0000000000, GiB, 0, CTX0);
	cuMemFree_v2_params fp = {0x7f0000000000};
	call(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &fp, 0, CTX0, spin, NULL);
	/* VMM on device 1 */
	CUmemGenericAllocationHandle h = 0x77;
	CUmemAllocationProp_head prop = {0, 0, {1, 1}};
	cuMemCreate_params cp = {&h, 2u << 20, &prop, 0};
	call(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, &cp, 0, CTX0, NULL, NULL);
	CUdeviceptr va = 0x7f1000000000;
	cuMemAddressReserve_params rp = {&va, 4u << 20, 0, 0, 0};
	call(CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, &rp, 0, CTX1, NULL,
	     NULL);
	cuMemMap_params mp = {va, 2u << 20, 0, 0x77, 0};
	call(CUPTI_DRIVER_TRACE_CBID_cuMemMap, &mp, 0, CTX1, NULL, NULL);
	cuMemUnmap_params up = {va, 2u << 20};
	call(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, &up, 0, CTX1, NULL, NULL);
	cuMemRelease_params rel = {0x77};
	call(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, &rel, 0, CTX1, NULL, NULL);
	cuMemAddressFree_params af = {va, 4u << 20};
	call(CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree, &af, 0, CTX1, NULL,
	     NULL);
	/* async pool, per-thread default stream variants */
	CUdeviceptr ap = 0x7f2000000000;
	cuMemAllocAsync_params aa = {&ap, 4096, (void *)0x5};
	call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, &aa, 0, CTX0, NULL,
	     NULL);
	cuMemFreeAsync_params fa = {ap, (void *)0x5};
	call(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, &fa, 0, CTX0, NULL, NULL);
	/* a failure, a free of unknown memory, a pitched allocation */
	alloc(0, 1ull << 50, CUDA_ERROR_OUT_OF_MEMORY, CTX0);
	mfree(0x1234000, CTX0);
	CUdeviceptr pp = 0x7f3000000000;
	size_t pitch = 1024;
	cuMemAllocPitch_v2_params pa = {&pp, &pitch, 1000, 10, 4};
	call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2, &pa, 0, CTX0, NULL,
	     NULL);
	/* pinned host memory */
	void *host = (void *)0x600000;
	cuMemHostAlloc_params ha = {&host, 1u << 20, 0};
	call(CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, &ha, 0, CTX0, NULL, NULL);
	cuMemFreeHost_params fh = {host};
	call(CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost, &fh, 0, CTX0, NULL, NULL);
	/* threads, each well past its ring's size */
	pthread_t th[THREADS];
	for (uintptr_t i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, churn, (void *)i);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	resource(CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, CTX0);
	return 0; /* the log is written at exit */
}

static int scenario_sigterm(void)
{
	start();
	for (int i = 0; i < 100; i++)
		alloc(0x7f0000000000 + (uint64_t)i * 4096, 4096, 0, CTX0);
	raise(SIGTERM);
	return 70; /* not reached: SIGTERM's default action */
}

static volatile sig_atomic_t got_int;
static void on_int(int sig)
{
	(void)sig;
	got_int = 1;
}

static int scenario_handler(void)
{
	signal(SIGINT, on_int); /* the program's own handler, before CUDA */
	start();
	for (int i = 0; i < 10; i++)
		alloc(0x7f0000000000 + (uint64_t)i * 4096, 4096, 0, CTX0);
	raise(SIGINT);
	alloc(0x7f8000000000, 4096, 0, CTX0);
	return got_int ? 7 : 71;
}

static int scenario_fork(void)
{
	start();
	for (int i = 0; i < 10; i++)
		alloc(0x7f0000000000 + (uint64_t)i * 4096, 4096, 0, CTX0);
	pid_t pid = fork();
	if (pid == 0) {
		alloc(0x7f9000000000, 4096, 0, CTX0);
		exit(0); /* runs the library's atexit: must not touch the log */
	}
	int st;
	waitpid(pid, &st, 0);
	for (int i = 10; i < 20; i++)
		alloc(0x7f0000000000 + (uint64_t)i * 4096, 4096, 0, CTX0);
	return 0;
}

static int scenario_calls(void)
{
	start();
	for (int i = 0; i < 20; i++)
		alloc(0x7f0000000000 + (uint64_t)i * 4096, 4096, 0, CTX0);
	return 5;
}

/*
 * Call sites the stack walk must tell apart: three exported functions
 * (named through -rdynamic), reached at changing depths, one of them
 * through a driver frame whose size changes. Each tags its addresses.
 */
#define SITE_TAG(k) (0x7a0000000000ull + (uint64_t)(k)*0x1000000000ull)
#define SITE_CALLS 3000
static volatile int sink;

/* Two call sites alike but for their place in the program. */
#define DEFINE_SITE(name, k)                                                   \
	__attribute__((noinline, visibility("default"))) int name(int i)       \
	{                                                                      \
		CUdeviceptr out = SITE_TAG(k) + (uint64_t)i * 4096;            \
		cuMemAlloc_v2_params p = {&out, 4096};                         \
		CUresult r = call(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &p,   \
				  0, CTX0, NULL, NULL);                        \
		return (int)r + sink;                                          \
	}
DEFINE_SITE(site_a, 0)
DEFINE_SITE(site_b, 1)

__attribute__((noinline, visibility("default"))) int site_c(int i)
{
	CUdeviceptr out = SITE_TAG(2) + (uint64_t)i * 4096;
	cuMemAlloc_v2_params p = {&out, 4096};
	CUresult r =
	    call_padded((size_t)(i % 64) * 48,
			CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &p, 0, CTX0);
	return (int)r + sink;
}

__attribute__((noinline)) static int descend(int depth, int i)
{
	volatile char frame[64];
	frame[depth] = (char)i;
	int r;
	if (depth > 0)
		r = descend(depth - 1, i);
	else if (i % 3 == 0)
		r = site_a(i);
	else if (i % 3 == 1)
		r = site_b(i);
	else
		r = site_c(i);
	return r + frame[depth] - (char)i;
}

/*
 * A driver frame that keeps one size long enough to be trusted, then
 * grows, its new space filled with site_a's return address: the fast walk
 * reads that word and would name site_a for calls that site_s makes. The
 * periodic full walk must catch it.
 */
#define STALE_CALLS 1000
__attribute__((noinline, visibility("default"))) int site_s(int i, size_t pad,
							    uintptr_t fill)
{
	CUdeviceptr out = SITE_TAG(3) + (uint64_t)i * 4096;
	cuMemAlloc_v2_params p = {&out, 4096};
	CUresult r = call_stale(
	    pad, fill, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &p, 0, CTX0);
	return (int)r + sink;
}

static int scenario_stale(void)
{
	start();
	int bad = 0;
	for (int i = 0; i < 10; i++)
		bad |= site_a(i);
	uintptr_t ra_a = (uintptr_t)last_caller();
	for (int i = 0; i < 20; i++)
		bad |= site_s(i, 0, 0);
	for (int i = 20; i < 20 + STALE_CALLS; i++)
		bad |= site_s(i, 4096, ra_a);
	return bad ? 77 : 13;
}

static int scenario_sites(void)
{
	start();
	int bad = 0;
	for (int i = 0; i < SITE_CALLS; i++)
		bad |= descend(i % 7, i);
	return bad ? 76 : 10;
}

/*
 * Pause and resume from the program: what happens while paused is not
 * recorded, a CUPTI taken by another tool meanwhile keeps it paused.
 * Tags: 0x7b0.. recorded, 0x7c0.. not. Exit 11, or 80 + the failed step.
 */
static int scenario_pause(void)
{
	start();
	if (getenv("GPURECLAIM_TRACE_SUBSCRIBE_ONLY")) /* nothing to pause */
		return trace_pause() == GPURECLAIM_TRACE_E_NOT_TRACED &&
			       trace_resume() == GPURECLAIM_TRACE_E_NOT_TRACED
			   ? 12
			   : 81;
	for (int i = 0; i < 10; i++)
		alloc(0x7b0000000000 + (uint64_t)i * 4096, 4096, 0, CTX0);
	if (trace_pause() != 0 || trace_pause() != 1)
		return 82;
	for (int i = 0; i < 10; i++)
		alloc(0x7c0000000000 + (uint64_t)i * 4096, 4096, 0, CTX0);
	setenv("FAKE_CUPTI_BUSY", "other-tool", 1);
	if (trace_resume() != GPURECLAIM_TRACE_E_UNAVAILABLE)
		return 83;
	for (int i = 10; i < 15; i++)
		alloc(0x7c0000000000 + (uint64_t)i * 4096, 4096, 0, CTX0);
	unsetenv("FAKE_CUPTI_BUSY");
	if (trace_resume() != 0 || trace_resume() != 1)
		return 84;
	for (int i = 10; i < 20; i++)
		alloc(0x7b0000000000 + (uint64_t)i * 4096, 4096, 0, CTX0);
	return 11;
}

static int scenario_bigwrite(void)
{
	/* a 20 KiB file limit: the log's writes fail, the program goes on */
	signal(SIGXFSZ, SIG_IGN);
	struct rlimit rl = {20000, 20000};
	setrlimit(RLIMIT_FSIZE, &rl);
	start();
	for (int i = 0; i < 20000; i++) {
		alloc(0x7f0000000000, 4096, 0, CTX0);
		mfree(0x7f0000000000, CTX0);
		if (i % 1000 == 0)
			usleep(20000);
	}
	return 6;
}

static int scenario_sigmask(void)
{
	/*
	 * The sigwait pattern: a signal blocked in every thread of the
	 * program and taken with sigtimedwait. The library's writer thread
	 * must not be the one thread that lets it in (its default action
	 * would end the process).
	 */
	start();
	alloc(0x7f0000000000, 4096, 0, CTX0);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	kill(getpid(), SIGUSR1);
	struct timespec ts = {2, 0};
	return sigtimedwait(&set, NULL, &ts) == SIGUSR1 ? 9 : 72;
}

struct poke {
	pthread_t target;
	int wfd;
	_Atomic int done; /* the reading thread's read returned */
};

static void *poke(void *arg)
{
	/*
	 * SIGINT to the reading thread, again every 10 ms until its read
	 * returns: one of them comes while it is blocked in the read,
	 * however late the thread gets there, and must end it with EINTR.
	 * A byte only if 3,000 signals (30 s or more) did not: the read went
	 * on after each (restarted), and the scenario then fails.
	 */
	struct poke *p = arg;
	for (int i = 0; i < 3000 && !atomic_load(&p->done); i++) {
		pthread_kill(p->target, SIGINT);
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	if (!atomic_load(&p->done)) {
		ssize_t k = write(p->wfd, "x", 1);
		(void)k;
	}
	return NULL;
}

static int scenario_eintr(void)
{
	/*
	 * A handler installed without SA_RESTART, as CPython installs its
	 * SIGINT handler: a blocking read must end with EINTR, so that the
	 * program sees the signal now and not when the read completes.
	 */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_int;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	start();
	alloc(0x7f0000000000, 4096, 0, CTX0);
	int fds[2];
	if (pipe(fds) != 0)
		return 73;
	struct poke p = {pthread_self(), fds[1], 0};
	pthread_t th;
	pthread_create(&th, NULL, poke, &p);
	char c;
	ssize_t n = read(fds[0], &c, 1);
	int e = errno;
	atomic_store(&p.done, 1);
	pthread_join(th, NULL);
	return n < 0 && e == EINTR && got_int ? 8 : 74;
}

static int scenario_failterm(void)
{
	/* writes fail (file size limit), then SIGTERM: it must end at once */
	signal(SIGXFSZ, SIG_IGN);
	struct rlimit rl = {20000, 20000};
	setrlimit(RLIMIT_FSIZE, &rl);
	start();
	for (int i = 0; i < 2000; i++) {
		alloc(0x7f0000000000, 4096, 0, CTX0);
		mfree(0x7f0000000000, CTX0);
	}
	/* the writer tries, fails and stops tracing: the live query says
	 * so (-1, no session recording) once it has, however long it took */
	const char *path = getenv("CUDA_INJECTION64_PATH");
	void *tracer = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
	gpureclaim_trace_live_fn *live = NULL;
	if (tracer)
		*(void **)&live = dlsym(tracer, "gpureclaim_trace_live");
	if (!live)
		return 76;
	size_t n = 0;
	while (live(NULL, 0, &n) == 0)
		usleep(1000);
	/* when the handler starts, for the parent to time the handler alone */
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	fprintf(stderr, "raised at %lld.%09ld\n", (long long)ts.tv_sec,
		ts.tv_nsec);
	raise(SIGTERM);
	return 75;
}

/* ---------------- the checking side ---------------- */

/*
 * The fork scenario's child ends in exit(), where LeakSanitizer's check
 * takes ASan's allocator lock; the child can inherit that lock held by the
 * tracer's writer thread (the libasan of gcc 12 takes no lock around
 * fork), and then waits for ever (seen in make check's ASan build). That
 * scenario is about the library's atexit, not leaks: it runs without the
 * check. Nothing changes in a build without ASan.
 */
static void no_leak_check(void)
{
	const char *o = getenv("ASAN_OPTIONS");
	char opts[1024];
	snprintf(opts, sizeof(opts), "%s%sdetect_leaks=0", o ? o : "",
		 o && *o ? ":" : "");
	setenv("ASAN_OPTIONS", opts, 1);
}

static void run(const char *scenario, const char *out, const char *extra_env,
		struct gpr_test_run *r)
{
	char errpath[512];
	snprintf(errpath, sizeof(errpath), "%s/%s.stderr", dir, scenario);
	pid_t pid = fork();
	if (pid == 0) {
		FILE *e = freopen(errpath, "w", stderr);
		(void)e;
		setenv("GPURECLAIM_CUPTI_LIBRARY", fake_path, 1);
		setenv("GPURECLAIM_CUDA_LIBRARY", fake_path, 1);
		setenv("GPURECLAIM_TRACE_OUTPUT", out, 1);
		if (strcmp(scenario, "fork") == 0)
			no_leak_check();
		if (gpr_test_setenv_list(extra_env) < 0)
			_exit(96);
		execl("/proc/self/exe", "test_inject", "--scenario", scenario,
		      inj_path, fake_path, (char *)NULL);
		_exit(99);
	}
	waitpid(pid, &r->status, 0);
	gpr_test_run_stderr(r, errpath);
}

static size_t count_op(const struct gpr_trace *t, uint32_t op)
{
	size_t n = 0;
	for (size_t i = 0; i < t->n_recs; i++)
		n += t->recs[i].op == op;
	return n;
}

static const struct gpr_trace_rec *find(const struct gpr_trace *t, uint32_t op,
					uint64_t addr)
{
	for (size_t i = 0; i < t->n_recs; i++)
		if (t->recs[i].op == op && t->recs[i].addr == addr)
			return &t->recs[i];
	return NULL;
}

static void check_basic(void)
{
	char out[512];
	struct gpr_test_run r;
	snprintf(out, sizeof(out), "%s/basic.trace", dir);
	run("basic", out, NULL, &r);
	CHECK(gpr_test_exited(&r, 0));
	CHECK(r.err[0] == '\0'); /* nothing said when all goes well */
	struct gpr_trace t;
	if (gpr_test_load(out, &t) < 0)
		return;
	CHECK(t.complete);
	CHECK(t.hdr.dropped == 0);
	CHECK(t.n_recs == 2 + 15 + 2 * THREADS * PAIRS);
	/* the log says what recorded it: CUPTI, the interposer not preloaded */
	const char *be = gpr_trace_meta(&t, "backend");
	CHECK(be && strcmp(be, "cupti") == 0);
	CHECK(gpr_trace_meta(&t, "wait") != NULL);
	/* the context, created before any call named it, has its device
	 * (CUPTI's cuptiGetDeviceId), not -1 */
	const struct gpr_trace_rec *cc = NULL;
	for (size_t i = 0; i < t.n_recs && !cc; i++)
		if (t.recs[i].op == GPR_OP_CTX_CREATED)
			cc = &t.recs[i];
	CHECK(cc && cc->aux == (uintptr_t)CTX0 && cc->device == 0);
	/* the 1 GiB free knows its size; it took >= 2 ms, device 0 */
	const struct gpr_trace_rec *f = find(&t, 3, 0x7f0000000000);
	CHECK(f && f->bytes == GiB && (f->flags & GPR_TRACE_R_SIZE_MAP));
	CHECK(f && f->dur_ns >= 2000000 && f->device == 0);
	CHECK(f && (f->flags & GPR_TRACE_R_WAIT));
	/* the caller is this test program, not the fake CUPTI */
	CHECK(f && strcmp(gpr_trace_str(&t, f->lib, "?"), "test_inject") == 0);
	CHECK(f && strstr(gpr_trace_str(&t, f->site, "?"), "test_inject"));
	/* VMM: the release knows the handle's size; device from the prop */
	const struct gpr_trace_rec *c = find(&t, 8, 0);
	CHECK(c && c->aux == 0x77 && c->bytes == (2u << 20) && c->device == 1);
	const struct gpr_trace_rec *rel = find(&t, 9, 0);
	CHECK(rel && rel->bytes == (2u << 20) && rel->device == 1);
	const struct gpr_trace_rec *m = find(&t, 10, 0x7f1000000000);
	CHECK(m && m->aux == 0x77 && m->bytes == (2u << 20));
	CHECK(find(&t, 12, 0x7f1000000000) && find(&t, 13, 0x7f1000000000));
	/* async: the _ptsz id maps to the same operation */
	const struct gpr_trace_rec *fa = find(&t, 6, 0x7f2000000000);
	CHECK(fa && fa->bytes == 4096 && fa->aux == 0x5);
	/* failure, unknown free, pitch, host */
	const struct gpr_trace_rec *oom = find(&t, 0, 0);
	CHECK(oom && oom->result == CUDA_ERROR_OUT_OF_MEMORY);
	const struct gpr_trace_rec *u = find(&t, 3, 0x1234000);
	CHECK(u && u->bytes == 0 && (u->flags & GPR_TRACE_R_SIZE_NONE));
	const struct gpr_trace_rec *p = find(&t, 1, 0x7f3000000000);
	CHECK(p && p->bytes == 10240);
	const struct gpr_trace_rec *hf = find(&t, 16, 0x600000);
	CHECK(hf && hf->bytes == (1u << 20));
	CHECK(count_op(&t, 17) == 1 && count_op(&t, 18) == 1);
	/* every churned free found its own thread's size */
	size_t good = 0, tids = 0;
	uint32_t seen[THREADS + 1] = {0};
	for (size_t i = 0; i < t.n_recs; i++) {
		const struct gpr_trace_rec *x = &t.recs[i];
		if (x->op != 3 || x->addr < 0x10000000000ull ||
		    x->addr >= 0x10000000000ull * (THREADS + 1))
			continue;
		uint64_t k = x->addr / 0x10000000000ull - 1;
		good += x->bytes == 4096 + k;
		int known = 0;
		for (size_t j = 0; j < tids; j++)
			known |= seen[j] == x->tid;
		if (!known && tids < THREADS + 1)
			seen[tids++] = x->tid;
	}
	CHECK(good == THREADS * PAIRS);
	CHECK(tids == THREADS);
	struct gpr_trace_stats s;
	CHECK(gpr_trace_stats_compute(&t, &s) == 0);
	CHECK(s.peak >= GiB);
	CHECK(s.held_end == 10240); /* the pitched allocation */
	gpr_trace_stats_free(&s);
	gpr_trace_free(&t);
}

/* How many fast walks the self-time line reports; -1 without one. */
static long fast_walks(const char *err)
{
	const char *p = strstr(err, "stack walks: ");
	return p ? strtol(p + strlen("stack walks: "), NULL, 10) : -1;
}

static void check_sites_run(const char *name, const char *env, int want_fast)
{
	char out[512];
	struct gpr_test_run r;
	snprintf(out, sizeof(out), "%s/%s.trace", dir, name);
	run("sites", out, env, &r);
	CHECK(gpr_test_exited(&r, 10));
	long fast = fast_walks(r.err);
	if (want_fast)
		CHECK(fast > SITE_CALLS / 2);
	else
		CHECK(fast == 0);
	struct gpr_trace t;
	if (gpr_test_load(out, &t) < 0)
		return;
	static const char *const names[] = {"!site_a+", "!site_b+", "!site_c+"};
	size_t right[3] = {0, 0, 0};
	for (size_t i = 0; i < t.n_recs; i++) {
		const struct gpr_trace_rec *x = &t.recs[i];
		for (int k = 0; k < 3; k++)
			if (x->op == GPR_OP_MEM_ALLOC &&
			    x->addr >= SITE_TAG(k) &&
			    x->addr < SITE_TAG(k) + SITE_CALLS * 4096ull)
				right[k] +=
				    strstr(gpr_trace_str(&t, x->site, "?"),
					   names[k]) != NULL;
	}
	for (int k = 0; k < 3; k++) {
		if (right[k] != SITE_CALLS / 3)
			fprintf(stderr, "%s: %s attributed %zu of %d\n", name,
				names[k], right[k], SITE_CALLS / 3);
		CHECK(right[k] == SITE_CALLS / 3);
	}
	gpr_trace_free(&t);
}

/*
 * Every call attributed to its own function, by the fast walk where it
 * applies (x86-64) and by the full walk alone; the self-time line counts
 * the walks of each kind.
 */
static void check_sites(void)
{
#if defined(__x86_64__)
	check_sites_run("sites", "GPURECLAIM_TRACE_SELFTIME=1", 1);
#else
	check_sites_run("sites", "GPURECLAIM_TRACE_SELFTIME=1", 0);
#endif
	check_sites_run(
	    "sites-full",
	    "GPURECLAIM_TRACE_SELFTIME=1,GPURECLAIM_TRACE_FULL_WALK=1", 0);
}

static void check_pause(void)
{
	char out[512];
	struct gpr_test_run r;
	snprintf(out, sizeof(out), "%s/pause.trace", dir);
	run("pause", out, NULL, &r);
	CHECK(gpr_test_exited(&r, 11));
	CHECK(strstr(r.err, "gpureclaim-trace: CUPTI is already in use by "
			    "another tool (other-tool); tracing stays "
			    "paused") != NULL);
	struct gpr_trace t;
	if (gpr_test_load(out, &t) == 0) {
		size_t kept = 0, paused = 0;
		for (size_t i = 0; i < t.n_recs; i++) {
			uint64_t a = t.recs[i].addr;
			kept += a >= 0x7b0000000000 && a < 0x7b0000100000;
			paused += a >= 0x7c0000000000 && a < 0x7c0000100000;
		}
		CHECK(t.complete && t.n_recs == 20);
		CHECK(kept == 20 && paused == 0);
		gpr_trace_free(&t);
	}
	snprintf(out, sizeof(out), "%s/pause-sub.trace", dir);
	run("pause", out, "GPURECLAIM_TRACE_SUBSCRIBE_ONLY=1", &r);
	CHECK(gpr_test_exited(&r, 12));
}

static size_t count_str(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/*
 * On/off switches take 1/0/yes/no/true/false in any case: "0" and "no"
 * are off (recording goes on), an unknown word is said once on stderr and
 * taken as off.
 */
static void check_switches(void)
{
	static const char *const off[] = {"GPURECLAIM_TRACE_SUBSCRIBE_ONLY=0",
					  "GPURECLAIM_TRACE_SUBSCRIBE_ONLY=No",
					  "GPURECLAIM_TRACE_INJECT_ONLY=false",
					  "GPURECLAIM_TRACE_SUBSCRIBE_ONLY="};
	char out[512];
	struct gpr_test_run r;
	struct gpr_trace t;
	for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++) {
		snprintf(out, sizeof(out), "%s/switch-off-%zu.trace", dir, i);
		run("calls", out, off[i], &r);
		CHECK(gpr_test_exited(&r, 5));
		CHECK(r.err[0] == '\0');
		if (gpr_test_load(out, &t) == 0) {
			if (t.n_recs != 20)
				fprintf(stderr, "%s: %zu records\n", off[i],
					t.n_recs);
			CHECK(t.n_recs == 20);
			gpr_trace_free(&t);
		}
	}
	snprintf(out, sizeof(out), "%s/switch-on.trace", dir);
	run("calls", out, "GPURECLAIM_TRACE_SUBSCRIBE_ONLY=TRUE", &r);
	CHECK(gpr_test_exited(&r, 5));
	if (gpr_test_load(out, &t) == 0) {
		CHECK(t.n_recs == 0);
		gpr_trace_free(&t);
	}
	snprintf(out, sizeof(out), "%s/switch-bad.trace", dir);
	run("calls", out,
	    "GPURECLAIM_TRACE_SELFTIME=maybe,GPURECLAIM_TRACE_SUBSCRIBE_ONLY= "
	    "1",
	    &r);
	CHECK(gpr_test_exited(&r, 5));
	CHECK(count_str(r.err,
			"gpureclaim-trace: GPURECLAIM_TRACE_SELFTIME="
			"'maybe' is not one of "
			"1/0/yes/no/true/false/parts; taken as off\n") == 1);
	CHECK(count_str(r.err, "GPURECLAIM_TRACE_SUBSCRIBE_ONLY=' 1' is not "
			       "one of") == 1);
	CHECK(count_str(r.err, "gpureclaim-trace:") == 2);
	CHECK(strstr(r.err, "self time:") == NULL);
	if (gpr_test_load(out, &t) == 0) {
		CHECK(t.n_recs == 20);
		gpr_trace_free(&t);
	}
}

/*
 * The log's real name, told to `gpureclaim trace`: with the name taken (a
 * planted file), the log goes to NAME.<pid>, and the file named by the pid
 * in $GPURECLAIM_TRACE_NAMES_DIR says so.
 */
static void check_names(void)
{
	char names[512], out[512], env[600];
	struct gpr_test_run r;
	snprintf(names, sizeof(names), "%s/names", dir);
	CHECK(mkdir(names, 0700) == 0);
	snprintf(out, sizeof(out), "%s/taken.trace", dir);
	FILE *f = fopen(out, "w");
	if (f) {
		fputs("planted", f);
		fclose(f);
	}
	snprintf(env, sizeof(env), "GPURECLAIM_TRACE_NAMES_DIR=%s", names);
	run("calls", out, env, &r);
	CHECK(gpr_test_exited(&r, 5));
	DIR *d = opendir(names);
	struct dirent *e;
	int seen = 0;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		seen++;
		char path[1024], got[1024] = "", want[1024];
		snprintf(path, sizeof(path), "%s/%s", names, e->d_name);
		snprintf(want, sizeof(want), "%s.%s\n", out, e->d_name);
		FILE *nf = fopen(path, "r");
		if (nf) {
			size_t n = fread(got, 1, sizeof(got) - 1, nf);
			got[n] = '\0';
			fclose(nf);
		}
		if (strcmp(got, want) != 0)
			fprintf(stderr, "names: '%s', expected '%s'\n", got,
				want);
		CHECK(strcmp(got, want) == 0);
		struct gpr_trace t;
		want[strlen(want) - 1] = '\0';
		if (gpr_test_load(want, &t) == 0) {
			CHECK(t.n_recs == 20);
			CHECK(t.hdr.pid == strtoul(e->d_name, NULL, 10));
			gpr_trace_free(&t);
		}
	}
	if (d)
		closedir(d);
	CHECK(seen == 1);
}

/* A fast walk misled by a stale word repeats at most 256 times. */
static void check_stale(void)
{
	char out[512];
	struct gpr_test_run r;
	snprintf(out, sizeof(out), "%s/stale.trace", dir);
	run("stale", out, "GPURECLAIM_TRACE_SELFTIME=1", &r);
	CHECK(gpr_test_exited(&r, 13));
	struct gpr_trace t;
	if (gpr_test_load(out, &t) < 0)
		return;
	size_t right = 0, total = 0;
	for (size_t i = 0; i < t.n_recs; i++) {
		const struct gpr_trace_rec *x = &t.recs[i];
		if (x->op != 0 || x->addr < SITE_TAG(3) ||
		    x->addr >= SITE_TAG(3) + (20 + STALE_CALLS) * 4096ull)
			continue;
		total++;
		right +=
		    strstr(gpr_trace_str(&t, x->site, "?"), "!site_s+") != NULL;
	}
	CHECK(total == 20 + STALE_CALLS);
	if (right < total - 256)
		fprintf(stderr, "stale: %zu of %zu attributed to site_s; %s\n",
			right, total, r.err);
	CHECK(right >= total - 256);
	gpr_trace_free(&t);
}

static void check_busy(void)
{
	char out[512];
	struct gpr_test_run r;
	snprintf(out, sizeof(out), "%s/busy.trace", dir);
	run("calls", out, "FAKE_CUPTI_BUSY=nsys-fake", &r);
	CHECK(gpr_test_exited(&r, 5));
	CHECK(strstr(r.err, "gpureclaim-trace: CUPTI is already in use by "
			    "another tool (nsys-fake); this run is not "
			    "traced") != NULL);
	CHECK(access(out, F_OK) != 0);
	run("calls", out, "FAKE_CUPTI_BUSY=-", &r);
	CHECK(gpr_test_exited(&r, 5));
	CHECK(strstr(r.err, "already in use by another tool (e.g. "
			    "torch.profiler or nsys)") != NULL);
	CHECK(access(out, F_OK) != 0);
}

static void check_failures(void)
{
	struct gpr_test_run r;
	run("calls", "/nonexistent-dir/x.trace", NULL, &r);
	CHECK(gpr_test_exited(&r, 5));
	CHECK(strstr(r.err, "gpureclaim-trace: cannot create "
			    "/nonexistent-dir/x.trace") != NULL);
	char out[512];
	snprintf(out, sizeof(out), "%s/nocupti.trace", dir);
	run("calls", out, "GPURECLAIM_CUPTI_LIBRARY=/nonexistent/libcupti.so",
	    &r);
	CHECK(gpr_test_exited(&r, 5));
	CHECK(strstr(r.err, "gpureclaim-trace: cannot load CUPTI") != NULL);
	CHECK(access(out, F_OK) != 0);
	/* a path longer than a log's may be: refused whole, never cut */
	static char longp[4200];
	memset(longp, 'd', sizeof(longp) - 1);
	longp[0] = '/';
	for (size_t i = 100; i < sizeof(longp) - 1; i += 100)
		longp[i] = '/';
	run("calls", longp, NULL, &r);
	CHECK(gpr_test_exited(&r, 5));
	CHECK(strstr(r.err,
		     "gpureclaim-trace: GPURECLAIM_TRACE_OUTPUT is 4199 "
		     "bytes, more than 4080; this run is not traced") != NULL);
	/* a symlink in the way is never followed */
	snprintf(out, sizeof(out), "%s/link.trace", dir);
	char target[512];
	snprintf(target, sizeof(target), "%s/target", dir);
	FILE *tf = fopen(target, "w");
	if (tf) {
		fputs("precious", tf);
		fclose(tf);
	}
	CHECK(symlink(target, out) == 0);
	run("calls", out, NULL, &r);
	CHECK(gpr_test_exited(&r, 5));
	char buf[16] = "";
	tf = fopen(target, "r");
	if (tf) {
		CHECK(fread(buf, 1, sizeof(buf) - 1, tf) == 8);
		fclose(tf);
	}
	CHECK(strcmp(buf, "precious") == 0);
	/* it went to link.trace.<pid> instead */
	CHECK(strstr(r.err, "cannot create") == NULL);
	/* the file size limit: a message, the program finishes */
	snprintf(out, sizeof(out), "%s/big.trace", dir);
	run("bigwrite", out, NULL, &r);
	CHECK(gpr_test_exited(&r, 6));
	CHECK(strstr(r.err, "gpureclaim-trace: writing") != NULL);
	CHECK(strstr(r.err, "tracing stopped, the program continues") != NULL);
}

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* What the library's own handler and thread must leave as they were. */
static void check_signal_behaviour(void)
{
	char out[512];
	struct gpr_test_run r;
	snprintf(out, sizeof(out), "%s/sigmask.trace", dir);
	run("sigmask", out, NULL, &r);
	CHECK(gpr_test_exited(&r, 9));
	snprintf(out, sizeof(out), "%s/eintr.trace", dir);
	run("eintr", out, NULL, &r);
	CHECK(gpr_test_exited(&r, 8));
	snprintf(out, sizeof(out), "%s/failterm.trace", dir);
	run("failterm", out, NULL, &r);
	double ended = mono_s();
	CHECK(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGTERM);
	CHECK(strstr(r.err, "tracing stopped, the program continues") != NULL);
	/*
	 * No wait for a log that will never close: the handler's wait for
	 * the final flush gives up after 2 s (200 sleeps of 10 ms), so a
	 * handler that waited took 2 s at least; one that did not is far
	 * quicker. Timed from the raise on, not from the start of the run.
	 */
	const char *at = strstr(r.err, "raised at ");
	double raised = at ? strtod(at + 10, NULL) : 0;
	CHECK(at != NULL);
	if (at && ended - raised >= 2.0)
		fprintf(stderr, "failterm's handler took %.2f s\n",
			ended - raised);
	CHECK(at && ended - raised < 2.0);
}

static void check_signals(void)
{
	char out[512];
	struct gpr_test_run r;
	struct gpr_trace t;
	snprintf(out, sizeof(out), "%s/term.trace", dir);
	run("sigterm", out, NULL, &r);
	CHECK(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGTERM);
	if (gpr_test_load(out, &t) == 0) {
		CHECK(t.complete);
		CHECK(t.n_recs == 100);
		gpr_trace_free(&t);
	}
	snprintf(out, sizeof(out), "%s/int.trace", dir);
	run("handler", out, NULL, &r);
	CHECK(gpr_test_exited(
	    &r, 7)); /* the program's handler ran, exit code kept */
	if (gpr_test_load(out, &t) == 0) {
		CHECK(t.complete);
		CHECK(t.n_recs == 11);
		gpr_trace_free(&t);
	}
	snprintf(out, sizeof(out), "%s/fork.trace", dir);
	run("fork", out, NULL, &r);
	CHECK(gpr_test_exited(&r, 0));
	if (gpr_test_load(out, &t) == 0) {
		CHECK(t.complete);
		CHECK(t.n_recs == 20); /* none from the child, none twice */
		CHECK(find(&t, 0, 0x7f9000000000) == NULL);
		gpr_trace_free(&t);
	}
}

int main(int argc, char **argv)
{
	/* As a CUDA program run by `gpureclaim trace`: CUDA would load us. */
	if (argc == 2 && strcmp(argv[1], "--cuda-app") == 0) {
		inj_path = getenv("CUDA_INJECTION64_PATH");
		fake_path = getenv("GPURECLAIM_CUPTI_LIBRARY");
		if (!inj_path || !fake_path)
			return 97;
		printf("app-out\n");
		fflush(stdout);
		return scenario_calls();
	}
	if (argc == 5 && strcmp(argv[1], "--scenario") == 0) {
		inj_path = argv[3];
		fake_path = argv[4];
		const char *s = argv[2];
		if (strcmp(s, "basic") == 0)
			return scenario_basic();
		if (strcmp(s, "sigterm") == 0)
			return scenario_sigterm();
		if (strcmp(s, "handler") == 0)
			return scenario_handler();
		if (strcmp(s, "fork") == 0)
			return scenario_fork();
		if (strcmp(s, "calls") == 0)
			return scenario_calls();
		if (strcmp(s, "sites") == 0)
			return scenario_sites();
		if (strcmp(s, "stale") == 0)
			return scenario_stale();
		if (strcmp(s, "pause") == 0)
			return scenario_pause();
		if (strcmp(s, "bigwrite") == 0)
			return scenario_bigwrite();
		if (strcmp(s, "sigmask") == 0)
			return scenario_sigmask();
		if (strcmp(s, "eintr") == 0)
			return scenario_eintr();
		if (strcmp(s, "failterm") == 0)
			return scenario_failterm();
		return 98;
	}
	if (argc != 3) {
		fprintf(stderr,
			"usage: test_inject INJECTION_LIB FAKE_CUPTI\n");
		return 2;
	}
	inj_path = argv[1];
	fake_path = argv[2];
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	check_basic();
	check_sites();
	check_stale();
	check_pause();
	check_busy();
	check_switches();
	check_names();
	check_failures();
	check_signals();
	check_signal_behaviour();
	return gpr_test_finish("test_inject", dir);
}
