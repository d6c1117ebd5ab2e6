/*
 * Who called the driver: the first frame, walking up from the CUPTI
 * callback, whose object is not libcuda, a libcudart, libcupti or this
 * library. What each return address means (skip, or which library and call
 * site) is cached process-wide in a lock-free table, so dladdr() and
 * interning run once per address.
 *
 * The walk itself: libgcc's _Unwind_Backtrace finds and interprets the
 * DWARF rules of every frame, about 0.1-0.3 us a frame, and the path from
 * the callback through CUPTI, libcuda and libcudart is 10-20 frames. So on
 * x86-64 the full walk also learns, per return address, how far up the
 * next frame's CFA lies (a frame size at that call site) and checks that
 * the return address sits at CFA - 8. Once an address has shown the same
 * size twice and never another, later walks step over it by arithmetic
 * (the fast walk). Any address not known that way, a size that changes
 * (a frame with alloca), a slot outside this thread's stack (a signal or
 * coroutine stack): the full walk runs instead. The one way to go wrong: a
 * frame that showed one size twice and later has another sends the walk to
 * a stale word, and that word is itself a known return address; a periodic
 * full walk bounds how long that can last (VERIFY_EVERY).
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
	/* the next frame's CFA minus this one's, as seen by full walks */
	_Atomic int32_t frame;
	/* how many full walks saw that size; -1: it varies, never trusted */
	_Atomic int32_t seen;
};
#define TRUSTED_AFTER 2
#define MAX_FRAME_SIZE (1 << 20)
static struct site *sites;
static void *excluded[MAX_EXCLUDED]; /* load bases of skipped objects */
/*
 * GPURECLAIM_TRACE_NO_CALLSITE: no unwinding; GPURECLAIM_TRACE_FULL_WALK:
 * never the fast walk (both to measure what they cost).
 */
static int no_callsite, no_fast_walk;
static _Atomic int n_excluded;

int gpr_inj_callsite_init(void)
{
	strtab.v = calloc(MAX_INTERNED, sizeof(*strtab.v));
	sites = calloc(SITE_SLOTS, sizeof(*sites));
	no_callsite = gpr_inj_switch("GPURECLAIM_TRACE_NO_CALLSITE");
	no_fast_walk = gpr_inj_switch("GPURECLAIM_TRACE_FULL_WALK");
	return strtab.v && sites ? 0 : -1;
}

uint32_t gpr_inj_intern(const char *s)
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

const char *const *gpr_inj_interned(uint32_t *n)
{
	*n = atomic_load_explicit(&strtab.n, memory_order_acquire);
	return (const char *const *)strtab.v;
}

void gpr_inj_callsite_exclude(const void *addr)
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
		out->lib = gpr_inj_intern("[unknown]");
		return;
	}
	if (plumbing(&di)) {
		out->skip = 1;
		return;
	}
	const char *b = display_name(di.dli_fname);
	if (!*b)
		b = "[main]";
	out->lib = gpr_inj_intern(b);
	char buf[320];
	if (di.dli_sname && di.dli_saddr)
		snprintf(buf, sizeof(buf), "%s!%.200s+0x%lx", b, di.dli_sname,
			 (unsigned long)(ip - (uintptr_t)di.dli_saddr));
	else
		snprintf(buf, sizeof(buf), "%s+0x%lx", b,
			 (unsigned long)(ip - (uintptr_t)di.dli_fbase));
	out->site = gpr_inj_intern(buf);
}

/*
 * The entry for ip; with `insert`, a new one classified now when there is
 * none (NULL only when the probe run is full); without, NULL.
 */
static struct site *probe(uintptr_t ip, int insert)
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
		if (!insert)
			return NULL;
		uintptr_t zero = 0;
		if (!atomic_compare_exchange_strong(&e->ip, &zero, 1))
			continue;
		classify(ip, e);
		atomic_store_explicit(&e->frame, 0, memory_order_relaxed);
		atomic_store_explicit(&e->seen, 0, memory_order_relaxed);
		atomic_store_explicit(&e->ip, ip, memory_order_release);
		return e;
	}
	return NULL;
}

static const struct site *lookup(uintptr_t ip, struct site *tmp)
{
	const struct site *e = probe(ip, 1);
	if (e)
		return e;
	classify(ip, tmp); /* table full around here: uncached */
	return tmp;
}

/* A cached entry for ip, or NULL; never inserts. */
static struct site *find(uintptr_t ip)
{
	return probe(ip, 0);
}

/* What a full walk saw of frame ip: its size, or that it varies. */
static void learn(uintptr_t ip, intptr_t size, int slot_ok)
{
	struct site *e = find(ip);
	if (!e || atomic_load_explicit(&e->seen, memory_order_relaxed) < 0)
		return;
	if (!slot_ok || size <= 0 || size > MAX_FRAME_SIZE) {
		atomic_store_explicit(&e->seen, -1, memory_order_relaxed);
		return;
	}
	int32_t zero = 0;
	if (atomic_compare_exchange_strong(&e->frame, &zero, (int32_t)size) ||
	    zero == size) {
		int32_t n =
		    atomic_load_explicit(&e->seen, memory_order_relaxed);
		if (n >= 0 && n < TRUSTED_AFTER)
			atomic_compare_exchange_strong(&e->seen, &n, n + 1);
	} else {
		atomic_store_explicit(&e->seen, -1, memory_order_relaxed);
	}
}

struct walk {
	int frames;
	uint32_t lib, site;
	uintptr_t prev_ip, prev_cfa;
};

static _Unwind_Reason_Code step(struct _Unwind_Context *uc, void *arg)
{
	struct walk *w = arg;
	uintptr_t ip = (uintptr_t)_Unwind_GetIP(uc);
	if (ip <= 1 || ++w->frames > MAX_FRAMES)
		return _URC_END_OF_STACK;
#if defined(__x86_64__)
	/*
	 * libgcc's CFA here is the stack pointer just after a return to ip,
	 * so ip should be the word below it; the distance to the next such
	 * CFA is the size of ip's frame.
	 */
	uintptr_t cfa = (uintptr_t)_Unwind_GetCFA(uc);
	if (w->prev_ip)
		learn(w->prev_ip, (intptr_t)(cfa - w->prev_cfa),
		      w->prev_cfa >= 8 &&
			  *(const uintptr_t *)(w->prev_cfa - 8) == w->prev_ip);
	w->prev_ip = 0;
#endif
	struct site tmp;
	const struct site *s = lookup(ip, &tmp);
	if (s->skip) {
#if defined(__x86_64__)
		if (s != &tmp) {
			w->prev_ip = ip;
			w->prev_cfa = cfa;
		}
#endif
		return _URC_NO_REASON;
	}
	w->lib = s->lib;
	w->site = s->site;
	return _URC_END_OF_STACK;
}

#if defined(__x86_64__)
/* This thread's stack; lo == hi == 1: unknown, no fast walks. */
static __thread uintptr_t stack_lo, stack_hi;

static int stack_bounds(void)
{
	if (stack_hi)
		return stack_hi > 1;
	stack_lo = stack_hi = 1;
	pthread_attr_t a;
	void *base;
	size_t size;
	if (pthread_getattr_np(pthread_self(), &a) != 0)
		return 0;
	if (pthread_attr_getstack(&a, &base, &size) == 0) {
		stack_lo = (uintptr_t)base;
		stack_hi = (uintptr_t)base + size;
	}
	pthread_attr_destroy(&a);
	return stack_hi > 1;
}

/*
 * The fast walk from cfa (this function's caller's frame, seen from
 * here): 1 when it found the caller, 0 when the full walk must run. It
 * notes the frames it stepped over in *path. It reads words of this
 * thread's stack only, return-address slots unless a frame size is wrong,
 * so ASan's view of the frames' locals does not apply.
 */
struct path {
	int n;
	struct site *s[MAX_FRAMES];
};

__attribute__((no_sanitize_address)) static int
fast_walk(uintptr_t cfa, uint32_t *lib, uint32_t *site, struct path *path)
{
	path->n = 0;
	if (!stack_bounds())
		return 0;
	for (int n = 0; n < MAX_FRAMES; n++) {
		if ((cfa & 7) || cfa - 8 < stack_lo || cfa > stack_hi)
			return 0;
		uintptr_t ip = *(const uintptr_t *)(cfa - 8);
		struct site *s = find(ip);
		if (!s)
			return 0;
		if (!s->skip) {
			*lib = s->lib;
			*site = s->site;
			return 1;
		}
		if (atomic_load_explicit(&s->seen, memory_order_relaxed) <
		    TRUSTED_AFTER)
			return 0;
		path->s[path->n++] = s;
		cfa += (uintptr_t)atomic_load_explicit(&s->frame,
						       memory_order_relaxed);
	}
	return 0;
}

/*
 * Every VERIFY_EVERY-th fast walk of a thread is done again in full. A
 * difference means a frame on the path no longer has the size it had:
 * the frames of that path are learned afresh and the full walk's answer
 * is kept, so a wrong fast walk cannot repeat more than VERIFY_EVERY
 * times in a row on a thread.
 */
#define VERIFY_EVERY 256
static __thread unsigned fast_walks;
static _Atomic uint64_t fast_walks_redone;

uint64_t gpr_inj_callsite_redone(void)
{
	return atomic_load_explicit(&fast_walks_redone, memory_order_relaxed);
}

static void relearn(const struct path *path)
{
	for (int i = 0; i < path->n; i++) {
		atomic_store_explicit(&path->s[i]->seen, 0,
				      memory_order_relaxed);
		atomic_store_explicit(&path->s[i]->frame, 0,
				      memory_order_relaxed);
	}
	atomic_fetch_add_explicit(&fast_walks_redone, 1, memory_order_relaxed);
}
#else
uint64_t gpr_inj_callsite_redone(void)
{
	return 0;
}
#endif

__attribute__((noinline)) int gpr_inj_callsite(uint32_t *lib, uint32_t *site)
{
	struct walk w = {0, GPR_TRACE_NO_STRING, GPR_TRACE_NO_STRING, 0, 0};
	*lib = *site = GPR_TRACE_NO_STRING;
	if (!sites || no_callsite)
		return GPR_WALK_NONE;
#if defined(__x86_64__)
	struct path path;
	if (!no_fast_walk &&
	    fast_walk((uintptr_t)__builtin_dwarf_cfa(), lib, site, &path)) {
		if (++fast_walks < VERIFY_EVERY)
			return GPR_WALK_FAST;
		fast_walks = 0;
		_Unwind_Backtrace(step, &w);
		if (w.lib == *lib && w.site == *site)
			return GPR_WALK_FAST;
		relearn(&path);
		*lib = w.lib;
		*site = w.site;
		return GPR_WALK_FULL;
	}
#endif
	_Unwind_Backtrace(step, &w);
	*lib = w.lib;
	*site = w.site;
	return GPR_WALK_FULL;
}
