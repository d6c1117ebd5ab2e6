/*
 * Files the tool writes for the user (the exports of `report`), created
 * the way the trace log is: the path the user names is never followed
 * when it is a symbolic link, never the file being read, and a file that
 * is not one of our exports is not replaced without --force (the rule of
 * trace/read/log_path.h, which the trace log follows too). The data go
 * to a new file beside the target (mkostemp: O_EXCL, mode 0600 less the
 * umask, the stricter of the two) that is renamed over the target only
 * once every output of the command is complete; a command that fails
 * leaves the old files as they were and no temporary behind.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../trace/read/log_path.h"

int gpr_cli_out_check(const char *cmd, const char *path, const char *signature,
		      const char *what, int force, const struct stat *input)
{
	char q[GPR_TRACE_QUOTED_MAX];
	struct stat lst;
	if (lstat(path, &lst) != 0) {
		if (errno == ENOENT)
			return 0;
		fprintf(stderr, "gpureclaim %s: cannot write %s: %s\n", cmd,
			gpr_trace_path_quoted(q, sizeof q, path),
			strerror(errno));
		return -1;
	}
	char why[256];
	if (!gpr_trace_path_refused(why, sizeof(why), path, &lst, signature,
				    what, force, input))
		return 0;
	fprintf(stderr, "gpureclaim %s: %s %s\n", cmd,
		gpr_trace_path_quoted(q, sizeof q, path), why);
	return -1;
}

int gpr_cli_out_create(struct gpr_cli_out *o, const char *cmd, const char *path)
{
	char q[GPR_TRACE_QUOTED_MAX];
	memset(o, 0, sizeof(*o));
	o->path = path;
	/* dirname and basename may change their argument: copies */
	char d[PATH_MAX], b[PATH_MAX];
	size_t plen = strlen(path);
	if (plen == 0 || plen >= sizeof(d) || path[plen - 1] == '/') {
		fprintf(stderr, "gpureclaim %s: cannot write %s: %s\n", cmd,
			gpr_trace_path_quoted(q, sizeof q, path),
			strerror(plen >= sizeof(d) ? ENAMETOOLONG : EISDIR));
		return -1;
	}
	snprintf(d, sizeof(d), "%s", path);
	snprintf(b, sizeof(b), "%s", path);
	const char *dir = dirname(d), *base = basename(b);
	/*
	 * ".NAME.XXXXXX" adds 8 bytes to the name: a name of up to NAME_MAX
	 * bytes is cut to leave room for them (the temporary's name matters
	 * to no one: mkostemp makes it unique).
	 */
	int keep = (int)strlen(base);
	if (keep > NAME_MAX - 8)
		keep = NAME_MAX - 8;
	size_t len = strlen(dir) + (size_t)keep + 16;
	o->tmp = malloc(len);
	if (!o->tmp) {
		fprintf(stderr, "gpureclaim %s: out of memory\n", cmd);
		return -1;
	}
	snprintf(o->tmp, len, "%s/.%.*s.XXXXXX", dir, keep, base);
	int fd = mkostemp(o->tmp, O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "gpureclaim %s: cannot write %s: %s\n", cmd,
			gpr_trace_path_quoted(q, sizeof q, path),
			strerror(errno));
		free(o->tmp);
		o->tmp = NULL;
		return -1;
	}
	o->f = fdopen(fd, "w");
	if (!o->f) {
		fprintf(stderr, "gpureclaim %s: cannot write %s: %s\n", cmd,
			gpr_trace_path_quoted(q, sizeof q, path),
			strerror(errno));
		close(fd);
		gpr_cli_out_abort(o);
		return -1;
	}
	return 0;
}

int gpr_cli_out_open(struct gpr_cli_out *o, const char *cmd, const char *path,
		     const char *signature, int force, const struct stat *input)
{
	memset(o, 0, sizeof(*o));
	o->path = path;
	if (gpr_cli_out_check(cmd, path, signature, "an export of gpureclaim",
			      force, input) != 0)
		return -1;
	return gpr_cli_out_create(o, cmd, path);
}

int gpr_cli_out_commit(struct gpr_cli_out *o, const char *cmd)
{
	if (!o->tmp)
		return 0;
	errno = 0;
	int bad = fflush(o->f) != 0 || ferror(o->f);
	int e = errno;
	if (fclose(o->f) != 0 && !bad) {
		bad = 1;
		e = errno;
	}
	o->f = NULL;
	if (!bad && rename(o->tmp, o->path) != 0) {
		bad = 1;
		e = errno;
	}
	if (bad) {
		char q[GPR_TRACE_QUOTED_MAX];
		fprintf(stderr, "gpureclaim %s: writing %s failed: %s\n", cmd,
			gpr_trace_path_quoted(q, sizeof q, o->path),
			strerror(e ? e : EIO));
		gpr_cli_out_abort(o);
		return -1;
	}
	free(o->tmp);
	o->tmp = NULL;
	return 0;
}

void gpr_cli_out_abort(struct gpr_cli_out *o)
{
	if (o->f)
		fclose(o->f);
	o->f = NULL;
	if (o->tmp)
		unlink(o->tmp);
	free(o->tmp);
	o->tmp = NULL;
}

int gpr_cli_out_same(const char *a, const char *b)
{
	struct stat sa, sb;
	if (lstat(a, &sa) == 0 && lstat(b, &sb) == 0)
		return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
	/* not both there yet: the same name in the same directory */
	char da[PATH_MAX], db[PATH_MAX], ra[PATH_MAX], rb[PATH_MAX];
	char ba[PATH_MAX], bb[PATH_MAX];
	if (strlen(a) >= sizeof(da) || strlen(b) >= sizeof(db))
		return strcmp(a, b) == 0;
	snprintf(da, sizeof(da), "%s", a);
	snprintf(db, sizeof(db), "%s", b);
	snprintf(ba, sizeof(ba), "%s", a);
	snprintf(bb, sizeof(bb), "%s", b);
	if (!realpath(dirname(da), ra) || !realpath(dirname(db), rb))
		return strcmp(a, b) == 0;
	return strcmp(ra, rb) == 0 && strcmp(basename(ba), basename(bb)) == 0;
}
