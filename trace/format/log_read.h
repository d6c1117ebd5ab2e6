/*
 * Reading a trace log (trace_format.h). The reader trusts nothing in the
 * file: every count, size, offset and string id is checked against the
 * bytes actually present, and a bad file gives an error message, never a
 * crash or a read past the buffer.
 *
 * Memory: the records (72 bytes each) and the strings (their bytes, a NUL,
 * 5 bytes each) plus a 1 MiB window; never a copy of the file. With the
 * statistics, at most twice the log's size plus a constant (docs/trace.md).
 */
#ifndef GPR_TRACE_LOG_READ_H
#define GPR_TRACE_LOG_READ_H

#include <stddef.h>
#include <stdint.h>

#include "trace_format.h"
#include "trace_ops.h"
#include "log_meta.h"

/* Where a log that was cut short ends (gpr_trace.cut). */
enum gpr_trace_cut {
	GPR_TRACE_CUT_NONE = 0,
	/* inside a chunk: its last write was cut short (a full disk, kill -9,
	   a log still being written) */
	GPR_TRACE_CUT_CHUNK = 1,
	/* a closed log ending on a chunk boundary before the records and
	   strings its header counts (a copy cut short, say) */
	GPR_TRACE_CUT_BOUNDARY = 2,
};

struct gpr_trace {
	struct gpr_trace_header hdr;
	int complete; /* the writer closed the log cleanly, and all is there */
	/*
	 * A log cut short reads up to the cut: every complete record before
	 * it, those of a cut record chunk included (a cut string or META
	 * chunk is left out: no record before the cut needs it). `cut_at` is
	 * the offset of the first byte not read (the incomplete chunk's
	 * header; the end of the file for GPR_TRACE_CUT_BOUNDARY); complete is
	 * 0 then. `size` is the log's length in bytes.
	 */
	enum gpr_trace_cut cut;
	uint64_t cut_at;
	uint64_t size;
	/* Records sorted by effect time (gpr_trace_key). */
	struct gpr_trace_rec *recs;
	size_t n_recs;
	/*
	 * Strings by id: str_data + str_off[id], NUL-terminated (a NUL inside
	 * becomes '?'). Read them with gpr_trace_str.
	 */
	char *str_data;
	uint32_t *str_off;
	uint32_t n_strs;
	/* Kind of each string used as an operation name, by string id. */
	unsigned char *kinds;
	/* The META lines (what recorded the log), later keys replacing. */
	struct gpr_trace_kv *meta;
	uint32_t n_meta;
};

/*
 * Parses a log held in memory. On success returns 0 and fills *t (release
 * with gpr_trace_free); otherwise returns a negative GPR_E_* code
 * (GPR_E_FORMAT, GPR_E_NOMEM) and writes a one-line reason into err. A log
 * cut short is read up to the cut (t->cut says so); one cut inside its
 * header has nothing to read and is refused, saying so.
 */
int gpr_trace_parse(const void *buf, size_t len, struct gpr_trace *t, char *err,
		    size_t errlen);

/*
 * Reads the file at path and parses it; as gpr_trace_parse, or GPR_E_IO.
 * Only a regular file is read: a symbolic link at path is not followed and
 * a FIFO or device is refused without blocking. A file larger than
 * gpr_trace_max_log_bytes() is refused (GPR_E_NOMEM) before any reading.
 * The reason in err never names the path: the caller does, once.
 */
int gpr_trace_load(const char *path, struct gpr_trace *t, char *err,
		   size_t errlen);

void gpr_trace_free(struct gpr_trace *t);

/* The largest log gpr_trace_load reads: half the physical memory. */
uint64_t gpr_trace_max_log_bytes(void);

/* The kind of record r's operation. */
enum gpr_trace_kind gpr_trace_rec_kind(const struct gpr_trace *t,
				       const struct gpr_trace_rec *r);

/*
 * When a record takes effect: the exit of an allocating call (the memory
 * exists from then on), the entry of any other call. Saturating.
 */
uint64_t gpr_trace_key(const struct gpr_trace *t,
		       const struct gpr_trace_rec *r);

/* The META value of `key`, or NULL when the log has none. */
const char *gpr_trace_meta(const struct gpr_trace *t, const char *key);

/* The string with id `id`, or `dflt` for GPR_TRACE_NO_STRING. */
const char *gpr_trace_str(const struct gpr_trace *t, uint32_t id,
			  const char *dflt);

#endif /* GPR_TRACE_LOG_READ_H */
