/*
 * The background writer of a session: every 10 ms (sooner when a ring
 * fills up) it moves records from the per-thread rings to the log,
 * resolving each record's caller into a library and call site
 * (inject_site.c) on the way. Strings are written after the rings are
 * drained and before the drained records, so a record never precedes the
 * string it names.
 *
 * A session ends when the program stops it (gpureclaim_trace_stop), at
 * exit (atexit; only in the process that opened the log, never in a forked
 * child), and on SIGINT, SIGTERM, SIGHUP and SIGQUIT when the signal's
 * previous action was the default one (the process is about to die): the
 * handler asks the writer for a final flush, waits for it (at most 2 s),
 * restores the previous action and re-raises, so the exit status is what
 * it would have been. A previous handler of the program is called as
 * before. A process may run several sessions one after the other, each
 * its own log.
 *
 * The log's descriptor is the program's to close (a daemon closes every
 * descriptor it did not open): before every write the writer checks that
 * it is still the log it created (fd.h), and when it is not, tracing stops
 * with one line and the number is never touched again. The writer sleeps
 * on a futex, not a descriptor, so nothing a program closes or reuses
 * can be woken or written to. A failed write (a full disk) stops tracing
 * too; the log is cut back to its last complete chunk (log_write.h).
 *
 * The log's real name (NAME, or NAME.<pid> when NAME is taken) is told to
 * `gpureclaim trace` through a file named by the pid in the private
 * directory $GPURECLAIM_TRACE_NAMES_DIR, so it never guesses the name
 * (the first session of a process: the one `gpureclaim trace` started, or
 * a program's first under --dormant).
 */
#include "writer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../format/trace_ops.h"
#include "callers.h"
#include "clock.h"
#include "fd.h"
#include "../format/log_write.h"
#include "threads.h"

#define BATCH 16384

/* The signals whose default action ends the process, flushed for. */
static const int fatal[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define N_FATAL (sizeof(fatal) / sizeof(fatal[0]))

static struct {
	struct gpr_trace_writer w;
	struct gpr_inj_fd log; /* w.fd, as it was opened */
	char path[PATH_MAX];
	pthread_t thread;
	_Atomic uint32_t wake; /* the futex word: moves at each wake-up */
	pid_t pid;	       /* the process that opened the log */
	int open;	       /* a session's log is open (control calls) */
	_Atomic int stop;      /* 1: finish and close */
	_Atomic int closed;    /* the log is closed */
	_Atomic int failed;    /* a write failed: tracing stopped */
	uint32_t strings_done; /* interned strings written */
	struct gpr_trace_rec *buf;
	gpr_inj_meta_fn closing; /* the closing META lines */
	struct sigaction old[N_FATAL];
} wr = {.log = {-1, 0, 0}};

void gpr_inj_writer_wake(void)
{
	atomic_fetch_add_explicit(&wr.wake, 1, memory_order_release);
	syscall(SYS_futex, &wr.wake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Sleeps until woken or 10 ms have passed. */
static void sleep_for_work(uint32_t seen)
{
	struct timespec ts = {0, 10 * 1000 * 1000};
	syscall(SYS_futex, &wr.wake, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
}

static void write_failed(int err)
{
	if (atomic_exchange(&wr.failed, 1))
		return;
	atomic_store(&gpr_inj_state.active, GPR_INJ_NONE);
	gpr_inj_say("writing %s failed: %s; tracing stopped, the program "
		    "continues",
		    wr.path, strerror(err));
}

/*
 * 1 while the log's descriptor is still the log: else tracing stops, said
 * once, and the descriptor (now the program's) is forgotten, never
 * written, truncated or closed.
 */
static int log_ours(void)
{
	if (wr.w.fd < 0)
		return 0;
	if (gpr_inj_fd_ours(&wr.log))
		return 1;
	if (!atomic_exchange(&wr.failed, 1)) {
		atomic_store(&gpr_inj_state.active, GPR_INJ_NONE);
		gpr_inj_say("descriptor %d is no longer the trace log %s (the "
			    "program closed it); tracing stopped there, the "
			    "program continues",
			    wr.w.fd, wr.path);
	}
	wr.w.fd = wr.log.fd = -1;
	return 0;
}

/* Writes the pending strings, then the n records gathered in wr.buf. */
static void flush(size_t n)
{
	if (!log_ours())
		return;
	uint32_t ns;
	const char *const *s = gpr_inj_interned(&ns);
	if (ns > wr.strings_done &&
	    gpr_trace_writer_strings(&wr.w, s + wr.strings_done,
				     ns - wr.strings_done) == 0)
		wr.strings_done = ns;
	if (n)
		gpr_trace_writer_records(&wr.w, wr.buf, n);
}

/* Moves everything in the rings to the log. */
static void drain(void)
{
	size_t n = 0;
	gpr_inj_clock_sync();
	for (struct gpr_inj_tt *tt = gpr_inj_tt_list(); tt; tt = tt->next) {
		int dead = atomic_load_explicit(
			       &tt->state, memory_order_acquire) == GPR_TT_DEAD;
		uint32_t t =
		    atomic_load_explicit(&tt->tail, memory_order_relaxed);
		uint32_t h =
		    atomic_load_explicit(&tt->head, memory_order_acquire);
		while (t != h) {
			const struct gpr_inj_slot *s =
			    &tt->ring[t & (GPR_RING_SIZE - 1)];
			struct gpr_trace_rec *r = &wr.buf[n++];
			*r = s->r;
			/* exit - entry of the converted stamps: the exit is
			 * as monotonic as the entry */
			r->t_ns = gpr_inj_clock_ns(s->r.t_ns);
			r->dur_ns =
			    gpr_inj_clock_ns(s->r.t_ns + s->r.dur_ns) - r->t_ns;
			gpr_inj_resolve(s->ip, &r->lib, &r->site);
			t++;
			if (n == BATCH) {
				atomic_store_explicit(&tt->tail, t,
						      memory_order_release);
				flush(n);
				n = 0;
			}
		}
		atomic_store_explicit(&tt->tail, t, memory_order_release);
		if (dead)
			atomic_store_explicit(&tt->state, GPR_TT_FREE,
					      memory_order_release);
	}
	flush(n);
	if (wr.w.err)
		write_failed(wr.w.err);
}

/* Forgets what the rings hold: records of calls still in flight when the
 * last session stopped, which belong to no log. */
static void discard(void)
{
	for (struct gpr_inj_tt *tt = gpr_inj_tt_list(); tt; tt = tt->next) {
		uint32_t h =
		    atomic_load_explicit(&tt->head, memory_order_acquire);
		atomic_store_explicit(&tt->tail, h, memory_order_release);
		atomic_store_explicit(&tt->dropped, 0, memory_order_relaxed);
	}
}

static uint32_t dropped(void)
{
	uint64_t d = 0;
	for (struct gpr_inj_tt *tt = gpr_inj_tt_list(); tt; tt = tt->next)
		d += atomic_load_explicit(&tt->dropped, memory_order_relaxed);
	return d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
}

/*
 * Marks the log complete and closes it, if it is still ours; after a
 * failed write only closes it (it ends on its last complete chunk).
 */
static void close_log(void)
{
	if (!log_ours())
		return;
	int failed = atomic_load(&wr.failed);
	int rc = gpr_trace_writer_close(&wr.w, gpr_inj_now(), dropped());
	wr.log.fd = -1;
	if (rc < 0 && !failed)
		gpr_inj_say("closing %s failed: %s", wr.path, strerror(-rc));
}

static void finish(void)
{
	drain();
	if (gpr_inj_state.selftime)
		gpr_inj_selftime_report();
	if (wr.closing && log_ours()) {
		const char *kv[16];
		char buf[4096];
		uint32_t n = wr.closing(kv, 16, buf, sizeof(buf));
		gpr_trace_writer_meta(&wr.w, kv, n);
	}
	close_log();
	atomic_store(&wr.closed, 1);
}

static void *writer_main(void *arg)
{
	(void)arg;
	for (;;) {
		uint32_t seen =
		    atomic_load_explicit(&wr.wake, memory_order_acquire);
		if (atomic_load(&wr.stop))
			break;
		sleep_for_work(seen);
		if (!atomic_load(&wr.failed))
			drain();
	}
	if (!atomic_load(&wr.failed)) {
		finish();
	} else { /* nothing more to write: a signal handler need not wait */
		close_log();
		atomic_store(&wr.closed, 1);
	}
	return NULL;
}

/*
 * Lets calls that saw `active` set finish their record (a thread inside
 * a long driver call is not waited for beyond 20 ms).
 */
static void settle(void)
{
	for (int i = 0; i < 20; i++) {
		int busy = 0;
		for (struct gpr_inj_tt *tt = gpr_inj_tt_list(); tt;
		     tt = tt->next)
			busy |= atomic_load_explicit(&tt->inside,
						     memory_order_acquire);
		if (!busy)
			return;
		struct timespec ts = {0, 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

static void stop_writer(void)
{
	atomic_store(&gpr_inj_state.active, GPR_INJ_NONE);
	atomic_store(&wr.stop, 1);
	gpr_inj_writer_wake();
}

static void at_exit(void)
{
	if (getpid() != wr.pid || !wr.open || atomic_load(&wr.closed) ||
	    atomic_load(&wr.stop))
		return;
	stop_writer();
	pthread_join(wr.thread, NULL);
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	size_t k = 0;
	while (k + 1 < N_FATAL && fatal[k] != sig)
		k++;
	struct sigaction *old = &wr.old[k];
	int saved = errno;
	if (old->sa_flags & SA_SIGINFO) {
		gpr_inj_writer_wake();
		old->sa_sigaction(sig, si, uc);
	} else if (old->sa_handler == SIG_IGN) {
		/* ignored before us: still ignored */
	} else if (old->sa_handler != SIG_DFL) {
		gpr_inj_writer_wake();
		old->sa_handler(sig);
	} else {
		/* The default action ends the process: flush first. */
		if (getpid() == wr.pid && wr.open) {
			stop_writer();
			for (int i = 0; i < 200 && !atomic_load(&wr.closed);
			     i++) {
				struct timespec ts = {0, 10 * 1000 * 1000};
				nanosleep(&ts, NULL);
			}
		}
		sigaction(sig, old, NULL);
		raise(sig); /* delivered when this handler returns */
	}
	errno = saved;
}

static void install(int sig, struct sigaction *old)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	if (sigaction(sig, NULL, old) != 0 || old->sa_handler == SIG_IGN)
		return;
	/*
	 * The program's handler keeps its flags and mask: without
	 * SA_RESTART (CPython's) a blocking call must still end with EINTR.
	 */
	sa.sa_flags = SA_SIGINFO |
		      (old->sa_flags &
		       (SA_RESTART | SA_ONSTACK | SA_NODEFER | SA_RESETHAND));
	sa.sa_mask = old->sa_mask;
	sigaction(sig, &sa, NULL);
}

static void in_child(void)
{
	/* A forked child must not touch the parent's log. */
	atomic_store(&gpr_inj_state.active, GPR_INJ_NONE);
}

/*
 * Leaves the log's absolute path in $GPURECLAIM_TRACE_NAMES_DIR/<pid> for
 * `gpureclaim trace`. Silent when that cannot be done: the directory is
 * gone once the traced command has ended, and a late process has nobody to
 * tell.
 */
static void tell_name(void)
{
	const char *dir = secure_getenv("GPURECLAIM_TRACE_NAMES_DIR");
	char abs[PATH_MAX], name[PATH_MAX];
	if (!dir || !*dir)
		return;
	int n;
	if (wr.path[0] == '/') {
		n = snprintf(abs, sizeof(abs), "%s", wr.path);
	} else {
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof(cwd)))
			return;
		n = snprintf(abs, sizeof(abs), "%s/%s", cwd, wr.path);
	}
	if (n < 0 || (size_t)n >= sizeof(abs) - 1)
		return;
	abs[n++] = '\n';
	int k = snprintf(name, sizeof(name), "%s/%d", dir, (int)wr.pid);
	if (k < 0 || (size_t)k >= sizeof(name))
		return;
	int fd = open(
	    name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	ssize_t w = write(fd, abs, (size_t)n);
	(void)w;
	close(fd);
}

/* What a process sets up once, at its first session. */
static void once(void)
{
	atexit(at_exit);
	pthread_atfork(NULL, NULL, in_child);
	for (size_t k = 0; k < N_FATAL; k++)
		install(fatal[k], &wr.old[k]);
}

int gpr_inj_writer_forked(void)
{
	return wr.open && getpid() != wr.pid;
}

int gpr_inj_writer_path(char *out, size_t len)
{
	int open = wr.open && getpid() == wr.pid && !atomic_load(&wr.closed);
	snprintf(out, len, "%s", open ? wr.path : "");
	return open;
}

int gpr_inj_writer_start(const char *path, int shared, const char *const *kv,
			 uint32_t n, gpr_inj_meta_fn closing)
{
	static pthread_once_t setup = PTHREAD_ONCE_INIT;
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	uint64_t real =
	    (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
	wr.pid = getpid();
	wr.open = 0;
	atomic_store(&wr.stop, 0);
	atomic_store(&wr.closed, 0);
	atomic_store(&wr.failed, 0);
	wr.strings_done = 0;
	wr.closing = closing;
	snprintf(wr.path, sizeof(wr.path), "%s", path);
	int rc = gpr_trace_writer_open(&wr.w, wr.path, (uint32_t)wr.pid, real,
				       gpr_inj_now());
	if (rc == -EEXIST && shared) {
		/* Another process of the same run has the name already. */
		snprintf(wr.path, sizeof(wr.path), "%s.%d", path, (int)wr.pid);
		rc = gpr_trace_writer_open(&wr.w, wr.path, (uint32_t)wr.pid,
					   real, gpr_inj_now());
	}
	if (rc < 0) {
		gpr_inj_say("cannot create %s: %s; this run is not traced",
			    wr.path, strerror(-rc));
		return -1;
	}
	if (gpr_inj_fd_keep(&wr.log, wr.w.fd) < 0) {
		gpr_inj_say("cannot keep %s open: %s; this run is not traced",
			    wr.path, strerror(errno));
		unlink(wr.path);
		return -1;
	}
	wr.w.fd = wr.log.fd;
	gpr_trace_writer_meta(&wr.w, kv, n);
	if (!wr.buf)
		wr.buf = malloc(BATCH * sizeof(*wr.buf));
	if (!wr.buf) {
		gpr_inj_say("out of memory; this run is not traced");
		gpr_trace_writer_close(&wr.w, gpr_inj_now(), 0);
		return -1;
	}
	discard();
	/*
	 * The writer takes no signal: not those it flushes for, nor any the
	 * program blocks in its own threads (to sigwait for them, say).
	 */
	sigset_t block, prev;
	sigfillset(&block);
	pthread_sigmask(SIG_BLOCK, &block, &prev);
	rc = pthread_create(&wr.thread, NULL, writer_main, NULL);
	pthread_sigmask(SIG_SETMASK, &prev, NULL);
	if (rc != 0) {
		gpr_inj_say("cannot start the writer thread: %s; this run is "
			    "not traced",
			    strerror(rc));
		gpr_trace_writer_close(&wr.w, gpr_inj_now(), 0);
		wr.log.fd = -1;
		return -1;
	}
	pthread_setname_np(wr.thread, "gpr-trace");
	pthread_once(&setup, once);
	tell_name();
	wr.open = 1;
	atomic_store(&gpr_inj_state.active, gpr_inj_state.backend);
	return 0;
}

int gpr_inj_writer_stop(void)
{
	if (!wr.open || getpid() != wr.pid)
		return -1;
	atomic_store(&gpr_inj_state.active, GPR_INJ_NONE);
	settle();
	if (!atomic_load(&wr.closed))
		stop_writer();
	pthread_join(wr.thread, NULL);
	wr.open = 0;
	return 0;
}
