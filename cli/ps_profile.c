/*
 * GPURECLAIM_PS_PROFILE: where one `gpureclaim ps` spends its time, for the
 * benchmark (bench/ps_profile.sh). Each step is recorded as it ends: when
 * (ms since the command's main was entered), on which thread, what and
 * how long. The tool times its own steps; the core's log at GPR_LOG_DEBUG
 * adds every NVML call and look-up of libcuda. The steps go to stderr,
 * each line starting with "ps-profile ", once the listing is written, so
 * printing them costs the listing nothing.
 *
 * The value "1" turns it on; a time (bash's $EPOCHREALTIME, expanded as
 * the command is started) also gives the wall time from then to main.
 * Off, each call returns at once.
 */
#include "ps.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_STEPS 512

struct step {
	double end; /* ms since main */
	char who[8];
	char text[200];
};

static struct {
	int on;
	double main_ms;	    /* CLOCK_MONOTONIC at main, ms */
	double cpu_before;  /* CPU time of the process at main, ms */
	double since_given; /* main after the given time, ms; < 0: none */
	pthread_mutex_t lock;
	struct step steps[MAX_STEPS];
	size_t n, dropped;
} prof = {.lock = PTHREAD_MUTEX_INITIALIZER, .since_given = -1};

static _Thread_local const char *who = "main";

static double clock_ms(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void gpr_cli_prof_start(void)
{
	const char *v = getenv("GPURECLAIM_PS_PROFILE");
	if (!v || !*v || strcmp(v, "0") == 0)
		return;
	prof.main_ms = clock_ms(CLOCK_MONOTONIC);
	prof.cpu_before = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
	char *end;
	double given = strtod(v, &end);
	/* a time, not "1": seconds since the epoch, with a fraction */
	if (*end == '\0' && strchr(v, '.') && given > 1e9)
		prof.since_given = clock_ms(CLOCK_REALTIME) - given * 1e3;
	prof.on = 1;
}

int gpr_cli_prof_on(void)
{
	return prof.on;
}

void gpr_cli_prof_thread(const char *name)
{
	who = name;
}

const char *gpr_cli_prof_thread_name(void)
{
	return who;
}

double gpr_cli_prof_clock(void)
{
	return prof.on ? clock_ms(CLOCK_MONOTONIC) : 0;
}

static void record(const char *text)
{
	double end = clock_ms(CLOCK_MONOTONIC) - prof.main_ms;
	pthread_mutex_lock(&prof.lock);
	if (prof.n < MAX_STEPS) {
		struct step *s = &prof.steps[prof.n++];
		s->end = end;
		snprintf(s->who, sizeof s->who, "%s", who);
		snprintf(s->text, sizeof s->text, "%s", text);
	} else {
		prof.dropped++;
	}
	pthread_mutex_unlock(&prof.lock);
}

static void recordv(double took, const char *fmt, va_list ap)
{
	char what[160], text[200];
	vsnprintf(what, sizeof what, fmt, ap);
	if (took >= 0)
		snprintf(text, sizeof text, "%s: %.3f ms", what, took);
	else
		snprintf(text, sizeof text, "%s", what);
	record(text);
}

void gpr_cli_prof_step(double t0, const char *fmt, ...)
{
	if (!prof.on)
		return;
	double took = clock_ms(CLOCK_MONOTONIC) - t0;
	va_list ap;
	va_start(ap, fmt);
	recordv(took, fmt, ap);
	va_end(ap);
}

void gpr_cli_prof_note(const char *fmt, ...)
{
	if (!prof.on)
		return;
	va_list ap;
	va_start(ap, fmt);
	recordv(-1, fmt, ap);
	va_end(ap);
}

void gpr_cli_prof_log(void *user, int level, const char *msg)
{
	(void)user;
	(void)level;
	if (prof.on)
		record(msg);
}

void gpr_cli_prof_print(void)
{
	if (!prof.on)
		return;
	gpr_cli_prof_note("profile printed (the process exits next)");
	pthread_mutex_lock(&prof.lock);
	fprintf(stderr,
		"ps-profile # ms since main; %.3f ms of CPU before main",
		prof.cpu_before);
	if (prof.since_given >= 0)
		fprintf(stderr, "; main_after_given_ms=%.3f", prof.since_given);
	fputc('\n', stderr);
	fprintf(stderr, "ps-profile # %9s %-7s %s\n", "end", "thread",
		"step: took");
	for (size_t i = 0; i < prof.n; i++)
		fprintf(stderr, "ps-profile %11.3f %-7s %s\n",
			prof.steps[i].end, prof.steps[i].who,
			prof.steps[i].text);
	if (prof.dropped)
		fprintf(stderr, "ps-profile # %zu more steps not kept\n",
			prof.dropped);
	pthread_mutex_unlock(&prof.lock);
	fflush(stderr);
}
