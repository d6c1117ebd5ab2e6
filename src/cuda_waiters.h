/*
 * Which threads of another process wait inside a CUDA driver call, seen
 * from outside (cuda_waiters.c): what the watcher of a suspended process
 * looks for to resume it on demand (docs/suspend.md, "Resume on demand").
 *
 * A locked process's CUDA call waits in the kernel (a futex on the H200,
 * its user PC in the C library, as idle threads are), so the system call
 * alone tells nothing. Its stack does: a thread counts when it is in a
 * system call and its stack, from the stack pointer up (at most `window`
 * bytes, and never past the mapping that holds it), holds at least
 * `min_returns` return addresses into the driver's code: words that point
 * into an executable mapping of the driver's file and, on x86-64 and
 * AArch64, follow a call instruction there. Measured on the H200: 41
 * words into libcuda's code in the top 64 KiB of a waiting Torch call's
 * stack, 0 while its loop slept, 0 on the driver's own threads.
 *
 * Threads set aside are never counted: the driver's own (its restore
 * thread, by id) and waits seen before the suspension (a thread waiting
 * at the same place then: the same system call, first argument, stack
 * pointer and user PC), which is how a driver thread that waits inside
 * libcuda at rest is told from a call that waits for the unlock.
 *
 * Reading another process's syscall and memory files takes what ptrace
 * takes (PTRACE_MODE_ATTACH): the same user and a dumpable process, or
 * root; with Yama's ptrace_scope 1 (Ubuntu's default) only root and the
 * process's ancestors. Otherwise open and look say GPR_E_PERM, and why.
 *
 * Cost, bounded: one directory read of /proc/PID/task and one small read
 * per thread each look; a stack is read (at most `window` bytes) only
 * when its thread is in a system call at a place it was not at the last
 * look; /proc/PID/maps again only when a stack lies in a mapping not
 * seen. At most GPR__WAITERS_THREADS threads a look.
 *
 * Internal. A gpr__waiters is used by one thread at a time.
 */
#ifndef GPR_CUDA_WAITERS_H
#define GPR_CUDA_WAITERS_H

#include <stddef.h>
#include <stdint.h>

#define GPR__WAITERS_WINDOW (64u << 10)
#define GPR__WAITERS_THREADS 4096

struct gpr__waiters_opts {
	size_t window;	      /* stack bytes read (0: GPR__WAITERS_WINDOW) */
	unsigned min_returns; /* return addresses that make a wait (0: 1) */
	const char *library;  /* the driver's file name begins so (NULL:
			       * "libcuda.so") */
};

/* Where a thread waits: its system call, first argument, stack pointer
 * and user PC, from /proc/PID/task/TID/syscall. */
struct gpr__wait_sig {
	int tid;
	long nr;
	uint64_t arg0, sp, pc;
	unsigned returns; /* return addresses into the driver (look only) */
};

/* What the looks cost so far. */
struct gpr__waiters_stats {
	uint64_t looks, threads, stacks, stack_bytes, maps_reads;
};

typedef struct gpr__waiters gpr__waiters;

/*
 * Starts looking at pid: its maps read and its memory opened. 0;
 * GPR_E_NOT_FOUND (no such process), GPR_E_PERM (not allowed to read its
 * threads: err says why and what would allow it), GPR_E_NOT_LOADED (the
 * driver's file is not mapped in it), GPR_E_NOMEM.
 */
int gpr__waiters_open(int pid, const struct gpr__waiters_opts *o,
		      gpr__waiters **out, char *err, size_t errlen);
void gpr__waiters_close(gpr__waiters *w);

/* Sets aside a thread for good (the driver's restore thread). */
int gpr__waiters_ignore_thread(gpr__waiters *w, int tid);
/* Sets aside a wait seen before: that thread, while it waits there. */
int gpr__waiters_ignore_wait(gpr__waiters *w, const struct gpr__wait_sig *s);

/*
 * One look: the number of threads that wait inside the driver now (not
 * set aside), the first `max` of them into sigs; or GPR_E_NOT_FOUND when
 * the process is gone, GPR_E_PERM (err) when it may no longer be read.
 * A thread that ends during the look is skipped.
 */
int gpr__waiters_look(gpr__waiters *w, struct gpr__wait_sig *sigs, size_t max,
		      char *err, size_t errlen);

/* The same look, set-aside threads included: every thread that shows the
 * driver's return addresses now, for a baseline taken before a lock. */
int gpr__waiters_all(gpr__waiters *w, struct gpr__wait_sig *sigs, size_t max,
		     char *err, size_t errlen);

void gpr__waiters_stats(const gpr__waiters *w, struct gpr__waiters_stats *s);

#endif /* GPR_CUDA_WAITERS_H */
