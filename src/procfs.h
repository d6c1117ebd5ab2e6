/*
 * The one bounded read of a small file of /proc, /sys or a cgroup
 * (procfs.c): for the core's facts of a process (suspend_host.c) and the
 * command's (cli/util_proc.c). Internal.
 */
#ifndef GPR_PROCFS_H
#define GPR_PROCFS_H

#include <stddef.h>
#include <sys/types.h>

/* Reads at most len - 1 bytes of path into out, NUL-terminated; their
 * number, or -1 when it cannot be opened or read. */
ssize_t gpr__read_small(const char *path, char *out, size_t len);

#endif /* GPR_PROCFS_H */
