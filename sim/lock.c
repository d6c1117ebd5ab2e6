/*
 * The one mutex of a simulated library. Linked into both libraries with
 * hidden visibility, so each has its own. A fork while another thread is
 * inside the sim must not leave the child with a mutex nobody will
 * unlock: it is held across fork.
 */
#include "sim.h"

#include <pthread.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic unsigned forks; /* forks this process has come through */

static void fork_prepare(void)
{
	pthread_mutex_lock(&mu);
}

static void fork_done(void)
{
	pthread_mutex_unlock(&mu);
}

static void fork_child(void)
{
	forks++;
	pthread_mutex_unlock(&mu);
}

static void register_fork(void)
{
	pthread_atfork(fork_prepare, fork_done, fork_child);
}

unsigned sim__forks(void)
{
	return forks;
}

void sim__lock(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, register_fork);
	pthread_mutex_lock(&mu);
}

int sim__trylock(void)
{
	return pthread_mutex_trylock(&mu);
}

void sim__unlock(void)
{
	pthread_mutex_unlock(&mu);
}

void sim__wait(pthread_cond_t *c)
{
	pthread_cond_wait(c, &mu);
}
