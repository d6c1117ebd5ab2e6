/*
 * Suspend or resume one process, as cli/suspend_run.h says: the core's facts
 * (src/suspend.c) with what belongs to the command around them. Before a
 * suspend, the process's agent, where it has one, gives its caches back,
 * so host memory holds only live data: the drop of NVML's figure over
 * that release is measured like everything else. A failure to reach the
 * agent is a note, not an error. A suspended process gets a record
 * (src/suspend_record.h) so `ps` can list it; a resumed one loses it.
 */
#include "suspend_run.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent_client.h"
#include "cuda_waiters.h"
#include "out/fmt.h"

int gpr_cli_suspend_open(struct gpr_cli_suspender *c, char *err, size_t len)
{
	memset(c, 0, sizeof *c);
	int rc = gpr_open(NULL, &c->ctx);
	if (rc) {
		snprintf(err, len, "%s", gpr_strerror(rc));
		return GPR_CLI_ERROR;
	}
	char why[512] = "";
	rc = gpr__suspender_open(c->ctx, &c->s, why, sizeof why);
	if (rc) {
		if (rc == GPR_E_NO_DRIVER)
			snprintf(err, len, "NVIDIA driver not found (%s)", why);
		else
			snprintf(err, len, "%s", why);
		gpr_close(c->ctx);
		c->ctx = NULL;
		return GPR_CLI_ERROR;
	}
	return GPR_CLI_OK;
}

void gpr_cli_suspend_close(struct gpr_cli_suspender *c)
{
	gpr__suspender_close(c->s);
	gpr_close(c->ctx);
	memset(c, 0, sizeof *c);
}

static void note(struct gpr_cli_suspend_result *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void note(struct gpr_cli_suspend_result *res, const char *fmt, ...)
{
	if (res->n_notes == GPR_CLI_NOTES)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(res->notes[res->n_notes++], sizeof res->notes[0], fmt, ap);
	va_end(ap);
}

/* A fresh result for pid: who it is. */
static void begin(int pid, const struct gpr_cli_suspend_opts *o,
		  struct gpr_cli_suspend_result *res)
{
	memset(res, 0, sizeof *res);
	res->dry_run = o->dry_run;
	if (gpr_cli_proc_cmdline(pid, res->command, sizeof res->command) != 0)
		res->command[0] = '\0';
	if (gpr_cli_proc_user(pid, res->user, sizeof res->user) != 0)
		res->user[0] = '\0';
}

static double wall_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The agent's release, measured as the drop of NVML's figure. */
static void release_first(struct gpr_cli_suspender *c, int pid,
			  const struct gpr_cli_suspend_opts *o,
			  const struct gpr__look *before,
			  struct gpr_cli_suspend_result *res)
{
	struct gpr_cli_agent_reply reply;
	double timeout = o->agent_timeout > 0 ? o->agent_timeout : 30;
	if (gpr_cli_agent_request(pid, "release", "", timeout, &reply) !=
	    GPR_CLI_OK) {
		if (strcmp(reply.kind, "no_agent") == 0) {
			note(res,
			     "process %d has no agent, so its caches (if any) "
			     "moved to host memory too; `gpureclaim run "
			     "--agent` "
			     "or GPURECLAIM_AGENT=1 starts one",
			     pid);
		} else {
			res->agent = -1;
			note(res,
			     "its agent did not release its caches (%s), so "
			     "they moved to host memory too",
			     reply.error);
		}
		gpr_cli_agent_reply_free(&reply);
		return;
	}
	gpr_cli_agent_reply_free(&reply);
	res->agent = 1;
	struct gpr__look after;
	char e[256];
	if (gpr__suspend_look(c->ctx, pid, &after, e, sizeof e) == 0 &&
	    before->known && after.known) {
		res->cache_known = 1;
		res->cache_released =
		    (int64_t)before->bytes - (int64_t)after.bytes;
	}
}

/* What the watcher of a suspension needs from before the lock: the
 * driver's restore thread and the threads that waited inside libcuda
 * then (cuda_waiters.h), which it must not take for calls. */
struct before_lock {
	int restore_tid;
	size_t n_waits;
	struct gpr__wait_sig waits[GPR__RECORD_WAITS];
};

static void look_before_lock(struct gpr_cli_suspender *c, int pid,
			     struct before_lock *b)
{
	memset(b, 0, sizeof *b);
	b->restore_tid = gpr__suspend_restore_thread(c->s, pid);
	gpr__waiters *w = NULL;
	char e[256];
	if (gpr__waiters_open(pid, NULL, &w, e, sizeof e) != 0)
		return; /* the watcher will say why it cannot look */
	int n = gpr__waiters_all(w, b->waits, GPR__RECORD_WAITS, e, sizeof e);
	b->n_waits = n < 0		     ? 0
		     : n > GPR__RECORD_WAITS ? GPR__RECORD_WAITS
					     : (size_t)n;
	gpr__waiters_close(w);
}

/* The record `ps` lists the process by (a failure is a note). */
static void record(const struct gpr__suspend_report *r,
		   const struct before_lock *b,
		   struct gpr_cli_suspend_result *res)
{
	struct gpr__record rec;
	memset(&rec, 0, sizeof rec);
	rec.restore_tid = b->restore_tid;
	rec.n_waits = b->n_waits;
	memcpy(rec.waits, b->waits, sizeof rec.waits);
	rec.pid = r->pid;
	rec.start = r->proc.start;
	rec.uid = r->proc.uid;
	rec.time = wall_now();
	rec.host_known = r->host_known && r->host_bytes >= 0;
	rec.host_bytes = rec.host_known ? (uint64_t)r->host_bytes : 0;
	for (size_t i = 0; i < r->before.n && i < r->after.n; i++) {
		const struct gpr__gpu_look *b = &r->before.gpu[i];
		if (!b->listed || rec.n_gpus == GPR__RECORD_GPUS)
			continue;
		rec.gpu[rec.n_gpus].index = b->index;
		snprintf(rec.gpu[rec.n_gpus].uuid, sizeof rec.gpu[0].uuid, "%s",
			 b->uuid);
		rec.gpu[rec.n_gpus].bytes =
		    b->bytes > r->after.gpu[i].bytes
			? b->bytes - r->after.gpu[i].bytes
			: 0;
		rec.n_gpus++;
	}
	char dir[4096], err[512];
	int rc = gpr__record_dir(dir, sizeof dir, 1, err, sizeof err);
	if (rc == 0)
		rc = gpr__record_write(dir, &rec, err, sizeof err);
	if (rc)
		note(res,
		     "not recorded, so `gpureclaim ps` will not list it: %s",
		     err);
	else
		res->recorded = 1;
}

/* How long a suspend or resume waits for another one of the same
 * process (a watcher's resume, a key in top) to finish. */
#define LOCK_WAIT_S 120.0

/* Another gpureclaim acts on pid and did not finish in time. */
static int busy(int pid, const char *verb, struct gpr_cli_suspend_result *res)
{
	res->r.pid = pid;
	res->r.resume = strcmp(verb, "resume") == 0;
	res->r.step = GPR__STEP_CHECK;
	res->r.rc = GPR_E_BUSY;
	snprintf(res->r.why, sizeof res->r.why,
		 "another gpureclaim is suspending or resuming process %d "
		 "and did not finish in %.0f s; not %s: try again later",
		 pid, LOCK_WAIT_S, res->r.resume ? "resumed" : "suspended");
	return GPR_E_BUSY;
}

int gpr_cli_suspend_pid(struct gpr_cli_suspender *c, int pid,
			const struct gpr_cli_suspend_opts *o,
			struct gpr_cli_suspend_result *res)
{
	begin(pid, o, res);
	struct gpr__suspend_opts so = {.lock_timeout_ms = o->lock_timeout_ms,
				       .dry_run = 1};
	/* the checks first: no agent is asked for a process that cannot be
	 * suspended anyway (a release could only make room) */
	int rc = gpr__suspend(c->s, pid, &so, &res->r);
	if (rc && rc != GPR_E_NO_ROOM)
		return rc;
	if (o->dry_run) {
		if (!o->no_release) {
			struct gpr_cli_agent_reply reply;
			if (gpr_cli_agent_request(pid, "status", "", 5,
						  &reply) == GPR_CLI_OK)
				note(res, "its agent would be asked to release "
					  "its caches first: less would move");
			gpr_cli_agent_reply_free(&reply);
		}
		return rc;
	}
	char dir[4096], err[512];
	int lock = -1;
	if (gpr__record_dir(dir, sizeof dir, 1, err, sizeof err) == 0)
		lock = gpr__record_lock(dir, pid, LOCK_WAIT_S);
	if (lock == GPR_E_BUSY)
		return busy(pid, "suspend", res);
	if (!o->no_release) {
		struct gpr__look before = res->r.before;
		release_first(c, pid, o, &before, res);
	}
	struct before_lock b;
	if (o->manual_resume)
		memset(&b, 0, sizeof b);
	else
		look_before_lock(c, pid, &b);
	so.dry_run = 0;
	rc = gpr__suspend(c->s, pid, &so, &res->r);
	if (rc == 0)
		record(&res->r, &b, res);
	if (lock >= 0)
		gpr__record_unlock(dir, pid, lock);
	gpr_cli_suspend_log(res, o->cause);
	if (rc == 0 && res->recorded && !o->manual_resume)
		gpr_cli_wake_start(pid, o->poll, res);
	return rc;
}

/* The record of pid in this user's folder, when it is that process's. */
static int own_record(int pid, struct gpr__record *rec,
		      struct gpr_cli_suspend_result *res)
{
	char dir[4096], err[512];
	if (gpr__record_dir(dir, sizeof dir, 0, err, sizeof err) != 0 ||
	    gpr__record_read(dir, pid, rec) != 0)
		return 0;
	if (gpr__record_current(rec, (long)getuid()))
		return 1;
	gpr__record_remove(dir, pid);
	note(res, "the record of an earlier process %d was removed", pid);
	return 0;
}

static void forget(int pid)
{
	char dir[4096], err[512];
	if (gpr__record_dir(dir, sizeof dir, 0, err, sizeof err) == 0)
		gpr__record_remove(dir, pid);
}

/* A resume that is not its watcher's ends the watcher (it would notice
 * the record gone at its next look, an interval later): SIGTERM, once
 * its pid is seen to be that watcher still. */
static void dismiss_watcher(const struct gpr__record *rec)
{
	if (rec->watcher > 0 && rec->watcher != (int)getpid() &&
	    gpr__proc_start(rec->watcher) == rec->watcher_start)
		kill(rec->watcher, SIGTERM);
}

/* After a failed restore: what each GPU it held needs, and has. */
static void needs(const struct gpr__record *rec, const struct gpr__look *now,
		  struct gpr_cli_suspend_result *res)
{
	char line[512];
	size_t len = 0;
	line[0] = '\0';
	for (size_t i = 0; i < rec->n_gpus; i++)
		for (size_t k = 0; k < now->n; k++) {
			const struct gpr__gpu_look *g = &now->gpu[k];
			if (g->index != rec->gpu[i].index)
				continue;
			char need[24], fr[24];
			uint64_t free =
			    g->total > g->used ? g->total - g->used : 0;
			int w =
			    snprintf(line + len, sizeof line - len,
				     "%sGPU %d needs %s back and has %s free",
				     len ? "; " : "", g->index,
				     gpr__fmt_bytes(rec->gpu[i].bytes, need,
						    sizeof need),
				     gpr__fmt_bytes(free, fr, sizeof fr));
			if (w > 0 && (size_t)w < sizeof line - len)
				len += (size_t)w;
		}
	if (len)
		note(res, "%s", line);
}

int gpr_cli_resume_pid(struct gpr_cli_suspender *c, int pid,
		       const struct gpr_cli_suspend_opts *o,
		       struct gpr_cli_suspend_result *res)
{
	begin(pid, o, res);
	struct gpr__record rec;
	int have = own_record(pid, &rec, res);
	if (have) {
		res->suspended_known = 1;
		res->suspended_s = wall_now() - rec.time;
	}
	struct gpr__suspend_opts so = {.lock_timeout_ms = o->lock_timeout_ms,
				       .dry_run = o->dry_run};
	char dir[4096], err[512];
	int lock = -1;
	if (!o->dry_run &&
	    gpr__record_dir(dir, sizeof dir, 0, err, sizeof err) == 0)
		lock = gpr__record_lock(dir, pid, LOCK_WAIT_S);
	if (lock == GPR_E_BUSY)
		return busy(pid, "resume", res);
	int rc = gpr__resume(c->s, pid, &so, &res->r);
	if (rc == 0 && !o->dry_run) {
		forget(pid);
		if (have)
			dismiss_watcher(&rec);
	} else if (rc == GPR_E_STATE && res->r.state_before == GPR__PS_RUNNING)
		forget(pid); /* running again: nothing to list */
	else if (rc && res->r.step == GPR__STEP_RESTORE && have)
		needs(&rec, &res->r.after, res);
	if (lock >= 0)
		gpr__record_unlock(dir, pid, lock);
	if (!o->dry_run)
		gpr_cli_suspend_log(res, o->cause);
	return rc;
}
