/*
 * The interposer: with LD_PRELOAD=libgpureclaim_trace.so this library's
 * exports come before the C library's and the driver's, so
 *
 *   - dlsym: a program (libcudart, PyTorch's c10, NCCL, ctypes, CuPy...)
 *     asking for a driver function gets, for the entry points of the
 *     operations table (trace_ops.h, entries column), a wrapper that
 *     records the call and calls the driver's function;
 *   - cuGetProcAddress, cuGetProcAddress_v2: how the CUDA runtime builds
 *     its table of driver functions (~420 look-ups in its first call, and
 *     it fetches cuGetProcAddress itself through it): the answers are
 *     wrapped the same way, so cudaGetDriverEntryPoint* is covered too;
 *   - the entry points themselves, for programs linked with -lcuda.
 *
 * A driver answer is matched to a wrapper by address: the driver's own
 * export of each entry point name (read from the libcuda the answers come
 * from, again whenever it is loaded at another address) has one wrapper
 * with exactly its ABI, each _ptsz (per-thread default stream) variant
 * its own, so the driver's choice of variant for a (name, version, flags)
 * look-up is kept. The tracer holds no reference to the driver: every
 * dlopen of its own (RTLD_NOLOAD, to read symbols) is closed at once, so
 * a program's dlclose unloads libcuda as it would untraced.
 *
 * Another interposer between the program and the driver (HAMi-core, which
 * hooks dlsym and cuGetProcAddress to enforce a container's memory limit)
 * answers with its own functions. The tracer asks the dlsym after its own
 * (gpr_inj_next_dlsym), so that interposer stays in the chain, and learns
 * the ABI of such an answer from the driver: the driver's own answer to
 * the same look-up (its export of that name for dlsym, its
 * cuGetProcAddress for the same name, version and flags) is the export
 * of one wrapper. The answer is then kept in that wrapper's second slot
 * and the chain wrapper handed out, which records and calls it ("chained"
 * in the log's META lines). A second, different answer for the same slot,
 * or an ABI no wrapper has (an older one), passes through unwrapped,
 * counted under "unrecognised".
 *
 * A wrapper costs a load and a compare while nothing records (dormant:
 * `gpureclaim trace --dormant`, or before a program starts a session).
 * Recording starts on the first recorded call when `gpureclaim trace`
 * asked for it (GPURECLAIM_TRACE_OUTPUT, GPURECLAIM_TRACE_BACKEND not
 * cupti, GPURECLAIM_TRACE_DORMANT unset), or when the program calls
 * gpureclaim_trace_start. The hook of dlsym keeps the C library's
 * behaviour: RTLD_NEXT and names not starting with "cu" go straight on,
 * as a tail call, so the C library still sees the caller's address.
 *
 * Pointers handed out before this library was in the process cannot be
 * seen: the interposer must be preloaded, it cannot attach late (a
 * running program's session uses CUPTI then, inject.c).
 */
#include "tracer.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../format/trace_ops.h"
#include "inject_entries.h"
#include "clock.h"
#include "dl.h"
#include "frontend.h"
#include "recorder.h"
#include "session.h"
#include "threads.h"
#include "wake.h"

/* ---- the driver ---- */

/* The driver the answers came from: its load base (0: not seen yet) and
 * path. No handle is kept: a handle is a reference. */
static _Atomic uintptr_t driver_base;
static char driver_path[PATH_MAX];

/* The CUDA 12 lookup and its CUDA 11.3 predecessor. */
typedef unsigned long long cuuint64_t;
typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t, int *);
typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t);
static gpa_v2_fn real_gpa_v2, next_gpa_v2;
static gpa_fn real_gpa, next_gpa;
static _Atomic(gpa_v2_fn) alt_gpa_v2; /* another interposer's */
static _Atomic(gpa_fn) alt_gpa;
static CUresult (*primary_state)(CUdevice, unsigned int *, int *);

/* Whether recording starts at the first call ($GPURECLAIM_TRACE_*). */
static _Atomic int autostart = -1; /* -1 not read yet */
static int crosscheck;		   /* GPURECLAIM_TRACE_CROSSCHECK */
static _Atomic uint64_t counts[GPR_TRACE_N_OPS];

static void read_env(void)
{
	const char *out = secure_getenv("GPURECLAIM_TRACE_OUTPUT");
	const char *be = secure_getenv("GPURECLAIM_TRACE_BACKEND");
	int on = out && *out && !(be && strcmp(be, "cupti") == 0) &&
		 !gpr_inj_switch("GPURECLAIM_TRACE_DORMANT");
	crosscheck = gpr_inj_switch("GPURECLAIM_TRACE_CROSSCHECK");
	int expect = -1;
	atomic_compare_exchange_strong(&autostart, &expect, on);
}

/* The session `gpureclaim trace` asked for, started by the first call
 * that would record: 1 when recording now. */
static int start_now(void)
{
	if (atomic_load_explicit(&autostart, memory_order_acquire) == -1)
		read_env();
	if (atomic_load_explicit(&autostart, memory_order_acquire) != 1)
		return 0;
	gpr_inj_session_lock();
	if (atomic_exchange(&autostart, 0) == 1 && !gpr_inj_session_open()) {
		char path[4096];
		gpr_inj_session_default_path(path, sizeof(path));
		if (gpr_inj_session_start(
			GPR_INJ_INTERPOSE, path, 1, "gpureclaim trace",
			gpr_inj_preload_meta, gpr_inj_preload_driver()) == 0 &&
		    crosscheck &&
		    gpr_inj_cupti_attach_counting(
			secure_getenv("GPURECLAIM_CUPTI_LIBRARY")) < 0)
			crosscheck = 0;
	}
	gpr_inj_session_unlock();
	return atomic_load(&gpr_inj_state.active) == GPR_INJ_INTERPOSE;
}

/* ---- one recorded memory call ---- */

struct call {
	struct gpr_inj_tt *tt;
	uint64_t a0; /* selftime: entry into the wrapper */
	struct gpr_inj_inflight f;
};

static inline int call_begin(struct call *c)
{
	if (atomic_load_explicit(&gpr_inj_state.active, memory_order_relaxed) !=
		GPR_INJ_INTERPOSE &&
	    !start_now())
		return 0;
	struct gpr_inj_tt *tt = gpr_inj_tt_self();
	/*
	 * Inside a recorded call already: the driver calling one of its own
	 * exports, which this library also defines. One record per call.
	 */
	if (!tt || atomic_load_explicit(&tt->inside, memory_order_relaxed))
		return 0;
	atomic_store_explicit(&tt->inside, 1, memory_order_relaxed);
	c->tt = tt;
	c->a0 = gpr_inj_state.selftime ? gpr_inj_stamp() : 0;
	return 1;
}

__attribute__((noinline)) static void call_enter(struct call *c, int op,
						 const void *params)
{
	gpr_inj_rec_enter(c->tt, &c->f, op, params);
}

__attribute__((noinline)) static void call_exit(struct call *c, int op,
						const void *params, CUresult r)
{
	struct gpr_inj_tt *tt = c->tt;
	gpr_inj_rec_exit(tt, &c->f, op, params, r, NULL);
	if (crosscheck)
		atomic_fetch_add_explicit(&counts[op], 1, memory_order_relaxed);
	if (gpr_inj_state.selftime) /* less the driver's time */
		gpr_inj_rec_selftime(tt, (c->f.t0 - c->a0) +
					     (gpr_inj_stamp() - c->f.t1));
	atomic_store_explicit(&tt->inside, 0, memory_order_release);
}

/* ---- context events ---- */

enum { CTX_CREATE, CTX_RETAIN, CTX_DESTROY, CTX_RELEASE, CTX_RESET };

/* The contexts seen created, with their device (for their destruction). */
#define MAX_CTX 64
static struct {
	_Atomic(void *) ctx;
	int dev;
	int primary;
} ctxs[MAX_CTX];

static void ctx_note(CUcontext ctx, int dev, int primary)
{
	for (int i = 0; i < MAX_CTX; i++) {
		void *expect = NULL;
		if (atomic_load(&ctxs[i].ctx) == (void *)ctx ||
		    atomic_compare_exchange_strong(&ctxs[i].ctx, &expect,
						   (void *)ctx)) {
			ctxs[i].dev = dev;
			ctxs[i].primary = primary;
			return;
		}
	}
}

/* Forgets ctx (or the primary context of dev); its device. */
static int ctx_forget(CUcontext *ctx, int dev)
{
	for (int i = 0; i < MAX_CTX; i++) {
		void *c = atomic_load(&ctxs[i].ctx);
		if (c && (*ctx ? c == (void *)*ctx
			       : ctxs[i].primary && ctxs[i].dev == dev)) {
			*ctx = c;
			int d = ctxs[i].dev;
			atomic_store(&ctxs[i].ctx, NULL);
			return d;
		}
	}
	return dev;
}

static void *driver_sym(const char *name);

static int primary_active(CUdevice dev)
{
	unsigned flags;
	int active = 0;
	if (!primary_state)
		*(void **)&primary_state =
		    driver_sym("cuDevicePrimaryCtxGetState");
	if (!primary_state || primary_state(dev, &flags, &active) != 0)
		return 0;
	return active;
}

struct ctx_call {
	struct gpr_inj_tt *tt;
	int how, op, dev, was_active;
};

/* A context event, counted for the crosscheck as CUPTI's resource
 * callbacks count it. */
static void ctx_record(struct gpr_inj_tt *tt, int op, CUcontext ctx, int dev)
{
	gpr_inj_rec_event(tt, op, ctx, dev);
	if (crosscheck)
		atomic_fetch_add_explicit(&counts[op], 1, memory_order_relaxed);
}

static int ctx_begin(struct ctx_call *c, int how, int op, CUcontext ctx,
		     int dev)
{
	struct call m;
	if (!call_begin(&m))
		return 0;
	c->tt = m.tt;
	c->how = how;
	c->op = op;
	c->dev = dev;
	c->was_active =
	    how == CTX_RETAIN || how == CTX_RESET ? primary_active(dev) : 0;
	if (how == CTX_DESTROY) /* as CUPTI: before the context goes */
		ctx_record(c->tt, op, ctx,
			   ctx_forget(&ctx, GPR_TRACE_NO_DEVICE));
	return 1;
}

static void ctx_end(struct ctx_call *c, CUresult r, CUcontext *pctx)
{
	CUcontext ctx = NULL;
	if (r == CUDA_SUCCESS) {
		switch (c->how) {
		case CTX_CREATE:
		case CTX_RETAIN:
			if (pctx && *pctx && !c->was_active) {
				ctx_note(*pctx, c->dev, c->how == CTX_RETAIN);
				ctx_record(c->tt, c->op, *pctx, c->dev);
			}
			break;
		case CTX_RELEASE:
		case CTX_RESET:
			if ((c->how == CTX_RELEASE &&
			     !primary_active(c->dev)) ||
			    (c->how == CTX_RESET && c->was_active)) {
				int d = ctx_forget(&ctx, c->dev);
				ctx_record(c->tt, c->op, ctx, d);
			}
			break;
		}
	}
	atomic_store_explicit(&c->tt->inside, 0, memory_order_release);
}

/* ---- the wrappers, one per entry point of the table ---- */

/*
 * rec_NAME records a call of fn; wrap_NAME is handed out for the driver's
 * export (real_NAME), chain_NAME for another interposer's function of the
 * same ABI (alt_NAME); NAME itself is exported for programs linked with
 * -lcuda and calls the next definition (next_NAME: the driver's, or
 * another interposer's).
 */
#define GPR_INJ_COMMON(name, proto, args)                                      \
	typedef CUresult(*name##_fn) proto;                                    \
	static name##_fn real_##name, next_##name;                             \
	static _Atomic(name##_fn) alt_##name;                                  \
	static CUresult rec_##name(name##_fn fn, GPR_TRACE_UNPAREN proto);     \
	static CUresult wrap_##name proto                                      \
	{                                                                      \
		return rec_##name(real_##name, GPR_TRACE_UNPAREN args);        \
	}                                                                      \
	static CUresult chain_##name proto                                     \
	{                                                                      \
		return rec_##name(                                             \
		    atomic_load_explicit(&alt_##name, memory_order_acquire),   \
		    GPR_TRACE_UNPAREN args);                                   \
	}                                                                      \
	GPR_EXPORT CUresult name proto                                         \
	{                                                                      \
		name##_fn fn = next_##name;                                    \
		if (!fn)                                                       \
			*(void **)&fn = next_##name##_find();                  \
		if (!fn)                                                       \
			return CUDA_ERROR_NOT_INITIALIZED;                     \
		return rec_##name(fn, GPR_TRACE_UNPAREN args);                 \
	}                                                                      \
	extern __typeof__(name) self_##name                                    \
	    __attribute__((alias(#name), visibility("hidden")));

#define GPR_INJ_NEXT(name) static void *next_##name##_find(void);

#define GPR_INJ_MEM(name, op, ptype, proto, args, pinit)                       \
	GPR_INJ_NEXT(name)                                                     \
	GPR_INJ_COMMON(name, proto, args)                                      \
	static CUresult rec_##name(name##_fn fn, GPR_TRACE_UNPAREN proto)      \
	{                                                                      \
		struct call c;                                                 \
		gpr_inj_wake_check();                                          \
		if (!call_begin(&c))                                           \
			return fn args;                                        \
		ptype params_ = {GPR_TRACE_UNPAREN pinit};                     \
		call_enter(&c, GPR_OP_##op, &params_);                         \
		CUresult r = fn args;                                          \
		call_exit(&c, GPR_OP_##op, &params_, r);                       \
		return r;                                                      \
	}

#define GPR_INJ_CTX(name, op, how, proto, args, pctx, ctx, dev)                \
	GPR_INJ_NEXT(name)                                                     \
	GPR_INJ_COMMON(name, proto, args)                                      \
	static CUresult rec_##name(name##_fn fn, GPR_TRACE_UNPAREN proto)      \
	{                                                                      \
		struct ctx_call c;                                             \
		gpr_inj_wake_check();                                          \
		if (!ctx_begin(&c, CTX_##how, GPR_OP_##op, ctx, dev))          \
			return fn args;                                        \
		CUresult r = fn args;                                          \
		ctx_end(&c, r, pctx);                                          \
		return r;                                                      \
	}

#define GPR_INJ_DEFINE(op, name) GPR_INJ_ENTRY_##name(op)
#define GPR_X_OP(op, name, kind, domain, cbid, cbid2, entries)                 \
	GPR_TRACE_EACH(GPR_INJ_DEFINE, op, entries)
GPR_TRACE_OPS(GPR_X_OP)
#undef GPR_X_OP

static CUresult wrap_gpa_v2(const char *symbol, void **pfn, int version,
			    cuuint64_t flags, int *status);
static CUresult wrap_gpa(const char *symbol, void **pfn, int version,
			 cuuint64_t flags);
static CUresult chain_gpa_v2(const char *symbol, void **pfn, int version,
			     cuuint64_t flags, int *status);
static CUresult chain_gpa(const char *symbol, void **pfn, int version,
			  cuuint64_t flags);

/* This library's exports of the two, below (not another's of the name). */
extern CUresult self_gpa_v2(const char *symbol, void **pfn, int version,
			    cuuint64_t flags, int *status)
    __attribute__((visibility("hidden")));
extern CUresult self_gpa(const char *symbol, void **pfn, int version,
			 cuuint64_t flags)
    __attribute__((visibility("hidden")));

/*
 * The table of wrappers: the two cuGetProcAddress, whose answers are
 * wrapped in turn, then the operations table's entry points in its order.
 */
struct entry {
	const char *name;
	void *wrapper;
	void **real;
	void **next;	      /* NAME's next definition, found on first use */
	void *chain;	      /* records and calls *alt */
	_Atomic(void *) *alt; /* another interposer's function */
	void *exported;	      /* NAME itself: it records as it is */
	_Atomic long handed;  /* how often given out */
	_Atomic long chained; /* the chain wrapper, how often */
};
/* One row: the wrappers of fn, and its export name. */
#define GPR_INJ_ROW_OF(name, fn)                                               \
	{name,                                                                 \
	 (void *)wrap_##fn,                                                    \
	 (void **)&real_##fn,                                                  \
	 (void **)&next_##fn,                                                  \
	 (void *)chain_##fn,                                                   \
	 (_Atomic(void *) *)(void *)&alt_##fn,                                 \
	 (void *)self_##fn,                                                    \
	 0,                                                                    \
	 0},
#define GPR_INJ_ROW(op, name) GPR_INJ_ROW_OF(#name, name)
/* clang-format off */
static struct entry entries[] = {
	GPR_INJ_ROW_OF("cuGetProcAddress", gpa)
	GPR_INJ_ROW_OF("cuGetProcAddress_v2", gpa_v2)
#define GPR_X_OP(op, name, kind, domain, cbid, cbid2, list)                    \
	GPR_TRACE_EACH(GPR_INJ_ROW, op, list)
	GPR_TRACE_OPS(GPR_X_OP)
#undef GPR_X_OP
};
/* clang-format on */
#define N_ENTRIES (sizeof(entries) / sizeof(entries[0]))

/* The driver's own definition of name: in the libcuda seen, else in
 * libcuda if loaded. A reference is taken only for the look-up. */
static void *driver_sym(const char *name)
{
	const char *cuda = secure_getenv("GPURECLAIM_CUDA_LIBRARY");
	const char *lib = atomic_load(&driver_base) ? driver_path
			  : cuda && *cuda	    ? cuda
						    : "libcuda.so.1";
	void *h = dlopen(lib, RTLD_NOLOAD | RTLD_LAZY);
	void *p = h ? gpr_inj_real_dlsym(h, name) : NULL;
	if (h)
		dlclose(h);
	return p;
}

/* The definition after this library (the driver's, or another
 * interposer's); the driver's when none is in the global scope. */
#define GPR_INJ_FIND(op, name)                                                 \
	static void *next_##name##_find(void)                                  \
	{                                                                      \
		void *p = gpr_inj_real_dlsym(RTLD_NEXT, #name);                \
		if (!p)                                                        \
			p = driver_sym(#name);                                 \
		*(void **)&next_##name = p;                                    \
		return p;                                                      \
	}
#define GPR_X_OP(op, name, kind, domain, cbid, cbid2, entries)                 \
	GPR_TRACE_EACH(GPR_INJ_FIND, op, entries)
GPR_TRACE_OPS(GPR_X_OP)
#undef GPR_X_OP

/* ---- what the driver answers ---- */

/*
 * Reads the driver's exports from the libcuda that answered p, when it is
 * not the one read last (the first, or one loaded again at another
 * address after the program's dlclose): 1 when it read them.
 */
static int learn_driver(void *p)
{
	Dl_info di;
	if (!p || !dladdr(p, &di) || !di.dli_fname ||
	    (uintptr_t)di.dli_fbase == atomic_load(&driver_base))
		return 0;
	const char *b = strrchr(di.dli_fname, '/');
	b = b ? b + 1 : di.dli_fname;
	if (strncmp(b, "libcuda.so", 10) != 0 ||
	    strlen(di.dli_fname) >= sizeof(driver_path))
		return 0;
	void *h = dlopen(di.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
	if (!h)
		return 0;
	for (size_t i = 0; i < N_ENTRIES; i++) {
		*entries[i].real = gpr_inj_real_dlsym(h, entries[i].name);
		*entries[i].next = NULL; /* found again on first use */
	}
	*(void **)&primary_state =
	    gpr_inj_real_dlsym(h, "cuDevicePrimaryCtxGetState");
	dlclose(h);
	snprintf(driver_path, sizeof(driver_path), "%s", di.dli_fname);
	atomic_store(&driver_base, (uintptr_t)di.dli_fbase);
	gpr_inj_rec_driver(p);
	return 1;
}

const void *gpr_inj_preload_driver(void)
{
	for (size_t i = 0; atomic_load(&driver_base) && i < N_ENTRIES; i++)
		if (*entries[i].real)
			return *entries[i].real;
	return NULL;
}

/* Answers the driver gave for memory functions that no wrapper has. */
#define MAX_UNKNOWN 16
static struct {
	char name[48];
	_Atomic long n;
} unknown[MAX_UNKNOWN];
static _Atomic int n_unknown;

/* Whether name (a base name or an export name) is one of the table's. */
static int ours(const char *name)
{
	for (size_t i = 0; i < N_ENTRIES; i++) {
		size_t n = strlen(name);
		if (strncmp(entries[i].name, name, n) == 0 &&
		    (entries[i].name[n] == '\0' || entries[i].name[n] == '_'))
			return 1;
	}
	return 0;
}

static void count_unknown(const char *name)
{
	if (!ours(name))
		return;
	int n = atomic_load(&n_unknown);
	for (int i = 0; i < n; i++)
		if (strcmp(unknown[i].name, name) == 0) {
			unknown[i].n++;
			return;
		}
	if (n < MAX_UNKNOWN &&
	    atomic_compare_exchange_strong(&n_unknown, &n, n + 1)) {
		snprintf(unknown[n].name, sizeof(unknown[n].name), "%s", name);
		unknown[n].n = 1;
	}
}

/* A look-up: by dlsym (the export name), or by cuGetProcAddress. */
struct lookup {
	const char *name;
	int by_gpa;
	int version;
	cuuint64_t flags;
};

/* What the driver itself answers to the look-up l, or NULL. */
static void *driver_answer(const struct lookup *l)
{
	void *p = driver_sym(l->by_gpa ? "cuInit" : l->name);
	learn_driver(p);
	if (!l->by_gpa)
		return p;
	p = NULL;
	int status = 0;
	if (real_gpa_v2)
		real_gpa_v2(l->name, &p, l->version, l->flags, &status);
	else if (real_gpa)
		real_gpa(l->name, &p, l->version, l->flags);
	return p;
}

/* Keeps p in *alt (a first answer, or the same again); 1 when kept. */
static int adopt(_Atomic(void *) *alt, void *p)
{
	void *none = NULL;
	return atomic_compare_exchange_strong(alt, &none, p) || none == p;
}

/*
 * The chain wrapper for another interposer's answer p to the look-up l,
 * or NULL: the driver's answer to the same look-up names the ABI.
 */
static void *chain(void *p, const struct lookup *l)
{
	if (!ours(l->name))
		return NULL;
	void *abi = driver_answer(l);
	if (!abi)
		return NULL;
	for (size_t i = 0; i < N_ENTRIES; i++)
		if (*entries[i].real == abi) {
			if (!adopt(entries[i].alt, p))
				return NULL;
			entries[i].chained++;
			return entries[i].chain;
		}
	return NULL;
}

/* The wrapper of the driver's function p, or NULL. */
static void *wrapper_of(void *p)
{
	for (size_t i = 0; i < N_ENTRIES; i++)
		if (*entries[i].real == p) {
			entries[i].handed++;
			return entries[i].wrapper;
		}
	return NULL;
}

/*
 * Resume on demand (GPURECLAIM_WAKE=1, which `gpureclaim run
 * --resume-on-demand` sets): the process's page is made at the first
 * look-up, and every driver function without a wrapper is handed out as
 * a stub that checks it (wake_stubs.c): 1 then. Read once.
 */
static int wake_mode(void)
{
	static _Atomic int on = -1;
	int v = atomic_load_explicit(&on, memory_order_acquire);
	if (v >= 0)
		return v;
	v = gpr_inj_switch("GPURECLAIM_WAKE") == 1 && gpr_inj_wake_start() == 0;
	int expect = -1;
	atomic_compare_exchange_strong(&on, &expect, v);
	return atomic_load(&on);
}

/*
 * Whether p, the answer to the look-up l, may be handed out as a stub: a
 * function. cuGetProcAddress answers only with the driver's functions;
 * dlsym may be asked for anything whose name starts with "cu" (a
 * runtime's function, a data symbol), so its answer must be a function
 * symbol's own address.
 */
static int stubbable(void *p, const struct lookup *l)
{
	if (l->by_gpa)
		return 1;
	Dl_info di;
	const ElfW(Sym) *sym = NULL;
	if (!dladdr1(p, &di, (void **)&sym, RTLD_DL_SYMENT) || !sym ||
	    di.dli_saddr != p)
		return 0;
	int type = ELF64_ST_TYPE(sym->st_info);
	return type == STT_FUNC || type == STT_GNU_IFUNC;
}

/* p itself, or its stub in wake mode. */
static void *pass(void *p, const struct lookup *l)
{
	return wake_mode() && stubbable(p, l) ? gpr_inj_wake_stub(p) : p;
}

/* Our wrapper of the function p that the look-up l found, or p itself
 * (its stub in wake mode). */
static void *wrap(void *p, const struct lookup *l)
{
	if (!p)
		return p;
	void *w = wrapper_of(p);
	/* not the driver read last: the first look-up, or a new load */
	if (!w && ours(l->name) && learn_driver(p))
		w = wrapper_of(p);
	if (w)
		return w;
	/* ours already: dlsym(RTLD_DEFAULT) finds this library's exports */
	for (size_t i = 0; i < N_ENTRIES; i++)
		if (p == entries[i].wrapper || p == entries[i].chain ||
		    p == entries[i].exported)
			return p;
	void *c = chain(p, l);
	if (c)
		return c;
	count_unknown(l->name);
	return pass(p, l);
}

/*
 * Not instrumented by any sanitizer (dl.h): a sanitizer runtime asks
 * dlsym for the functions it intercepts while it starts, before its
 * shadow memory (ASan) or its thread state (TSan) exists. The pass-on
 * must stay a tail call at every optimisation level (gcc makes sibling
 * calls from -O2 on only; clang's musttail makes one at any level).
 */
#if defined(__clang__) && defined(__has_attribute)
#if __has_attribute(musttail)
#define GPR_MUSTTAIL __attribute__((musttail))
#endif
#endif
#ifndef GPR_MUSTTAIL
#define GPR_MUSTTAIL
#endif
#if defined(__GNUC__) && !defined(__clang__)
#define GPR_TAIL_CALLS __attribute__((optimize("optimize-sibling-calls")))
#else
#define GPR_TAIL_CALLS
#endif
GPR_INJ_UNINSTRUMENTED GPR_TAIL_CALLS GPR_EXPORT void *dlsym(void *handle,
							     const char *name)
{
	if (handle == RTLD_NEXT || name[0] != 'c' || name[1] != 'u') {
		void *(*libc)(void *, const char *) = gpr_inj_libc_dlsym();
		GPR_MUSTTAIL return libc(handle, name); /* a tail call */
	}
	struct lookup l = {name, 0, 0, 0};
	return wrap(gpr_inj_next_dlsym(handle, name), &l);
}

static CUresult gpa_v2(gpa_v2_fn fn, const char *symbol, void **pfn,
		       int version, cuuint64_t flags, int *status)
{
	if (!fn)
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult r = fn(symbol, pfn, version, flags, status);
	if (r == CUDA_SUCCESS && pfn && symbol) {
		struct lookup l = {symbol, 1, version, flags};
		*pfn = wrap(*pfn, &l);
	}
	return r;
}

static CUresult gpa(gpa_fn fn, const char *symbol, void **pfn, int version,
		    cuuint64_t flags)
{
	if (!fn)
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult r = fn(symbol, pfn, version, flags);
	if (r == CUDA_SUCCESS && pfn && symbol) {
		struct lookup l = {symbol, 1, version, flags};
		*pfn = wrap(*pfn, &l);
	}
	return r;
}

static CUresult wrap_gpa_v2(const char *symbol, void **pfn, int version,
			    cuuint64_t flags, int *status)
{
	return gpa_v2(real_gpa_v2, symbol, pfn, version, flags, status);
}

static CUresult wrap_gpa(const char *symbol, void **pfn, int version,
			 cuuint64_t flags)
{
	return gpa(real_gpa, symbol, pfn, version, flags);
}

static CUresult chain_gpa_v2(const char *symbol, void **pfn, int version,
			     cuuint64_t flags, int *status)
{
	return gpa_v2(atomic_load(&alt_gpa_v2), symbol, pfn, version, flags,
		      status);
}

static CUresult chain_gpa(const char *symbol, void **pfn, int version,
			  cuuint64_t flags)
{
	return gpa(atomic_load(&alt_gpa), symbol, pfn, version, flags);
}

GPR_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn,
					int version, cuuint64_t flags,
					int *status)
{
	if (!next_gpa_v2)
		*(void **)&next_gpa_v2 =
		    gpr_inj_real_dlsym(RTLD_NEXT, "cuGetProcAddress_v2");
	return gpa_v2(next_gpa_v2, symbol, pfn, version, flags, status);
}

GPR_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn,
				     int version, cuuint64_t flags)
{
	if (!next_gpa)
		*(void **)&next_gpa =
		    gpr_inj_real_dlsym(RTLD_NEXT, "cuGetProcAddress");
	return gpa(next_gpa, symbol, pfn, version, flags);
}

extern __typeof__(cuGetProcAddress_v2) self_gpa_v2
    __attribute__((alias("cuGetProcAddress_v2"), visibility("hidden")));
extern __typeof__(cuGetProcAddress) self_gpa
    __attribute__((alias("cuGetProcAddress"), visibility("hidden")));

/*
 * Preloaded objects come right after the program in the link map, before
 * the C library; a dlopen'ed one comes after it. (A look-up of "dlsym"
 * from here cannot tell: it may find this object's own definition.)
 */
struct order {
	uintptr_t ours, libc;
	int seen_ours;
};

static int visit(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct order *o = arg;
	if (info->dlpi_addr == o->ours)
		o->seen_ours = 1;
	else if (info->dlpi_addr == o->libc)
		return 1; /* stop: the C library comes first, or ours did */
	return o->seen_ours;
}

int gpr_inj_preload_live(void)
{
	static _Atomic int live = -1;
	int v = atomic_load_explicit(&live, memory_order_relaxed);
	if (v >= 0)
		return v;
	Dl_info mine, libc;
	struct order o = {0, 0, 0};
	void *(*libc_dlsym)(void *, const char *) = gpr_inj_libc_dlsym();
	if (dladdr((const void *)gpr_inj_preload_live, &mine) && libc_dlsym &&
	    dladdr((const void *)libc_dlsym, &libc)) {
		o.ours = (uintptr_t)mine.dli_fbase;
		o.libc = (uintptr_t)libc.dli_fbase;
		/* dlpi_addr is the load bias; the base of a shared object */
		dl_iterate_phdr(visit, &o);
	}
	v = o.seen_ours;
	atomic_store_explicit(&live, v, memory_order_relaxed);
	return v;
}

/* Appends ",name=n" (no comma first) to line; 0 when it did not fit. */
static int append(char *line, size_t len, size_t *at, int first,
		  const char *name, unsigned long long n)
{
	int k = snprintf(line + *at, len - *at, "%s%s=%llu", first ? "" : ",",
			 name, n);
	if (k < 0 || (size_t)k >= len - *at)
		return 0;
	*at += (size_t)k;
	return 1;
}

enum { META_LINE = 680 };

/*
 * Into line, "KEY=" and the wrappers handed out, how often: for the
 * driver's functions, or (chained) for another interposer's.
 */
static void handed_line(char *line, const char *key, int chained)
{
	size_t at = (size_t)snprintf(line, META_LINE, "%s=", key);
	int first = 1;
	for (size_t i = 0; i < N_ENTRIES; i++) {
		long n = chained ? entries[i].chained : entries[i].handed;
		if (n && append(line, META_LINE, &at, first, entries[i].name,
				(unsigned long long)n))
			first = 0;
	}
}

uint32_t gpr_inj_preload_meta(const char **kv, uint32_t max, char *buf,
			      size_t len)
{
	enum { LINE = META_LINE };
	if (max < 4 || len < 4 * LINE)
		return 0;
	uint32_t n = 0;
	handed_line(buf, "entry_points", 0);
	kv[n++] = buf;
	handed_line(buf + LINE, "chained", 1);
	kv[n++] = buf + LINE;
	/* the answers left unwrapped */
	char *line = buf + 2 * LINE;
	size_t at = (size_t)snprintf(line, LINE, "unrecognised=");
	int first = 1;
	for (int i = 0; i < atomic_load(&n_unknown); i++)
		if (append(line, LINE, &at, first, unknown[i].name,
			   (unsigned long long)unknown[i].n))
			first = 0;
	kv[n++] = line;
	if (!crosscheck)
		return n;
	/* calls per operation: recorded here / seen by CUPTI */
	uint64_t cupti[GPR_TRACE_N_OPS];
	gpr_inj_cupti_counts(cupti);
	line = buf + 3 * LINE;
	at = (size_t)snprintf(line, LINE, "crosscheck=");
	size_t head = at;
	int same = 1;
	for (int op = 0; op < GPR_TRACE_N_OPS; op++) {
		uint64_t mine = atomic_load(&counts[op]);
		if (!mine && !cupti[op])
			continue;
		same &= mine == cupti[op];
		int k = snprintf(
		    line + at, LINE - at, "%s%s=%llu/%llu",
		    at == head ? "" : ",", gpr_trace_op_name((unsigned)op),
		    (unsigned long long)mine, (unsigned long long)cupti[op]);
		if (k < 0 || (size_t)k >= LINE - at)
			break;
		at += (size_t)k;
	}
	kv[n++] = line;
	gpr_inj_say("crosscheck (calls recorded by the interposer / seen by "
		    "CUPTI): %s; %s",
		    line + head, same ? "the same" : "THEY DIFFER");
	return n;
}
