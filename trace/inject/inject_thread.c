/*
 * Per-thread state of the tracer. A thread registers on its first traced
 * call (the only allocation it ever makes for tracing): it takes a retired
 * state or a new one, pushed on a lock-free list that the writer walks.
 * Thread exit retires the state; the writer drains it and frees it for
 * reuse.
 */
#include "threads.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "wait.h"

static _Atomic(struct gpr_inj_tt *) list;
static pthread_key_t key;
/* initial-exec: a plain load on every call, not a __tls_get_addr call
 * (8 bytes of the static TLS space a dlopen'ed library may use) */
static __thread struct gpr_inj_tt *self
    __attribute__((tls_model("initial-exec")));

static void retire(void *p)
{
	struct gpr_inj_tt *tt = p;
	gpr_inj_wait_thread_end(tt);
	self = NULL;
	atomic_store_explicit(&tt->state, GPR_TT_DEAD, memory_order_release);
}

/*
 * A forked child has one thread, the one that forked: its state still
 * names the parent's thread (tid, the schedstat descriptor and perf page
 * of the parent's thread). A child never records what the parent began
 * (inject_writer.c); these are reset for a session it may start itself.
 */
static void in_child(void)
{
	if (!self)
		return;
	self->tid = (uint32_t)syscall(SYS_gettid);
	gpr_inj_wait_thread_end(self);
	gpr_inj_wait_thread_start(self);
	memset(&self->memo, 0, sizeof(self->memo));
	self->stack_lo = self->stack_hi = 0;
}

int gpr_inj_tt_init(void)
{
	if (pthread_key_create(&key, retire) != 0)
		return -1;
	pthread_atfork(NULL, NULL, in_child);
	return 0;
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
	memset(&tt->memo, 0, sizeof(tt->memo));
	tt->fast_walks = 0;
	tt->stack_lo = tt->stack_hi = 0;
	gpr_inj_wait_thread_start(tt);
	self = tt;
	pthread_setspecific(key, tt);
	return tt;
}

void gpr_inj_tt_selftime(struct gpr_inj_selftime *out)
{
	memset(out, 0, sizeof(*out));
	for (struct gpr_inj_tt *tt = gpr_inj_tt_list(); tt; tt = tt->next) {
		struct gpr_inj_selftime *s = &tt->st;
#define TAKE(f)                                                                \
	out->f += atomic_exchange_explicit(&s->f, 0, memory_order_relaxed)
		TAKE(calls);
		TAKE(ns);
		TAKE(walk_ns);
		TAKE(wait_ns);
		TAKE(fast);
		TAKE(full);
		TAKE(reads);
		for (int i = 0; i <= GPR_SELF_BINS; i++)
			TAKE(hist[i]);
#undef TAKE
	}
}
