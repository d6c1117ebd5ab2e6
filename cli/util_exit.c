/*
 * How a one-shot command that loaded NVML ends (`ps`, `version`).
 *
 * A process that used NVML pays as it exits: the kernel closes NVML's
 * device files and unmaps its mappings, and the NVIDIA driver frees what
 * it held for the process (4.3-4.7 ms on a two-GPU H200, after the
 * output is written; bench/nvml_exit). The shell sees the command end
 * only once that is done. So the command hands that work to a detached
 * process and returns at once:
 *
 * - stdout and stderr are flushed, then every descriptor a reader could
 *   wait on is closed: 0, 1 and 2, and any other that is not a
 *   character device (pipes, sockets, files the caller passed on). NVML's
 *   device files stay open. A pipe reader (`| head`, `$(...)`, `| jq`)
 *   sees EOF here, before anything else happens.
 * - A child is cloned that shares this process's memory and descriptor
 *   table (CLONE_VM | CLONE_FILES: nothing is copied, no fork handlers
 *   run) and does nothing but _exit. This process then _exits with its
 *   status; the memory and descriptors stay alive through the child, so
 *   the last reference, and the release, is the child's.
 * - The child needs no second fork and no setsid: its parent exits at
 *   once, so the kernel hands it to init (or the nearest subreaper), which
 *   reaps it; it is never the shell's. It stays in the command's process
 *   group: a Ctrl-C or hangup that reaches it only ends it a moment
 *   earlier, and the kernel's release is the same either way.
 * - Should the clone fail, the process _exits as before (the release is
 *   then waited for).
 *
 * Builds with AddressSanitizer return instead (main's exit() runs the
 * leak check); ThreadSanitizer builds _exit without the child (its
 * runtime's exit hook must not run in two processes sharing memory).
 */
#include "cli.h"

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define ASAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN_BUILD 1
#endif
#endif
#ifndef ASAN_BUILD
#define ASAN_BUILD 0
#endif

#if defined(__SANITIZE_THREAD__)
#define TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TSAN_BUILD 1
#endif
#endif
#ifndef TSAN_BUILD
#define TSAN_BUILD 0
#endif

/* The child's stack: it runs one call, in memory that outlives us. */
static _Alignas(64) char child_stack[64 * 1024];

static int end_at_once(void *unused)
{
	(void)unused;
	_exit(0);
}

/* 1 if fd is a character device (NVML's files; also /dev/null, ttys). */
static int is_device(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode);
}

/* Closes 0-2 and every other descriptor that is not a device. */
static void close_callers_fds(void)
{
	close(STDIN_FILENO);
	close(STDOUT_FILENO);
	close(STDERR_FILENO);
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return; /* no /proc: the caller's other descriptors stay */
	int own = dirfd(d);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		if (end == e->d_name || *end || fd <= STDERR_FILENO ||
		    fd == own)
			continue;
		if (!is_device((int)fd))
			close((int)fd);
	}
	closedir(d);
}

int gpr_cli_end(int code, enum gpr_cli_end how)
{
	if (how == GPR_CLI_END_LIBC || ASAN_BUILD)
		return code;
	/* a failed flush is no news now that the exit status is chosen */
	fflush(stdout);
	fflush(stderr);
	if (how != GPR_CLI_END_WAIT && !TSAN_BUILD) {
		close_callers_fds();
		if (how == GPR_CLI_END_FORK) {
			if (fork() == 0)
				_exit(0);
		} else {
			(void)clone(end_at_once,
				    child_stack + sizeof child_stack,
				    CLONE_VM | CLONE_FILES | SIGCHLD, NULL);
		}
	}
	_exit(code);
}
