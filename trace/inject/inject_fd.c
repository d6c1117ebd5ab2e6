/* Descriptors the tracer keeps (fd.h). */
#include "fd.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * The lowest number a kept descriptor moves to: half the soft limit, at
 * most 512 (a higher number grows the kernel's descriptor table for
 * nothing); programs get low numbers first.
 */
static int floor_fd(void)
{
	struct rlimit rl;
	rlim_t lim = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
	return lim / 2 > 512 ? 512 : lim / 2 > 3 ? (int)(lim / 2) : 3;
}

int gpr_inj_fd_keep(struct gpr_inj_fd *o, int fd)
{
	o->fd = -1;
	if (fd < 0)
		return -1;
	int high = fcntl(fd, F_DUPFD_CLOEXEC, floor_fd());
	if (high >= 0) {
		close(fd);
		fd = high;
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return -1;
	}
	o->fd = fd;
	o->dev = st.st_dev;
	o->ino = st.st_ino;
	return 0;
}

int gpr_inj_fd_ours(const struct gpr_inj_fd *o)
{
	struct stat st;
	return o->fd >= 0 && fstat(o->fd, &st) == 0 && st.st_dev == o->dev &&
	       st.st_ino == o->ino;
}

void gpr_inj_fd_close(struct gpr_inj_fd *o)
{
	if (gpr_inj_fd_ours(o))
		close(o->fd);
	o->fd = -1;
}
