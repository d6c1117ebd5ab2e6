/*
 * Who called the driver: the first frame, walking up from the CUPTI
 * callback, whose object is not libcuda, a libcudart, libcupti or this
 * library. Unwinding costs about 0.1 us a frame; what each return address
 * means (skip, or which library and call site) is cached process-wide in a
 * lock-free table, so dladdr() and interning run once per address.
 *
 * The string table: interned strings get ids from GPR_TRACE_N_OPS up (the
 * operation names come first). Interning takes a mutex; it only happens on
 * a cache miss. Published strings never change, so the writer reads them
 * without the lock.
 */
#include "inject.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unwind.h>

#define MAX_INTERNED 65536
#define SITE_SLOTS 4096
#define MAX_FRAMES 48
#define MAX_EXCLUDED 8

static struct {
	pthread_mutex_t mu;
	char **v;
	_Atomic uint32_t n;
} strtab = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

/* Cache of return addresses: key 0 empty, 1 being filled, else the ip. */
struct site {
	_Atomic uintptr_t ip;
	uint32_t lib, site;
	int skip;
};
static struct site *sites;
static void *excluded[MAX_EXCLUDED]; /* load bases of skipped objects */
/* GPURECLAIM_TRACE_NO_CALLSITE: no unwinding (to measure what it costs). */
static int no_callsite;
static _Atomic int n_excluded;

int gpr__callsite_init(void)
{
	strtab.v = calloc(MAX_INTERNED, sizeof(*strtab.v));
	sites = calloc(SITE_SLOTS, sizeof(*sites));
	no_callsite = getenv("GPURECLAIM_TRACE_NO_CALLSITE") != NULL;
	return strtab.v && sites ? 0 : -1;
}

uint32_t gpr__intern(const char *s)
{
	uint32_t id = GPR_TRACE_NO_STRING;
	pthread_mutex_lock(&strtab.mu);
	uint32_t n = atomic_load_explicit(&strtab.n, memory_order_relaxed);
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(strtab.v[i], s) == 0) {
			id = GPR_TRACE_N_OPS + i;
			break;
		}
	if (id == GPR_TRACE_NO_STRING && n < MAX_INTERNED) {
		strtab.v[n] = strdup(s);
		if (strtab.v[n]) {
			atomic_store_explicit(&strtab.n, n + 1,
					      memory_order_release);
			id = GPR_TRACE_N_OPS + n;
		}
	}
	pthread_mutex_unlock(&strtab.mu);
	return id;
}

const char *const *gpr__interned(uint32_t *n)
{
	*n = atomic_load_explicit(&strtab.n, memory_order_acquire);
	return (const char *const *)strtab.v;
}

void gpr__callsite_exclude(const void *addr)
{
	Dl_info di;
	if (!addr || !dladdr(addr, &di) || !di.dli_fbase)
		return;
	int n = atomic_load(&n_excluded);
	for (int i = 0; i < n; i++)
		if (excluded[i] == di.dli_fbase)
			return;
	if (n < MAX_EXCLUDED) {
		excluded[n] = di.dli_fbase;
		atomic_store(&n_excluded, n + 1);
	}
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* Whether an object is CUDA plumbing rather than a caller. */
static int plumbing(const Dl_info *di)
{
	int n = atomic_load(&n_excluded);
	for (int i = 0; i < n; i++)
		if (excluded[i] == di->dli_fbase)
			return 1;
	const char *b = base_name(di->dli_fname ? di->dli_fname : "");
	return strncmp(b, "libcuda.so", 10) == 0 ||
	       strncmp(b, "libcudart", 9) == 0 ||
	       strncmp(b, "libcupti", 8) == 0 ||
	       strncmp(b, "libgpureclaim_trace", 19) == 0;
}

/*
 * The name a library is reported under: below site-packages (or
 * dist-packages) the path from there, so that a Python extension such as
 * cupy_backends/cuda/api/runtime.cpython-312-x86_64-linux-gnu.so names its
 * package; elsewhere the file name.
 */
static const char *display_name(const char *path)
{
	static const char *const roots[] = {"/site-packages/",
					    "/dist-packages/"};
	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		const char *p = strstr(path, roots[i]);
		if (p && p[strlen(roots[i])])
			return p + strlen(roots[i]);
	}
	return base_name(path);
}

/* Slow path: what ip means, by dladdr. */
static void classify(uintptr_t ip, struct site *out)
{
	Dl_info di;
	out->skip = 0;
	out->lib = out->site = GPR_TRACE_NO_STRING;
	/* ip is a return address: ip - 1 lies inside the calling insn. */
	if (!dladdr((void *)(ip - 1), &di) || !di.dli_fname) {
		out->lib = gpr__intern("[unknown]");
		return;
	}
	if (plumbing(&di)) {
		out->skip = 1;
		return;
	}
	const char *b = display_name(di.dli_fname);
	if (!*b)
		b = "[main]";
	out->lib = gpr__intern(b);
	char buf[320];
	if (di.dli_sname && di.dli_saddr)
		snprintf(buf, sizeof(buf), "%s!%.200s+0x%lx", b, di.dli_sname,
			 (unsigned long)(ip - (uintptr_t)di.dli_saddr));
	else
		snprintf(buf, sizeof(buf), "%s+0x%lx", b,
			 (unsigned long)(ip - (uintptr_t)di.dli_fbase));
	out->site = gpr__intern(buf);
}

static const struct site *lookup(uintptr_t ip, struct site *tmp)
{
	size_t h = (size_t)((ip * 0x9e3779b97f4a7c15ULL) >> 52);
	for (size_t i = 0; i < 16; i++) {
		struct site *e = &sites[(h + i) & (SITE_SLOTS - 1)];
		uintptr_t k =
		    atomic_load_explicit(&e->ip, memory_order_acquire);
		if (k == ip)
			return e;
		if (k != 0)
			continue;
		uintptr_t zero = 0;
		if (!atomic_compare_exchange_strong(&e->ip, &zero, 1))
			continue;
		classify(ip, e);
		atomic_store_explicit(&e->ip, ip, memory_order_release);
		return e;
	}
	classify(ip, tmp); /* table full around here: uncached */
	return tmp;
}

struct walk {
	int frames;
	uint32_t lib, site;
};

static _Unwind_Reason_Code step(struct _Unwind_Context *uc, void *arg)
{
	struct walk *w = arg;
	uintptr_t ip = (uintptr_t)_Unwind_GetIP(uc);
	if (ip <= 1 || ++w->frames > MAX_FRAMES)
		return _URC_END_OF_STACK;
	struct site tmp;
	const struct site *s = lookup(ip, &tmp);
	if (s->skip)
		return _URC_NO_REASON;
	w->lib = s->lib;
	w->site = s->site;
	return _URC_END_OF_STACK;
}

void gpr__callsite(uint32_t *lib, uint32_t *site)
{
	struct walk w = {0, GPR_TRACE_NO_STRING, GPR_TRACE_NO_STRING};
	if (sites && !no_callsite)
		_Unwind_Backtrace(step, &w);
	*lib = w.lib;
	*site = w.site;
}
