/*
 * GPURECLAIM_TRACE_SELFTIME's line at the end of a session: the tracer's
 * own time per recorded call, summed over the threads (each thread adds
 * its calls as it goes, inject_record.c).
 */
#include "threads.h"

#include <stdio.h>

#include "callers.h"
#include "clock.h"
#include "wait.h"

/* The median and p90 of the selftime histogram (4 ns bins). */
static void quantiles(const struct gpr_inj_selftime *s, double *p50,
		      double *p90)
{
	uint64_t n = 0, acc = 0;
	for (int i = 0; i <= GPR_SELF_BINS; i++)
		n += s->hist[i];
	double *out[2] = {p50, p90};
	const unsigned tenths[2] = {5, 9};
	*p50 = *p90 = 0;
	int k = 0;
	for (int i = 0; i <= GPR_SELF_BINS && k < 2 && n; i++) {
		acc += s->hist[i];
		while (k < 2 && acc * 10 >= n * tenths[k])
			*out[k++] = i * 4.0 + 2;
	}
}

void gpr_inj_selftime_report(void)
{
	struct gpr_inj_selftime s;
	gpr_inj_tt_selftime(&s);
	double n = s.calls ? (double)s.calls : 1.0, p50, p90;
	quantiles(&s, &p50, &p90);
	char parts[96] = "";
	if (gpr_inj_state.selftime == GPR_INJ_SELFTIME_PARTS)
		snprintf(parts, sizeof(parts),
			 "; of it stack walk %.0f, waiting-time reads %.0f",
			 (double)gpr_inj_ticks_ns_fast(s.walk_ns) / n,
			 (double)gpr_inj_ticks_ns_fast(s.wait_ns) / n);
	gpr_inj_say(
	    "self time: %llu calls, median %.0f ns, p90 %.0f ns, "
	    "mean %.0f ns per call in the tracer's own code (%s%s); "
	    "clock %s; waiting time %s, %llu schedstat reads; stack "
	    "walks: "
	    "%llu fast, %llu full, %llu fast found wrong and redone",
	    (unsigned long long)s.calls, p50, p90, (double)s.ns / n,
	    gpr_inj_state.backend == GPR_INJ_INTERPOSE ? "interposer" : "CUPTI",
	    parts, gpr_inj_clock_name(), gpr_inj_wait_name(gpr_inj_state.wait),
	    (unsigned long long)s.reads, (unsigned long long)s.fast,
	    (unsigned long long)s.full,
	    (unsigned long long)gpr_inj_callsite_redone());
}
