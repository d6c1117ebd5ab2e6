/* The rule for replacing what lies at a path (log_path.h). */
#include "log_path.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../format/trace_format.h"
#include "out/buf.h"
#include "out/text.h"

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

/* 1 if c needs no quoting in a shell word. */
static int plain(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || strchr("_./+,:=@%^-", c);
}

char *gpr_trace_path_quoted(char *out, size_t len, const char *path)
{
	if (!len)
		return out;
	struct gpr__buf b = {0};
	int bare = *path != '\0', raw = 1;
	for (const char *p = path; *p;) {
		uint32_t cp;
		size_t n = gpr__utf8_len(p, &cp);
		if (!plain((unsigned char)*p))
			bare = 0;
		if (n == 0 || gpr__text_unsafe(cp))
			raw = 0;
		p += n ? n : 1;
	}
	if (bare) {
		gpr__buf_puts(&b, path);
	} else if (raw) {
		gpr__buf_puts(&b, "'");
		for (const char *p = path; *p; p++) {
			if (*p == '\'')
				gpr__buf_puts(&b, "'\\''");
			else
				gpr__buf_putn(&b, p, 1);
		}
		gpr__buf_puts(&b, "'");
	} else {
		gpr__buf_puts(&b, "$'");
		for (const char *p = path; *p;) {
			uint32_t cp;
			size_t n = gpr__utf8_len(p, &cp);
			if (n == 0 || gpr__text_unsafe(cp)) {
				/* each byte of it, escaped */
				size_t k = n ? n : 1;
				for (size_t i = 0; i < k; i++)
					gpr__buf_printf(&b, "\\x%02x",
							(unsigned char)p[i]);
				p += k;
				continue;
			}
			if (*p == '\'' || *p == '\\')
				gpr__buf_puts(&b, "\\");
			gpr__buf_putn(&b, p, n);
			p += n;
		}
		gpr__buf_puts(&b, "'");
	}
	const char *q = b.oom ? "(a path)" : gpr__buf_str(&b);
	snprintf(out, len, "%s", q);
	gpr__buf_free(&b);
	return out;
}
