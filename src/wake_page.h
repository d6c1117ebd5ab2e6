/*
 * The watcher's side of a process's page for resume on demand
 * (wake_page.c; the page and its protocol: include/gpureclaim_wake.h; the
 * process's side: trace/inject/wake.c). A process under `gpureclaim run
 * --resume-on-demand`, or with an agent in a notebook, keeps a memfd
 * named "gpureclaim-wake"; the watcher finds it in /proc/PID/fd (the
 * process's user, the process dumpable, or root; with Yama's ptrace_scope
 * 1 too: reading descriptors is not attaching), or as root through
 * /proc/PID/map_files where the program closed the descriptor. A page is
 * believed only when it says it is that process's (its pid and start
 * time).
 *
 * Internal. One thread at a time.
 */
#ifndef GPR_WAKE_PAGE_H
#define GPR_WAKE_PAGE_H

#include <stddef.h>
#include <stdint.h>

#define GPR__WAKE_PAGES 4

typedef struct gpr__wake gpr__wake;

/*
 * The pages of process pid, started at `start` (its /proc/PID/stat start
 * time). 0 with at least one; GPR_E_NOT_FOUND when it keeps none,
 * GPR_E_PERM when its descriptors may not be read (err says why).
 */
int gpr__wake_find(int pid, uint64_t start, gpr__wake **out, char *err,
		   size_t errlen);

/* Holds the process: each page SUSPENDED, this process its watcher. */
void gpr__wake_hold(gpr__wake *w);

/*
 * Waits at most `seconds` for the process to ask (a futex on the first
 * page's word, woken by the ask). 1 when a page is asked (at once when it
 * was already), 0 when not.
 */
int gpr__wake_wait(gpr__wake *w, double seconds);

/* Answers every asking call: resumed (the pages RUNNING) or not (the
 * pages SUSPENDED again: its call goes on into the driver and waits). */
void gpr__wake_answer(gpr__wake *w, int resumed);

/* How often the process asked, over its pages. */
uint32_t gpr__wake_asks(const gpr__wake *w);

/* Lets go: pages still held by this watcher are RUNNING again (their
 * waiting calls answered), then unmapped. NULL is fine. */
void gpr__wake_release(gpr__wake *w);

#endif /* GPR_WAKE_PAGE_H */
