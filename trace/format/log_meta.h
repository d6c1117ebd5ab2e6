/*
 * The META chunks of a trace log (trace_format.h): what recorded the log
 * and how, as key=value text. Parsed by the reader (log_read.c).
 */
#ifndef GPR_TRACE_LOG_META_H
#define GPR_TRACE_LOG_META_H

#include <stddef.h>
#include <stdint.h>

struct gpr_trace_kv {
	char *key;
	char *value;
};

/*
 * Checks one META chunk's payload (count lines in plen bytes) and, with
 * `into` non-NULL, adds its lines to *into / *n (a key given again
 * replaces the value). *lines counts the lines of every chunk so far, for
 * the GPR_TRACE_MAX_META bound. 0, or GPR_E_FORMAT with *why what is wrong
 * and *line (from 1) where, or GPR_E_NOMEM.
 */
int gpr_trace_meta_chunk(const unsigned char *p, uint64_t plen, uint32_t count,
			 uint32_t *lines, struct gpr_trace_kv **into,
			 uint32_t *n, const char **why, uint32_t *line);

void gpr_trace_meta_free(struct gpr_trace_kv *kv, uint32_t n);

#endif /* GPR_TRACE_LOG_META_H */
