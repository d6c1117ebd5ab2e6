/*
 * A growable string for building output whole before writing it: a
 * failure halfway through a listing must not leave half a document on
 * stdout.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cli_buf_free(struct cli_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->oom = 0;
}

void cli_buf_reset(struct cli_buf *b)
{
	b->len = 0;
	b->oom = 0;
	if (b->data)
		b->data[0] = '\0';
}

/* Makes room for n more bytes and the terminating NUL. */
static int reserve(struct cli_buf *b, size_t n)
{
	if (b->oom)
		return -1;
	if (n >= SIZE_MAX / 2 - b->len) {
		b->oom = 1;
		return -1;
	}
	size_t need = b->len + n + 1;
	if (need <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	char *p = realloc(b->data, cap);
	if (!p) {
		b->oom = 1;
		return -1;
	}
	b->data = p;
	b->cap = cap;
	return 0;
}

void cli_buf_append(struct cli_buf *b, const char *s, size_t n)
{
	if (reserve(b, n) != 0)
		return;
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void cli_buf_puts(struct cli_buf *b, const char *s)
{
	cli_buf_append(b, s, strlen(s));
}

void cli_buf_vprintf(struct cli_buf *b, const char *fmt, va_list ap)
{
	va_list copy;
	va_copy(copy, ap);
	int n = vsnprintf(NULL, 0, fmt, copy);
	va_end(copy);
	if (n < 0) {
		b->oom = 1;
		return;
	}
	if (reserve(b, (size_t)n) != 0)
		return;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
}

void cli_buf_printf(struct cli_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	cli_buf_vprintf(b, fmt, ap);
	va_end(ap);
}

const char *cli_buf_str(const struct cli_buf *b)
{
	return b->data ? b->data : "";
}

int cli_buf_write_stdout(const struct cli_buf *b)
{
	/* stdio may hold earlier output: keep the order */
	if (fflush(stdout) != 0)
		return -1;
	size_t off = 0;
	while (off < b->len) {
		ssize_t w = write(STDOUT_FILENO, b->data + off, b->len - off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		off += (size_t)w;
	}
	return 0;
}
