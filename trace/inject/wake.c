/*
 * The process's page for resume on demand (wake.h; the protocol:
 * include/gpureclaim_wake.h). A memfd of one page, mapped shared and kept
 * open on a high descriptor (fd.h: a program that closes descriptors it
 * did not open never makes us touch its own), so the watcher finds it in
 * /proc/PID/fd. A forked child makes its own page in the fork handler
 * (system calls only), since the parent's is the parent's.
 */
#include "wake.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fd.h"
#include "gpureclaim_wake.h"

_Static_assert(sizeof(struct gpureclaim_wake_page) <= GPURECLAIM_WAKE_SIZE,
	       "the page's layout fits its page");
_Static_assert(offsetof(struct gpureclaim_wake_page, state) == 24,
	       "the page's layout is the header's");

uint32_t *gpr_inj_wake_word;

static struct gpureclaim_wake_page *page; /* atomic */
static struct gpr_inj_fd page_fd = {-1, 0, 0};
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

/* Field 22 of /proc/self/stat (after the command's closing ')'): read
 * with system calls only, as the fork handler must. 0 when unreadable. */
static uint64_t self_start(void)
{
	char buf[1024];
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	char *p = NULL;
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == ')')
			p = buf + i;
	if (!p)
		return 0;
	/* after ") ": field 3 is the state; 22 is 19 fields further */
	int field = 2;
	char *end = buf + n;
	for (p++; p < end && field < 22; p++)
		if (*p == ' ')
			field++;
	uint64_t v = 0;
	for (; p < end && *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	return v;
}

/* A new page for this process; its fields set, the word published last.
 * System calls only (the fork handler calls it). */
static int make_page(void)
{
	int fd =
	    (int)syscall(SYS_memfd_create, GPURECLAIM_WAKE_NAME, MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct gpr_inj_fd kept;
	if (ftruncate(fd, GPURECLAIM_WAKE_SIZE) != 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	void *m = mmap(NULL, GPURECLAIM_WAKE_SIZE, PROT_READ | PROT_WRITE,
		       MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		int e = errno;
		close(fd);
		return -e;
	}
	if (gpr_inj_fd_keep(&kept, fd) != 0) {
		munmap(m, GPURECLAIM_WAKE_SIZE);
		return -EBADF;
	}
	struct gpureclaim_wake_page *p = m;
	p->magic = GPURECLAIM_WAKE_MAGIC;
	p->version = GPURECLAIM_WAKE_VERSION;
	p->pid = (int32_t)getpid();
	p->start = self_start();
	page_fd = kept;
	__atomic_store_n(&page, p, __ATOMIC_RELEASE);
	__atomic_store_n(&gpr_inj_wake_word, &p->state, __ATOMIC_RELEASE);
	return 0;
}

/*
 * In a forked child: the parent's page is left alone (its mapping
 * dropped, its descriptor closed only while it is still ours) and the
 * child gets one of its own. A child that cannot make one has none: its
 * calls are not checked, and a watcher finds it from outside alone.
 */
static void child(void)
{
	if (!page)
		return;
	__atomic_store_n(&gpr_inj_wake_word, NULL, __ATOMIC_RELAXED);
	munmap(page, GPURECLAIM_WAKE_SIZE);
	page = NULL;
	gpr_inj_fd_close(&page_fd);
	pthread_mutex_init(&start_lock, NULL);
	make_page();
}

static void register_child(void)
{
	pthread_atfork(NULL, NULL, child);
}

int gpr_inj_wake_start(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, register_child);
	pthread_mutex_lock(&start_lock);
	int rc = page ? 0 : make_page();
	pthread_mutex_unlock(&start_lock);
	return rc;
}

int gpr_inj_wake_state(void)
{
	uint32_t *w = __atomic_load_n(&gpr_inj_wake_word, __ATOMIC_ACQUIRE);
	return w ? (int)__atomic_load_n(w, __ATOMIC_ACQUIRE)
		 : GPURECLAIM_WAKE_RUNNING;
}

static long futex(uint32_t *word, int op, uint32_t val, double seconds)
{
	struct timespec ts = {
	    (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
	return syscall(SYS_futex, word, op, val, seconds > 0 ? &ts : NULL, NULL,
		       0);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Whether the watcher that holds the page is still there (root's answers
 * EPERM: it is). */
static int watcher_alive(const struct gpureclaim_wake_page *p)
{
	int32_t w = __atomic_load_n(&p->watcher, __ATOMIC_ACQUIRE);
	return w > 0 && (kill(w, 0) == 0 || errno != ESRCH);
}

int gpr_inj_wake_ask(double max_seconds)
{
	struct gpureclaim_wake_page *p =
	    __atomic_load_n(&page, __ATOMIC_ACQUIRE);
	if (!p)
		return 0;
	int saved = errno; /* the program's errno, as the call found it */
	uint32_t seen = __atomic_load_n(&p->answer, __ATOMIC_ACQUIRE);
	uint32_t st = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE);
	if (st == GPURECLAIM_WAKE_RUNNING)
		return 0;
	if (st == GPURECLAIM_WAKE_SUSPENDED) {
		uint32_t want = GPURECLAIM_WAKE_SUSPENDED;
		if (__atomic_compare_exchange_n(
			&p->state, &want, GPURECLAIM_WAKE_ASKED, 0,
			__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			__atomic_fetch_add(&p->asks, 1, __ATOMIC_RELAXED);
		futex(&p->state, FUTEX_WAKE, INT_MAX, 0);
	}
	double t0 = now();
	int rc = -1;
	for (;;) {
		if (__atomic_load_n(&p->answer, __ATOMIC_ACQUIRE) != seen) {
			rc = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) ==
				     GPURECLAIM_WAKE_RUNNING
				 ? 1
				 : -1;
			break;
		}
		double left = max_seconds > 0 ? t0 + max_seconds - now() : 1;
		if (left <= 0)
			break;
		futex(&p->answer, FUTEX_WAIT, seen, left < 1 ? left : 1);
		if (__atomic_load_n(&p->answer, __ATOMIC_ACQUIRE) != seen)
			continue;
		if (!watcher_alive(p)) {
			/* nobody will answer: later calls need not ask */
			uint32_t s = GPURECLAIM_WAKE_ASKED;
			__atomic_compare_exchange_n(
			    &p->state, &s, GPURECLAIM_WAKE_RUNNING, 0,
			    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
			s = GPURECLAIM_WAKE_SUSPENDED;
			__atomic_compare_exchange_n(
			    &p->state, &s, GPURECLAIM_WAKE_RUNNING, 0,
			    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
			break;
		}
	}
	errno = saved;
	return rc;
}
