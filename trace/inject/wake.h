/*
 * Resume on demand, the process's side (wake.c): the page it shares with
 * the watcher of its suspension (include/gpureclaim_wake.h says the
 * protocol), the check before a driver call and the ask. Compiled into
 * the tracer (the interposer checks before every driver call it hands
 * out: inject_preload.c, wake_stubs.c) and into the Python extension (the
 * agent asks before a notebook cell: python/src/wake.c), which uses the
 * tracer's page instead when the tracer is in the process.
 *
 * The check is one load of a pointer and one of a word, no lock, no
 * allocation; the ask is the slow path, taken only while a watcher holds
 * the process suspended.
 */
#ifndef GPR_TRACE_INJECT_WAKE_H
#define GPR_TRACE_INJECT_WAKE_H

#include <stdint.h>

/* The page's state word while this process has a page, else NULL
 * (wake_stubs.c's assembly reads it too). */
extern uint32_t *gpr_inj_wake_word __attribute__((visibility("hidden")));

/* Makes the page (once; again in a forked child, for the child). 0, or a
 * negative errno. */
int gpr_inj_wake_start(void);
/* GPURECLAIM_WAKE_RUNNING without a page, else the page's state. */
int gpr_inj_wake_state(void);
/* The slow path (gpureclaim_wake_ask_fn's contract). */
int gpr_inj_wake_ask(double max_seconds);

/* The interposer's stub for the driver function fn (wake_stubs.c): a
 * check, then fn; fn itself where there is no stub. */
void *gpr_inj_wake_stub(void *fn);

/* Before a driver call: asks when a watcher holds this process. */
static inline void gpr_inj_wake_check(void)
{
	uint32_t *w = __atomic_load_n(&gpr_inj_wake_word, __ATOMIC_RELAXED);
	if (__builtin_expect(w != 0, 0) &&
	    __builtin_expect(__atomic_load_n(w, __ATOMIC_RELAXED) != 0, 0))
		gpr_inj_wake_ask(0);
}

#endif /* GPR_TRACE_INJECT_WAKE_H */
