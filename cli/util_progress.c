/*
 * A progress line on stderr for work that may take a while (`gpureclaim
 * report` of a large log): nothing for the first second, then, while
 * stderr is a terminal, one line redrawn in place ("\r") five times a
 * second and at each change of phase, "gpureclaim report: FILE: PHASE 41%
 * (9.1 M of 22 M records)", cleared at the end. Not a terminal: nothing at
 * all. GPURECLAIM_PROGRESS_AFTER=S sets the quiet first second (S=0: drawn
 * from the start), so that a test sees the line whatever the machine's
 * speed.
 */
#include "cli.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../trace/read/log_stats.h"

static struct {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int running, stop, drawn;
	const char *what;
	_Atomic(const char *) phase;
	struct timespec t0;
	double after; /* seconds before the first line */
} pg = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static double elapsed(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - pg.t0.tv_sec) +
	       (double)(now.tv_nsec - pg.t0.tv_nsec) / 1e9;
}

static void draw(void)
{
	char line[512];
	uint64_t done = atomic_load(&gpr_trace_progress.done);
	uint64_t total = atomic_load(&gpr_trace_progress.total);
	const char *phase = atomic_load(&pg.phase);
	int n = snprintf(line, sizeof(line), "\rgpureclaim report: %s: %s",
			 pg.what, phase ? phase : "working");
	if (total && done <= total && n > 0 && (size_t)n < sizeof(line))
		snprintf(line + n, sizeof(line) - (size_t)n,
			 " %3.0f%% (%.1f M of %.1f M records)",
			 100.0 * (double)done / (double)total,
			 (double)done / 1e6, (double)total / 1e6);
	size_t len = strlen(line);
	/* blank what a longer line left */
	snprintf(line + len, sizeof(line) - len, "\033[K");
	ssize_t k = write(2, line, strlen(line));
	(void)k;
	pg.drawn = 1;
}

static void *run(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&pg.mu);
	while (!pg.stop) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 200 * 1000 * 1000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&pg.cv, &pg.mu, &until);
		if (!pg.stop && elapsed() >= pg.after)
			draw();
	}
	pthread_mutex_unlock(&pg.mu);
	return NULL;
}

/* GPURECLAIM_PROGRESS_AFTER, else 1 s; a value that is not a number of
 * seconds (0 to 86400) is said once and ignored. */
static double quiet_seconds(void)
{
	const char *v = getenv("GPURECLAIM_PROGRESS_AFTER");
	double s;
	if (!v)
		return 1.0;
	if (strcmp(v, "0") == 0)
		return 0.0;
	if (gpr_cli_parse_seconds(v, &s) == 0)
		return s;
	fprintf(stderr,
		"gpureclaim: GPURECLAIM_PROGRESS_AFTER must be seconds "
		"(0, or 0.1 to 86400), not '%s'; using 1\n",
		v);
	return 1.0;
}

void gpr_cli_progress_start(const char *what)
{
	const char *term = getenv("TERM");
	if (pg.running || !isatty(2) || (term && strcmp(term, "dumb") == 0))
		return;
	pg.after = quiet_seconds();
	pg.what = what;
	pg.stop = pg.drawn = 0;
	atomic_store(&pg.phase, "reading");
	atomic_store(&gpr_trace_progress.done, 0);
	atomic_store(&gpr_trace_progress.total, 0);
	clock_gettime(CLOCK_MONOTONIC, &pg.t0);
	pg.running = pthread_create(&pg.thread, NULL, run, NULL) == 0;
	if (pg.running && pg.after == 0.0) {
		pthread_mutex_lock(&pg.mu);
		draw();
		pthread_mutex_unlock(&pg.mu);
	}
}

void gpr_cli_progress_phase(const char *phase)
{
	/* the phase that ends, as it ended, once the quiet time is over */
	if (pg.running) {
		pthread_mutex_lock(&pg.mu);
		if (elapsed() >= pg.after)
			draw();
		pthread_mutex_unlock(&pg.mu);
	}
	atomic_store(&gpr_trace_progress.done, 0);
	atomic_store(&gpr_trace_progress.total, 0);
	atomic_store(&pg.phase, phase);
}

void gpr_cli_progress_stop(void)
{
	if (!pg.running)
		return;
	pthread_mutex_lock(&pg.mu);
	pg.stop = 1;
	pthread_cond_signal(&pg.cv);
	pthread_mutex_unlock(&pg.mu);
	pthread_join(pg.thread, NULL);
	pg.running = 0;
	if (pg.drawn) {
		ssize_t k = write(2, "\r\033[K", 4);
		(void)k;
	}
}
