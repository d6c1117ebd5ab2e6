/*
 * The target side of the simulated checkpoint API (docs/sim.md): as in
 * the real driver, the work is done inside the process being
 * checkpointed. Every process that calls cuInit gets a checkpoint thread
 * (the driver's "restore thread", cuCheckpointProcessGetRestoreThreadId)
 * and a record in the shared state (struct sim__ckpt). A controller
 * (sim/cuda_ckpt.c) writes a request into the record and wakes the
 * thread (a futex on the shared file); the thread takes the library's
 * mutex, so the request waits for the CUDA calls under way, does it, and
 * answers. So the effects are the real ones, seen from outside:
 * - lock: the process's later CUDA calls wait until unlock (lock() in
 *   cuda.c), and gprsim_blocked_calls() counts those that did;
 * - checkpoint: its device memory is copied into fresh memory of its
 *   own, page by page at `checkpoint_rate` (its VmRSS grows by it), and
 *   its figures leave NVML's lists (the GPUs' used memory falls);
 * - restore: the figures come back (CUDA_ERROR_OUT_OF_MEMORY, changing
 *   nothing, when a GPU no longer has room: the process stays
 *   checkpointed), at `restore_rate`, and the host copy is freed.
 * The process's own tables are cuda.c's, reached through the operations
 * it registers with (struct sim__ckpt_ops), so this file calls nothing of
 * cuda.c's by name.
 */
#include "sim.h"

#include "cuda_abi.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Set on a request the thread has taken: a controller whose lock timed
 * out withdraws only a request nobody took. */
#define TAKEN 0x100u

static unsigned thread_forks = (unsigned)-1; /* sim__forks() it runs in */
static pthread_t thread;
static _Atomic int stopping;		/* the library is being unloaded */
static uint32_t *_Atomic waiting_on;	/* the futex word it waits on */
static const struct sim__ckpt_ops *ops; /* cuda.c's tables */
static void *host_copy;			/* the checkpoint's host memory */
static uint64_t host_len;

/* Waits until `done` bytes at `rate` bytes/s would have taken since t0. */
static void pace(double t0, uint64_t done, uint64_t rate)
{
	if (rate)
		sim__sleep(t0 + (double)done / (double)rate - sim__now());
}

/* ---------------- the target's checkpoint thread ---------------- */

/* The device memory into host memory of this process, every page
 * written, at the configured rate. 0 or CUDA_ERROR_OUT_OF_MEMORY. */
static CUresult copy_out(const struct sim__config *c)
{
	uint64_t bytes = ops->device_bytes();
	double t0 = sim__now();
	if (bytes) {
		void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return CUDA_ERROR_OUT_OF_MEMORY;
		const uint64_t chunk = 16ULL << 20;
		for (uint64_t at = 0; at < bytes;) {
			uint64_t end = at + chunk < bytes ? at + chunk : bytes;
			for (uint64_t b = at; b < end; b += 4096)
				((volatile char *)p)[b] = 1;
			at = end;
			pace(t0, at, c->checkpoint_rate);
		}
		host_copy = p;
	}
	host_len = bytes;
	return CUDA_SUCCESS;
}

static void free_host(void)
{
	if (host_copy)
		munmap(host_copy, host_len);
	host_copy = NULL;
	host_len = 0;
}

/* Does request `req` in state `st`; the new state in *st. */
static CUresult perform(const struct sim__config *c, uint32_t req, uint32_t *st)
{
	CUresult r = CUDA_SUCCESS;
	switch (req) {
	case SIM_REQ_LOCK:
		if (*st != CU_PROCESS_STATE_RUNNING)
			return CUDA_ERROR_ILLEGAL_STATE;
		ops->block(1);
		*st = CU_PROCESS_STATE_LOCKED;
		return r;
	case SIM_REQ_CHECKPOINT:
		if (*st != CU_PROCESS_STATE_LOCKED)
			return CUDA_ERROR_ILLEGAL_STATE;
		if (ops->unmovable())
			return CUDA_ERROR_NOT_SUPPORTED;
		if (c->faults & SIM_FAULT_CHECKPOINT_FAILS) {
			*st = CU_PROCESS_STATE_FAILED;
			return CUDA_ERROR_UNKNOWN;
		}
		r = copy_out(c);
		if (!r)
			r = ops->listed(1);
		if (r) {
			free_host();
			return r;
		}
		*st = CU_PROCESS_STATE_CHECKPOINTED;
		return r;
	case SIM_REQ_RESTORE: {
		if (*st != CU_PROCESS_STATE_CHECKPOINTED)
			return CUDA_ERROR_ILLEGAL_STATE;
		r = ops->listed(0);
		if (r)
			return r;
		double t0 = sim__now();
		pace(t0, host_len, c->restore_rate);
		free_host();
		*st = CU_PROCESS_STATE_LOCKED;
		return r;
	}
	case SIM_REQ_UNLOCK:
		if (*st != CU_PROCESS_STATE_LOCKED)
			return CUDA_ERROR_ILLEGAL_STATE;
		ops->block(0);
		*st = CU_PROCESS_STATE_RUNNING;
		return r;
	}
	return CUDA_ERROR_INVALID_VALUE;
}

/* Answers the request taken: done under the library's mutex, so it
 * waits for this process's CUDA calls under way, then written back. */
static void answer(struct sim__state *hs, pid_t me, uint32_t req)
{
	const struct sim__config *c = sim__config();
	sim__lock();
	uint32_t st = CU_PROCESS_STATE_RUNNING;
	if (sim__state_lock(hs, 0) == 0) {
		struct sim__ckpt *rec = sim__ckpt_find(hs, me, 0);
		if (rec)
			st = rec->state;
		sim__state_unlock(hs);
	}
	CUresult r = perform(c, req, &st);
	if (sim__state_lock(hs, 0) == 0) {
		struct sim__ckpt *rec = sim__ckpt_find(hs, me, 0);
		if (rec) {
			rec->state = st;
			rec->result = r;
			rec->host = host_len;
			rec->req = SIM_REQ_NONE;
			rec->seq++;
			sim__futex(&rec->seq, FUTEX_WAKE, INT_MAX, 0);
		}
		sim__state_unlock(hs);
	}
	sim__unlock();
}

/*
 * What the thread will touch of its own, touched once at its start (its
 * stack as deep as a request goes, its malloc arena), so that what a
 * checkpoint adds to the process's resident memory is the copy alone.
 */
static void warm_up(void)
{
	volatile char stack[256 << 10];
	memset((char *)stack, 0, sizeof stack);
	free(malloc(1));
}

static void *ckpt_thread(void *arg)
{
	sem_t *up = arg;
	warm_up();
	const struct sim__config *c = sim__config();
	struct sim__state hs = SIM_STATE_INIT;
	sim__state_init(&hs, c->state);
	pid_t me = getpid();
	int32_t tid = (int32_t)syscall(SYS_gettid);
	while (!stopping) {
		uint32_t req = SIM_REQ_NONE, *word = NULL, seen = 0;
		if (sim__state_lock(&hs, 0) == 0) {
			struct sim__ckpt *rec = sim__ckpt_find(&hs, me, 0);
			if (rec) {
				rec->tid = tid;
				req = seen = rec->req;
				word = &rec->req;
				int ignore =
				    req == SIM_REQ_LOCK &&
				    (c->faults & SIM_FAULT_LOCK_TIMEOUT);
				if (req != SIM_REQ_NONE && !(req & TAKEN) &&
				    !ignore)
					rec->req = req | TAKEN;
				else
					req = SIM_REQ_NONE;
			}
			sim__state_unlock(&hs);
		}
		if (up) { /* its first pass is done: cuInit may return */
			sem_post(up);
			up = NULL;
		}
		if (req != SIM_REQ_NONE) {
			answer(&hs, me, req);
			continue;
		}
		/* The file stays mapped while our record keeps it; a request
		 * written since `seen` was read ends the wait at once. */
		if (word && hs.shm) {
			waiting_on = word;
			if (!stopping)
				sim__futex(word, FUTEX_WAIT, seen, 0.25);
			waiting_on = NULL;
		} else {
			sim__sleep(0.05);
		}
	}
	sim__state_close(&hs);
	return NULL;
}

int sim__ckpt_register(struct sim__state *s, const struct sim__ckpt_ops *o)
{
	ops = o;
	if (sim__state_lock(s, 1))
		return CUDA_ERROR_OPERATING_SYSTEM;
	struct sim__ckpt *rec = sim__ckpt_find(s, getpid(), 1);
	sim__state_unlock(s);
	if (!rec)
		return CUDA_ERROR_OUT_OF_MEMORY; /* the table is full */
	if (thread_forks == sim__forks())
		return CUDA_SUCCESS;
	sem_t up;
	sem_init(&up, 0, 0);
	stopping = 0;
	int e = pthread_create(&thread, NULL, ckpt_thread, &up);
	/*
	 * As the real driver's threads are, it is up when cuInit returns:
	 * its record read once, its tid there, the pages it touches to do
	 * so resident, so a process measured from then on sees only what a
	 * checkpoint itself adds.
	 */
	while (!e && sem_wait(&up) != 0 && errno == EINTR)
		;
	sem_destroy(&up);
	if (e)
		return CUDA_ERROR_OPERATING_SYSTEM;
	thread_forks = sim__forks();
	return CUDA_SUCCESS;
}

void sim__ckpt_unregister(struct sim__state *s)
{
	sim__ckpt_drop(s, getpid());
}

void sim__ckpt_stop(void)
{
	if (thread_forks != sim__forks())
		return; /* none, or the parent's (a child has no copy) */
	stopping = 1;
	uint32_t *w = waiting_on;
	if (w) /* a word of its own mapping: EFAULT if it is gone, harmless */
		sim__futex(w, FUTEX_WAKE, INT_MAX, 0);
	pthread_join(thread, NULL);
	thread_forks = (unsigned)-1;
}
