/*
 * A call's stamps and the log's clock (inject_clock.c): a stamp is TSC
 * ticks where the kernel keeps time by the TSC, else CLOCK_MONOTONIC ns;
 * the writer turns stamps into the log's nanoseconds through one
 * monotonic conversion for the whole session.
 */
#ifndef GPR_TRACE_INJECT_CLOCK_H
#define GPR_TRACE_INJECT_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "tracer.h"

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

/* A call's timestamp: TSC ticks or CLOCK_MONOTONIC ns; the writer turns
 * it into the log's nanoseconds (gpr_inj_clock_ns). */
static inline uint64_t gpr_inj_stamp(void)
{
	return gpr_inj_state.tsc ? gpr_inj_tsc() : gpr_inj_now();
}

/* Decides the session's stamps (gpr_inj_state.tsc) and calibrates. */
void gpr_inj_clock_start(void);
const char *gpr_inj_clock_name(void);
/* The writer, before it converts a batch: extends the conversion to now
 * (it changes nothing for the stamps before now). */
void gpr_inj_clock_sync(void);
/* A stamp as the log's CLOCK_MONOTONIC ns: one function of the stamp for
 * the whole session, never decreasing (the writer's only). */
uint64_t gpr_inj_clock_ns(uint64_t stamp);
/* A difference of stamps as ns, roughly (selftime, any thread). */
uint64_t gpr_inj_ticks_ns_fast(uint64_t ticks);

#endif /* GPR_TRACE_INJECT_CLOCK_H */
