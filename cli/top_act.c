/*
 * What `top`'s keys do, each in a thread of its own so the screen goes
 * on while an agent works: release a process's caches and show its
 * holders (one request to its agent, cli/agent_client.c, as `release
 * --pid` and `explain --pid --holders` make it), suspend and resume it
 * (gpureclaim suspend's and resume's own functions, cli/suspend_run.h:
 * the same checks, the agent's release first, the records), and reclaim,
 * which runs
 * `gpureclaim reclaim` itself (this very program, --dry-run first) and
 * reads its JSON: so top's reclaim is the command's, with its checks,
 * bounds and figures, not a second one.
 *
 * One action at a time; its outcome waits for the screen to take it, and
 * a byte on the wake descriptor says it is there.
 */
#include "top.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent_client.h"
#include "suspend_run.h"
#include "out/fmt.h"

extern char **environ;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int busy, ready, joinable;
static pthread_t thread;
static struct gpr_cli_top_done outcome;

struct job {
	int kind;
	long pid;
	double timeout;
	int wake_fd;
};
static struct job job;

/* ---------------- one process's agent ---------------- */

static void release(const struct job *j, struct gpr_cli_top_done *d)
{
	struct gpr_cli_agent_reply r;
	char x[24];
	if (gpr_cli_agent_request(j->pid, "release", "", j->timeout, &r) !=
	    GPR_CLI_OK) {
		snprintf(d->line, sizeof(d->line), "release %ld: %s: %.500s",
			 j->pid, r.kind, r.error);
		gpr_cli_agent_reply_free(&r);
		return;
	}
	/* "returned": the bytes, then per GPU its ordinal, NVML index,
	 * released bytes and whether they are known (_agent_server.py) */
	const char *v, *e;
	long long n[1] = {0};
	if (gpr_cli_agent_member(&r, "returned", &v, &e) == 0)
		gpr_cli_agent_ints(v, e, n, 1);
	if (gpr_cli_agent_member(&r, "release_seconds", &v, &e) == 0 &&
	    *v != 'n')
		d->seconds = strtod(v, NULL);
	gpr_cli_agent_reply_free(&r);
	d->ok = 1;
	d->bytes = n[0];
	char secs[24];
	snprintf(d->line, sizeof(d->line), "%ld released %s (%lld bytes) in %s",
		 j->pid,
		 gpr__fmt_bytes(n[0] > 0 ? (uint64_t)n[0] : 0, x, sizeof(x)),
		 n[0], gpr__fmt_secs(d->seconds, secs, sizeof(secs)));
}

static void holders(const struct job *j, struct gpr_cli_top_done *d)
{
	struct gpr_cli_agent_reply r;
	if (gpr_cli_agent_request(j->pid, "explain", "\"holders\":true",
				  j->timeout, &r) != GPR_CLI_OK) {
		snprintf(d->line, sizeof(d->line), "holders of %ld: %s: %.500s",
			 j->pid, r.kind, r.error);
		gpr_cli_agent_reply_free(&r);
		return;
	}
	if (!r.text || gpr_cli_agent_string(r.text, r.end, &d->text) != 0)
		snprintf(d->line, sizeof(d->line),
			 "holders of %ld: its agent sent no report", j->pid);
	else
		d->ok = 1;
	gpr_cli_agent_reply_free(&r);
}

/* ---------------- `gpureclaim reclaim` ---------------- */

/* The items of the JSON array at [v, e). */
static int items(const char *v, const char *e)
{
	const char *c = v + 1;
	while (c < e && (*c == ' ' || *c == '\n' || *c == '\t' || *c == '\r'))
		c++;
	if (c >= e || *c == ']')
		return 0;
	int depth = 1, n = 1, str = 0;
	for (; c < e && depth > 0; c++) {
		if (str) {
			if (*c == '\\')
				c++;
			else if (*c == '"')
				str = 0;
		} else if (*c == '"') {
			str = 1;
		} else if (*c == '[' || *c == '{') {
			depth++;
		} else if (*c == ']' || *c == '}') {
			depth--;
		} else if (*c == ',' && depth == 1) {
			n++;
		}
	}
	return n;
}

/* Runs this program's `reclaim` with args; its stdout into out, its
 * first line of stderr into err; its exit status, or -1. */
static int run_reclaim(const char *const *args, double timeout,
		       struct gpr__buf *out, char *err, size_t errlen)
{
	int o[2], e[2];
	if (pipe2(o, O_CLOEXEC) != 0)
		return -1;
	if (pipe2(e, O_CLOEXEC) != 0) {
		close(o[0]);
		close(o[1]);
		return -1;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, o[1], 1);
	posix_spawn_file_actions_adddup2(&fa, e[1], 2);
	char *argv[16];
	int n = 0;
	argv[n++] = "gpureclaim";
	argv[n++] = "reclaim";
	for (int i = 0; args[i] && n < 14; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	pid_t pid;
	int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(o[1]);
	close(e[1]);
	if (rc != 0) {
		close(o[0]);
		close(e[0]);
		snprintf(err, errlen, "cannot run gpureclaim reclaim: %s",
			 strerror(rc));
		return -1;
	}
	/* reclaim bounds itself by --timeout; a margin for its own start */
	struct gpr__buf errs = {0};
	struct pollfd p[2] = {{.fd = o[0], .events = POLLIN},
			      {.fd = e[0], .events = POLLIN}};
	int open_fds = 2;
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (open_fds) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		double left = timeout + 10 - (double)(now.tv_sec - t0.tv_sec) -
			      (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
		if (left <= 0 || poll(p, 2, (int)(left * 1000) + 1) <= 0) {
			if (errno == EINTR)
				continue;
			kill(pid, SIGKILL);
			break;
		}
		for (int i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP)))
				continue;
			char buf[8192];
			ssize_t k = read(p[i].fd, buf, sizeof(buf));
			if (k > 0) {
				gpr__buf_putn(i ? &errs : out, buf, (size_t)k);
				continue;
			}
			close(p[i].fd);
			p[i].fd = -1;
			open_fds--;
		}
	}
	for (int i = 0; i < 2; i++)
		if (p[i].fd >= 0)
			close(p[i].fd);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	const char *s = gpr__buf_str(&errs);
	const char *nl = strchr(s, '\n');
	snprintf(err, errlen, "%.*s", (int)(nl ? nl - s : (long)strlen(s)), s);
	gpr__buf_free(&errs);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void reclaim(const struct job *j, struct gpr_cli_top_done *d)
{
	int dry = j->kind == GPR_CLI_TOP_RECLAIM_DRY;
	char secs[32], err[512] = "", x[24];
	snprintf(secs, sizeof(secs), "%g", j->timeout);
	const char *dry_args[] = {"--dry-run", "--json", "--timeout", secs,
				  NULL};
	const char *args[] = {"--json", "--timeout", secs, NULL};
	struct gpr__buf out = {0};
	int rc = run_reclaim(dry ? dry_args : args, j->timeout, &out, err,
			     sizeof(err));
	/* its JSON read as an answer (agent_client.h reads its members) */
	struct gpr_cli_agent_reply r = {.line = out};
	r.end = out.data ? out.data + out.len : NULL;
	const char *v, *e;
	if ((rc != 0 && rc != 3) ||
	    gpr_cli_agent_member(&r, "total", &v, &e) != 0) {
		snprintf(d->line, sizeof(d->line), "reclaim failed: %s",
			 err[0] ? err : "no report");
		gpr__buf_free(&out);
		return;
	}
	d->ok = 1;
	d->bytes = strtoll(v, NULL, 10);
	if (gpr_cli_agent_member(&r, "processes", &v, &e) == 0)
		d->processes = items(v, e);
	if (gpr_cli_agent_member(&r, "failed", &v, &e) == 0)
		d->failed = items(v, e);
	gpr__buf_free(&out);
	char silent[64] = "";
	if (d->failed)
		snprintf(silent, sizeof(silent), "; %d did not answer",
			 d->failed);
	snprintf(
	    d->line, sizeof(d->line),
	    dry ? "reclaim would give back %s (%lld bytes) from %d "
		  "process%s%s"
		: "reclaim released %s (%lld bytes) from %d process%s%s",
	    gpr__fmt_bytes(d->bytes > 0 ? (uint64_t)d->bytes : 0, x, sizeof(x)),
	    d->bytes, d->processes, d->processes != 1 ? "es" : "", silent);
}

/* ---------------- suspend and resume (cli/suspend_run.h) ---------------- */

/* The driver, loaded and initialised (~0.2 s) at the first suspend or
 * resume and kept: only the actions' thread uses it, one at a time. */
static struct gpr_cli_suspender suspender;
static int suspender_open;

static void suspend(const struct job *j, struct gpr_cli_top_done *d)
{
	char err[512], x[24], y[24], z[24], t[24];
	if (!suspender_open) {
		if (gpr_cli_suspend_open(&suspender, err, sizeof err) !=
		    GPR_CLI_OK) {
			snprintf(d->line, sizeof(d->line), "suspend %ld: %s",
				 j->pid, err);
			return;
		}
		suspender_open = 1;
	}
	/* the command's bounds (gpureclaim suspend's defaults) */
	struct gpr_cli_suspend_opts o = {.dry_run =
					     j->kind == GPR_CLI_TOP_SUSPEND_DRY,
					 .agent_timeout = 30,
					 .lock_timeout_ms = 30000};
	struct gpr_cli_suspend_result res;
	int rc = j->kind == GPR_CLI_TOP_RESUME
		     ? gpr_cli_resume_pid(&suspender, (int)j->pid, &o, &res)
		     : gpr_cli_suspend_pid(&suspender, (int)j->pid, &o, &res);
	const struct gpr__suspend_report *r = &res.r;
	if (rc) {
		snprintf(d->line, sizeof(d->line), "%s %ld: %.560s",
			 j->kind == GPR_CLI_TOP_RESUME ? "resume" : "suspend",
			 j->pid, r->why);
		return;
	}
	d->ok = 1;
	d->host_bytes = r->host_known ? r->host_bytes : -1;
	d->cache = res.cache_known ? res.cache_released : 0;
	d->seconds = r->total_s;
	gpr__fmt_secs(r->total_s, t, sizeof t);
	if (j->kind == GPR_CLI_TOP_SUSPEND_DRY) {
		d->bytes = (long long)r->need;
		return; /* the question says it */
	}
	d->bytes = r->released_known ? r->released : 0;
	long long moved = d->bytes < 0 ? -d->bytes : d->bytes;
	gpr__fmt_bytes((uint64_t)moved, x, sizeof x);
	if (j->kind == GPR_CLI_TOP_RESUME) {
		snprintf(
		    d->line, sizeof(d->line),
		    "%ld resumed: %s (%lld bytes) restored on the GPU in %s",
		    j->pid, x, moved, t);
		return;
	}
	if (d->host_bytes >= 0)
		gpr__fmt_bytes((uint64_t)d->host_bytes, z, sizeof z);
	else
		snprintf(z, sizeof z, "?");
	gpr__fmt_bytes(d->cache > 0 ? (uint64_t)d->cache : 0, y, sizeof y);
	snprintf(d->line, sizeof(d->line),
		 "%ld suspended: %s of cache released, then %s (%lld bytes) "
		 "off the GPU, %s in host memory, in %s",
		 j->pid, y, x, moved, z, t);
}

/* ---------------- the thread ---------------- */

static void *act_main(void *arg)
{
	struct job *j = arg;
	struct gpr_cli_top_done d = {.kind = j->kind, .pid = j->pid};
	switch (j->kind) {
	case GPR_CLI_TOP_RELEASE:
		release(j, &d);
		break;
	case GPR_CLI_TOP_HOLDERS:
		holders(j, &d);
		break;
	case GPR_CLI_TOP_SUSPEND_DRY:
	case GPR_CLI_TOP_SUSPEND:
	case GPR_CLI_TOP_RESUME:
		suspend(j, &d);
		break;
	default:
		reclaim(j, &d);
	}
	pthread_mutex_lock(&lock);
	outcome = d;
	ready = 1;
	busy = 0;
	pthread_mutex_unlock(&lock);
	char c = 'a';
	if (write(j->wake_fd, &c, 1) < 0) {
		/* a full pipe has a wake-up waiting already */
	}
	return NULL;
}

int gpr_cli_top_act_start(int kind, long pid, double timeout, int wake_fd)
{
	pthread_mutex_lock(&lock);
	if (busy) {
		pthread_mutex_unlock(&lock);
		return -1;
	}
	busy = 1;
	pthread_mutex_unlock(&lock);
	if (joinable) { /* the one before, ended */
		pthread_join(thread, NULL);
		joinable = 0;
	}
	job = (struct job){kind, pid, timeout, wake_fd};
	if (pthread_create(&thread, NULL, act_main, &job) != 0) {
		act_main(&job); /* no thread: here */
		return 0;
	}
	joinable = 1;
	return 0;
}

int gpr_cli_top_act_take(struct gpr_cli_top_done *done)
{
	pthread_mutex_lock(&lock);
	int got = ready;
	if (got) {
		*done = outcome;
		memset(&outcome, 0, sizeof(outcome));
		ready = 0;
	}
	pthread_mutex_unlock(&lock);
	return got;
}

int gpr_cli_top_act_busy(void)
{
	pthread_mutex_lock(&lock);
	int b = busy;
	pthread_mutex_unlock(&lock);
	return b;
}

int gpr_cli_top_act_leave(void)
{
	if (!joinable)
		return 0;
	joinable = 0;
	if (gpr_cli_top_act_busy()) { /* bounded, but not worth the wait */
		pthread_detach(thread);
		return 1;
	}
	pthread_join(thread, NULL);
	struct gpr_cli_top_done d;
	if (gpr_cli_top_act_take(&d))
		gpr__buf_free(&d.text);
	return 0;
}
