/* The names of the logs a traced command wrote (trace_names.h). */
#include "trace_names.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int gpr_cli_trace_names_open(struct gpr_cli_trace_names *tn, char *err,
			     size_t errlen)
{
	memset(tn, 0, sizeof(*tn));
	const char *tmp = getenv("TMPDIR");
	if (!tmp || tmp[0] != '/')
		tmp = "/tmp";
	int n = snprintf(tn->dir, sizeof(tn->dir), "%s/gpureclaim-trace-XXXXXX",
			 tmp);
	if (n < 0 || (size_t)n >= sizeof(tn->dir)) {
		snprintf(err, errlen, "$TMPDIR is too long (%zu bytes)",
			 strlen(tmp));
		tn->dir[0] = '\0';
		return -1;
	}
	if (!mkdtemp(tn->dir)) {
		snprintf(err, errlen,
			 "cannot create a private directory in %s: %s", tmp,
			 strerror(errno));
		tn->dir[0] = '\0';
		return -1;
	}
	return 0;
}

/* The path in the file `name` of dir fd: one absolute path, a newline. */
static char *read_name(int dfd, const char *name)
{
	int fd =
	    openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	char buf[PATH_MAX + 1];
	ssize_t k = -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_size <= PATH_MAX)
		k = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (k < 2 || buf[0] != '/' || buf[k - 1] != '\n')
		return NULL;
	buf[k - 1] = '\0';
	if (strlen(buf) != (size_t)k - 1)
		return NULL; /* a NUL inside */
	return strdup(buf);
}

static long pid_of(const char *name)
{
	char *end;
	if (name[0] < '1' || name[0] > '9')
		return -1;
	errno = 0;
	long v = strtol(name, &end, 10);
	return errno || *end || v > INT_MAX ? -1 : v;
}

static int by_pid(const void *a, const void *b)
{
	const struct gpr_cli_trace_log *x = a, *y = b;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

int gpr_cli_trace_names_collect(struct gpr_cli_trace_names *tn)
{
	if (!tn->dir[0])
		return 0;
	int rc = 0;
	int dfd =
	    open(tn->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d && dfd >= 0)
		close(dfd);
	struct dirent *e;
	size_t cap = 0;
	while (d && (e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		long pid = pid_of(e->d_name);
		char *path = pid > 0 ? read_name(dfd, e->d_name) : NULL;
		unlinkat(dfd, e->d_name, 0);
		if (!path)
			continue;
		if (tn->n == cap) {
			size_t c = cap ? cap * 2 : 8;
			void *p = realloc(tn->v, c * sizeof(*tn->v));
			if (!p) {
				free(path);
				rc = -1;
				continue;
			}
			tn->v = p;
			cap = c;
		}
		tn->v[tn->n++] = (struct gpr_cli_trace_log){pid, path};
	}
	if (d)
		closedir(d);
	rmdir(tn->dir);
	tn->dir[0] = '\0';
	if (tn->n > 1)
		qsort(tn->v, tn->n, sizeof(*tn->v), by_pid);
	return rc;
}

void gpr_cli_trace_names_free(struct gpr_cli_trace_names *tn)
{
	for (size_t i = 0; i < tn->n; i++)
		free(tn->v[i].path);
	free(tn->v);
	if (tn->dir[0])
		rmdir(tn->dir);
	memset(tn, 0, sizeof(*tn));
}
