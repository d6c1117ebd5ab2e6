/*
 * Who called the driver: the first frame, walking up from the tracer's
 * own frames (an interposer's wrapper or a CUPTI callback), whose object
 * is not libcuda, a libcudart, libcupti or this library. A traced thread
 * finds the caller's return address only; the writer thread (and the
 * live query) turns it into a library and a call site (gpr_inj_resolve),
 * so dladdr and the string table's lock stay off the traced threads but
 * for an address's first sight.
 *
 * The walk itself: libgcc's _Unwind_Backtrace finds and interprets the
 * DWARF rules of every frame, about 0.1-0.3 us a frame, and the path from
 * a CUPTI callback through CUPTI, libcuda and libcudart is 10-20 frames
 * (2-4 from an interposer's wrapper through libcudart). So on x86-64 the
 * full walk also learns, per return address, how far up the next frame's
 * CFA lies (a frame size at that call site) and checks that the return
 * address sits at CFA - 8. Once an address has shown the same size twice
 * and never another, later walks step over it by arithmetic (the fast
 * walk). Any address not known that way, a size that changes (a frame
 * with alloca), a slot outside this thread's stack (a signal or coroutine
 * stack): the full walk runs instead. The one way to go wrong: a frame
 * that showed one size twice and later has another sends the walk to a
 * stale word, and that word is itself a known return address; a periodic
 * full walk bounds how long that can last (VERIFY_EVERY).
 *
 * A thread also remembers the path of its last fast walk (struct
 * gpr_inj_memo): the stack words holding each return address and their
 * values. A call from the same place starts at the same stack address and
 * finds the same words there: then the caller is the same, read from the
 * thread's own state and the (hot) stack, without a look-up in the shared
 * table. The memo only repeats a fast walk, so it is right exactly when
 * the fast walk would be, and it is checked as often.
 *
 * The string table: interned strings get ids from GPR_TRACE_N_OPS up (the
 * operation names come first). Interning takes a mutex; published strings
 * never change, so the writer reads them without the lock.
 */
#include "callers.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unwind.h>

#include "../format/trace_ops.h"
#include "tracer.h"

#define MAX_INTERNED 65536
#define SITE_SLOTS 4096
#define RESOLVED_SLOTS 8192
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
	int skip; /* CUDA plumbing, not a caller */
	/* the next frame's CFA minus this one's, as seen by full walks */
	_Atomic int32_t frame;
	/* how many full walks saw that size; -1: it varies, never trusted */
	_Atomic int32_t seen;
};
#define TRUSTED_AFTER 2
#define MAX_FRAME_SIZE (1 << 20)
static struct site *sites;
static void *excluded[MAX_EXCLUDED]; /* load bases of skipped objects */
/* Moves whenever a frame size once trusted may be wrong: memos of an
 * older generation are not used. */
static _Atomic unsigned site_gen;
/*
 * GPURECLAIM_TRACE_NO_CALLSITE: no unwinding; GPURECLAIM_TRACE_FULL_WALK:
 * never the fast walk (both to measure what they cost).
 */
static int no_callsite, no_fast_walk;
static _Atomic int n_excluded;

/* The writer's cache: ip -> library and call site (under resolved_mu). */
struct resolved {
	uintptr_t ip;
	uint32_t lib, site;
};
static pthread_mutex_t resolved_mu = PTHREAD_MUTEX_INITIALIZER;
static struct resolved *resolved;

int gpr_inj_callsite_init(void)
{
	strtab.v = calloc(MAX_INTERNED, sizeof(*strtab.v));
	sites = calloc(SITE_SLOTS, sizeof(*sites));
	resolved = calloc(RESOLVED_SLOTS, sizeof(*resolved));
	no_callsite = gpr_inj_switch("GPURECLAIM_TRACE_NO_CALLSITE");
	no_fast_walk = gpr_inj_switch("GPURECLAIM_TRACE_FULL_WALK");
	return strtab.v && sites && resolved ? 0 : -1;
}

static uint32_t intern(const char *s)
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

const char *gpr_inj_string(uint32_t id)
{
	uint32_t n = atomic_load_explicit(&strtab.n, memory_order_acquire);
	if (id < GPR_TRACE_N_OPS || id - GPR_TRACE_N_OPS >= n)
		return NULL;
	return strtab.v[id - GPR_TRACE_N_OPS];
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

/* ip -> library and call site, by dladdr (slow: once per ip). */
static void name_of(uintptr_t ip, uint32_t *lib, uint32_t *site)
{
	Dl_info di;
	*lib = *site = GPR_TRACE_NO_STRING;
	/* ip is a return address: ip - 1 lies inside the calling insn. */
	if (!dladdr((void *)(ip - 1), &di) || !di.dli_fname) {
		*lib = intern("[unknown]");
		return;
	}
	const char *b = display_name(di.dli_fname);
	if (!*b)
		b = "[main]";
	*lib = intern(b);
	char buf[320];
	if (di.dli_sname && di.dli_saddr)
		snprintf(buf, sizeof(buf), "%s!%.200s+0x%lx", b, di.dli_sname,
			 (unsigned long)(ip - (uintptr_t)di.dli_saddr));
	else
		snprintf(buf, sizeof(buf), "%s+0x%lx", b,
			 (unsigned long)(ip - (uintptr_t)di.dli_fbase));
	*site = intern(buf);
}

void gpr_inj_resolve(uintptr_t ip, uint32_t *lib, uint32_t *site)
{
	uint32_t l, s;
	if (ip == 0 || !resolved) {
		l = s = GPR_TRACE_NO_STRING;
	} else {
		pthread_mutex_lock(&resolved_mu);
		size_t h = (size_t)((ip * 0x9e3779b97f4a7c15ULL) >> 51);
		struct resolved *e = NULL;
		for (size_t i = 0; i < 32; i++) {
			struct resolved *c =
			    &resolved[(h + i) & (RESOLVED_SLOTS - 1)];
			if (c->ip == ip || c->ip == 0) {
				e = c;
				break;
			}
		}
		if (e && e->ip == ip) {
			l = e->lib;
			s = e->site;
		} else {
			name_of(ip, &l, &s);
			if (e)
				*e = (struct resolved){ip, l, s};
		}
		pthread_mutex_unlock(&resolved_mu);
	}
	if (lib)
		*lib = l;
	*site = s;
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
		Dl_info di;
		e->skip = dladdr((void *)(ip - 1), &di) && di.dli_fname &&
			  plumbing(&di);
		atomic_store_explicit(&e->frame, 0, memory_order_relaxed);
		atomic_store_explicit(&e->seen, 0, memory_order_relaxed);
		atomic_store_explicit(&e->ip, ip, memory_order_release);
		return e;
	}
	return NULL;
}

/* Whether ip is plumbing; *cached its entry, if the table has one. */
static int skip_of(uintptr_t ip, struct site **cached)
{
	struct site *e = probe(ip, 1);
	*cached = e;
	if (e)
		return e->skip;
	Dl_info di; /* table full around here: uncached */
	return dladdr((void *)(ip - 1), &di) && di.dli_fname && plumbing(&di);
}

/* A cached entry for ip, or NULL; never inserts. */
static struct site *find(uintptr_t ip)
{
	return probe(ip, 0);
}

static void distrust(struct site *e)
{
	if (atomic_exchange_explicit(&e->seen, -1, memory_order_relaxed) >=
	    TRUSTED_AFTER)
		atomic_fetch_add(&site_gen, 1);
}

/* What a full walk saw of frame ip: its size, or that it varies. */
static void learn(uintptr_t ip, intptr_t size, int slot_ok)
{
	struct site *e = find(ip);
	if (!e || atomic_load_explicit(&e->seen, memory_order_relaxed) < 0)
		return;
	if (!slot_ok || size <= 0 || size > MAX_FRAME_SIZE) {
		distrust(e);
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
		distrust(e);
	}
}

struct walk {
	int frames;
	uintptr_t caller;
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
	struct site *cached;
	if (skip_of(ip, &cached)) {
#if defined(__x86_64__)
		if (cached) {
			w->prev_ip = ip;
			w->prev_cfa = cfa;
		}
#endif
		return _URC_NO_REASON;
	}
	w->caller = ip;
	return _URC_END_OF_STACK;
}

static uintptr_t full_walk(void)
{
	struct walk w = {0, 0, 0, 0};
	_Unwind_Backtrace(step, &w);
	return w.caller;
}

#if defined(__x86_64__)
/* The thread's stack into tt; lo == hi == 1: unknown, no fast walks. */
static int stack_bounds(struct gpr_inj_tt *tt)
{
	if (tt->stack_hi)
		return tt->stack_hi > 1;
	tt->stack_lo = tt->stack_hi = 1;
	pthread_attr_t a;
	void *base;
	size_t size;
	if (pthread_getattr_np(pthread_self(), &a) != 0)
		return 0;
	if (pthread_attr_getstack(&a, &base, &size) == 0) {
		tt->stack_lo = (uintptr_t)base;
		tt->stack_hi = (uintptr_t)base + size;
	}
	pthread_attr_destroy(&a);
	return tt->stack_hi > 1;
}

/*
 * The fast walk from cfa (the frame of this file's caller, seen from
 * here): 1 when it found the caller, 0 when the full walk must run. It
 * leaves the path it took in one of the thread's memos, *used. It reads
 * words of this thread's stack only, return-address slots unless a frame
 * size is wrong, so ASan's view of the frames' locals does not apply.
 */
__attribute__((no_sanitize_address)) static int
fast_walk(struct gpr_inj_tt *tt, uintptr_t cfa, uintptr_t *caller,
	  struct gpr_inj_memo **used)
{
	struct gpr_inj_memo *m = &tt->memo[tt->memo_next++ % GPR_MEMOS];
	*used = m;
	m->n = 0;
	if (!stack_bounds(tt))
		return 0;
	unsigned gen = atomic_load_explicit(&site_gen, memory_order_relaxed);
	uintptr_t cfa0 = cfa;
	for (int n = 0; n < MAX_FRAMES; n++) {
		if ((cfa & 7) || cfa - 8 < tt->stack_lo || cfa > tt->stack_hi)
			return 0;
		uintptr_t ip = *(const uintptr_t *)(cfa - 8);
		struct site *s = find(ip);
		if (!s)
			return 0;
		if (n < GPR_MEMO) {
			m->f[n].slot = cfa - 8;
			m->f[n].ip = ip;
		}
		if (!s->skip) {
			*caller = ip;
			if (n < GPR_MEMO) {
				m->n = n + 1;
				m->cfa0 = cfa0;
				m->gen = gen;
			}
			return 1;
		}
		if (atomic_load_explicit(&s->seen, memory_order_relaxed) <
		    TRUSTED_AFTER)
			return 0;
		cfa += (uintptr_t)atomic_load_explicit(&s->frame,
						       memory_order_relaxed);
	}
	return 0;
}

/* The caller of a memo whose path the stack from cfa holds. */
__attribute__((no_sanitize_address)) static int
memo_walk(struct gpr_inj_tt *tt, uintptr_t cfa, uintptr_t *caller,
	  struct gpr_inj_memo **used)
{
	unsigned gen = atomic_load_explicit(&site_gen, memory_order_relaxed);
	for (int k = 0; k < GPR_MEMOS; k++) {
		struct gpr_inj_memo *m = &tt->memo[k];
		if (m->n == 0 || m->cfa0 != cfa || m->gen != gen)
			continue;
		int i = 0;
		while (i < m->n &&
		       *(const uintptr_t *)m->f[i].slot == m->f[i].ip)
			i++;
		if (i == m->n) {
			*caller = m->f[m->n - 1].ip;
			*used = m;
			return 1;
		}
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
static _Atomic uint64_t fast_walks_redone;

uint64_t gpr_inj_callsite_redone(void)
{
	return atomic_load_explicit(&fast_walks_redone, memory_order_relaxed);
}

static void relearn(struct gpr_inj_memo *m)
{
	for (int i = 0; i < m->n; i++) {
		struct site *s = find(m->f[i].ip);
		if (!s)
			continue;
		atomic_store_explicit(&s->seen, 0, memory_order_relaxed);
		atomic_store_explicit(&s->frame, 0, memory_order_relaxed);
	}
	m->n = 0;
	atomic_fetch_add(&site_gen, 1);
	atomic_fetch_add_explicit(&fast_walks_redone, 1, memory_order_relaxed);
}
#else
uint64_t gpr_inj_callsite_redone(void)
{
	return 0;
}
#endif

__attribute__((noinline)) int gpr_inj_callsite(struct gpr_inj_tt *tt,
					       uintptr_t *ip)
{
	*ip = 0;
	if (!sites || no_callsite)
		return GPR_WALK_NONE;
#if defined(__x86_64__)
	uintptr_t cfa = (uintptr_t)__builtin_dwarf_cfa();
	struct gpr_inj_memo *m;
	if (!no_fast_walk &&
	    (memo_walk(tt, cfa, ip, &m) || fast_walk(tt, cfa, ip, &m))) {
		if (++tt->fast_walks < VERIFY_EVERY)
			return GPR_WALK_FAST;
		tt->fast_walks = 0;
		uintptr_t full = full_walk();
		if (full == *ip)
			return GPR_WALK_FAST;
		relearn(m);
		*ip = full;
		return GPR_WALK_FULL;
	}
#else
	(void)tt;
#endif
	*ip = full_walk();
	return GPR_WALK_FULL;
}
