/*
 * Suspend and resume through the driver's checkpoint API (suspend.h).
 *
 * The order is the safety: every check that can refuse runs before the
 * lock, since once a process is locked its CUDA calls wait, and the
 * driver of 570 says it "does not attempt to keep the process in a good
 * state" when a checkpoint fails. After a failed checkpoint the process
 * is unlocked again; after a failed restore it is left checkpointed, its
 * memory still in host memory, for a later resume. Every figure reported
 * was read: NVML's per-process figure and the GPUs' used memory before
 * and after, the process's VmRSS before and after; what could not be read
 * is said to be unknown.
 */
#include "suspend.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "driver_info.h"
#include "out/fmt.h"

struct gpr__suspender {
	gpr_ctx *ctx;
	struct gpr__cuda cuda;
};

const char *gpr__pstate_name(int state)
{
	switch (state) {
	case GPR__PS_RUNNING:
		return "running";
	case GPR__PS_LOCKED:
		return "locked";
	case GPR__PS_CHECKPOINTED:
		return "suspended";
	case GPR__PS_FAILED:
		return "failed";
	}
	return "unknown";
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* "this NVIDIA driver (580.65.06, CUDA 13.0)" or as much as is known. */
static void driver_words(gpr__suspender *s, char *out, size_t len)
{
	char nvml[96] = "";
	int cuda = 0;
	char e[GPR__ERRLEN];
	gpr__driver_version(s->ctx, nvml, sizeof nvml);
	gpr__cuda_driver_version(&s->cuda, &cuda, e, sizeof e);
	if (nvml[0] && cuda)
		snprintf(out, len, "this NVIDIA driver (%s, CUDA %d.%d)", nvml,
			 cuda / 1000, cuda % 1000 / 10);
	else if (cuda)
		snprintf(out, len, "this NVIDIA driver (CUDA %d.%d)",
			 cuda / 1000, cuda % 1000 / 10);
	else
		snprintf(out, len, "this NVIDIA driver");
}

int gpr__suspender_open(gpr_ctx *ctx, gpr__suspender **out, char *err,
			size_t errlen)
{
	*out = NULL;
	if (!ctx)
		return GPR_E_INVAL;
	gpr__suspender *s = calloc(1, sizeof *s);
	if (!s)
		return GPR_E_NOMEM;
	s->ctx = ctx;
	int rc = gpr__cuda_load(&s->cuda, ctx->cuda_path, err, errlen);
	if (rc) {
		free(s);
		return rc;
	}
	const char *missing = gpr__ckpt_missing(&s->cuda);
	if (missing) {
		char words[160];
		driver_words(s, words, sizeof words);
		snprintf(err, errlen,
			 "%s has no checkpoint API (%s missing): suspend and "
			 "resume need NVIDIA driver 570 or later",
			 words, missing);
		gpr__cuda_close(&s->cuda);
		free(s);
		return GPR_E_UNSUPPORTED;
	}
	rc = gpr__cuda_init(&s->cuda, err, errlen);
	if (rc) {
		gpr__cuda_close(&s->cuda);
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void gpr__suspender_close(gpr__suspender *s)
{
	if (!s)
		return;
	gpr__cuda_close(&s->cuda);
	free(s);
}

int gpr__suspend_state(gpr__suspender *s, int pid, int *state, char *err,
		       size_t errlen)
{
	CUresult res;
	int rc = gpr__ckpt_state(&s->cuda, pid, state, &res, err, errlen);
	if (rc == 0 && (*state < GPR__PS_RUNNING || *state > GPR__PS_FAILED))
		*state = GPR__PS_UNKNOWN;
	return rc;
}

int gpr__suspend_restore_thread(gpr__suspender *s, int pid)
{
	int tid = 0;
	CUresult res;
	char e[GPR__ERRLEN];
	if (gpr__ckpt_restore_tid(&s->cuda, pid, &tid, &res, e, sizeof e) != 0)
		return 0;
	return tid > 0 ? tid : 0;
}

/* ---------------- looking ---------------- */

int gpr__suspend_look(gpr_ctx *ctx, int pid, struct gpr__look *out, char *err,
		      size_t errlen)
{
	memset(out, 0, sizeof *out);
	out->known = 1;
	out->rss_known = gpr__proc_rss(pid, &out->rss) == 0;
	int count = 0, rc = gpr_gpu_count(ctx, &count);
	for (int i = 0; rc == 0 && i < count && out->n < GPR__SUSPEND_GPUS;
	     i++) {
		struct gpr__gpu_look *g = &out->gpu[out->n];
		struct gpr_gpu info;
		struct gpr_process *procs = NULL;
		size_t n = 0;
		rc = gpr_gpu_info(ctx, i, &info);
		if (rc == 0)
			rc = gpr_gpu_processes(ctx, i, &procs, &n);
		if (rc)
			break;
		memset(g, 0, sizeof *g);
		g->known = 1; /* not listed: 0 bytes, known */
		g->index = i;
		snprintf(g->uuid, sizeof g->uuid, "%s", info.uuid);
		g->used = info.used;
		g->total = info.total;
		for (size_t k = 0; k < n; k++) {
			if (procs[k].pid != (uint32_t)pid)
				continue;
			g->listed = 1;
			g->known = procs[k].bytes_known;
			g->bytes = g->known ? procs[k].bytes : 0;
		}
		gpr_free(procs);
		out->listed |= g->listed;
		if (g->listed && !g->known)
			out->known = 0;
		out->bytes += g->bytes;
		out->n++;
	}
	if (rc)
		snprintf(err, errlen, "NVML: %s (%s)", gpr_strerror(rc),
			 gpr_last_error(ctx));
	return rc;
}

/* ---------------- the report ---------------- */

static int stop(struct gpr__suspend_report *r, int step, int rc,
		const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int stop(struct gpr__suspend_report *r, int step, int rc,
		const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof r->why, fmt, ap);
	va_end(ap);
	r->step = step;
	r->rc = rc;
	return rc;
}

/* What the driver's refusal of a step means, in words. */
static const char *refusal(CUresult res, int restore)
{
	if (restore && res == CUDA_ERROR_OUT_OF_MEMORY)
		return "the GPU has no room for it (other processes took the "
		       "memory it gave back)";
	switch (res) {
	case CUDA_ERROR_NOT_SUPPORTED:
		return "the driver cannot checkpoint this process: it holds "
		       "memory the driver cannot move (managed memory, UVM, "
		       "or CUDA IPC memory shared with another process), or "
		       "its GPU does not support checkpoints";
	case CUDA_ERROR_NOT_PERMITTED:
		return "the driver does not let this user checkpoint it";
	case CUDA_ERROR_TIMEOUT:
		return "its CUDA calls did not stop in time (a long kernel, or "
		       "a call that blocks)";
	case CUDA_ERROR_OUT_OF_MEMORY:
		return "memory ran out while it was copied";
	case CUDA_ERROR_ILLEGAL_STATE:
		return "it was not in the state the step needs (another "
		       "controller at work?)";
	case CUDA_ERROR_NOT_INITIALIZED:
		return "the driver is not initialised in this process (is the "
		       "host out of memory?)";
	}
	return NULL;
}

/* "what (detail)" for a driver answer, from the table above. */
static void because(CUresult res, int restore, const char *detail, char *out,
		    size_t len)
{
	const char *w = refusal(res, restore);
	snprintf(out, len, "%s (%s)", w ? w : "the driver refused", detail);
}

/* Reads the driver's state after a step; GPR__PS_UNKNOWN if it cannot. */
static int state_now(gpr__suspender *s, int pid)
{
	int st = GPR__PS_UNKNOWN;
	char e[GPR__ERRLEN];
	if (gpr__suspend_state(s, pid, &st, e, sizeof e) != 0)
		st = GPR__PS_UNKNOWN;
	return st;
}

/* The checks both operations make first: the process, its user, the
 * driver's state of it. */
static int common_checks(gpr__suspender *s, int pid, const char *verb,
			 struct gpr__suspend_report *r)
{
	char e[GPR__ERRLEN];
	if (pid == getpid())
		return stop(r, GPR__STEP_CHECK, GPR_E_INVAL,
			    "process %d is this command; it cannot %s itself",
			    pid, verb);
	int rc = gpr__proc_read(pid, &r->proc, e, sizeof e);
	if (rc)
		return stop(r, GPR__STEP_CHECK, rc, "%s", e);
	if (r->proc.zombie)
		return stop(r, GPR__STEP_CHECK, GPR_E_NOT_FOUND,
			    "process %d has exited", pid);
	long me = (long)getuid();
	if (geteuid() != 0 && r->proc.uid != me)
		return stop(r, GPR__STEP_CHECK, GPR_E_PERM,
			    "process %d belongs to uid %ld; only that user and "
			    "root may %s it",
			    pid, r->proc.uid, verb);
	rc = gpr__suspend_state(s, pid, &r->state_before, e, sizeof e);
	if (rc)
		return stop(r, GPR__STEP_CHECK, GPR_E_NOT_FOUND,
			    "the driver knows no CUDA state of process %d: it "
			    "does not use CUDA, or not yet (%s)",
			    pid, e);
	r->state_after = r->state_before;
	return 0;
}

/* The states neither operation starts from: failed, or one this
 * gpureclaim does not know. */
static int unusable(struct gpr__suspend_report *r, int pid, const char *verb)
{
	if (r->state_before == GPR__PS_FAILED)
		return stop(r, GPR__STEP_CHECK, GPR_E_STATE,
			    "the driver says a checkpoint or restore of "
			    "process %d failed: its GPU state is lost and it "
			    "must be restarted",
			    pid);
	return stop(r, GPR__STEP_CHECK, GPR_E_STATE,
		    "the driver answers a state this gpureclaim does not know "
		    "for process %d; not %s",
		    pid, verb);
}

static int64_t rss_growth(const struct gpr__look *a, const struct gpr__look *b,
			  int *known)
{
	*known = a->rss_known && b->rss_known;
	return *known ? (int64_t)b->rss - (int64_t)a->rss : 0;
}

/* The drop of NVML's figures from a to b, over the GPUs both read; only
 * known where every figure where the process was listed is known. */
static int64_t figure_drop(const struct gpr__look *a, const struct gpr__look *b,
			   int *known)
{
	*known = a->known && b->known && a->n == b->n;
	int64_t d = 0;
	for (size_t i = 0; *known && i < a->n; i++)
		d += (int64_t)a->gpu[i].bytes - (int64_t)b->gpu[i].bytes;
	return *known ? d : 0;
}

/* The looks after the last step, and what they measured. */
static void measure(gpr__suspender *s, struct gpr__suspend_report *r)
{
	char e[GPR__ERRLEN];
	r->state_after = state_now(s, r->pid);
	if (gpr__suspend_look(s->ctx, r->pid, &r->after, e, sizeof e) != 0) {
		r->after.n = 0;
		r->after.known = 0;
		r->after.rss_known = 0;
	}
	r->released = figure_drop(&r->before, &r->after, &r->released_known);
	r->host_bytes = rss_growth(&r->before, &r->after, &r->host_known);
}

/* ---------------- suspend ---------------- */

static int suspend_checks(gpr__suspender *s, int pid,
			  struct gpr__suspend_report *r)
{
	char e[GPR__ERRLEN];
	int rc = common_checks(s, pid, "suspend", r);
	if (rc)
		return rc;
	switch (r->state_before) {
	case GPR__PS_RUNNING:
		break;
	case GPR__PS_CHECKPOINTED:
		return stop(r, GPR__STEP_CHECK, GPR_E_STATE,
			    "process %d is suspended already (gpureclaim "
			    "resume --pid %d brings it back)",
			    pid, pid);
	case GPR__PS_LOCKED:
		return stop(r, GPR__STEP_CHECK, GPR_E_STATE,
			    "process %d is locked (a checkpoint under way, or "
			    "one left locked: gpureclaim resume --pid %d "
			    "unlocks it)",
			    pid, pid);
	default:
		return unusable(r, pid, "suspended");
	}
	rc = gpr__suspend_look(s->ctx, pid, &r->before, e, sizeof e);
	if (rc)
		return stop(r, GPR__STEP_CHECK, rc, "%s", e);
	if (!r->before.listed)
		return stop(r, GPR__STEP_CHECK, GPR_E_NOT_FOUND,
			    "process %d holds no GPU memory that NVML lists: "
			    "nothing to suspend",
			    pid);
	if (!r->before.known)
		return stop(r, GPR__STEP_CHECK, GPR_E_NO_PER_PROCESS,
			    "NVML withholds process %d's figure (MIG?), so "
			    "whether host memory can hold it cannot be "
			    "checked; not suspended",
			    pid);
	r->need = r->before.bytes;
	rc = gpr__host_room(pid, &r->room, e, sizeof e);
	if (rc)
		return stop(r, GPR__STEP_CHECK, rc, "%s; not suspended", e);
	r->room_known = 1;
	char why[sizeof r->why];
	rc = gpr__host_fits(&r->room, r->need, why, sizeof why);
	if (rc)
		return stop(r, GPR__STEP_CHECK, rc, "process %d: %s", pid, why);
	return 0;
}

int gpr__suspend(gpr__suspender *s, int pid, const struct gpr__suspend_opts *o,
		 struct gpr__suspend_report *r)
{
	memset(r, 0, sizeof *r);
	r->pid = pid;
	r->state_before = r->state_after = GPR__PS_UNKNOWN;
	int rc = suspend_checks(s, pid, r);
	if (rc || (o && o->dry_run))
		return rc;
	unsigned timeout =
	    o && o->lock_timeout_ms ? o->lock_timeout_ms : GPR__LOCK_TIMEOUT_MS;
	char e[GPR__ERRLEN], why[GPR__ERRLEN + 256];
	double t0 = now();
	rc = gpr__ckpt_lock(&s->cuda, pid, timeout, &r->driver_result, e,
			    sizeof e);
	double t1 = now();
	r->lock_s = t1 - t0;
	if (rc) {
		because(r->driver_result, 0, e, why, sizeof why);
		r->state_after = state_now(s, pid);
		return stop(r, GPR__STEP_LOCK, GPR_E_UNSUPPORTED,
			    "process %d was not locked: %s; it is %s, nothing "
			    "was moved",
			    pid, why, gpr__pstate_name(r->state_after));
	}
	rc =
	    gpr__ckpt_checkpoint(&s->cuda, pid, &r->driver_result, e, sizeof e);
	double t2 = now();
	r->move_s = t2 - t1;
	r->total_s = t2 - t0;
	if (rc) {
		because(r->driver_result, 0, e, why, sizeof why);
		/* never leave it locked: its CUDA calls would wait forever */
		CUresult ures;
		char ue[GPR__ERRLEN];
		int st = state_now(s, pid);
		int unlocked =
		    st == GPR__PS_LOCKED &&
		    gpr__ckpt_unlock(&s->cuda, pid, &ures, ue, sizeof ue) == 0;
		measure(s, r);
		if (r->state_after == GPR__PS_RUNNING)
			return stop(r, GPR__STEP_CHECKPOINT, GPR_E_UNSUPPORTED,
				    "process %d was not suspended: %s; it was "
				    "unlocked and goes on running",
				    pid, why);
		if (r->state_after == GPR__PS_FAILED)
			return stop(r, GPR__STEP_CHECKPOINT, GPR_E_UNSUPPORTED,
				    "process %d was not suspended: %s; the "
				    "driver left it in state failed: its GPU "
				    "state is lost and it must be restarted",
				    pid, why);
		return stop(r, GPR__STEP_CHECKPOINT, GPR_E_UNSUPPORTED,
			    "process %d was not suspended: %s; it is %s%s "
			    "(gpureclaim resume --pid %d tries to bring it "
			    "back)",
			    pid, why, gpr__pstate_name(r->state_after),
			    unlocked || st != GPR__PS_LOCKED
				? ""
				: " and could not be unlocked",
			    pid);
	}
	measure(s, r);
	r->rc = 0;
	r->step = GPR__STEP_DONE;
	return 0;
}

/* ---------------- resume ---------------- */

int gpr__resume(gpr__suspender *s, int pid, const struct gpr__suspend_opts *o,
		struct gpr__suspend_report *r)
{
	memset(r, 0, sizeof *r);
	r->pid = pid;
	r->resume = 1;
	r->state_before = r->state_after = GPR__PS_UNKNOWN;
	int rc = common_checks(s, pid, "resume", r);
	if (rc)
		return rc;
	char e[GPR__ERRLEN], why[GPR__ERRLEN + 256];
	switch (r->state_before) {
	case GPR__PS_CHECKPOINTED:
	case GPR__PS_LOCKED:
		break;
	case GPR__PS_RUNNING:
		return stop(r, GPR__STEP_CHECK, GPR_E_STATE,
			    "process %d is running, not suspended", pid);
	default:
		return unusable(r, pid, "resumed");
	}
	rc = gpr__suspend_look(s->ctx, pid, &r->before, e, sizeof e);
	if (rc)
		return stop(r, GPR__STEP_CHECK, rc, "%s", e);
	if (o && o->dry_run)
		return 0;
	double t0 = now();
	if (r->state_before == GPR__PS_CHECKPOINTED) {
		rc = gpr__ckpt_restore(&s->cuda, pid, NULL, 0,
				       &r->driver_result, e, sizeof e);
		r->move_s = now() - t0;
		r->total_s = r->move_s;
		if (rc) {
			because(r->driver_result, 1, e, why, sizeof why);
			measure(s, r);
			if (r->state_after == GPR__PS_FAILED)
				return stop(r, GPR__STEP_RESTORE,
					    GPR_E_UNSUPPORTED,
					    "process %d was not restored: %s; "
					    "the driver left it in state "
					    "failed: its GPU state is lost",
					    pid, why);
			return stop(r, GPR__STEP_RESTORE, GPR_E_UNSUPPORTED,
				    "process %d was not restored: %s; it stays "
				    "%s, its memory kept in host memory: run "
				    "gpureclaim resume --pid %d again once the "
				    "cause is gone",
				    pid, why, gpr__pstate_name(r->state_after),
				    pid);
		}
	}
	/* measured while it is still locked: once unlocked, the program's
	 * own work (a call that waited) changes its figure at once */
	measure(s, r);
	double t2 = now();
	rc = gpr__ckpt_unlock(&s->cuda, pid, &r->driver_result, e, sizeof e);
	double t3 = now();
	r->unlock_s = t3 - t2;
	r->total_s = r->move_s + r->unlock_s;
	r->state_after = state_now(s, pid);
	if (rc)
		return stop(
		    r, GPR__STEP_UNLOCK, GPR_E_UNSUPPORTED,
		    "process %d was restored but not unlocked (%s): its "
		    "CUDA calls still wait; run gpureclaim resume "
		    "--pid %d again",
		    pid, e, pid);
	r->rc = 0;
	r->step = GPR__STEP_DONE;
	return 0;
}
