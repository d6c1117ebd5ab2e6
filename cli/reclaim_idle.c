/*
 * `reclaim --idle`: the idle processes of each GPU suspended, the largest
 * first, as far as the target asks (reclaim_idle.h; docs/suspend.md, "The
 * node's policy"). Every process on the GPUs gets a decision and its
 * reason, so a dry run says what would be done and why; each suspend is
 * `gpureclaim suspend`'s own (gpr_cli_suspend_pid: its checks, its
 * agent's release, its record, its watcher, its line in the log), its
 * exact bytes the drop of NVML's figures. A process opts out with
 * GPURECLAIM_SUSPEND=never in its environment (as it started: what
 * /proc/PID/environ shows, which only its user and root may read; one
 * that cannot be read is not suspended).
 */
#include "reclaim_idle.h"
#include "reclaim_idle_result.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "idle_note.h"
#include "out/fmt.h"
#include "out/text.h"
#include "ps.h"
#include "suspend_host.h"
#include "suspend_run.h"

#define ENVIRON_MAX (1 << 20)

/* ---------------- facts of a process ---------------- */

/* Whether pid opted out: 1 GPURECLAIM_SUSPEND=never in its environment,
 * 0 not, -1 its environment cannot be read (errno). */
static int opted_out(uint32_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%u/environ", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char *buf = malloc(ENVIRON_MAX);
	if (!buf) {
		close(fd);
		errno = ENOMEM;
		return -1;
	}
	size_t len = 0;
	ssize_t r = 0;
	while (len < ENVIRON_MAX &&
	       (r = read(fd, buf + len, ENVIRON_MAX - len)) > 0)
		len += (size_t)r;
	int e = errno;
	close(fd);
	if (r < 0) {
		free(buf);
		errno = e;
		return -1;
	}
	static const char key[] = "GPURECLAIM_SUSPEND=";
	int out = 0;
	for (size_t i = 0; i < len;) {
		const char *v = buf + i;
		size_t n = strnlen(v, len - i);
		if (n >= sizeof key - 1 &&
		    memcmp(v, key, sizeof key - 1) == 0 &&
		    n - (sizeof key - 1) == 5 &&
		    strncasecmp(v + sizeof key - 1, "never", 5) == 0)
			out = 1;
		i += n + 1;
	}
	free(buf);
	return out;
}

/* This user's to suspend: its own, or any as root. */
static int ours(uint32_t pid)
{
	char p[64];
	struct stat st;
	snprintf(p, sizeof p, "/proc/%u", pid);
	return stat(p, &st) == 0 && (geteuid() == 0 || st.st_uid == getuid());
}

/* ---------------- building the result ---------------- */

static struct idle_proc *add_proc(struct gpr_cli_idle_result *r)
{
	if (r->n == r->cap) {
		size_t c = r->cap ? 2 * r->cap : 32;
		struct idle_proc *g = realloc(r->procs, c * sizeof *g);
		if (!g)
			return NULL;
		r->procs = g;
		r->cap = c;
	}
	struct idle_proc *p = &r->procs[r->n++];
	memset(p, 0, sizeof *p);
	p->idle_s = p->worked_s = -1;
	return p;
}

static void why(struct idle_proc *p, int decision, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void why(struct idle_proc *p, int decision, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->why, sizeof p->why, fmt, ap);
	va_end(ap);
	p->decision = decision;
}

/* The latest work of pid over the round's GPUs: 1 with *us (0: no
 * sample showed any), -1 when NVML cannot tell on one of its GPUs. */
static int latest_work(const struct gpr_cli_ps_round *round, uint32_t pid,
		       uint64_t *us)
{
	*us = 0;
	int known = 1;
	for (size_t k = 0; k < round->n; k++) {
		const struct gpr_cli_ps_gpu *g = &round->gpus[k];
		for (size_t i = 0; !g->err && i < g->n; i++) {
			const struct gpr_cli_ps_row *row = &g->rows[i];
			if (row->pid != pid)
				continue;
			if (row->work != 1)
				known = -1;
			else if (row->work_us > *us)
				*us = row->work_us;
		}
	}
	return known;
}

/*
 * Each process's idle time (p->idle_s): since its latest work, the later
 * of what NVML's samples show and what the note says; a process of which
 * neither knows anything is noted idle from now (its time not known this
 * run); where NVML cannot tell (MIG), not known. The note is written back
 * with the processes of this round only.
 */
static void idle_times(const struct gpr_cli_ps_round *round,
		       struct gpr_cli_idle_result *r)
{
	char dir[4096], err[256];
	struct gpr_cli_idle_note old = {0}, now = {0};
	int have_dir =
	    gpr__record_dir(dir, sizeof dir, 1, err, sizeof err) == 0;
	if (have_dir)
		gpr_cli_idle_note_read(dir, &old);
	else
		snprintf(r->note, sizeof r->note,
			 "gpureclaim's note of idle times cannot be kept: %.*s",
			 (int)sizeof r->note - 64, err);
	uint64_t t = (uint64_t)round->when.tv_sec * 1000000u +
		     (uint64_t)round->when.tv_nsec / 1000u;
	for (size_t i = 0; i < r->n; i++) {
		struct idle_proc *p = &r->procs[i];
		int done = 0;
		for (size_t k = 0; k < i && !done; k++) /* on another GPU */
			if (r->procs[k].pid == p->pid) {
				p->idle_s = r->procs[k].idle_s;
				p->worked_s = r->procs[k].worked_s;
				done = 1;
			}
		if (done)
			continue;
		uint64_t start = gpr__proc_start((int)p->pid), work;
		const struct gpr_cli_idle_note_entry *m =
		    gpr_cli_idle_note_find(&old, (int)p->pid, start);
		if (latest_work(round, p->pid, &work) != 1) {
			if (m && start)
				gpr_cli_idle_note_add(&now, m->pid, m->start,
						      m->since_us);
			continue;
		}
		if (work)
			p->worked_s = t > work ? (double)(t - work) / 1e6 : 0;
		uint64_t since = work;
		if (m && m->since_us > since)
			since = m->since_us;
		int vouched = work || m;
		if (!since)
			since = t; /* first seen idle: from now on */
		if (start)
			gpr_cli_idle_note_add(&now, (int)p->pid, start, since);
		if (vouched)
			p->idle_s = t > since ? (double)(t - since) / 1e6 : 0;
	}
	if (have_dir)
		gpr_cli_idle_note_write(dir, &now);
	free(old.v);
	free(now.v);
}

/* Every row of the round's GPUs, as a process to decide on. */
static int gather(const struct gpr_cli_ps_round *round,
		  struct gpr_cli_idle_result *r)
{
	const struct gpr_cli_idle_opts *o = &r->o;
	for (size_t k = 0; k < round->n && r->n_gpus < MAX_GPUS; k++) {
		const struct gpr_cli_ps_gpu *g = &round->gpus[k];
		struct idle_gpu *x = &r->gpus[r->n_gpus++];
		x->index = g->index;
		x->err = g->err;
		x->total = g->info.total;
		x->used_before = x->used_after = g->info.used;
		if (o->target == 1) {
			x->has_target = 1;
			x->target = o->target_bytes;
		} else if (o->target == 2) {
			x->has_target = 1;
			x->target = (uint64_t)((double)x->total *
					       o->target_percent / 100.0);
		}
		for (size_t i = 0; !g->err && i < g->n; i++) {
			const struct gpr_cli_ps_row *row = &g->rows[i];
			struct idle_proc *p = add_proc(r);
			if (!p)
				return -1;
			p->pid = row->pid;
			p->gpu = g->index;
			p->bytes = row->bytes;
			p->bytes_known = row->bytes_known;
			p->user_known = row->user_known;
			p->cmd_known = row->cmd_known;
			snprintf(p->user, sizeof p->user, "%s", row->user);
			snprintf(p->cmd, sizeof p->cmd, "%.*s",
				 (int)sizeof p->cmd - 1, row->cmd);
			p->decision = -1;
			if (row->state != GPR_CLI_PID_ALIVE)
				why(p, D_SKIPPED, "%s",
				    row->state == GPR_CLI_PID_EXITED
					? "it has exited"
					: "not in this pid namespace");
		}
	}
	return 0;
}

/* ---------------- deciding ---------------- */

static struct idle_gpu *gpu_of(struct gpr_cli_idle_result *r, int index)
{
	for (size_t k = 0; k < r->n_gpus; k++)
		if (r->gpus[k].index == index)
			return &r->gpus[k];
	return NULL;
}

/* The checks that need no driver, in order; 1 when p may be suspended. */
static int eligible(struct gpr_cli_idle_result *r, struct idle_proc *p)
{
	char d[48], x[48];
	if (p->decision >= 0)
		return 0;
	if (!ours(p->pid)) {
		why(p, D_SKIPPED,
		    "another user's process (only its user and root may "
		    "suspend it)");
		return 0;
	}
	if (!p->bytes_known) {
		why(p, D_SKIPPED,
		    "NVML withholds its figure (MIG?): whether host memory "
		    "can hold it cannot be checked");
		return 0;
	}
	if (p->idle_s < 0) {
		why(p, D_SKIPPED,
		    "idle for how long is not known: NVML's samples show no "
		    "work of it and gpureclaim had not seen it before; noted "
		    "idle from now (a later reclaim --idle counts from here)");
		return 0;
	}
	if (p->idle_s < r->o.idle_s) {
		if (p->worked_s >= 0 && p->worked_s < r->o.idle_s)
			why(p, D_SKIPPED, "busy: its latest GPU work %s ago",
			    gpr_cli_fmt_duration(p->worked_s, d, sizeof d));
		else
			why(p, D_SKIPPED, "idle for %s, less than %s",
			    gpr_cli_fmt_duration(p->idle_s, d, sizeof d),
			    gpr_cli_fmt_duration(r->o.idle_s, x, sizeof x));
		return 0;
	}
	int out = opted_out(p->pid);
	if (out < 0) {
		why(p, D_SKIPPED,
		    "its environment cannot be read (%s): whether it opted "
		    "out (GPURECLAIM_SUSPEND=never) is not known",
		    strerror(errno));
		return 0;
	}
	if (out) {
		why(p, D_SKIPPED, "opted out: GPURECLAIM_SUSPEND=never");
		return 0;
	}
	return 1;
}

static int by_bytes(const void *a, const void *b)
{
	const struct idle_proc *x = *(struct idle_proc *const *)a,
			       *y = *(struct idle_proc *const *)b;
	return (x->bytes < y->bytes) - (x->bytes > y->bytes);
}

/* After a suspend of pid: its other rows say so, with their GPU's drop,
 * and every GPU's used memory is read again. */
static void after_suspend(gpr_ctx *ctx, struct gpr_cli_idle_result *r,
			  const struct idle_proc *done,
			  const struct gpr__suspend_report *rep)
{
	for (size_t i = 0; i < r->n; i++) {
		struct idle_proc *p = &r->procs[i];
		if (p->pid != done->pid)
			continue;
		for (size_t k = 0; k < rep->before.n && k < rep->after.n; k++)
			if (rep->before.gpu[k].index == p->gpu)
				p->released_here =
				    (int64_t)rep->before.gpu[k].bytes -
				    (int64_t)rep->after.gpu[k].bytes;
		if (p != done && p->decision < 0)
			why(p, D_SUSPENDED, "suspended for GPU %d", done->gpu);
		p->released_known = rep->released_known;
		p->released = rep->released;
		p->host_known = rep->host_known;
		p->host_bytes = rep->host_bytes;
	}
	for (size_t k = 0; k < r->n_gpus; k++) {
		struct gpr_gpu info;
		if (!r->gpus[k].err &&
		    gpr_gpu_info(ctx, r->gpus[k].index, &info) == 0)
			r->gpus[k].used_after = info.used;
	}
}

/* In a dry run: what the suspend of p would free on each GPU. */
static void would_free(struct gpr_cli_idle_result *r,
		       const struct idle_proc *done)
{
	for (size_t i = 0; i < r->n; i++) {
		struct idle_proc *p = &r->procs[i];
		if (p->pid != done->pid)
			continue;
		struct idle_gpu *g = gpu_of(r, p->gpu);
		if (g)
			g->used_after = g->used_after > p->bytes
					    ? g->used_after - p->bytes
					    : 0;
		if (p != done && p->decision < 0)
			why(p, D_WOULD, "would be suspended for GPU %d",
			    done->gpu);
	}
}

/* One GPU's candidates, largest first, until its target is met. */
static void decide_gpu(gpr_ctx *ctx, struct gpr_cli_idle_result *r,
		       struct idle_gpu *g, struct gpr_cli_suspender *ctl,
		       int *ctl_state, int *failed)
{
	struct idle_proc **c = calloc(r->n ? r->n : 1, sizeof *c);
	size_t n = 0;
	if (!c)
		return;
	for (size_t i = 0; i < r->n; i++)
		if (r->procs[i].gpu == g->index && eligible(r, &r->procs[i]))
			c[n++] = &r->procs[i];
	qsort(c, n, sizeof *c, by_bytes);
	char d[48], a[32], b[32], cause[160];
	gpr_cli_fmt_duration(r->o.idle_s, a, sizeof a);
	for (size_t i = 0; i < n; i++) {
		struct idle_proc *p = c[i];
		if (p->decision >= 0) /* decided for another GPU meanwhile */
			continue;
		if (g->has_target && g->used_after <= g->target) {
			why(p, D_SKIPPED,
			    "GPU %d is at its target: %s used, the target %s",
			    g->index,
			    gpr__fmt_bytes(g->used_after, a, sizeof a),
			    gpr__fmt_bytes(g->target, b, sizeof b));
			continue;
		}
		if (*ctl_state == 0) {
			char err[512];
			*ctl_state = gpr_cli_suspend_open(
					 ctl, err, sizeof err) == GPR_CLI_OK
					 ? 1
					 : -1;
			if (*ctl_state < 0)
				snprintf(r->note, sizeof r->note,
					 "nothing suspended: %.*s",
					 (int)sizeof r->note - 32, err);
		}
		if (*ctl_state < 0) {
			why(p, D_SKIPPED, "%s", r->note);
			continue;
		}
		snprintf(cause, sizeof cause, "reclaim --idle %s: idle for %s",
			 gpr_cli_fmt_duration(r->o.idle_s, a, sizeof a),
			 gpr_cli_fmt_duration(p->idle_s, d, sizeof d));
		struct gpr_cli_suspend_opts so = {.dry_run = r->o.dry_run,
						  .agent_timeout = 30,
						  .cause = cause};
		struct gpr_cli_suspend_result *res = calloc(1, sizeof *res);
		if (!res)
			break;
		int rc = gpr_cli_suspend_pid(ctl, (int)p->pid, &so, res);
		gpr_cli_fmt_duration(p->idle_s, d, sizeof d);
		if (rc) {
			why(p,
			    r->o.dry_run || res->r.step == GPR__STEP_CHECK
				? D_SKIPPED
				: D_FAILED,
			    "%s", res->r.why);
			*failed |= p->decision == D_FAILED;
		} else if (r->o.dry_run) {
			why(p, D_WOULD, "idle for %s", d);
			would_free(r, p);
		} else {
			why(p, D_SUSPENDED, "idle for %s", d);
			after_suspend(ctx, r, p, &res->r);
			r->suspended++;
			if (res->r.released_known && res->r.released > 0)
				r->released += (uint64_t)res->r.released;
		}
		free(res);
	}
	free(c);
}

struct gpr_cli_idle_result *
gpr_cli_reclaim_idle(gpr_ctx *ctx, const struct gpr_cli_idle_opts *o,
		     int *failed)
{
	*failed = 0;
	struct gpr_cli_idle_result *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->o = *o;
	struct gpr_cli_ps_round round = {0};
	int code = 0;
	const char *was = gpr_cli_ps_name;
	gpr_cli_ps_name = "reclaim";
	if (gpr_cli_ps_query(ctx, o->gpu >= 0 ? &o->gpu : NULL, o->gpu >= 0, 0,
			     &round, &code) != 0) {
		gpr_cli_ps_name = was;
		snprintf(r->note, sizeof r->note,
			 "the GPUs could not be read: nothing suspended "
			 "(gpureclaim ps says why)");
		*failed = 1;
		return r;
	}
	gpr_cli_ps_name = was;
	gpr_cli_ps_work(ctx, &round, NULL);
	if (gather(&round, r) != 0) {
		gpr_cli_ps_round_free(&round);
		gpr_cli_idle_free(r);
		return NULL;
	}
	idle_times(&round, r);
	gpr_cli_ps_round_free(&round);
	for (size_t k = 0; o->dry_run && k < r->n_gpus; k++) {
		struct idle_gpu *g = &r->gpus[k];
		long long c = g->index >= 0 && g->index < 64
				  ? o->cache_releasable[g->index]
				  : 0;
		if (c > 0)
			g->used_after = g->used_after > (uint64_t)c
					    ? g->used_after - (uint64_t)c
					    : 0;
	}
	struct gpr_cli_suspender ctl;
	int ctl_state = 0;
	for (size_t k = 0; k < r->n_gpus; k++)
		if (!r->gpus[k].err)
			decide_gpu(ctx, r, &r->gpus[k], &ctl, &ctl_state,
				   failed);
	for (size_t i = 0; i < r->n; i++) /* a process on a GPU in error */
		if (r->procs[i].decision < 0)
			why(&r->procs[i], D_SKIPPED, "its GPU was not read");
	if (ctl_state == 1)
		gpr_cli_suspend_close(&ctl);
	return r;
}

void gpr_cli_idle_free(struct gpr_cli_idle_result *r)
{
	if (!r)
		return;
	free(r->procs);
	free(r);
}
