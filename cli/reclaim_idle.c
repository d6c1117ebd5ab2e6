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

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "out/fmt.h"
#include "out/text.h"
#include "ps.h"
#include "suspend_host.h"
#include "suspend_run.h"

#define MAX_GPUS 64
#define MEMO_NAME "idle"
#define MEMO_MAX (1 << 20)
#define ENVIRON_MAX (1 << 20)

enum decision { D_SUSPENDED, D_WOULD, D_SKIPPED, D_FAILED };

/* JSON's words, then the text's */
static const char *const decision_words[] = {
    [D_SUSPENDED] = "suspended",
    [D_WOULD] = "would_suspend",
    [D_SKIPPED] = "skipped",
    [D_FAILED] = "failed",
};
static const char *const decision_text[] = {
    [D_SUSPENDED] = "suspended",
    [D_WOULD] = "would suspend",
    [D_SKIPPED] = "skipped",
    [D_FAILED] = "FAILED",
};

struct idle_proc {
	uint32_t pid;
	int gpu;
	uint64_t bytes; /* its figure on this GPU, before */
	int bytes_known;
	double idle_s;	 /* -1: not known */
	double worked_s; /* since its latest work NVML shows; -1: none */
	char user[64], cmd[256];
	int user_known, cmd_known;
	int decision;
	char why[600];
	/* a suspend: its drop on this GPU, and in all */
	int released_known;
	int64_t released_here, released;
	int host_known;
	int64_t host_bytes;
};

struct idle_gpu {
	int index;
	int err;
	uint64_t total, used_before, used_after;
	int has_target;
	uint64_t target;
};

struct gpr_cli_idle_result {
	struct gpr_cli_idle_opts o;
	struct idle_gpu gpus[MAX_GPUS];
	size_t n_gpus;
	struct idle_proc *procs;
	size_t n, cap;
	int suspended;
	uint64_t released;
	char note[512];
};

/* ---------------- the note of idle times, across runs ---------------- */

struct memo_entry {
	int pid;
	uint64_t start, since_us; /* idle since (the latest work seen) */
};

struct memo {
	struct memo_entry *v;
	size_t n, cap;
};

static int memo_add(struct memo *m, int pid, uint64_t start, uint64_t since)
{
	if (m->n == m->cap) {
		size_t c = m->cap ? 2 * m->cap : 64;
		struct memo_entry *g = realloc(m->v, c * sizeof *g);
		if (!g)
			return -1;
		m->v = g;
		m->cap = c;
	}
	m->v[m->n++] = (struct memo_entry){pid, start, since};
	return 0;
}

static struct memo_entry *memo_find(struct memo *m, int pid, uint64_t start)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->v[i].pid == pid && m->v[i].start == start)
			return &m->v[i];
	return NULL;
}

/* The note in dir, as a record is read: a regular file of this user,
 * not a link, bounded; a line that does not parse is left out. */
static void memo_read(const char *dir, struct memo *m)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof path, "%s/" MEMO_NAME, dir);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return;
	struct stat st;
	char *text = NULL;
	ssize_t n = -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_uid == getuid() && st.st_size <= MEMO_MAX &&
	    (text = malloc((size_t)st.st_size + 1)))
		n = read(fd, text, (size_t)st.st_size);
	close(fd);
	if (n < 0) {
		free(text);
		return;
	}
	text[n] = '\0';
	for (char *l = text; *l;) {
		char *nl = strchr(l, '\n');
		if (nl)
			*nl = '\0';
		int pid, used = 0;
		unsigned long long start, since;
		if (sscanf(l, "%d %llu %llu%n", &pid, &start, &since, &used) ==
			3 &&
		    !l[used] && pid > 0)
			memo_add(m, pid, start, since);
		l = nl ? nl + 1 : l + strlen(l);
	}
	free(text);
}

/* Writes the note (a temporary file renamed over it). */
static void memo_write(const char *dir, const struct memo *m)
{
	char path[PATH_MAX + 16], tmp[PATH_MAX + 48];
	snprintf(path, sizeof path, "%s/" MEMO_NAME, dir);
	snprintf(tmp, sizeof tmp, "%s/." MEMO_NAME ".%ld.tmp", dir,
		 (long)getpid());
	unlink(tmp);
	FILE *f = NULL;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		      0600);
	if (fd >= 0)
		f = fdopen(fd, "w");
	if (!f) {
		if (fd >= 0)
			close(fd);
		return;
	}
	for (size_t i = 0; i < m->n; i++)
		fprintf(f, "%d %llu %llu\n", m->v[i].pid,
			(unsigned long long)m->v[i].start,
			(unsigned long long)m->v[i].since_us);
	if (fclose(f) != 0 || rename(tmp, path) != 0)
		unlink(tmp);
}

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
	struct memo old = {0}, now = {0};
	int have_dir =
	    gpr__record_dir(dir, sizeof dir, 1, err, sizeof err) == 0;
	if (have_dir)
		memo_read(dir, &old);
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
		const struct memo_entry *m =
		    memo_find(&old, (int)p->pid, start);
		if (latest_work(round, p->pid, &work) != 1) {
			if (m && start)
				memo_add(&now, m->pid, m->start, m->since_us);
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
			memo_add(&now, (int)p->pid, start, since);
		if (vouched)
			p->idle_s = t > since ? (double)(t - since) / 1e6 : 0;
	}
	if (have_dir)
		memo_write(dir, &now);
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

/* ---------------- what it says ---------------- */

double gpr_cli_parse_duration(const char *s)
{
	double v, mult = 1;
	int i = s ? gpr_cli_number_prefix(s, &v) : -1;
	if (i < 0)
		return -1;
	const char *u = s + i;
	if (!strcmp(u, "") || !strcmp(u, "s"))
		mult = 1;
	else if (!strcmp(u, "m") || !strcmp(u, "min"))
		mult = 60;
	else if (!strcmp(u, "h"))
		mult = 3600;
	else if (!strcmp(u, "d"))
		mult = 86400;
	else
		return -1;
	v *= mult;
	return isfinite(v) && v <= 366.0 * 86400 ? v : -1;
}

static void bytes_text(struct gpr__buf *b, uint64_t v)
{
	char x[32];
	gpr__buf_printf(b, "%s (%llu bytes)", gpr__fmt_bytes(v, x, sizeof x),
			(unsigned long long)v);
}

void gpr_cli_idle_text(struct gpr__buf *b, const struct gpr_cli_idle_result *r)
{
	char d[48], x[32], y[32];
	gpr__buf_printf(b, "Idle for at least %s: ",
			gpr_cli_fmt_duration(r->o.idle_s, d, sizeof d));
	if (r->o.dry_run) {
		int would = 0;
		for (size_t i = 0; i < r->n; i++)
			would += r->procs[i].decision == D_WOULD;
		gpr__buf_printf(b,
				"%d process%s would be suspended (--dry-run)\n",
				would, would != 1 ? "es" : "");
	} else {
		gpr__buf_printf(b, "%d process%s suspended, ", r->suspended,
				r->suspended != 1 ? "es" : "");
		bytes_text(b, r->released);
		gpr__buf_puts(b, " released\n");
	}
	for (size_t k = 0; k < r->n_gpus; k++) {
		const struct idle_gpu *g = &r->gpus[k];
		gpr__buf_printf(b, "GPU %d: ", g->index);
		if (g->err) {
			gpr__buf_puts(b, "not read\n");
			continue;
		}
		gpr__buf_printf(b, "%s / %s used",
				gpr__fmt_bytes(g->used_before, x, sizeof x),
				gpr__fmt_bytes(g->total, y, sizeof y));
		if (g->has_target)
			gpr__buf_printf(b, ", target %s",
					gpr__fmt_bytes(g->target, x, sizeof x));
		gpr__buf_printf(b, "; %s %s\n",
				r->o.dry_run ? "would be" : "now",
				gpr__fmt_bytes(g->used_after, x, sizeof x));
		for (size_t i = 0; i < r->n; i++) {
			const struct idle_proc *p = &r->procs[i];
			if (p->gpu != g->index)
				continue;
			gpr__buf_printf(b, "  %7u ", p->pid);
			gpr__text_put(b, p->user_known ? p->user : "-", 10, 1);
			gpr__buf_printf(
			    b, " %10s  ",
			    p->bytes_known
				? gpr__fmt_bytes(p->bytes, x, sizeof x)
				: "n/a");
			gpr__buf_printf(
			    b, "%-16s ",
			    p->idle_s < 0
				? "idle ?"
				: gpr_cli_fmt_duration(p->idle_s, d, sizeof d));
			gpr__buf_printf(b, "%s: ", decision_text[p->decision]);
			gpr__text_put(b, p->why, 0, 0);
			if (p->decision == D_SUSPENDED && p->released_known) {
				gpr__buf_puts(b, "; released ");
				bytes_text(b, (uint64_t)(p->released_here > 0
							     ? p->released_here
							     : 0));
				if (p->host_known && p->host_bytes >= 0) {
					char h[32];
					gpr__buf_printf(
					    b, ", %s in host memory",
					    gpr__fmt_bytes(
						(uint64_t)p->host_bytes, h,
						sizeof h));
				}
			}
			gpr__buf_puts(b, "  ");
			if (p->cmd_known)
				gpr__text_put(b, p->cmd, 60, 0);
			gpr__buf_puts(b, "\n");
		}
	}
	if (r->note[0]) {
		gpr__text_put(b, r->note, 0, 0);
		gpr__buf_puts(b, "\n");
	}
}

static void opt_i64(struct gpr__json *j, const char *k, int known, int64_t v)
{
	gpr__json_key(j, k);
	if (known)
		gpr__json_i64(j, v);
	else
		gpr__json_null(j);
}

void gpr_cli_idle_json(struct gpr__json *j, const struct gpr_cli_idle_result *r)
{
	gpr__json_object(j);
	gpr__json_key(j, "idle_seconds");
	gpr__json_double(j, r->o.idle_s, 3);
	gpr__json_key(j, "target");
	if (r->o.target) {
		gpr__json_object(j);
		opt_i64(j, "bytes", r->o.target == 1,
			(int64_t)r->o.target_bytes);
		gpr__json_key(j, "percent");
		if (r->o.target == 2)
			gpr__json_double(j, r->o.target_percent, 3);
		else
			gpr__json_null(j);
		gpr__json_object_end(j);
	} else {
		gpr__json_null(j);
	}
	gpr__json_kv_i64(j, "suspended", r->suspended);
	gpr__json_kv_u64(j, "released", r->released);
	gpr__json_key(j, "gpus");
	gpr__json_array(j);
	for (size_t k = 0; k < r->n_gpus; k++) {
		const struct idle_gpu *g = &r->gpus[k];
		gpr__json_object(j);
		gpr__json_kv_i64(j, "gpu", g->index);
		gpr__json_kv_bool(j, "read", !g->err);
		gpr__json_kv_u64(j, "total", g->total);
		gpr__json_kv_u64(j, "used_before", g->used_before);
		gpr__json_kv_u64(j,
				 r->o.dry_run ? "used_would_be" : "used_after",
				 g->used_after);
		opt_i64(j, "target_bytes", g->has_target, (int64_t)g->target);
		gpr__json_key(j, "processes");
		gpr__json_array(j);
		for (size_t i = 0; i < r->n; i++) {
			const struct idle_proc *p = &r->procs[i];
			if (p->gpu != g->index)
				continue;
			gpr__json_object(j);
			gpr__json_kv_u64(j, "pid", p->pid);
			gpr__json_kv_str(j, "user",
					 p->user_known ? p->user : NULL);
			gpr__json_kv_str(j, "command",
					 p->cmd_known ? p->cmd : NULL);
			opt_i64(j, "bytes", p->bytes_known, (int64_t)p->bytes);
			gpr__json_key(j, "idle_seconds");
			if (p->idle_s >= 0)
				gpr__json_double(j, p->idle_s, 3);
			else
				gpr__json_null(j);
			gpr__json_kv_str(j, "decision",
					 decision_words[p->decision]);
			gpr__json_kv_str(j, "why", p->why);
			int done = p->decision == D_SUSPENDED;
			opt_i64(j, "released", done && p->released_known,
				p->released_here);
			opt_i64(j, "released_all_gpus",
				done && p->released_known, p->released);
			opt_i64(j, "host_bytes", done && p->host_known,
				p->host_bytes);
			gpr__json_object_end(j);
		}
		gpr__json_array_end(j);
		gpr__json_object_end(j);
	}
	gpr__json_array_end(j);
	gpr__json_kv_str(j, "note", r->note[0] ? r->note : NULL);
	gpr__json_object_end(j);
}
