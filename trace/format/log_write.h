/*
 * Writing a trace log (trace_format.h), the codec's writer: used by the
 * injection library's writer thread, bench/trace_gen and the tests. Not
 * thread-safe: one thread writes a log.
 */
#ifndef GPR_TRACE_LOG_WRITE_H
#define GPR_TRACE_LOG_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "trace_format.h"

struct gpr_trace_writer {
	int fd;
	int err;	  /* errno of the first failed write, 0 if none */
	uint64_t good;	  /* the end of the last complete chunk */
	uint64_t records; /* records written */
	uint32_t strings; /* strings written (the next string id) */
	struct gpr_trace_header hdr;
};

/*
 * Creates `path` (mode 0600, never through a symlink, never over an
 * existing file: O_EXCL) and writes the header (not complete) and the
 * operation names as strings 0 .. GPR_TRACE_N_OPS-1. Returns 0, or -errno
 * (the file is removed again if the header could not be written).
 */
int gpr_trace_writer_open(struct gpr_trace_writer *w, const char *path,
			  uint32_t pid, uint64_t start_realtime_ns,
			  uint64_t start_mono_ns);

/*
 * Each append writes whole chunks. After a failed write the log is cut
 * back to the end of its last complete chunk (so it stays readable, as a
 * log that was not closed), the error is kept in w->err, and every later
 * call returns it without writing.
 *
 * Appends strings with ids w->strings .. w->strings + n - 1. Strings longer
 * than GPR_TRACE_MAX_STRING are cut. 0, or -errno (also kept in w->err).
 */
int gpr_trace_writer_strings(struct gpr_trace_writer *w, const char *const *s,
			     uint32_t n);

/*
 * Appends a META chunk of n "key=value" lines (trace_format.h); a line with
 * a newline or longer than GPR_TRACE_MAX_STRING is cut there. 0, or -errno
 * (also kept in w->err).
 */
int gpr_trace_writer_meta(struct gpr_trace_writer *w, const char *const *kv,
			  uint32_t n);

/* Appends n records. 0, or -errno (also kept in w->err). */
int gpr_trace_writer_records(struct gpr_trace_writer *w,
			     const struct gpr_trace_rec *r, size_t n);

/*
 * Marks the log complete (counts, end time, dropped records) and closes it.
 * 0, or -errno. The descriptor is closed in every case.
 */
int gpr_trace_writer_close(struct gpr_trace_writer *w, uint64_t end_mono_ns,
			   uint32_t dropped);

#endif /* GPR_TRACE_LOG_WRITE_H */
