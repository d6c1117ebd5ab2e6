/*
 * What every file of the tracer (libgpureclaim_trace.so) shares: which
 * front end records, the session's settings, and the one way to speak.
 *
 * The parts, each with its header (named by role, each declaring what its
 * readers use):
 *   frontend.h   the two front ends, the interposer (inject_preload.c:
 *                LD_PRELOAD, wrappers of the driver's entry points handed
 *                out by dlsym and cuGetProcAddress) and CUPTI
 *                (inject_cupti.c: callbacks, the library loaded by the
 *                driver from CUDA_INJECTION64_PATH or by a program);
 *   recorder.h   the call record both front ends record through
 *                (inject_record.c);
 *   threads.h    the per-thread state and rings (inject_thread.c) and the
 *                selftime counters (inject_selftime.c);
 *   wait.h       the waiting-time gate (inject_wait.c);
 *   sizes.h      the address -> size maps (inject_map.c);
 *   callers.h    the caller walk and its resolution (inject_site.c);
 *   clock.h      the calls' stamps and the log's clock (inject_clock.c);
 *   writer.h     the writer thread (inject_writer.c);
 *   session.h    a session from start to stop (inject_session.c);
 *   fd.h         descriptors the tracer owns (inject_fd.c);
 *   dl.h         the C library's dlsym (inject_dl.c).
 * inject.c holds the library's exports (include/gpureclaim_trace.h) and
 * decides which front end records. Nothing here is exported.
 */
#ifndef GPR_TRACE_INJECT_TRACER_H
#define GPR_TRACE_INJECT_TRACER_H

#include <stdatomic.h>
#include <stddef.h>

#define GPR_EXPORT __attribute__((visibility("default")))

/* Which front end records the current session. */
enum { GPR_INJ_NONE = 0, GPR_INJ_INTERPOSE = 1, GPR_INJ_CUPTI = 2 };

/* GPURECLAIM_TRACE_SELFTIME: 1 the time per call, "parts" also split
 * into the stack walk and the waiting-time reads (more clock reads). */
enum { GPR_INJ_SELFTIME_OFF, GPR_INJ_SELFTIME_TOTAL, GPR_INJ_SELFTIME_PARTS };

/* Where the waiting time comes from (wait.h). */
enum { GPR_INJ_WAIT_NONE = 0, GPR_INJ_WAIT_PERF = 1, GPR_INJ_WAIT_RUSAGE = 2 };

/*
 * The state every file of the library reads, defined in one place
 * (inject_state.c). Who writes what, and when:
 *   active   the front end that records now (GPR_INJ_*), GPR_INJ_NONE
 *            when none does: set by the writer (inject_writer.c) once the
 *            log is open and by a resume (inject.c); cleared by the writer
 *            when a write fails or its descriptor is lost, when a session
 *            stops, at exit, on a fatal signal and in a forked child, and
 *            by a pause. Read by every call, which records only when it
 *            names its own front end (relaxed: one seen late records a
 *            call more or less).
 *   epoch    incremented by a CUPTI pause (inject_cupti.c); read by each
 *            call's entry callback, which forgets the calls entered
 *            before a pause (their exit never comes).
 *   selftime, backend, wait, tsc
 *            set by the session's start (inject_session.c, the clock's
 *            start) before `active`, read by the calls while it is set.
 * Plain globals in one struct: a call pays no lock and no pointer chase
 * to read them.
 */
struct gpr_inj_state {
	_Atomic int active;	/* the front end recording, or NONE */
	_Atomic unsigned epoch; /* counts CUPTI pauses */
	int selftime;		/* GPR_INJ_SELFTIME_*: time our own code */
	int backend;		/* GPR_INJ_* of the session */
	int wait;		/* GPR_INJ_WAIT_* of the session */
	int tsc;		/* stamps are TSC ticks (clock.h) */
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
/*
 * A setting of the environment that takes one of a few words
 * (settings.h: GPURECLAIM_TRACE_WAIT, GPURECLAIM_TRACE_CLOCK): the
 * index of its word, -1 when unset or empty; another value is said on
 * stderr and taken as unset (the default).
 */
int gpr_inj_setting(const char *name);

#endif /* GPR_TRACE_INJECT_TRACER_H */
