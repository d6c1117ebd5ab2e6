/*
 * The records' timestamps. The log's clock is CLOCK_MONOTONIC; reading it
 * (clock_gettime through the vDSO) costs 24-34 ns, twice per call. Where
 * the kernel itself keeps time by the TSC (clocksource "tsc", which it
 * only keeps while the TSC is invariant and in step across CPUs: cpuinfo
 * flags constant_tsc and nonstop_tsc), a call reads the TSC instead
 * (12-19 ns) and the writer turns the ticks into CLOCK_MONOTONIC
 * nanoseconds. Elsewhere, and with GPURECLAIM_TRACE_CLOCK=clock_gettime,
 * the calls read CLOCK_MONOTONIC. The log's META line `clock` says which.
 *
 * The conversion is one function of the stamp for the whole session,
 * never decreasing, so the order of the ticks is the order of the
 * nanoseconds: a thread's calls stay in order and a free never lands
 * before its allocation, whichever drain converts which record. It is
 * piecewise linear and continuous: a piece begins every PIECE_NS where
 * the last one ends, its slope the long-term rate (ticks against
 * CLOCK_MONOTONIC since the session's start, so it follows the clock's
 * own NTP-slewed rate) corrected to take the difference between the
 * pieces and the clock back to 0 over the next second. A stamp converts
 * by the piece it falls in, whenever it is converted; pieces are kept for
 * PIECES x PIECE_NS (about 17 minutes): a stamp older than that (a call
 * in flight so long) takes the oldest piece's line.
 */
#include "clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "settings.h"

#define PIECES 4096
#define PIECE_NS 250000000ull /* a new piece after this many ns */
#define CATCH_UP_NS 1e9	      /* a piece takes its error back to 0 in this */

struct piece {
	uint64_t tsc, ns; /* where it begins */
	double slope;	  /* ns per tick */
};

static struct {
	uint64_t tsc0, ns0;	/* at the session's start */
	double ns_per_tick;	/* for selftime: the rate at the start */
	struct piece p[PIECES]; /* a ring: p[(n - 1) % PIECES] the last */
	uint64_t n;		/* pieces made this session */
	uint64_t last_sync_ns;	/* CLOCK_MONOTONIC of the last piece */
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
	if (gpr_inj_setting("GPURECLAIM_TRACE_CLOCK") ==
	    GPR_TRACE_CLOCK_GETTIME)
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
	(void)gpr_inj_setting("GPURECLAIM_TRACE_CLOCK");
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

/* The piece a stamp falls in: the last one beginning at or before it
 * (usually the newest), else the oldest kept. */
static const struct piece *piece_of(uint64_t stamp)
{
	uint64_t kept = ck.n < PIECES ? ck.n : PIECES;
	for (uint64_t k = 0; k < kept; k++) {
		const struct piece *p = &ck.p[(ck.n - 1 - k) % PIECES];
		if (p->tsc <= stamp || k + 1 == kept)
			return p;
	}
	return &ck.p[0];
}

/* A piece's line at stamp (before its start: back along the same line,
 * not below 0). Never decreasing in stamp. */
static uint64_t on_piece(const struct piece *p, uint64_t stamp)
{
	if (stamp >= p->tsc)
		return p->ns + (uint64_t)((double)(stamp - p->tsc) * p->slope);
	uint64_t back = (uint64_t)((double)(p->tsc - stamp) * p->slope);
	return back < p->ns ? p->ns - back : 0;
}

void gpr_inj_clock_start(void)
{
	gpr_inj_state.tsc = tsc_usable();
	ck.n = 0;
	if (!gpr_inj_state.tsc)
		return;
	uint64_t tsc1, ns1;
	pair(&ck.tsc0, &ck.ns0);
	/* a first rate: 200 us apart */
	struct timespec ts = {0, 200 * 1000};
	nanosleep(&ts, NULL);
	pair(&tsc1, &ns1);
	ck.ns_per_tick = tsc1 > ck.tsc0 && ns1 > ck.ns0
			     ? (double)(ns1 - ck.ns0) / (double)(tsc1 - ck.tsc0)
			     : 1.0;
	ck.p[0] = (struct piece){ck.tsc0, ck.ns0, ck.ns_per_tick};
	ck.n = 1;
	ck.last_sync_ns = ck.ns0;
}

const char *gpr_inj_clock_name(void)
{
	return gpr_inj_state.tsc ? "tsc" : "clock_gettime";
}

void gpr_inj_clock_sync(void)
{
	if (!gpr_inj_state.tsc || ck.n == 0)
		return;
	uint64_t tsc, ns;
	pair(&tsc, &ns);
	const struct piece *last = &ck.p[(ck.n - 1) % PIECES];
	if (ns < ck.last_sync_ns + PIECE_NS || tsc <= last->tsc ||
	    tsc <= ck.tsc0 || ns <= ck.ns0)
		return;
	/* where the last piece has got to, and how far the clock is */
	uint64_t at = on_piece(last, tsc);
	double rate = (double)(ns - ck.ns0) / (double)(tsc - ck.tsc0);
	double error = (double)ns - (double)at;
	double slope = rate * (1.0 + error / CATCH_UP_NS);
	if (slope < rate / 2)
		slope = rate / 2;
	if (slope > rate * 2)
		slope = rate * 2;
	ck.p[ck.n % PIECES] = (struct piece){tsc, at, slope};
	ck.n++;
	ck.last_sync_ns = ns;
}

uint64_t gpr_inj_clock_ns(uint64_t stamp)
{
	if (!gpr_inj_state.tsc || ck.n == 0)
		return stamp;
	return on_piece(piece_of(stamp), stamp);
}

uint64_t gpr_inj_ticks_ns_fast(uint64_t ticks)
{
	return gpr_inj_state.tsc ? (uint64_t)((double)ticks * ck.ns_per_tick)
				 : ticks;
}
