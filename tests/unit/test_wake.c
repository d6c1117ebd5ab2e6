/*
 * Resume on demand's two ways of seeing a suspended process's demand
 * (docs/suspend.md): from outside, the threads that wait inside a CUDA
 * call (src/cuda_waiters.c), on a forked target of the simulated driver
 * whose call waits for the checkpoint's unlock; from inside, the process's
 * page (trace/inject/wake.c, compiled in here) and the watcher's side of
 * it (src/wake_page.c): found, held, asked, answered, a forked child's own.
 * Waits are for states, bounded by a minute (a hang, never a measure).
 * Each test runs in its own process (support.c).
 */
#include "support.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../trace/inject/wake.h"
#include "cuda_waiters.h"
#include "gpureclaim.h"
#include "gpureclaim_wake.h"
#include "suspend.h"
#include "suspend_host.h"
#include "wake_page.h"

#define HANG_S 60.0

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void pause_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/*
 * A target that takes commands one byte at a time on `cmd` and answers on
 * `ans`: 'a' allocates 1 MiB (waits while it is locked) and answers 'a'
 * or 'x'; 'p' makes its page ('p' or 'x'); 'k' asks (its answer: 'R'
 * resumed, '0' nothing to do, 'N' not resumed); 'f' forks a child that
 * makes its own page and answers its pid (4 bytes), then waits; 'q' quits.
 */
struct target {
	int pid, cmd, ans;
};

static void serve(void *lib, int cmd, int ans)
{
	char c;
	while (read(cmd, &c, 1) == 1) {
		char r = 'x';
		unsigned long long p;
		if (c == 'a')
			r = sim_cuda_alloc(lib, 1 << 20, &p) == 0 ? 'a' : 'x';
		else if (c == 'p')
			r = gpr_inj_wake_start() == 0 ? 'p' : 'x';
		else if (c == 'k') {
			int k = gpr_inj_wake_ask(0);
			r = k == 1 ? 'R' : k == 0 ? '0' : 'N';
		} else if (c == 'f') {
			int fds[2];
			if (pipe(fds) != 0)
				_exit(4);
			pid_t kid = fork();
			if (kid == 0) {
				/* the fork handler made it a page of its own */
				char z;
				if (read(fds[0], &z, 1) < 0)
					_exit(0);
				_exit(0);
			}
			int32_t v = (int32_t)kid;
			if (write(ans, &v, 4) != 4)
				_exit(3);
			continue; /* fds[1] kept: the child waits for our end */
		} else if (c == 'q') {
			_exit(0);
		}
		if (write(ans, &r, 1) != 1)
			_exit(3);
	}
	_exit(0);
}

static struct target start(void *lib)
{
	int cmd[2], ans[2], up[2];
	assert_int_equal(pipe(cmd), 0);
	assert_int_equal(pipe(ans), 0);
	assert_int_equal(pipe(up), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(cmd[1]);
		close(ans[0]);
		close(up[0]);
		int ok = ((int (*)(unsigned))sim_sym(lib, "cuInit"))(0) == 0 &&
			 sim_cuda_open_device(lib, 0) == 0;
		unsigned long long p;
		ok = ok && sim_cuda_alloc(lib, 8 << 20, &p) == 0;
		char c = ok ? 'y' : 'n';
		if (write(up[1], &c, 1) != 1)
			_exit(3);
		serve(lib, cmd[0], ans[1]);
	}
	close(cmd[0]);
	close(ans[1]);
	close(up[1]);
	char c = 0;
	assert_int_equal(read(up[0], &c, 1), 1);
	assert_int_equal(c, 'y');
	close(up[0]);
	return (struct target){(int)pid, cmd[1], ans[0]};
}

static void say(struct target *t, char c)
{
	assert_int_equal(write(t->cmd, &c, 1), 1);
}

static char answer(struct target *t)
{
	char c = 0;
	assert_int_equal(read(t->ans, &c, 1), 1);
	return c;
}

/* A target on the sim that has made its page. */
static struct target with_page(void)
{
	sim_setup("context=16MiB");
	struct target t = start(sim_cuda_load());
	say(&t, 'p');
	assert_int_equal(answer(&t), 'p');
	return t;
}

static void stop(struct target *t)
{
	say(t, 'q');
	int st;
	assert_int_equal(waitpid(t->pid, &st, 0), t->pid);
	close(t->cmd);
	close(t->ans);
}

/* A suspender of the sim for this process (cuInit), and its context. */
struct ctl {
	gpr_ctx *ctx;
	gpr__suspender *s;
};

static struct ctl controller(void)
{
	struct ctl c;
	char err[512];
	assert_int_equal(gpr_open(NULL, &c.ctx), 0);
	assert_int_equal(gpr__suspender_open(c.ctx, &c.s, err, sizeof err), 0);
	return c;
}

static void suspend(struct ctl *c, int pid)
{
	struct gpr__suspend_report r;
	assert_int_equal(gpr__suspend(c->s, pid, NULL, &r), 0);
}

static void resume(struct ctl *c, int pid)
{
	struct gpr__suspend_report r;
	assert_int_equal(gpr__resume(c->s, pid, NULL, &r), 0);
}

/* A look until it finds `want` waiting threads (a minute at most). */
static int look_until(gpr__waiters *w, int want, struct gpr__wait_sig *sig)
{
	char err[256];
	double end = now() + HANG_S;
	for (;;) {
		int n = gpr__waiters_look(w, sig, 1, err, sizeof err);
		if (n == want || now() > end)
			return n;
		pause_ms(10);
	}
}

/* Whether thread tid of pid is blocked in system call nr, waiting for it
 * (a minute at most): /proc/PID/task/TID/syscall's first field. */
static int in_syscall(int pid, int tid, long nr)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", pid, tid);
	for (double end = now() + HANG_S; now() < end; pause_ms(10)) {
		FILE *f = fopen(path, "r");
		long got = -2;
		if (f) {
			if (fscanf(f, "%ld", &got) != 1)
				got = -2;
			fclose(f);
		}
		if (got == nr)
			return 1;
	}
	return 0;
}

/* ---------------- from outside ---------------- */

static void test_a_call_waiting_for_the_unlock_is_seen(void **state)
{
	(void)state;
	sim_setup("context=16MiB");
	void *lib = sim_cuda_load();
	struct target t = start(lib);
	struct ctl c = controller();
	gpr__waiters *w = NULL;
	char err[256];
	assert_int_equal(gpr__waiters_open(t.pid, NULL, &w, err, sizeof err),
			 0);
	/* running: the sim's checkpoint thread waits inside its libcuda
	 * (the driver's restore thread). The main thread, blocked reading
	 * its commands, may show stale return addresses into the driver from
	 * its earlier calls (it does in the ASan and TSan builds, whose
	 * frames are larger): suspend's baseline sets such a wait aside, as
	 * here, so only a wait at a new place counts. The baseline is taken
	 * once both threads are where they stay (a loaded machine may not
	 * have them there yet when the target says it is up). */
	struct gpr__wait_sig all[8];
	int tid = gpr__suspend_restore_thread(c.s, t.pid);
	assert_true(tid > 0 && tid != t.pid);
	assert_true(in_syscall(t.pid, t.pid, SYS_read));
	int n = 0, restore_seen = 0;
	for (double end = now() + HANG_S; !restore_seen && now() < end;) {
		n = gpr__waiters_all(w, all, 8, err, sizeof err);
		for (int i = 0; i < n; i++)
			restore_seen |= all[i].tid == tid;
		if (!restore_seen)
			pause_ms(10);
	}
	assert_true(restore_seen);
	assert_true(n >= 1 && n <= 2);
	for (int i = 0; i < n; i++) {
		assert_true(all[i].returns >= 1);
		if (all[i].tid != tid) {
			assert_int_equal(all[i].tid, t.pid);
			assert_int_equal(gpr__waiters_ignore_wait(w, &all[i]),
					 0);
		}
	}
	assert_int_equal(gpr__waiters_ignore_thread(w, tid), 0);
	assert_int_equal(gpr__waiters_look(w, all, 8, err, sizeof err), 0);

	suspend(&c, t.pid);
	assert_int_equal(gpr__waiters_look(w, all, 8, err, sizeof err), 0);
	say(&t, 'a'); /* waits for the unlock */
	struct gpr__wait_sig sig;
	assert_int_equal(look_until(w, 1, &sig), 1);
	assert_int_equal(sig.tid, t.pid); /* its main thread, in the sim */
	assert_true(sig.returns >= 1 && sig.nr >= 0 && sig.sp != 0);
	/* the same wait, seen before: set aside */
	assert_int_equal(gpr__waiters_ignore_wait(w, &sig), 0);
	assert_int_equal(gpr__waiters_look(w, all, 8, err, sizeof err), 0);
	resume(&c, t.pid);
	assert_int_equal(answer(&t), 'a');

	struct gpr__waiters_stats st;
	gpr__waiters_stats(w, &st);
	assert_true(st.looks >= 4 && st.threads >= st.looks);
	assert_true(st.stacks >= 2 && st.stack_bytes > 0);
	gpr__waiters_close(w);
	stop(&t);
	gpr__suspender_close(c.s);
	gpr_close(c.ctx);
}

static void test_a_narrow_window_or_another_library_sees_nothing(void **state)
{
	(void)state;
	sim_setup("context=16MiB");
	void *lib = sim_cuda_load();
	struct target t = start(lib);
	struct ctl c = controller();
	suspend(&c, t.pid);
	say(&t, 'a');
	char err[256];
	struct gpr__wait_sig sig;
	gpr__waiters *w = NULL;
	struct gpr__waiters_opts o = {.window = 0, .min_returns = 1000};
	assert_int_equal(gpr__waiters_open(t.pid, &o, &w, err, sizeof err), 0);
	gpr__waiters *other = NULL;
	struct gpr__waiters_opts libc = {.library = "libnvidia-ml.so"};
	assert_int_equal(
	    gpr__waiters_open(t.pid, &libc, &other, err, sizeof err),
	    GPR_E_NOT_LOADED);
	assert_non_null(strstr(err, "has no libnvidia-ml.so mapped"));
	gpr__waiters *all = NULL;
	assert_int_equal(gpr__waiters_open(t.pid, NULL, &all, err, sizeof err),
			 0);
	int tid = gpr__suspend_restore_thread(c.s, t.pid);
	gpr__waiters_ignore_thread(all, tid);
	assert_int_equal(look_until(all, 1, &sig), 1);
	/* a thousand return addresses: no stack holds as many */
	assert_int_equal(gpr__waiters_look(w, &sig, 1, err, sizeof err), 0);
	resume(&c, t.pid);
	assert_int_equal(answer(&t), 'a');
	gpr__waiters_close(w);
	gpr__waiters_close(all);
	stop(&t);
	gpr__suspender_close(c.s);
	gpr_close(c.ctx);
}

static void test_looking_at_what_is_not_there(void **state)
{
	(void)state;
	char err[256];
	gpr__waiters *w = NULL;
	/* a process without the driver: sleep, exec'd */
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		execlp("sleep", "sleep", "60", (char *)NULL);
		_exit(127);
	}
	double end = now() + HANG_S;
	int rc;
	do { /* until the exec is done */
		pause_ms(5);
		rc = gpr__waiters_open(pid, NULL, &w, err, sizeof err);
		if (rc == 0)
			gpr__waiters_close(w);
	} while (rc != GPR_E_NOT_LOADED && now() < end);
	assert_int_equal(rc, GPR_E_NOT_LOADED);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	/* gone */
	assert_int_equal(gpr__waiters_open(pid, NULL, &w, err, sizeof err),
			 GPR_E_NOT_FOUND);
	if (geteuid() != 0) {
		/* pid 1 is root's: not ours to read */
		assert_int_equal(
		    gpr__waiters_open(1, NULL, &w, err, sizeof err),
		    GPR_E_PERM);
		assert_non_null(strstr(err, "only its user"));
	}
}

static void test_a_process_gone_during_the_watch(void **state)
{
	(void)state;
	sim_setup("context=16MiB");
	void *lib = sim_cuda_load();
	struct target t = start(lib);
	char err[256];
	gpr__waiters *w = NULL;
	assert_int_equal(gpr__waiters_open(t.pid, NULL, &w, err, sizeof err),
			 0);
	stop(&t);
	struct gpr__wait_sig sig;
	assert_int_equal(gpr__waiters_look(w, &sig, 1, err, sizeof err),
			 GPR_E_NOT_FOUND);
	gpr__waiters_close(w);
}

/* ---------------- from inside ---------------- */

static void test_the_page_found_held_asked_and_answered(void **state)
{
	(void)state;
	sim_setup("context=16MiB");
	void *lib = sim_cuda_load();
	struct target t = start(lib);
	char err[256];
	gpr__wake *w = NULL;
	uint64_t start_time = gpr__proc_start(t.pid);
	assert_int_equal(gpr__wake_find(t.pid, start_time, &w, err, sizeof err),
			 GPR_E_NOT_FOUND);
	assert_non_null(strstr(err, "keeps no page"));
	say(&t, 'p');
	assert_int_equal(answer(&t), 'p');
	/* another start time: not that process's page */
	assert_int_equal(
	    gpr__wake_find(t.pid, start_time + 1, &w, err, sizeof err),
	    GPR_E_NOT_FOUND);
	assert_int_equal(gpr__wake_find(t.pid, start_time, &w, err, sizeof err),
			 0);
	/* not held: asking is nothing to do */
	say(&t, 'k');
	assert_int_equal(answer(&t), '0');
	gpr__wake_hold(w);
	assert_int_equal(gpr__wake_wait(w, 0), 0);
	say(&t, 'k');
	assert_int_equal(gpr__wake_wait(w, HANG_S), 1); /* woken at once */
	assert_int_equal(gpr__wake_asks(w), 1);
	gpr__wake_answer(w, 0); /* not resumed: its call goes on, and waits */
	assert_int_equal(answer(&t), 'N');
	say(&t, 'k');
	assert_int_equal(gpr__wake_wait(w, HANG_S), 1);
	gpr__wake_answer(w, 1);
	assert_int_equal(answer(&t), 'R');
	say(&t, 'k'); /* running again: nothing to ask */
	assert_int_equal(answer(&t), '0');
	gpr__wake_hold(w);
	gpr__wake_release(w); /* the watcher leaves: calls go on */
	say(&t, 'k');
	assert_int_equal(answer(&t), '0');
	stop(&t);
}

static void test_an_ask_whose_watcher_is_gone_goes_on(void **state)
{
	(void)state;
	struct target t = with_page();
	/* a watcher in a child that holds the page, then dies unanswered */
	int up[2];
	assert_int_equal(pipe(up), 0);
	fflush(NULL);
	pid_t watcher = fork();
	if (watcher == 0) {
		char err[256];
		gpr__wake *w = NULL;
		if (gpr__wake_find(t.pid, 0, &w, err, sizeof err) != 0)
			_exit(1);
		gpr__wake_hold(w);
		char c = 'h';
		if (write(up[1], &c, 1) != 1 || !gpr__wake_wait(w, HANG_S))
			_exit(2);
		_exit(0); /* asked, never answers */
	}
	char c = 0;
	assert_int_equal(read(up[0], &c, 1), 1);
	say(&t, 'k');
	int st;
	assert_int_equal(waitpid(watcher, &st, 0), watcher);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(answer(&t), 'N'); /* within a second of its end */
	say(&t, 'k');			   /* and the page no longer asks */
	assert_int_equal(answer(&t), '0');
	stop(&t);
}

static void test_a_forked_child_has_a_page_of_its_own(void **state)
{
	(void)state;
	struct target t = with_page();
	say(&t, 'f');
	int32_t kid = 0;
	assert_int_equal(read(t.ans, &kid, 4), 4);
	char err[256];
	gpr__wake *w = NULL;
	double end = now() + HANG_S;
	int rc;
	do { /* its fork handler ran before fork() returned in it */
		rc = gpr__wake_find(kid, gpr__proc_start(kid), &w, err,
				    sizeof err);
	} while (rc != 0 && now() < end && (pause_ms(5), 1));
	assert_int_equal(rc, 0);
	gpr__wake_release(w);
	/* the parent's still its own */
	assert_int_equal(gpr__wake_find(t.pid, 0, &w, err, sizeof err), 0);
	gpr__wake_release(w);
	kill(kid, SIGKILL);
	stop(&t);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_a_call_waiting_for_the_unlock_is_seen),
	    cmocka_unit_test(
		test_a_narrow_window_or_another_library_sees_nothing),
	    cmocka_unit_test(test_looking_at_what_is_not_there),
	    cmocka_unit_test(test_a_process_gone_during_the_watch),
	    cmocka_unit_test(test_the_page_found_held_asked_and_answered),
	    cmocka_unit_test(test_an_ask_whose_watcher_is_gone_goes_on),
	    cmocka_unit_test(test_a_forked_child_has_a_page_of_its_own),
	};
	return gpr_test_main(argc, argv, "wake", tests,
			     sizeof tests / sizeof tests[0]);
}
