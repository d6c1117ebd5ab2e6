/*
 * A growable string for the renderers: appends never fail visibly; the
 * first allocation failure marks the buffer and gpr__sb_finish returns
 * NULL, so a caller never sees a partial document.
 */
#ifndef GPR_STRBUF_H
#define GPR_STRBUF_H

#include <stddef.h>

struct gpr__sb {
	char *s;
	size_t len, cap;
	int oom;
};

void gpr__sb_printf(struct gpr__sb *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void gpr__sb_putn(struct gpr__sb *b, const char *s, size_t n);
void gpr__sb_puts(struct gpr__sb *b, const char *s);

/* The string (caller frees), or NULL if any append ran out of memory. */
char *gpr__sb_finish(struct gpr__sb *b);

#endif /* GPR_STRBUF_H */
