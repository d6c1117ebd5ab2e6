/*
 * The records' timestamps. The log's clock is CLOCK_MONOTONIC; reading it
 * (clock_gettime through the vDSO) costs 24-34 ns, twice per call. Where
 * the kernel itself keeps time by the TSC (clocksource "tsc", which it
 * only keeps while the TSC is invariant and in step across CPUs: cpuinfo
 * flags constant_tsc and nonstop_tsc), a call reads the TSC instead
 * (12-19 ns) and the writer turns the ticks into CLOCK_MONOTONIC
 * nanoseconds: linearly, between the pair (TSC, CLOCK_MONOTONIC) read at
 * the session's start and the latest pair the writer read, so the scale
 * follows the clock's own (NTP-slewed) rate. Elsewhere, and with
 * GPURECLAIM_TRACE_CLOCK=clock_gettime, the calls read CLOCK_MONOTONIC.
 * The log's META line `clock` says which.
 */
#include "inject.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
	uint64_t tsc0, ns0; /* at the session's start */
	uint64_t tsc1, ns1; /* the latest pair */
	double ns_per_tick; /* for selftime: the rate at the start */
} ck;

#if defined(__x86_64__)
static int file_has(const char *path, const char *word)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	char line[4096];
	int found = 0;
	while (!found && fgets(line, sizeof(line), f)) {
		char *p = line;
		while ((p = strstr(p, word)) != NULL) {
			size_t n = strlen(word);
			if ((p == line || p[-1] == ' ' || p[-1] == '\t') &&
			    (p[n] == ' ' || p[n] == '\n' || p[n] == '\0')) {
				found = 1;
				break;
			}
			p += n;
		}
		if (strncmp(line, "flags", 5) == 0)
			break; /* the first CPU's flags line decides */
	}
	fclose(f);
	return found;
}

static int tsc_usable(void)
{
	const char *want = secure_getenv("GPURECLAIM_TRACE_CLOCK");
	if (want && strcmp(want, "clock_gettime") == 0)
		return 0;
	FILE *f = fopen(
	    "/sys/devices/system/clocksource/clocksource0/current_clocksource",
	    "re");
	char cs[32] = "";
	if (f) {
		if (!fgets(cs, sizeof(cs), f))
			cs[0] = '\0';
		fclose(f);
	}
	return strcmp(cs, "tsc\n") == 0 &&
	       file_has("/proc/cpuinfo", "constant_tsc") &&
	       file_has("/proc/cpuinfo", "nonstop_tsc");
}
#else
static int tsc_usable(void)
{
	return 0;
}
#endif

/* A pair read as close together as this thread can. */
static void pair(uint64_t *tsc, uint64_t *ns)
{
	uint64_t a = gpr_inj_tsc();
	*ns = gpr_inj_now();
	uint64_t b = gpr_inj_tsc();
	*tsc = a + (b - a) / 2;
}

void gpr_inj_clock_start(void)
{
	gpr_inj_state.tsc = tsc_usable();
	if (!gpr_inj_state.tsc)
		return;
	pair(&ck.tsc0, &ck.ns0);
	/* a first rate, for the selftime figures: 200 us apart */
	struct timespec ts = {0, 200 * 1000};
	nanosleep(&ts, NULL);
	pair(&ck.tsc1, &ck.ns1);
	ck.ns_per_tick = ck.tsc1 > ck.tsc0 ? (double)(ck.ns1 - ck.ns0) /
						 (double)(ck.tsc1 - ck.tsc0)
					   : 1.0;
}

const char *gpr_inj_clock_name(void)
{
	return gpr_inj_state.tsc ? "tsc" : "clock_gettime";
}

void gpr_inj_clock_sync(void)
{
	if (!gpr_inj_state.tsc)
		return;
	uint64_t tsc, ns;
	pair(&tsc, &ns);
	if (tsc > ck.tsc1 && ns > ck.ns1) {
		ck.tsc1 = tsc;
		ck.ns1 = ns;
	}
}

uint64_t gpr_inj_clock_ns(uint64_t stamp)
{
	if (!gpr_inj_state.tsc)
		return stamp;
	uint64_t dt = ck.tsc1 - ck.tsc0, dn = ck.ns1 - ck.ns0;
	if (dt == 0)
		return ck.ns0;
	if (stamp >= ck.tsc0)
		return ck.ns0 +
		       (uint64_t)((unsigned __int128)(stamp - ck.tsc0) * dn /
				  dt);
	uint64_t back =
	    (uint64_t)((unsigned __int128)(ck.tsc0 - stamp) * dn / dt);
	return back < ck.ns0 ? ck.ns0 - back : 0;
}

uint64_t gpr_inj_ticks_ns(uint64_t ticks)
{
	if (!gpr_inj_state.tsc)
		return ticks;
	uint64_t dt = ck.tsc1 - ck.tsc0, dn = ck.ns1 - ck.ns0;
	return dt ? (uint64_t)((unsigned __int128)ticks * dn / dt) : ticks;
}

uint64_t gpr_inj_ticks_ns_fast(uint64_t ticks)
{
	return gpr_inj_state.tsc ? (uint64_t)((double)ticks * ck.ns_per_tick)
				 : ticks;
}
