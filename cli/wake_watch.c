/*
 * Resume on demand (docs/suspend.md): the watcher of one suspended
 * process, `gpureclaim resume --pid N --on-demand` (`gpureclaim suspend`
 * starts it: cli/wake_start.c).
 *
 * One watcher per suspended process, its life the suspension's: it ends
 * when it has resumed the process, when the process runs again (resumed
 * by hand, by `cuda-checkpoint`), when the process exits (then its record
 * goes too), when the record is gone or names another watcher (a later
 * suspension's), or on SIGTERM/SIGINT (the process stays suspended). It
 * holds the driver (cuInit, no context: nothing in NVML), a descriptor of
 * /proc/PID/mem and a pidfd; nothing on disk but a line of the record.
 *
 * Two ways to see that the program needs the GPU again (cuda_waiters.h,
 * wake_page.h): from outside, every `poll` seconds a thread waiting inside
 * a CUDA call (the driver's lock makes every call wait); from inside,
 * where the process keeps a page (the interposer under `gpureclaim run
 * --resume-on-demand`, a notebook's agent), its ask wakes the watcher at
 * once. Either way the process is resumed as `gpureclaim resume` would
 * (restore, unlock, the record removed, the log written), after checking
 * that the pid is still the process suspended (pidfd, start time). A
 * resume that fails leaves it suspended with its memory in host memory:
 * the failure goes into the record (ps shows it) and the log, the calls
 * that asked go on into the driver (which makes them wait), and the next
 * demand tries again after a pause that doubles from the poll interval
 * (at least 1 s) to a minute.
 */
#include "suspend_run.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda_waiters.h"
#include "out/text.h"
#include "suspend_host.h"
#include "wake_page.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define BACKOFF_MAX_S 60.0

struct watch {
	int pid;
	uint64_t start;
	double poll;
	int pidfd;
	char dir[4096]; /* the records folder */
	gpr__waiters *outside;
	char outside_why[320];
	gpr__wake *inside;
	char inside_why[320];
	struct gpr_cli_suspender ctl;
	int ctl_open;
};

static volatile sig_atomic_t stopping;

static void on_stop(int sig)
{
	(void)sig;
	stopping = 1;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double wall_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---------------- the record ---------------- */

/* pid's record, when it is still this suspension's. */
static int read_record(const struct watch *w, struct gpr__record *rec)
{
	return gpr__record_read(w->dir, w->pid, rec) == 0 &&
	       rec->start == w->start;
}

/* Rewrites the record with `fn` applied; 0 when it was there. */
static int update_record(const struct watch *w,
			 void (*fn)(struct gpr__record *, const void *),
			 const void *arg)
{
	struct gpr__record rec;
	char err[256];
	if (!read_record(w, &rec))
		return -1;
	fn(&rec, arg);
	return gpr__record_write(w->dir, &rec, err, sizeof err) == 0 ? 0 : -1;
}

static void set_watcher(struct gpr__record *rec, const void *arg)
{
	const int *on = arg;
	rec->watcher = *on ? (int)getpid() : 0;
	rec->watcher_start = *on ? gpr__proc_start(getpid()) : 0;
}

static void set_error(struct gpr__record *rec, const void *arg)
{
	rec->wake_error_time = wall_now();
	snprintf(rec->wake_error, sizeof rec->wake_error, "%.*s",
		 (int)sizeof rec->wake_error - 1, (const char *)arg);
}

/* ---------------- the process ---------------- */

/* Whether the process suspended is gone: exited (pidfd), or its pid is
 * another process's now. */
static int gone(const struct watch *w)
{
	if (w->pidfd >= 0) {
		/* while it has not exited its pid is its own: no other
		 * process can have it */
		struct pollfd p = {w->pidfd, POLLIN, 0};
		return poll(&p, 1, 0) != 0;
	}
	struct gpr__proc pr;
	char e[128];
	return gpr__proc_read(w->pid, &pr, e, sizeof e) != 0 ||
	       pr.start != w->start || pr.zombie;
}

static void watch_close(struct watch *w)
{
	gpr__wake_release(w->inside);
	w->inside = NULL;
	gpr__waiters_close(w->outside);
	w->outside = NULL;
	if (w->pidfd >= 0)
		close(w->pidfd);
	w->pidfd = -1;
	if (w->ctl_open)
		gpr_cli_suspend_close(&w->ctl);
	w->ctl_open = 0;
}

/* Everything the watch needs; 0, or an exit code with err. */
static int watch_open(struct watch *w, int pid, double interval, char *err,
		      size_t len)
{
	memset(w, 0, sizeof *w);
	w->pid = pid;
	w->poll = interval > 0 ? interval : GPR_CLI_POLL_S;
	w->pidfd = -1;
	char e[512];
	struct gpr__record rec;
	if (gpr__record_dir(w->dir, sizeof w->dir, 0, e, sizeof e) != 0 ||
	    gpr__record_read(w->dir, pid, &rec) != 0) {
		snprintf(err, len,
			 "process %d has no record of a suspension by this "
			 "user's gpureclaim, so there is nothing to watch "
			 "(gpureclaim resume --pid %d resumes it)",
			 pid, pid);
		return GPR_CLI_ERROR;
	}
	w->start = rec.start;
	w->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (gone(w) || !gpr__record_current(&rec, (long)getuid())) {
		snprintf(err, len, "process %d has exited", pid);
		return GPR_CLI_ERROR;
	}
	if (gpr_cli_suspend_open(&w->ctl, e, sizeof e) != GPR_CLI_OK) {
		snprintf(err, len, "%s", e);
		return GPR_CLI_ERROR;
	}
	w->ctl_open = 1;
	int state = GPR__PS_UNKNOWN;
	if (gpr__suspend_state(w->ctl.s, pid, &state, e, sizeof e) != 0 ||
	    (state != GPR__PS_CHECKPOINTED && state != GPR__PS_LOCKED)) {
		snprintf(err, len, "process %d is %s, not suspended", pid,
			 gpr__pstate_name(state));
		return GPR_CLI_ERROR;
	}
	if (gpr__waiters_open(pid, NULL, &w->outside, w->outside_why,
			      sizeof w->outside_why) == 0) {
		int tid = rec.restore_tid
			      ? rec.restore_tid
			      : gpr__suspend_restore_thread(w->ctl.s, pid);
		if (tid > 0)
			gpr__waiters_ignore_thread(w->outside, tid);
		for (size_t i = 0; i < rec.n_waits; i++)
			gpr__waiters_ignore_wait(w->outside, &rec.waits[i]);
	}
	if (gpr__wake_find(pid, w->start, &w->inside, w->inside_why,
			   sizeof w->inside_why) != 0)
		w->inside = NULL;
	if (!w->outside && !w->inside) {
		snprintf(err, len,
			 "process %d cannot be resumed on demand: %s; and %s",
			 pid, w->outside_why, w->inside_why);
		return GPR_CLI_ERROR;
	}
	int on = 1;
	update_record(w, set_watcher, &on);
	if (w->inside)
		gpr__wake_hold(w->inside);
	return GPR_CLI_OK;
}

/* ---------------- what it says ---------------- */

static void say_watching(struct gpr__buf *b, const struct watch *w, int json)
{
	if (json) {
		struct gpr__json j;
		gpr__json_init(&j, b);
		gpr__json_object(&j);
		gpr__json_kv_u64(&j, "pid", (uint64_t)w->pid);
		gpr__json_kv_bool(&j, "on_demand", 1);
		gpr__json_kv_u64(&j, "watcher", (uint64_t)getpid());
		gpr__json_key(&j, "poll");
		gpr__json_ufixed(&j, (uint64_t)(w->poll * 1000 + 0.5), 3);
		gpr__json_kv_bool(&j, "threads", w->outside != NULL);
		gpr__json_kv_str(&j, "threads_error",
				 w->outside ? NULL : w->outside_why);
		gpr__json_kv_bool(&j, "asks", w->inside != NULL);
		gpr__json_kv_str(&j, "error", NULL);
		gpr__json_object_end(&j);
		gpr__buf_puts(b, "\n");
		return;
	}
	gpr__buf_printf(b, "Process %d resumes on demand: watcher %d ", w->pid,
			(int)getpid());
	if (w->outside)
		gpr__buf_printf(b, "looks at its threads every %g s%s", w->poll,
				w->inside ? ", and " : "\n");
	if (w->inside)
		gpr__buf_puts(b, "is asked by its next driver call at once\n");
	if (!w->outside) {
		gpr__buf_puts(b, "  not its threads: ");
		gpr__text_put(b, w->outside_why, 0, 0);
		gpr__buf_puts(b, "\n");
	}
}

static void say_error(struct gpr__buf *b, int pid, const char *err, int json)
{
	if (json) {
		struct gpr__json j;
		gpr__json_init(&j, b);
		gpr__json_object(&j);
		gpr__json_kv_u64(&j, "pid", (uint64_t)pid);
		gpr__json_kv_bool(&j, "on_demand", 0);
		gpr__json_key(&j, "watcher");
		gpr__json_null(&j);
		gpr__json_kv_str(&j, "error", err);
		gpr__json_object_end(&j);
		gpr__buf_puts(b, "\n");
		return;
	}
	gpr__buf_puts(b, "gpureclaim resume: ");
	gpr__text_put(b, err, 0, 0);
	gpr__buf_puts(b, "\n");
}

/* ---------------- the loop ---------------- */

/*
 * Waits at most `seconds` (at most 1 s: the process's end and the record
 * are looked at every second, whatever the poll interval), or until the
 * process asks or exits. 1 when it asked.
 */
static int wait_once(struct watch *w, double seconds)
{
	if (seconds > 1)
		seconds = 1;
	if (seconds < 0.001)
		seconds = 0.001;
	if (w->inside)
		return gpr__wake_wait(w->inside, seconds);
	if (w->pidfd >= 0) {
		struct pollfd p = {w->pidfd, POLLIN, 0};
		poll(&p, 1, (int)(seconds * 1000));
	} else {
		struct timespec ts = {
		    (time_t)seconds,
		    (long)((seconds - (double)(time_t)seconds) * 1e9)};
		nanosleep(&ts, NULL);
	}
	return 0;
}

/* Why the process needs the GPU now, into why; 0 when it does not. Its
 * threads are looked at only when `look` (once per poll interval). */
static int demand(struct watch *w, int asked, int look, char *why, size_t len)
{
	if (asked) {
		snprintf(why, len, "on demand: the process asked");
		return 1;
	}
	if (!w->outside || !look)
		return 0;
	struct gpr__wait_sig sig;
	char e[320];
	int n = gpr__waiters_look(w->outside, &sig, 1, e, sizeof e);
	if (n < 0) {
		snprintf(w->outside_why, sizeof w->outside_why, "%s", e);
		gpr__waiters_close(w->outside);
		w->outside = NULL;
		return 0;
	}
	if (n == 0)
		return 0;
	snprintf(why, len, "on demand: thread %d waits in a CUDA call",
		 sig.tid);
	return 1;
}

enum end { END_RESUMED, END_ELSEWHERE, END_EXITED, END_LEFT, END_FAILED };

/* One resume; END_RESUMED, or -1 (failed, may try again), END_FAILED. */
static int resume_now(struct watch *w, const char *why, int json,
		      struct gpr__buf *out)
{
	struct gpr_cli_suspend_opts o = {.cause = why};
	struct gpr_cli_suspend_result *res = calloc(1, sizeof *res);
	if (!res)
		return -1;
	/* the pid is still the process suspended: checked last */
	if (gone(w)) {
		free(res);
		return END_EXITED;
	}
	int rc = gpr_cli_resume_pid(&w->ctl, w->pid, &o, res);
	if (json) {
		struct gpr__json j;
		gpr__json_init(&j, out);
		gpr__json_object(&j);
		gpr__json_key(&j, "processes");
		gpr__json_array(&j);
		gpr_cli_suspend_json(&j, res);
		gpr__json_array_end(&j);
		gpr__json_object_end(&j);
		gpr__buf_puts(out, "\n");
	} else {
		gpr_cli_suspend_text(out, res);
	}
	int end = -1;
	if (rc == 0)
		end = END_RESUMED;
	else if (res->r.state_before == GPR__PS_RUNNING)
		end = END_ELSEWHERE;
	else if (res->r.state_after == GPR__PS_FAILED)
		end = END_FAILED;
	if (rc && end != END_ELSEWHERE)
		update_record(w, set_error, res->r.why);
	free(res);
	return end;
}

/* The loop; how it ended. */
static int watch_loop(struct watch *w, int json, int background)
{
	double backoff = 0, retry_at = 0, look_at = now() + w->poll;
	for (;;) {
		int asked = wait_once(w, look_at - now());
		int look = now() >= look_at;
		if (stopping)
			return END_LEFT;
		if (gone(w))
			return END_EXITED;
		if (!asked && !look)
			continue; /* each second: its end only */
		if (look)
			look_at = now() + w->poll;
		struct gpr__record rec;
		if (!read_record(w, &rec) || rec.watcher != (int)getpid())
			return END_LEFT; /* resumed by hand, or watched anew */
		int state = GPR__PS_UNKNOWN;
		char e[256], why[160];
		if (gpr__suspend_state(w->ctl.s, w->pid, &state, e, sizeof e) ==
			0 &&
		    state == GPR__PS_RUNNING)
			return END_ELSEWHERE;
		if (!demand(w, asked, look, why, sizeof why)) {
			if (!w->outside && !w->inside)
				return END_LEFT;
			continue;
		}
		if (now() < retry_at) {
			if (w->inside) /* not now: its call waits in the driver
					*/
				gpr__wake_answer(w->inside, 0);
			continue;
		}
		struct gpr__buf out = {0};
		int end = resume_now(w, why, json, &out);
		if (!background)
			gpr__buf_write(&out, stdout);
		gpr__buf_free(&out);
		if (w->inside)
			gpr__wake_answer(w->inside, end == END_RESUMED);
		if (end >= 0)
			return end;
		backoff = backoff ? backoff * 2 : (w->poll > 1 ? w->poll : 1);
		if (backoff > BACKOFF_MAX_S)
			backoff = BACKOFF_MAX_S;
		retry_at = now() + backoff;
	}
}

/* The end of a watch: the record's line, the record of a process gone. */
static void watch_end(struct watch *w, int end, int json, int background)
{
	if (end == END_EXITED) {
		struct gpr__record rec;
		if (read_record(w, &rec))
			gpr__record_remove(w->dir, w->pid);
	} else if (end == END_LEFT) {
		struct gpr__record rec;
		int off = 0;
		if (read_record(w, &rec) && rec.watcher == (int)getpid())
			update_record(w, set_watcher, &off);
	}
	if (background || json || end == END_RESUMED)
		return;
	static const char *const words[] = {
	    [END_ELSEWHERE] = "runs again (resumed by another)",
	    [END_EXITED] = "has exited",
	    [END_LEFT] = "stays suspended; no longer watched",
	    [END_FAILED] = "could not be resumed: its GPU state is lost",
	};
	printf("Process %d %s.\n", w->pid, words[end]);
}

/* In the background: a session of its own, the terminal's signals gone,
 * stdout and stderr to /dev/null once it has said whether it watches
 * (into `say`, the parent's pipe). */
static void detach_output(void)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		if (null > 2)
			close(null);
	}
	if (chdir("/") != 0) {
		/* "/" always exists; nothing holds a mount busy either way */
	}
}

/* The background's parent: what the watcher said, passed on; its exit
 * code from whether it watches. */
static int relay(int from, pid_t child)
{
	char buf[4096];
	size_t n = 0;
	for (;;) {
		ssize_t r = read(from, buf + n, sizeof buf - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || (n += (size_t)r) == sizeof buf - 1)
			break;
	}
	close(from);
	buf[n] = '\0';
	int ok = n > 0 && (strncmp(buf, "Process ", 8) == 0 ||
			   strstr(buf, "\"on_demand\":true") != NULL);
	if (n == 0) {
		int st = 0;
		waitpid(child, &st, WNOHANG);
		fprintf(stderr, "gpureclaim resume: the watcher ended before "
				"it said whether it watches\n");
		return GPR_CLI_ERROR;
	}
	fputs(buf, ok ? stdout : stderr);
	return ok ? GPR_CLI_OK : GPR_CLI_ERROR;
}

int gpr_cli_wake_run(int pid, double interval, int background, int json)
{
	int say = STDOUT_FILENO;
	if (background) {
		int fds[2];
		if (pipe2(fds, O_CLOEXEC) != 0) {
			fprintf(stderr, "gpureclaim resume: pipe: %s\n",
				strerror(errno));
			return GPR_CLI_ERROR;
		}
		fflush(NULL);
		pid_t child = fork();
		if (child < 0) {
			fprintf(stderr, "gpureclaim resume: fork: %s\n",
				strerror(errno));
			return GPR_CLI_ERROR;
		}
		if (child > 0) {
			close(fds[1]);
			return relay(fds[0], child);
		}
		close(fds[0]);
		setsid();
		detach_output();
		say = fds[1];
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop; /* no SA_RESTART: the waits end */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (background)
		signal(SIGHUP, SIG_IGN);
	struct watch w;
	char err[1024];
	struct gpr__buf b = {0};
	int code = watch_open(&w, pid, interval, err, sizeof err);
	if (code == GPR_CLI_OK)
		say_watching(&b, &w, json);
	else
		say_error(&b, pid, err, json);
	if (say == STDOUT_FILENO) {
		gpr__buf_write(&b,
			       code == GPR_CLI_OK || json ? stdout : stderr);
		fflush(stdout);
	} else {
		if (!b.oom && write(say, b.data, b.len) < 0) {
			/* the parent is gone: watch all the same */
		}
		close(say);
	}
	gpr__buf_free(&b);
	if (code == GPR_CLI_OK) {
		int end = watch_loop(&w, json, background);
		watch_end(&w, end, json, background);
		code = end == END_FAILED ? GPR_CLI_ERROR : GPR_CLI_OK;
	}
	watch_close(&w);
	return code;
}
