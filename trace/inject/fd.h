/*
 * Descriptors the tracer opens and keeps (inject_fd.c): the log, each
 * thread's schedstat. A traced program may close descriptors it did not
 * open (`for (fd = 3; fd < 1024; fd++) close(fd)`, as daemons do) and get
 * the numbers back for its own files; the tracer must then never read,
 * write or close that number again. So each kept descriptor remembers the
 * file it was opened on (device and inode) and is checked against it
 * before every use: a change means it is no longer ours.
 *
 * What is left: a program that closes the descriptor and opens another
 * file on its number between the check and the use (a few instructions
 * apart, on another thread).
 */
#ifndef GPR_TRACE_INJECT_FD_H
#define GPR_TRACE_INJECT_FD_H

#include <sys/types.h>

struct gpr_inj_fd {
	int fd; /* -1: none */
	dev_t dev;
	ino_t ino;
};

/*
 * Keeps fd, which the tracer has just opened: moved above the low numbers
 * a program expects its own opens to get (a daemon that closes 0-2 and
 * opens /dev/null), close-on-exec, its file remembered. 0, or -1 (fd
 * closed, o->fd -1).
 */
int gpr_inj_fd_keep(struct gpr_inj_fd *o, int fd);
/* 1 while o->fd is still the file it was opened on; 0 when it is not (or
 * none). A system call (fstat). */
int gpr_inj_fd_ours(const struct gpr_inj_fd *o);
/* Closes o->fd when it is still ours, forgets it in every case. */
void gpr_inj_fd_close(struct gpr_inj_fd *o);

#endif /* GPR_TRACE_INJECT_FD_H */
