/*
 * Waiting, for the checkpoint API's two sides (ckpt_thread.c in the
 * target, cuda_ckpt.c in the controller): a futex on a word of the
 * shared state file (not FUTEX_PRIVATE: the two are other processes, and
 * a futex of a shared file mapping is keyed by the file), the monotonic
 * clock, and a sleep that a signal does not cut short.
 */
#include "sim.h"

#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

long sim__futex(uint32_t *word, int op, uint32_t val, double seconds)
{
	struct timespec ts = {
	    (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
	return syscall(SYS_futex, word, op, val, seconds > 0 ? &ts : NULL, NULL,
		       0);
}

double sim__now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void sim__sleep(double s)
{
	if (s <= 0)
		return;
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}
