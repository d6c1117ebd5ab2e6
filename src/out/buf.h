/*
 * The output toolkit's growable string, used by every product (the core's
 * report renderers, the trace reader, the CLI). Output is built whole in
 * one of these and handed over or written only on success, so a failure
 * halfway never leaves half a document.
 *
 * Zero-initialise (`struct gpr__buf b = {0};`). After an allocation
 * failure the buffer stays failed (oom = 1): later appends do nothing, so
 * a caller checks once at the end (gpr__buf_finish returns NULL then).
 */
#ifndef GPR_OUT_BUF_H
#define GPR_OUT_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

struct gpr__buf {
	char *data; /* NULL until something was appended */
	size_t len;
	size_t cap;
	int oom;
};

void gpr__buf_putn(struct gpr__buf *b, const char *s, size_t n);
void gpr__buf_puts(struct gpr__buf *b, const char *s);
void gpr__buf_printf(struct gpr__buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void gpr__buf_vprintf(struct gpr__buf *b, const char *fmt, va_list ap);

/* The contents ("" when empty); valid until the next append. */
const char *gpr__buf_str(const struct gpr__buf *b);

/* Empties the buffer (len 0, oom cleared) and keeps its memory. */
void gpr__buf_reset(struct gpr__buf *b);

/* Releases the memory; the buffer is empty and usable again. */
void gpr__buf_free(struct gpr__buf *b);

/*
 * Hands the string over (the caller frees it) and leaves the buffer
 * empty; NULL, with the memory released, if any append ran out of memory.
 */
char *gpr__buf_finish(struct gpr__buf *b);

/*
 * Writes the whole buffer to f and flushes f (output written to f before
 * keeps its place). 0, or -1 on a write error (EPIPE included).
 */
int gpr__buf_write(const struct gpr__buf *b, FILE *f);

#endif /* GPR_OUT_BUF_H */
