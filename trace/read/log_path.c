/* The rule for replacing what lies at a path (log_path.h). */
#include "log_path.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../format/trace_format.h"

/* 1 if the regular file at fd is empty or begins with signature. */
static int begins_with(int fd, const struct stat *st, const char *signature)
{
	if (st->st_size == 0)
		return 1;
	size_t n = strlen(signature);
	if ((size_t)st->st_size < n)
		return 0;
	char *head = malloc(n);
	if (!head)
		return 0;
	size_t got = 0;
	while (got < n) {
		ssize_t r = pread(fd, head + got, n - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	int same = got == n && memcmp(head, signature, n) == 0;
	free(head);
	return same;
}

int gpr_trace_path_refused(char *why, size_t len, const char *path,
			   const struct stat *lst, const char *signature,
			   const char *what, int force,
			   const struct stat *input)
{
	/* said only when the command has a --force that was not given */
	const char *hint = "";
	const char *phrase = NULL;
	int not_ours = 0; /* a file of this user that is not one of ours */
	if (input && lst->st_dev == input->st_dev &&
	    lst->st_ino == input->st_ino) {
		phrase = "is the file being read";
	} else if (S_ISLNK(lst->st_mode)) {
		if (force > 0)
			return 0;
		phrase = "is a symbolic link, not followed";
		hint = " (--force replaces the link itself)";
	} else if (S_ISDIR(lst->st_mode)) {
		phrase = "is a directory";
	} else if (!S_ISREG(lst->st_mode)) {
		phrase = "is not a regular file";
	} else if (force > 0) {
		return 0;
	} else if (lst->st_uid != geteuid()) {
		phrase = "belongs to another user";
		hint = " (--force replaces it)";
	} else {
		int fd =
		    open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0) {
			phrase = "cannot be read to check what it is";
		} else {
			struct stat st;
			int ours = fstat(fd, &st) == 0 &&
				   st.st_dev == lst->st_dev &&
				   st.st_ino == lst->st_ino &&
				   begins_with(fd, &st, signature);
			close(fd);
			if (ours)
				return 0;
			phrase = "exists and is not";
			not_ours = 1;
		}
		hint = " (--force replaces it)";
	}
	snprintf(why, len, "%s%s%s%s", phrase, not_ours ? " " : "",
		 not_ours ? what : "", force == 0 ? hint : "");
	return 1;
}

int gpr_trace_clear_path(const char *path, char *why, size_t len)
{
	struct stat lst;
	if (lstat(path, &lst) < 0) {
		if (errno == ENOENT)
			return 0;
		snprintf(why, len, "%s: %s", path, strerror(errno));
		return -1;
	}
	char phrase[256];
	if (gpr_trace_path_refused(phrase, sizeof(phrase), path, &lst,
				   GPR_TRACE_MAGIC, "a trace log", -1, NULL)) {
		snprintf(why, len, "%s %s", path, phrase);
		return -1;
	}
	if (unlink(path) != 0 && errno != ENOENT) {
		snprintf(why, len, "cannot replace %s: %s", path,
			 strerror(errno));
		return -1;
	}
	return 0;
}
