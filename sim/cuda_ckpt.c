/*
 * The checkpoint API of the simulated driver, the controller's calls
 * (docs/sim.md): cuCheckpointProcessLock, Checkpoint, Restore, Unlock,
 * GetState and GetRestoreThreadId on another process's pid, as with the
 * real driver of 570 and later. Each request goes to the target's own
 * checkpoint thread through its record in the shared state
 * (sim/ckpt_thread.c does the work there) and waits for the answer.
 * Refusals: managed memory or memory exported with cuIpcGetMemHandle
 * (CUDA_ERROR_NOT_SUPPORTED, still locked), a step in the wrong state
 * (CUDA_ERROR_ILLEGAL_STATE), no such CUDA process (CUDA_ERROR_NOT_FOUND),
 * reserved argument fields not zero (CUDA_ERROR_INVALID_VALUE), GPU
 * remapping (CUDA_ERROR_NOT_SUPPORTED: not simulated), and the faults
 * checkpoint-fails, checkpoint-denied and lock-timeout.
 */
#include "sim.h"

#include "cuda_abi.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---------------- the controller's calls ---------------- */

/* 0 when this process may call the API (cuInit ran), else the error. */
static CUresult controller(const struct sim__config **c)
{
	return sim__cuda_controller(c) ? CUDA_SUCCESS
				       : CUDA_ERROR_NOT_INITIALIZED;
}

static int zero(const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

/*
 * Posts `req` to pid's thread and waits for its answer (for a lock with
 * a timeout, at most timeout_ms: the request is withdrawn if nobody took
 * it, CUDA_ERROR_TIMEOUT). A request already pending is waited for first.
 */
static CUresult request(int pid, uint32_t req, unsigned timeout_ms)
{
	const struct sim__config *c;
	CUresult res = controller(&c);
	if (res)
		return res;
	if (pid <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (req == SIM_REQ_LOCK && (c->faults & SIM_FAULT_CHECKPOINT_DENIED))
		return CUDA_ERROR_NOT_PERMITTED;
	struct sim__state cs = SIM_STATE_INIT;
	sim__state_init(&cs, c->state);
	double t0 = sim__now();
	uint32_t seq0 = 0;
	int posted = 0;
	for (;;) {
		if (sim__state_lock(&cs, 0) != 0) {
			res = CUDA_ERROR_OPERATING_SYSTEM;
			break;
		}
		struct sim__ckpt *rec = sim__ckpt_find(&cs, pid, 0);
		if (!rec) {
			sim__state_unlock(&cs);
			res = CUDA_ERROR_NOT_FOUND; /* none, or it ended */
			break;
		}
		if (!posted && rec->req == SIM_REQ_NONE) {
			rec->req = req;
			seq0 = rec->seq;
			posted = 1;
			sim__futex(&rec->req, FUTEX_WAKE, INT_MAX, 0);
		} else if (posted && rec->seq != seq0) {
			res = rec->result;
			sim__state_unlock(&cs);
			break;
		}
		if (timeout_ms && sim__now() - t0 >= timeout_ms / 1000.0 &&
		    (!posted || rec->req == req)) {
			if (posted)
				rec->req = SIM_REQ_NONE;
			sim__state_unlock(&cs);
			res = CUDA_ERROR_TIMEOUT;
			break;
		}
		uint32_t *word = &rec->seq, seen = rec->seq;
		sim__state_unlock(&cs);
		if (cs.shm)
			sim__futex(word, FUTEX_WAIT, seen, 0.05);
		else
			sim__sleep(0.05);
	}
	sim__state_close(&cs);
	return res;
}

/* A copy of pid's record, read under the state's lock; out NULL: the
 * arguments were bad. */
static CUresult record_of(int pid, const void *out, struct sim__ckpt *copy)
{
	const struct sim__config *c;
	CUresult r = controller(&c);
	if (!r && (!out || pid <= 0))
		r = CUDA_ERROR_INVALID_VALUE;
	if (r)
		return r;
	struct sim__state cs = SIM_STATE_INIT;
	sim__state_init(&cs, c->state);
	r = CUDA_ERROR_NOT_FOUND;
	if (sim__state_lock(&cs, 0) == 0) {
		struct sim__ckpt *rec = sim__ckpt_find(&cs, pid, 0);
		if (rec) {
			*copy = *rec;
			r = CUDA_SUCCESS;
		}
		sim__state_unlock(&cs);
	}
	sim__state_close(&cs);
	return r;
}

SIM_API(CUresult, cuCheckpointProcessGetState, (int pid, CUprocessState *state))
{
	struct sim__ckpt rec;
	CUresult r = record_of(pid, state, &rec);
	if (!r)
		*state = (CUprocessState)rec.state;
	return r;
}

SIM_API(CUresult, cuCheckpointProcessGetRestoreThreadId, (int pid, int *tid))
{
	struct sim__ckpt rec;
	CUresult r = record_of(pid, tid, &rec);
	if (!r && !rec.tid)
		r = CUDA_ERROR_NOT_FOUND; /* its thread has not run yet */
	if (!r)
		*tid = rec.tid;
	return r;
}

SIM_API(CUresult, cuCheckpointProcessLock,
	(int pid, CUcheckpointLockArgs *args))
{
	if (args &&
	    (args->reserved0 || !zero(args->reserved1, sizeof args->reserved1)))
		return CUDA_ERROR_INVALID_VALUE;
	return request(pid, SIM_REQ_LOCK, args ? args->timeoutMs : 0);
}

SIM_API(CUresult, cuCheckpointProcessCheckpoint,
	(int pid, CUcheckpointCheckpointArgs *args))
{
	if (args && !zero(args, sizeof *args))
		return CUDA_ERROR_INVALID_VALUE;
	return request(pid, SIM_REQ_CHECKPOINT, 0);
}

SIM_API(CUresult, cuCheckpointProcessRestore,
	(int pid, CUcheckpointRestoreArgs *args))
{
	if (args &&
	    (!zero(args->reserved, sizeof args->reserved) || args->reserved1))
		return CUDA_ERROR_INVALID_VALUE;
	/* GPU remapping is not simulated */
	if (args && (args->gpuPairs || args->gpuPairsCount))
		return CUDA_ERROR_NOT_SUPPORTED;
	return request(pid, SIM_REQ_RESTORE, 0);
}

SIM_API(CUresult, cuCheckpointProcessUnlock,
	(int pid, CUcheckpointUnlockArgs *args))
{
	if (args && !zero(args, sizeof *args))
		return CUDA_ERROR_INVALID_VALUE;
	return request(pid, SIM_REQ_UNLOCK, 0);
}

static const struct sim__proc procs[] = {
    {"cuCheckpointProcessGetState", 12080,
     (void *)sim_cuCheckpointProcessGetState, NULL},
    {"cuCheckpointProcessGetRestoreThreadId", 12080,
     (void *)sim_cuCheckpointProcessGetRestoreThreadId, NULL},
    {"cuCheckpointProcessLock", 12080, (void *)sim_cuCheckpointProcessLock,
     NULL},
    {"cuCheckpointProcessCheckpoint", 12080,
     (void *)sim_cuCheckpointProcessCheckpoint, NULL},
    {"cuCheckpointProcessRestore", 12080,
     (void *)sim_cuCheckpointProcessRestore, NULL},
    {"cuCheckpointProcessUnlock", 12080, (void *)sim_cuCheckpointProcessUnlock,
     NULL},
};

const struct sim__proc *sim__cuda_ckpt_procs(size_t *n)
{
	*n = sizeof(procs) / sizeof(procs[0]);
	return procs;
}
