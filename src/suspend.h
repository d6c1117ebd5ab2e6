/*
 * Suspend and resume a whole process from outside (suspend.c): the
 * driver's checkpoint API moves all of its GPU memory to host memory and
 * gives the GPU back, then brings it back. The facts, measured: NVML's
 * figure for the process and each GPU's used memory before and after,
 * the growth of the process's resident memory, every step's time, the
 * state read back from the driver. The safety rules come before anything
 * is locked: the caller is the process's user or root, the driver sees a
 * running CUDA process, and the host (and the process's memory cgroup)
 * can hold what would move. A failed step leaves the process running or
 * restorable, and says which and what to do.
 *
 * Internal (gpr__): the command (cli/cmd_suspend.c) and later the
 * extension use it; the calls are young and will grow with resume on
 * demand and the idle policy, so they are not the public API yet.
 *
 * Threads: a gpr__suspender may be used by one thread at a time.
 */
#ifndef GPR_SUSPEND_H
#define GPR_SUSPEND_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_abi.h"
#include "gpureclaim.h"
#include "suspend_host.h"

/* The driver's states of a process (CUprocessState), and none known. */
enum gpr__pstate {
	GPR__PS_UNKNOWN = -1,
	GPR__PS_RUNNING = 0,
	GPR__PS_LOCKED = 1,
	GPR__PS_CHECKPOINTED = 2,
	GPR__PS_FAILED = 3,
};

/* "running", "locked", "suspended", "failed"; "unknown" for the rest. */
const char *gpr__pstate_name(int state);

typedef struct gpr__suspender gpr__suspender;

/*
 * The controller: the CUDA driver loaded into this process and
 * initialised (cuInit, ~0.2 s on an H200; no context, nothing in NVML),
 * with ctx (kept, not owned) for NVML. GPR_E_NO_DRIVER when there is no
 * driver; GPR_E_UNSUPPORTED when it lacks the checkpoint API, err then
 * saying which driver is needed and which this is; GPR_E_DRIVER when
 * cuInit fails.
 */
int gpr__suspender_open(gpr_ctx *ctx, gpr__suspender **out, char *err,
			size_t errlen);
void gpr__suspender_close(gpr__suspender *s);

/* The driver's state of pid (GPR__PS_*); an error when the driver knows
 * no CUDA state for it (err has its answer). */
int gpr__suspend_state(gpr__suspender *s, int pid, int *state, char *err,
		       size_t errlen);

/* The driver's restore thread in pid (the thread of the driver's that
 * does a checkpoint's work there): its tid, or 0 when the driver does not
 * say. */
int gpr__suspend_restore_thread(gpr__suspender *s, int pid);

#define GPR__SUSPEND_GPUS 16

/* NVML's view of one process on one GPU. */
struct gpr__gpu_look {
	int index; /* NVML index */
	char uuid[96];
	int listed; /* the process is in the GPU's list */
	int known;  /* bytes are known (MIG hides a listed one's) */
	uint64_t bytes;
	uint64_t used, total; /* the GPU's, every process */
};

/* One process at one moment: every GPU, and its resident memory. */
struct gpr__look {
	size_t n;
	struct gpr__gpu_look gpu[GPR__SUSPEND_GPUS];
	int listed;	/* on some GPU */
	int known;	/* every figure where it is listed is known */
	uint64_t bytes; /* NVML's figures summed */
	int rss_known;
	uint64_t rss;
};

/* Reads pid's look now through ctx's NVML. 0, or the NVML error. */
int gpr__suspend_look(gpr_ctx *ctx, int pid, struct gpr__look *out, char *err,
		      size_t errlen);

/* The step a suspend or resume stopped at. */
enum gpr__suspend_step {
	GPR__STEP_DONE = 0,
	GPR__STEP_CHECK,      /* refused before anything was locked */
	GPR__STEP_LOCK,	      /* lock failed: still running */
	GPR__STEP_CHECKPOINT, /* checkpoint failed (unlocked again) */
	GPR__STEP_RESTORE,    /* restore failed: still suspended */
	GPR__STEP_UNLOCK,     /* unlock failed: restored, still locked */
};

struct gpr__suspend_opts {
	unsigned lock_timeout_ms; /* 0: GPR__LOCK_TIMEOUT_MS */
	int dry_run;		  /* checks only, nothing locked */
};
#define GPR__LOCK_TIMEOUT_MS 30000

struct gpr__suspend_report {
	int pid;
	int resume;		 /* 0: a suspend, 1: a resume */
	struct gpr__proc proc;	 /* as /proc showed it first */
	int state_before;	 /* the driver's, read back */
	int state_after;	 /* read back after the last step */
	struct gpr__look before; /* right before the lock */
	struct gpr__look after;	 /* after the checkpoint or restore, before
				  * the unlock lets the program go on */
	/* suspend: what would move (NVML's figures) and where it would go */
	uint64_t need;
	int room_known;
	struct gpr__host_room room;
	/* measured: the drop of NVML's figures (suspend; a resume's is the
	 * bytes taken back, negative), the growth of the process's RSS */
	int released_known;
	int64_t released;
	int host_known;
	int64_t host_bytes;
	/* seconds: lock, then checkpoint or restore, then unlock; total:
	 * their sum (the measurements between them left out) */
	double lock_s, move_s, unlock_s, total_s;
	/* GPR__STEP_DONE, or where it stopped: rc, the driver's answer, and
	 * one line (what happened, the state it left, what to do) */
	int step;
	int rc;
	CUresult driver_result;
	char why[768];
};

/*
 * Suspends pid: the checks, then lock and checkpoint; after it, the
 * measurements. Returns r->rc: 0, or the failure (r->step and r->why).
 * With o->dry_run, the checks only (r->need and r->room filled).
 */
int gpr__suspend(gpr__suspender *s, int pid, const struct gpr__suspend_opts *o,
		 struct gpr__suspend_report *r);

/* Resumes pid: restore and unlock (unlock only when it is locked). */
int gpr__resume(gpr__suspender *s, int pid, const struct gpr__suspend_opts *o,
		struct gpr__suspend_report *r);

#endif /* GPR_SUSPEND_H */
