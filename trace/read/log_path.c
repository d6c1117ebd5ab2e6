/* The rule for where a new trace log may go (log_path.h). */
#include "log_path.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../format/trace_format.h"

int gpr_trace_clear_path(const char *path, char *why, size_t len)
{
	struct stat st;
	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		snprintf(why, len, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (S_ISREG(st.st_mode)) {
		char magic[8] = {0};
		int fd =
		    open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, magic, sizeof(magic)) : -1;
		if (fd >= 0)
			close(fd);
		if ((n == 0 ||
		     (n == 8 && memcmp(magic, GPR_TRACE_MAGIC, 8) == 0)) &&
		    unlink(path) == 0)
			return 0;
	}
	snprintf(why, len,
		 "%s exists and is not a trace log; not writing over it", path);
	return -1;
}
