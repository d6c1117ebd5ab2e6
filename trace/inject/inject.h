/*
 * Internals of the tracer library (libgpureclaim_trace.so), shared by its
 * files. Two front ends see the driver calls:
 *   the interposer (inject_preload.c): LD_PRELOAD, wrappers of the
 *     driver's entry points handed out by dlsym and cuGetProcAddress;
 *   CUPTI (inject_cupti.c): callbacks, the library loaded by the driver
 *     from CUDA_INJECTION64_PATH or attached by a running program.
 * Both record through one back end: the call record (inject_record.c),
 * the per-thread rings and waiting-time gate (inject_thread.c,
 * inject_wait.c), the size maps (inject_map.c), the caller walk and its
 * resolution (inject_site.c) and the writer thread (inject_writer.c).
 * inject.c holds the library's exports (include/gpureclaim_trace.h) and
 * decides which front end records. Nothing here is exported.
 */
#ifndef GPR_TRACE_INJECT_H
#define GPR_TRACE_INJECT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "../format/trace_format.h"
#include "../format/trace_ops.h"
#include "cuda_abi.h"

#define GPR_EXPORT __attribute__((visibility("default")))

/* Which front end records the current session. */
enum { GPR_INJ_NONE = 0, GPR_INJ_INTERPOSE = 1, GPR_INJ_CUPTI = 2 };

/* GPURECLAIM_TRACE_SELFTIME: 1 the time per call, "parts" also split
 * into the stack walk and the waiting-time reads (more clock reads). */
enum { GPR_INJ_SELFTIME_OFF, GPR_INJ_SELFTIME_TOTAL, GPR_INJ_SELFTIME_PARTS };

/* Where the waiting time comes from (inject_wait.c). */
enum { GPR_INJ_WAIT_NONE = 0, GPR_INJ_WAIT_PERF = 1, GPR_INJ_WAIT_RUSAGE = 2 };

/*
 * The state every file of the library reads, defined in one place
 * (inject_state.c). Who writes what, and when:
 *   active   the front end that records now (GPR_INJ_*), GPR_INJ_NONE
 *            when none does: set by the writer (inject_writer.c) once the
 *            log is open and by a resume (inject.c); cleared by the writer
 *            when a write fails, when a session stops, at exit, on a
 *            fatal signal and in a forked child, and by a pause. Read by
 *            every call, which records only when it names its own front
 *            end (relaxed: one seen late records a call more or less).
 *   epoch    incremented by a CUPTI pause (inject_cupti.c); read by each
 *            call's entry callback, which forgets the calls entered
 *            before a pause (their exit never comes).
 *   selftime, backend, wait
 *            set by the session's start (inject_session.c: selftime from
 *            the switch GPURECLAIM_TRACE_SELFTIME) before `active`, read
 *            by the calls while it is set.
 * Plain globals in one struct: a call pays no lock and no pointer chase
 * to read them.
 */
struct gpr_inj_state {
	_Atomic int active;	/* the front end recording, or NONE */
	_Atomic unsigned epoch; /* counts CUPTI pauses */
	int selftime;		/* GPR_INJ_SELFTIME_*: time our own code */
	int backend;		/* GPR_INJ_* of the session */
	int wait;		/* GPR_INJ_WAIT_* of the session */
	int tsc;		/* stamps are TSC ticks (inject_clock.c) */
};
extern struct gpr_inj_state gpr_inj_state;

/*
 * One line on stderr, "gpureclaim-trace: ...", or, while a program's call
 * into the library (gpureclaim_trace_start) has asked for it, into that
 * call's message buffer instead (inject_state.c).
 */
void gpr_inj_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Sends what gpr_inj_say says to buf (NULL: back to stderr). */
void gpr_inj_say_into(char *buf, size_t len);
/*
 * An on/off switch of the environment (trace/format/trace_switch.h), read
 * with secure_getenv: 1 or 0, or 2 for the switch's own further word
 * (GPURECLAIM_TRACE_SELFTIME=parts). A value that is none of these is said
 * on stderr and taken as off. Each switch is read once, when a session
 * starts or the library initialises, never by a call (inject_state.c).
 */
int gpr_inj_switch(const char *name);

/* Wall-clock nanoseconds, CLOCK_MONOTONIC: the log's clock. */
static inline uint64_t gpr_inj_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t gpr_inj_tsc(void)
{
#if defined(__x86_64__)
	return __builtin_ia32_rdtsc();
#else
	return gpr_inj_now();
#endif
}

/* A call's timestamp: TSC ticks or CLOCK_MONOTONIC ns (inject_clock.c);
 * the writer turns it into the log's nanoseconds. */
static inline uint64_t gpr_inj_stamp(void)
{
	return gpr_inj_state.tsc ? gpr_inj_tsc() : gpr_inj_now();
}

/* ---- inject_clock.c ---- */
/* Decides the session's stamps (gpr_inj_state.tsc) and calibrates. */
void gpr_inj_clock_start(void);
const char *gpr_inj_clock_name(void);
/* The writer: a new calibration pair, before it converts a batch. */
void gpr_inj_clock_sync(void);
/* A stamp as the log's CLOCK_MONOTONIC ns; a difference of stamps as ns
 * (exact, the writer's), and roughly (selftime, any thread). */
uint64_t gpr_inj_clock_ns(uint64_t stamp);
uint64_t gpr_inj_ticks_ns(uint64_t ticks);
uint64_t gpr_inj_ticks_ns_fast(uint64_t ticks);

#define GPR_RING_SIZE 8192 /* records per thread; a power of two */
#define GPR_INFLIGHT 4	   /* nested CUPTI calls followed per thread */
#define GPR_MEMO 8	   /* frames of a remembered caller path */
#define GPR_MEMOS 4	   /* caller paths a thread remembers */
#define GPR_SELF_BINS 1024 /* selftime histogram: 4 ns bins */

/* The waiting-time reading at a call's entry (inject_wait.c). */
struct gpr_inj_wait {
	uint64_t rd0;  /* run_delay at entry */
	uint64_t csw0; /* getrusage gate: switches at entry */
	uint32_t s0;   /* perf gate: lock word at entry */
	int ok;	       /* rd0 was read */
};

/* A call from its entry to its exit. */
struct gpr_inj_inflight {
	uint64_t t0;   /* entry (a stamp: gpr_inj_stamp) */
	uint64_t t1;   /* exit (set by gpr_inj_rec_exit) */
	uintptr_t ip;  /* the caller (inject_site.c) */
	uint64_t size; /* of the memory a free or release ends */
	uint32_t meta; /* and where it was (GPR_INJ_META_*) */
	int size_found;
	uint64_t self_ticks; /* selftime: our code at entry (stamps) */
	struct gpr_inj_wait wait;
};

enum { GPR_TT_OWNED = 0, GPR_TT_DEAD = 1, GPR_TT_FREE = 2 };

/*
 * GPURECLAIM_TRACE_SELFTIME: what this thread's calls cost in our own
 * code (written by the thread, read at the end of a session).
 */
struct gpr_inj_selftime {
	_Atomic uint64_t calls, ns, walk_ns, wait_ns, fast, full, reads;
	_Atomic uint32_t hist[GPR_SELF_BINS + 1]; /* per-call ns / 4 */
};
static inline void gpr_inj_st_add(_Atomic uint64_t *c, uint64_t v)
{
	atomic_store_explicit(c,
			      atomic_load_explicit(c, memory_order_relaxed) + v,
			      memory_order_relaxed);
}

/* A record in a ring: the log's record (t_ns and dur_ns in stamps) and
 * the caller, which the writer turns into ns and into the record's lib
 * and site (inject_clock.c, inject_site.c). */
struct gpr_inj_slot {
	struct gpr_trace_rec r;
	uintptr_t ip;
};

/* The caller path of one of the thread's recent fast walks
 * (inject_site.c). */
struct gpr_inj_memo {
	uintptr_t cfa0; /* where the walk started */
	unsigned gen;	/* gpr_inj_site_gen() when taken */
	int n;		/* frames, the caller last */
	struct {
		uintptr_t slot; /* a return-address word on the stack */
		uintptr_t ip;	/* what it held */
	} f[GPR_MEMO];
};

/*
 * One thread's state; its ring is a single-producer single-consumer
 * queue. What a recorded call reads and writes comes first, packed into
 * a few cache lines (a call follows a framework's and the driver's own
 * work, which evicts much of what the tracer touched last time).
 */
struct gpr_inj_tt {
	/* ---- every call ---- */
	_Atomic uint32_t head; /* next slot the thread writes */
	_Atomic int inside;    /* set while inside a recorded call */
	uint32_t tid;
	unsigned fast_walks;	      /* since the last verifying full walk */
	unsigned memo_next;	      /* the memo a new path replaces */
	uintptr_t stack_lo, stack_hi; /* 1, 1: unknown (inject_site.c) */
	/* waiting time (inject_wait.c) */
	volatile const void *pg; /* perf task-clock page */
	int pg_state;		 /* 0 not tried, 1 mapped, -1 refused */
	int have_rd; /* rd_at_read is a reading taken at seq_at_read */
	uint32_t seq_at_read;
	int sched_fd;
	uint64_t rd_at_read, csw_at_read;
	/* context -> device of the thread's recent contexts */
	void *ctx_key[4];
	int ctx_dev[4];
	unsigned ctx_next;
	struct gpr_inj_memo memo[GPR_MEMOS];
	/* ---- the writer's side, CUPTI's, the rest ---- */
	_Atomic uint32_t tail __attribute__((aligned(64))); /* next to read */
	_Atomic int state;				    /* GPR_TT_* */
	_Atomic uint32_t dropped;
	struct gpr_inj_tt *next; /* list of all states, never unlinked */
	/* CUPTI calls between their enter and exit callbacks */
	int depth;
	unsigned epoch; /* gpr_inj_state.epoch when depth was last valid */
	struct gpr_inj_inflight fl[GPR_INFLIGHT];
	struct gpr_inj_selftime st;
	struct gpr_inj_slot ring[GPR_RING_SIZE];
};

/* ---- inject_thread.c ---- */
/* This thread's state, registered on first use; NULL if that failed. */
struct gpr_inj_tt *gpr_inj_tt_self(void);
/* Head of the list of thread states (acquire). */
struct gpr_inj_tt *gpr_inj_tt_list(void);
/* Reserves the next ring slot, or NULL (counted as dropped) when full. */
static inline struct gpr_inj_slot *gpr_inj_tt_slot(struct gpr_inj_tt *tt)
{
	uint32_t h = atomic_load_explicit(&tt->head, memory_order_relaxed);
	uint32_t t = atomic_load_explicit(&tt->tail, memory_order_acquire);
	if (h - t >= GPR_RING_SIZE) {
		atomic_fetch_add_explicit(&tt->dropped, 1,
					  memory_order_relaxed);
		return NULL;
	}
	return &tt->ring[h & (GPR_RING_SIZE - 1)];
}
/* Publishes the slot returned by gpr_inj_tt_slot; 1 when the ring has
 * just become half full (the writer should be woken). */
static inline int gpr_inj_tt_push(struct gpr_inj_tt *tt)
{
	uint32_t h = atomic_load_explicit(&tt->head, memory_order_relaxed);
	atomic_store_explicit(&tt->head, h + 1, memory_order_release);
	/* the slot the next call writes, fetched while the program runs */
	__builtin_prefetch(&tt->ring[(h + 1) & (GPR_RING_SIZE - 1)], 1, 3);
	return h + 1 - atomic_load_explicit(&tt->tail, memory_order_relaxed) ==
	       GPR_RING_SIZE / 2;
}
int gpr_inj_tt_init(void);
/* Sums every thread's selftime into *out and zeroes them. */
void gpr_inj_tt_selftime(struct gpr_inj_selftime *out);

/* ---- inject_wait.c: waiting time, runnable but not running ---- */
/* Decides the session's source (gpr_inj_state.wait) on this thread. */
int gpr_inj_wait_probe(void);
const char *gpr_inj_wait_name(int mode);
void gpr_inj_wait_enter(struct gpr_inj_tt *tt, struct gpr_inj_wait *w);
/* 1 and *ns when the call's waiting time was measured, else 0. */
int gpr_inj_wait_exit(struct gpr_inj_tt *tt, struct gpr_inj_wait *w,
		      uint64_t *ns);
/* A thread's sources, opened on its first call, closed at its exit. */
void gpr_inj_wait_thread_start(struct gpr_inj_tt *tt);
void gpr_inj_wait_thread_end(struct gpr_inj_tt *tt);

/* ---- inject_map.c: address -> size, handle -> size ---- */
enum { GPR_MAP_ADDR = 0, GPR_MAP_HANDLE = 1 };
/* What the maps keep besides the size: device + 1 (0 unknown) in the low
 * 16 bits, the live query's kind (gpureclaim_trace.h) above. */
#define GPR_INJ_META(device, kind)                                             \
	((uint32_t)((device) + 1) & 0xffffu) | ((uint32_t)(kind) << 16)
#define GPR_INJ_META_DEVICE(m) ((int)((m)&0xffffu) - 1)
#define GPR_INJ_META_KIND(m) ((int)((m) >> 16))
void gpr_inj_map_put(int which, uint64_t key, uint64_t size, uintptr_t ip,
		     uint32_t meta);
/* Removes key; its size (0 when absent) and, when found, its meta. */
uint64_t gpr_inj_map_take(int which, uint64_t key, uint32_t *meta);
int gpr_inj_map_init(void);
/* Forgets everything (a new session). */
void gpr_inj_map_clear(void);
/* Calls fn for every allocation held (a snapshot, racing with calls). */
void gpr_inj_map_each(void (*fn)(void *ctx, uint64_t size, uintptr_t ip,
				 uint32_t meta),
		      void *ctx);

/* ---- inject_site.c: who called the driver ---- */
/*
 * The first caller, walking up from the function that calls this one,
 * outside libcuda/libcudart/libcupti/this library: its return address in
 * *ip, 0 when unknown. Returns how it walked: GPR_WALK_*.
 */
enum { GPR_WALK_NONE = 0, GPR_WALK_FAST = 1, GPR_WALK_FULL = 2 };
int gpr_inj_callsite(struct gpr_inj_tt *tt, uintptr_t *ip);
/* Fast walks found wrong by the periodic check and done again in full. */
uint64_t gpr_inj_callsite_redone(void);
/* Marks the object holding `addr` as not a caller (a CUDA library). */
void gpr_inj_callsite_exclude(const void *addr);
int gpr_inj_callsite_init(void);
/*
 * ip -> string ids of its library and call site, interned (the writer
 * thread and the live query; never a traced thread). lib may be NULL.
 */
void gpr_inj_resolve(uintptr_t ip, uint32_t *lib, uint32_t *site);
/* The library name of string id `id`, or NULL (valid while loaded). */
const char *gpr_inj_string(uint32_t id);
/* Strings interned so far: ids GPR_TRACE_N_OPS .. + *n - 1. */
const char *const *gpr_inj_interned(uint32_t *n);

/* ---- inject_record.c: one recorded call, for both front ends ---- */
/*
 * At a call's entry: the caller, what a free gives back, the waiting-time
 * reading, the entry time. `params` is the call's arguments as CUPTI lays
 * them out (cupti_abi.h: <name>_params).
 */
void gpr_inj_rec_enter(struct gpr_inj_tt *tt, struct gpr_inj_inflight *f,
		       int op, const void *params);
/*
 * At its exit: one record into the thread's ring. `ctx` is the call's
 * context where the front end knows it (CUPTI), NULL to ask the driver.
 */
void gpr_inj_rec_exit(struct gpr_inj_tt *tt, struct gpr_inj_inflight *f, int op,
		      const void *params, CUresult res, CUcontext ctx);
/* A context event (created, destroyed): one record, no duration. */
void gpr_inj_rec_event(struct gpr_inj_tt *tt, int op, CUcontext ctx,
		       int device);
/* The functions of the driver the record asks (current context, its
 * device); from the handle the front end found (NULL: libcuda.so.1 if
 * loaded). */
void gpr_inj_rec_driver(void *libcuda);
/* selftime: adds one call's own time (a difference of stamps). */
void gpr_inj_rec_selftime(struct gpr_inj_tt *tt, uint64_t ticks);

/* ---- inject_writer.c ---- */
/* The META lines a session's log ends with, into kv (at most max, their
 * text in buf); returns how many. */
typedef uint32_t (*gpr_inj_meta_fn)(const char **kv, uint32_t max, char *buf,
				    size_t len);
/*
 * Opens the log (META lines kv[0..n-1]) and starts the writer; sets
 * gpr_inj_state.active to the session's backend. A log of that name
 * already there (O_EXCL) is an error, or with `shared` (every process of
 * a `gpureclaim trace` run gets the same name) the log is PATH.<pid>.
 * 0, or -1 (said why).
 */
int gpr_inj_writer_start(const char *path, int shared, const char *const *kv,
			 uint32_t n, gpr_inj_meta_fn closing);
/* Ends the session: records stop, the rings are drained, the closing
 * META lines are added, the log is closed. 0, or -1 when none is open in
 * this process. */
int gpr_inj_writer_stop(void);
void gpr_inj_writer_wake(void);
/* The open log's path into out ("" when none); 1 when one is open. */
int gpr_inj_writer_path(char *out, size_t len);
/* 1 in a child forked while a log was open. */
int gpr_inj_writer_forked(void);

/* ---- inject_dl.c: the C library's dlsym (our own export hooks it) ---- */
void *(*gpr_inj_libc_dlsym(void))(void *, const char *);
void *gpr_inj_real_dlsym(void *handle, const char *name);
/* The dlsym after this library in the global scope: another interposer's
 * (HAMi-core defines one), else the C library's. */
void *gpr_inj_next_dlsym(void *handle, const char *name);

/* ---- inject_selftime.c ---- */
/* One stderr line: the session's selftime, summed over the threads. */
void gpr_inj_selftime_report(void);

/* ---- inject_session.c: a session, from start to stop ---- */
/*
 * Starts recording with `backend` into path (inject_writer.c's `shared`),
 * the log saying who started it; `libcuda` the driver's handle if known.
 * The caller holds the session lock. 0, or -1 (said why).
 */
int gpr_inj_session_start(int backend, const char *path, int shared,
			  const char *started_by, gpr_inj_meta_fn closing,
			  void *libcuda);
/* Ends the session (caller holds the lock). 0, or -1 when none is open. */
int gpr_inj_session_stop(void);
/* 1 when this process has a session open (paused or not). */
int gpr_inj_session_open(void);
/* 1 in a child forked while this process had a session open. */
int gpr_inj_session_forked(void);
void gpr_inj_session_lock(void);
void gpr_inj_session_unlock(void);
/* The log `gpureclaim trace` asked for ($GPURECLAIM_TRACE_OUTPUT, else
 * ./gpureclaim-<pid>.trace) into out (GPR_TRACE_MAX_PATH + 1 bytes). 0,
 * or -1 when the variable is longer than GPR_TRACE_MAX_PATH (said why:
 * refused, never cut). */
int gpr_inj_session_default_path(char *out, size_t len);
/* 1 in a setuid or setgid program (secure execution), which is never
 * traced: says so. 0 otherwise. */
int gpr_inj_session_secure(void);

/* ---- inject_preload.c: the interposer ---- */
/* 1 when this library's exports come first in the process (preloaded):
 * the driver calls handed out by dlsym/cuGetProcAddress are ours. */
int gpr_inj_preload_live(void);
/* The interposer's closing META lines (a gpr_inj_meta_fn). */
uint32_t gpr_inj_preload_meta(const char **kv, uint32_t max, char *buf,
			      size_t len);
/* The driver's handle, once a look-up has shown it (NULL before). */
void *gpr_inj_preload_libcuda(void);

/* ---- inject_cupti.c: the CUPTI front end ---- */
/* Loads CUPTI (path, else the one mapped, else the usual names),
 * subscribes and turns the callbacks on. 0, or -1 (said why). */
int gpr_inj_cupti_attach(const char *path);
/* 1 when GPURECLAIM_TRACE_SUBSCRIBE_ONLY holds CUPTI with no callback. */
int gpr_inj_cupti_subscribe_only(void);
/* Turns the callbacks off and unsubscribes (another tool may take CUPTI). */
void gpr_inj_cupti_detach(void);
/* Only counts calls per operation, records nothing
 * (GPURECLAIM_TRACE_CROSSCHECK, beside the interposer). */
int gpr_inj_cupti_attach_counting(const char *path);
/* The counts: calls[op] per GPR_TRACE_N_OPS. */
void gpr_inj_cupti_counts(uint64_t *calls);
int gpr_inj_cupti_pause(void);
int gpr_inj_cupti_resume(void);

#endif /* GPR_TRACE_INJECT_H */
