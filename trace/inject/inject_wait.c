/*
 * Waiting time: how long a call's thread was runnable but not running
 * (on a run queue) during the call. The number is always the change of
 * schedstat's run_delay (/proc/thread-self/schedstat, second field, read
 * with pread on a descriptor the thread opens once). Reading it costs a
 * system call (0.6-0.8 us), and it can only have grown if the thread was
 * switched out, so it is read only around calls that follow or contain a
 * context switch. What tells a switch, per session (gpr_inj_state.wait):
 *
 *   GPR_INJ_WAIT_PERF    the lock word of the thread's perf task-clock
 *                        page (perf_event_open, mmap'ed read-only): the
 *                        kernel rewrites the page, and so moves the word,
 *                        each time it switches the thread in or out; one
 *                        load, about a nanosecond;
 *   GPR_INJ_WAIT_RUSAGE  getrusage(RUSAGE_THREAD)'s switch counts, where
 *                        perf events are refused (perf_event_paranoid >=
 *                        3, a container's seccomp profile): two system
 *                        calls per call;
 *   GPR_INJ_WAIT_NONE    no schedstat (or GPURECLAIM_TRACE_NO_SCHEDSTAT):
 *                        not measured.
 *
 * At entry: if the word has not moved since the last reading, that
 * reading is still run_delay; else read it. At exit: an unmoved word means
 * the thread ran throughout, the wait is 0; else read and subtract. So
 * the figure is exact, and a call pays a read only after a switch.
 * GPURECLAIM_TRACE_WAIT=perf|getrusage|none chooses the source (to
 * measure each); the default is the first that works here.
 *
 * The schedstat descriptor is checked before each read (fd.h: a program
 * may have closed it and opened a file of its own on its number): one
 * that is no longer ours is forgotten, never read or closed, and the
 * thread opens its own again.
 */
#include "wait.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fd.h"
#include "settings.h"
#include "tracer.h"

static const char *const names[] = {"none", "perf-gated", "getrusage-gated"};

const char *gpr_inj_wait_name(int mode)
{
	return mode >= 0 && mode <= 2 ? names[mode] : "none";
}

static int open_schedstat(void)
{
	return open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
}

/* This thread's schedstat, kept (fd.h): 0, or -1 when it cannot be. */
static int keep_schedstat(struct gpr_inj_tt *tt)
{
	if (gpr_inj_fd_keep(&tt->sched, open_schedstat()) < 0) {
		tt->sched_state = -1;
		return -1;
	}
	tt->sched_state = 1;
	return 0;
}

/* The thread's task-clock page, or NULL (errno set). */
static const void *open_page(void)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	/* unprivileged users may only count user space (paranoid 2) */
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1,
			      PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return NULL;
	void *p = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ,
		       MAP_SHARED, fd, 0);
	close(fd); /* the mapping keeps the event */
	return p == MAP_FAILED ? NULL : p;
}

static void close_page(const void *pg)
{
	if (pg)
		munmap((void *)pg, (size_t)sysconf(_SC_PAGESIZE));
}

static inline uint32_t lock_word(const struct gpr_inj_tt *tt)
{
	const struct perf_event_mmap_page *pg = (const void *)tt->pg;
	return *(const volatile uint32_t *)&pg->lock;
}

int gpr_inj_wait_probe(void)
{
	int want = gpr_inj_setting("GPURECLAIM_TRACE_WAIT");
	int fd = gpr_inj_switch("GPURECLAIM_TRACE_NO_SCHEDSTAT")
		     ? -1
		     : open_schedstat();
	if (fd < 0 || want == GPR_TRACE_WAIT_NONE) {
		if (fd >= 0)
			close(fd);
		return GPR_INJ_WAIT_NONE;
	}
	close(fd);
	if (want == GPR_TRACE_WAIT_GETRUSAGE)
		return GPR_INJ_WAIT_RUSAGE;
	const void *pg = open_page();
	if (!pg)
		return GPR_INJ_WAIT_RUSAGE;
	/*
	 * A sleep switches the thread out: a kernel that does not move the
	 * word then cannot gate the reads.
	 */
	const struct perf_event_mmap_page *p = pg;
	uint32_t before = *(const volatile uint32_t *)&p->lock;
	struct timespec ts = {0, 1000};
	nanosleep(&ts, NULL);
	uint32_t after = *(const volatile uint32_t *)&p->lock;
	close_page(pg);
	return after != before ? GPR_INJ_WAIT_PERF : GPR_INJ_WAIT_RUSAGE;
}

void gpr_inj_wait_thread_start(struct gpr_inj_tt *tt)
{
	tt->sched_state = 0;
	tt->sched.fd = -1;
	tt->pg = NULL;
	tt->pg_state = 0;
	tt->have_rd = 0;
}

void gpr_inj_wait_thread_end(struct gpr_inj_tt *tt)
{
	gpr_inj_fd_close(&tt->sched);
	tt->sched_state = 0;
	if (tt->pg_state == 1)
		close_page((const void *)tt->pg);
	tt->pg = NULL;
	tt->pg_state = 0;
	tt->have_rd = 0;
}

/* run_delay now (ns); -1 when it cannot be read. */
static int run_delay(struct gpr_inj_tt *tt, uint64_t *out)
{
	char buf[96];
	if (tt->sched_state < 0)
		return -1;
	if (tt->sched_state == 0 && keep_schedstat(tt) < 0)
		return -1;
	if (!gpr_inj_fd_ours(&tt->sched)) {
		/* the program's now: forget it, open our own again */
		tt->sched.fd = -1;
		if (keep_schedstat(tt) < 0)
			return -1;
	}
	ssize_t n = pread(tt->sched.fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* "<on-cpu ns> <run-queue wait ns> <timeslices>" */
	const char *p = buf;
	while (*p >= '0' && *p <= '9')
		p++;
	if (*p != ' ')
		return -1;
	p++;
	uint64_t v = 0;
	if (*p < '0' || *p > '9')
		return -1;
	while (*p >= '0' && *p <= '9')
		v = v * 10 + (uint64_t)(*p++ - '0');
	*out = v;
	if (gpr_inj_state.selftime)
		gpr_inj_st_add(&tt->st.reads, 1);
	return 0;
}

/* The thread's context switches so far (getrusage gate). */
static int switches(uint64_t *csw)
{
	struct rusage ru;
	if (getrusage(RUSAGE_THREAD, &ru) != 0)
		return -1;
	*csw = (uint64_t)ru.ru_nvcsw + (uint64_t)ru.ru_nivcsw;
	return 0;
}

/* The source this thread uses now: the session's, unless its own perf
 * page was refused. */
static int mode_of(struct gpr_inj_tt *tt)
{
	int mode = gpr_inj_state.wait;
	if (mode != GPR_INJ_WAIT_PERF)
		return mode;
	if (__builtin_expect(tt->pg_state == 0, 0)) {
		tt->pg = open_page();
		tt->pg_state = tt->pg ? 1 : -1;
		tt->have_rd = 0;
	}
	return tt->pg_state == 1 ? GPR_INJ_WAIT_PERF : GPR_INJ_WAIT_RUSAGE;
}

void gpr_inj_wait_enter(struct gpr_inj_tt *tt, struct gpr_inj_wait *w)
{
	w->ok = 0;
	switch (mode_of(tt)) {
	case GPR_INJ_WAIT_PERF: {
		uint32_t s0 = lock_word(tt);
		w->s0 = s0;
		if (tt->have_rd && s0 == tt->seq_at_read) {
			w->rd0 = tt->rd_at_read;
			w->ok = 1;
			return;
		}
		if (run_delay(tt, &w->rd0) < 0)
			return;
		w->ok = 1;
		/* a switch during the read itself: read again next time */
		uint32_t s = lock_word(tt);
		tt->seq_at_read = s;
		tt->rd_at_read = w->rd0;
		tt->have_rd = s == s0;
		return;
	}
	case GPR_INJ_WAIT_RUSAGE:
		if (switches(&w->csw0) < 0)
			return;
		if (tt->have_rd && w->csw0 == tt->csw_at_read) {
			w->rd0 = tt->rd_at_read;
			w->ok = 1;
			return;
		}
		if (run_delay(tt, &w->rd0) < 0)
			return;
		w->ok = 1;
		tt->have_rd = 1;
		tt->rd_at_read = w->rd0;
		tt->csw_at_read = w->csw0;
		return;
	}
}

int gpr_inj_wait_exit(struct gpr_inj_tt *tt, struct gpr_inj_wait *w,
		      uint64_t *ns)
{
	if (!w->ok)
		return 0;
	uint64_t rd1;
	switch (mode_of(tt)) {
	case GPR_INJ_WAIT_PERF: {
		uint32_t s1 = lock_word(tt);
		if (s1 == w->s0) { /* on the CPU throughout the call */
			*ns = 0;
			return 1;
		}
		if (run_delay(tt, &rd1) < 0)
			return 0;
		uint32_t s = lock_word(tt);
		tt->seq_at_read = s;
		tt->rd_at_read = rd1;
		tt->have_rd = s == s1;
		break;
	}
	case GPR_INJ_WAIT_RUSAGE: {
		uint64_t csw1;
		if (switches(&csw1) < 0)
			return 0;
		if (csw1 == w->csw0) {
			*ns = 0;
			return 1;
		}
		if (run_delay(tt, &rd1) < 0)
			return 0;
		tt->have_rd = 1;
		tt->rd_at_read = rd1;
		tt->csw_at_read = csw1;
		break;
	}
	default:
		return 0;
	}
	*ns = rd1 >= w->rd0 ? rd1 - w->rd0 : 0;
	return 1;
}
