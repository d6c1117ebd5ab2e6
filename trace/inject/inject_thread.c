/*
 * Per-thread state of the injection library. A thread registers on its
 * first traced call (the only allocation it ever makes for tracing): it
 * takes a retired state or a new one, pushed on a lock-free list that the
 * writer walks. Thread exit retires the state; the writer drains it and
 * frees it for reuse.
 */
#include "inject.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static _Atomic(struct gpr_inj_tt *) list;
static pthread_key_t key;
static __thread struct gpr_inj_tt *self;
/* GPURECLAIM_TRACE_NO_SCHEDSTAT, read once at init. */
static int no_schedstat;

static void retire(void *p)
{
	struct gpr_inj_tt *tt = p;
	if (tt->sched_fd >= 0)
		close(tt->sched_fd);
	tt->sched_fd = -1;
	self = NULL;
	atomic_store_explicit(&tt->state, GPR_TT_DEAD, memory_order_release);
}

int gpr_inj_tt_init(void)
{
	no_schedstat = gpr_inj_switch("GPURECLAIM_TRACE_NO_SCHEDSTAT");
	return pthread_key_create(&key, retire) == 0 ? 0 : -1;
}

struct gpr_inj_tt *gpr_inj_tt_list(void)
{
	return atomic_load_explicit(&list, memory_order_acquire);
}

static struct gpr_inj_tt *claim(void)
{
	for (struct gpr_inj_tt *tt = gpr_inj_tt_list(); tt; tt = tt->next) {
		int expect = GPR_TT_FREE;
		if (atomic_compare_exchange_strong(&tt->state, &expect,
						   GPR_TT_OWNED))
			return tt;
	}
	struct gpr_inj_tt *tt = calloc(1, sizeof(*tt));
	if (!tt)
		return NULL;
	tt->next = atomic_load_explicit(&list, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(
	    &list, &tt->next, tt, memory_order_release, memory_order_relaxed))
		;
	return tt;
}

struct gpr_inj_tt *gpr_inj_tt_self(void)
{
	if (self)
		return self;
	struct gpr_inj_tt *tt = claim();
	if (!tt)
		return NULL;
	/* A reused state was drained: head == tail, counters kept. */
	tt->tid = (uint32_t)syscall(SYS_gettid);
	tt->depth = 0;
	tt->ctx_next = 0;
	memset(tt->ctx_key, 0, sizeof(tt->ctx_key));
	tt->sched_fd = -1;
	tt->have_last = 0;
	if (!no_schedstat)
		tt->sched_fd =
		    open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
	self = tt;
	pthread_setspecific(key, tt);
	return tt;
}

int gpr_inj_tt_wait_now(struct gpr_inj_tt *tt, uint64_t *wait, uint64_t *csw)
{
	struct rusage ru;
	if (tt->sched_fd < 0 || getrusage(RUSAGE_THREAD, &ru) != 0)
		return -1;
	*csw = (uint64_t)ru.ru_nvcsw + (uint64_t)ru.ru_nivcsw;
	if (tt->have_last && *csw == tt->last_csw) {
		*wait = tt->last_wait;
		return 0;
	}
	if (gpr_inj_tt_run_delay(tt, wait) < 0)
		return -1;
	tt->have_last = 1;
	tt->last_wait = *wait;
	tt->last_csw = *csw;
	return 0;
}

int gpr_inj_tt_run_delay(struct gpr_inj_tt *tt, uint64_t *out)
{
	char buf[96];
	if (tt->sched_fd < 0)
		return -1;
	ssize_t n = pread(tt->sched_fd, buf, sizeof(buf) - 1, 0);
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
	return 0;
}

void gpr_inj_selftime_report(void)
{
	uint64_t calls = 0, ns = 0, walk = 0, wait = 0, fast = 0, full = 0;
	for (struct gpr_inj_tt *tt = gpr_inj_tt_list(); tt; tt = tt->next) {
		calls +=
		    atomic_load_explicit(&tt->st.calls, memory_order_relaxed);
		ns += atomic_load_explicit(&tt->st.ns, memory_order_relaxed);
		walk +=
		    atomic_load_explicit(&tt->st.walk_ns, memory_order_relaxed);
		wait +=
		    atomic_load_explicit(&tt->st.wait_ns, memory_order_relaxed);
		fast +=
		    atomic_load_explicit(&tt->st.fast, memory_order_relaxed);
		full +=
		    atomic_load_explicit(&tt->st.full, memory_order_relaxed);
	}
	double n = calls ? (double)calls : 1.0;
	gpr_inj_say("self time: %llu calls, %.0f ns per call in the callbacks "
		    "(stack walk %.0f, waiting-time reads %.0f); stack walks: "
		    "%llu fast, %llu full, %llu fast found wrong and redone",
		    (unsigned long long)calls, (double)ns / n, (double)walk / n,
		    (double)wait / n, (unsigned long long)fast,
		    (unsigned long long)full,
		    (unsigned long long)gpr_inj_callsite_redone());
}
