/*
 * The actions' log (docs/suspend.md, "The log"): every suspend and
 * resume that locked a process, whoever asked (the command, a watcher's
 * resume on demand, `reclaim --idle`), and the cache releases of
 * `reclaim --idle`, one JSON object a line in
 * `actions.log` of the user's records folder (src/suspend_record.h):
 * when, what, the process, whether it worked, its exact bytes and why it
 * was done. Written with O_APPEND (a line is one write: lines of two
 * writers never mix); past 1 MiB the log becomes actions.log.1 (one kept)
 * and a new one starts. A log that cannot be written loses the line, never
 * the action.
 */
#include "suspend_run.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ps.h"

#define LOG_NAME "actions.log"
#define LOG_MAX (1 << 20)

static void bytes_or_null(struct gpr__json *j, const char *key, int known,
			  int64_t v)
{
	gpr__json_key(j, key);
	if (known && v >= 0)
		gpr__json_u64(j, (uint64_t)v);
	else
		gpr__json_null(j);
}

static void seconds(struct gpr__json *j, const char *key, double s)
{
	gpr__json_key(j, key);
	gpr__json_ufixed(j, (uint64_t)(s < 0 ? 0 : s * 1000 + 0.5), 3);
}

static const char *const steps[] = {
    [GPR__STEP_DONE] = "done",	     [GPR__STEP_CHECK] = "check",
    [GPR__STEP_LOCK] = "lock",	     [GPR__STEP_CHECKPOINT] = "checkpoint",
    [GPR__STEP_RESTORE] = "restore", [GPR__STEP_UNLOCK] = "unlock",
};

/* A line's start: the time, the action, the process. */
static void head(struct gpr__json *j, const char *action, long pid)
{
	struct timespec when;
	clock_gettime(CLOCK_REALTIME, &when);
	gpr__json_object(j);
	gpr_cli_json_when(j, &when);
	gpr__json_kv_str(j, "action", action);
	gpr__json_kv_u64(j, "pid", (uint64_t)pid);
}

/* The line, ended, appended to the log (see the file's comment); b is
 * freed. */
static void append(struct gpr__buf *b)
{
	char dir[4096], err[256], path[PATH_MAX + 16], old[PATH_MAX + 16];
	if (gpr__record_dir(dir, sizeof dir, 1, err, sizeof err) != 0) {
		gpr__buf_free(b);
		return;
	}
	snprintf(path, sizeof path, "%s/" LOG_NAME, dir);
	snprintf(old, sizeof old, "%s/" LOG_NAME ".1", dir);
	gpr__buf_puts(b, "\n");
	struct stat st;
	if (!b->oom && lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_size + (off_t)b->len > LOG_MAX)
		rename(path, old);
	int fd = open(path,
		      O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC |
			  O_NONBLOCK,
		      0600);
	if (fd >= 0 && !b->oom && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_uid == getuid()) {
		ssize_t w = write(fd, b->data, b->len);
		(void)w;
	}
	if (fd >= 0)
		close(fd);
	gpr__buf_free(b);
}

void gpr_cli_release_log(long pid, int ok, long long released,
			 const char *cause, const char *error)
{
	struct gpr__buf b = {0};
	struct gpr__json j;
	gpr__json_init(&j, &b);
	head(&j, "release", pid);
	gpr__json_kv_bool(&j, "ok", ok);
	bytes_or_null(&j, "released", ok, released);
	gpr__json_kv_str(&j, "cause", cause ? cause : "by hand");
	gpr__json_kv_str(&j, "error", ok ? NULL : error);
	gpr__json_object_end(&j);
	append(&b);
}

void gpr_cli_suspend_log(const struct gpr_cli_suspend_result *res,
			 const char *cause)
{
	const struct gpr__suspend_report *r = &res->r;
	if (res->dry_run || r->step == GPR__STEP_CHECK)
		return; /* nothing was locked: not an action */
	struct gpr__buf b = {0};
	struct gpr__json j;
	gpr__json_init(&j, &b);
	head(&j, r->resume ? "resume" : "suspend", r->pid);
	gpr__json_kv_bool(&j, "ok", r->rc == 0);
	gpr__json_kv_str(&j, "step", steps[r->step]);
	gpr__json_kv_str(&j, "state", gpr__pstate_name(r->state_after));
	if (r->resume) {
		bytes_or_null(&j, "restored", r->released_known, -r->released);
		bytes_or_null(&j, "host_freed", r->host_known, -r->host_bytes);
	} else {
		bytes_or_null(&j, "released", r->released_known, r->released);
		bytes_or_null(&j, "host_bytes", r->host_known, r->host_bytes);
		bytes_or_null(&j, "cache_released", res->cache_known,
			      res->cache_released);
	}
	seconds(&j, "seconds", r->total_s);
	gpr__json_kv_str(&j, "cause", cause ? cause : "by hand");
	gpr__json_kv_str(&j, "error", r->rc ? r->why : NULL);
	gpr__json_object_end(&j);
	append(&b);
}
