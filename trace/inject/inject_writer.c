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
 * child), and on SIGINT/SIGTERM when the signal's previous action was the
 * default one (the process is about to die): the handler asks the writer
 * for a final flush, waits for it (at most 2 s), restores the previous
 * action and re-raises, so the exit status is what it would have been. A
 * previous handler of the program is called as before. A process may run
 * several sessions one after the other, each its own log.
 *
 * The log's real name (NAME, or NAME.<pid> when NAME is taken) is told to
 * `gpureclaim trace` through a file named by the pid in the private
 * directory $GPURECLAIM_TRACE_NAMES_DIR, so it never guesses the name
 * (the first session of a process: the one `gpureclaim trace` started, or
 * a program's first under --dormant).
 */
#include "inject.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../format/log_write.h"

#define BATCH 16384

static struct {
	struct gpr_trace_writer w;
	char path[PATH_MAX];
	pthread_t thread;
	int efd;
	pid_t pid;	       /* the process that opened the log */
	int open;	       /* a session's log is open (control calls) */
	_Atomic int stop;      /* 1: finish and close */
	_Atomic int closed;    /* the log is closed */
	_Atomic int failed;    /* a write failed: tracing stopped */
	uint32_t strings_done; /* interned strings written */
	struct gpr_trace_rec *buf;
	gpr_inj_meta_fn closing; /* the closing META lines */
	struct sigaction old_int, old_term;
} wr = {.efd = -1};

void gpr_inj_writer_wake(void)
{
	uint64_t one = 1;
	if (wr.efd >= 0) {
		ssize_t k = write(wr.efd, &one, sizeof(one));
		(void)k;
	}
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

/* Writes the pending strings, then the n records gathered in wr.buf. */
static void flush(size_t n)
{
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
			r->t_ns = gpr_inj_clock_ns(s->r.t_ns);
			r->dur_ns = gpr_inj_ticks_ns(s->r.dur_ns);
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

static void finish(void)
{
	drain();
	if (gpr_inj_state.selftime)
		gpr_inj_selftime_report();
	if (wr.closing) {
		const char *kv[16];
		char buf[4096];
		uint32_t n = wr.closing(kv, 16, buf, sizeof(buf));
		gpr_trace_writer_meta(&wr.w, kv, n);
	}
	int rc = gpr_trace_writer_close(&wr.w, gpr_inj_now(), dropped());
	if (rc < 0 && !atomic_load(&wr.failed))
		gpr_inj_say("closing %s failed: %s", wr.path, strerror(-rc));
	atomic_store(&wr.closed, 1);
}

static void *writer_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&wr.stop)) {
		/* Wakes on the eventfd or after 10 ms. */
		struct pollfd pfd = {wr.efd, POLLIN, 0};
		if (poll(&pfd, 1, 10) > 0) {
			uint64_t v;
			ssize_t k = read(wr.efd, &v, sizeof(v));
			(void)k;
		}
		if (!atomic_load(&wr.failed))
			drain();
	}
	if (!atomic_load(&wr.failed))
		finish();
	else /* nothing more to write: a signal handler need not wait */
		atomic_store(&wr.closed, 1);
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
	struct sigaction *old = sig == SIGINT ? &wr.old_int : &wr.old_term;
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
	install(SIGINT, &wr.old_int);
	install(SIGTERM, &wr.old_term);
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
	gpr_trace_writer_meta(&wr.w, kv, n);
	if (!wr.buf)
		wr.buf = malloc(BATCH * sizeof(*wr.buf));
	if (wr.efd < 0)
		wr.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!wr.buf || wr.efd < 0) {
		gpr_inj_say("out of resources; this run is not traced");
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
