/*
 * The growable string of buf.h. Sizes are checked before they are added,
 * so a huge append fails (oom) instead of wrapping.
 */
#include "buf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Makes room for n more bytes and the terminating NUL. */
static int reserve(struct gpr__buf *b, size_t n)
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

void gpr__buf_putn(struct gpr__buf *b, const char *s, size_t n)
{
	if (reserve(b, n) != 0)
		return;
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void gpr__buf_puts(struct gpr__buf *b, const char *s)
{
	gpr__buf_putn(b, s, strlen(s));
}

void gpr__buf_vprintf(struct gpr__buf *b, const char *fmt, va_list ap)
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

void gpr__buf_printf(struct gpr__buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	gpr__buf_vprintf(b, fmt, ap);
	va_end(ap);
}

const char *gpr__buf_str(const struct gpr__buf *b)
{
	return b->data ? b->data : "";
}

void gpr__buf_reset(struct gpr__buf *b)
{
	b->len = 0;
	b->oom = 0;
	if (b->data)
		b->data[0] = '\0';
}

void gpr__buf_free(struct gpr__buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->oom = 0;
}

char *gpr__buf_finish(struct gpr__buf *b)
{
	if (b->oom || reserve(b, 0) != 0) {
		gpr__buf_free(b);
		return NULL;
	}
	char *s = b->data;
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	return s;
}

int gpr__buf_write(const struct gpr__buf *b, FILE *f)
{
	/* through f, so that any FILE works (a memory stream too) and what
	 * f holds already keeps its place */
	if (b->len && fwrite(b->data, 1, b->len, f) != b->len)
		return -1;
	return fflush(f) == 0 ? 0 : -1;
}
