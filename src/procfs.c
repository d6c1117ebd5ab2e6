/* The one bounded read of a small file of /proc (procfs.h). */
#include "procfs.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

ssize_t gpr__read_small(const char *path, char *out, size_t len)
{
	if (len == 0)
		return -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -1;
	size_t off = 0;
	while (off + 1 < len) {
		ssize_t r = read(fd, out + off, len - 1 - off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		off += (size_t)r;
	}
	close(fd);
	out[off] = '\0';
	return (ssize_t)off;
}
