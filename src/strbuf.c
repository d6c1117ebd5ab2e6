/* Growable string buffer used by the text and JSON renderers. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

static int reserve(struct gpr__sb *b, size_t extra)
{
	if (b->oom)
		return -1;
	if (b->len + extra + 1 <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + extra + 1)
		cap *= 2;
	char *p = realloc(b->s, cap);
	if (!p) {
		b->oom = 1;
		return -1;
	}
	b->s = p;
	b->cap = cap;
	return 0;
}

void gpr__sb_putn(struct gpr__sb *b, const char *s, size_t n)
{
	if (reserve(b, n))
		return;
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

void gpr__sb_puts(struct gpr__sb *b, const char *s)
{
	gpr__sb_putn(b, s, strlen(s));
}

void gpr__sb_printf(struct gpr__sb *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->oom = 1;
		return;
	}
	if (reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

char *gpr__sb_finish(struct gpr__sb *b)
{
	if (b->oom || reserve(b, 0)) {
		free(b->s);
		b->s = NULL;
		return NULL;
	}
	char *s = b->s;
	b->s = NULL;
	return s;
}
