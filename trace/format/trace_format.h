/*
 * The gpureclaim trace log, version 1: the on-disk layout shared by the
 * writer (the injection library, tests) and the reader. docs/trace.md is
 * the prose version of this file; keep the two in step.
 *
 * A log is a 64-byte header followed by chunks. A chunk is a 16-byte chunk
 * header (tag, count, payload length) and its payload:
 *   "STRS": strings, ids first_id .. first_id + count - 1 (dense, in order
 *           across the file, starting at 0): u32 first_id, then per string
 *           u32 length and the bytes (no NUL).
 *   "RECS": count fixed-size records (record_size bytes each).
 *   "META": count text lines "key=value\n" (a minor addition to version
 *           1: older readers skip it): what recorded the log and how
 *           (the keys below). A log may hold several META
 *           chunks; a key given again replaces its earlier value.
 * A string is written before any record that refers to it. Records are in
 * per-thread order; across threads the reader sorts by time. All integers
 * are little-endian.
 *
 * Strings 0 .. n_ops-1 name the operations (written first, in a chunk of
 * their own): a record's `op` is a string id, so a reader meets new
 * operation names as strings, never as unknown numbers. The operations
 * and what each does to memory are the tables of trace_ops.h.
 */
#ifndef GPR_TRACE_FORMAT_H
#define GPR_TRACE_FORMAT_H

#include <stdint.h>

#define GPR_TRACE_MAGIC "GPRTRACE"
#define GPR_TRACE_VERSION 1
#define GPR_TRACE_HEADER_SIZE 64
#define GPR_TRACE_RECORD_SIZE 72
#define GPR_TRACE_CHUNK_HEADER_SIZE 16
#define GPR_TRACE_CLOCK_MONOTONIC 1

/* Header flags. */
#define GPR_TRACE_F_COMPLETE 0x1 /* closed cleanly: counts below are set */

/* Record flags. */
#define GPR_TRACE_R_WAIT 0x1	  /* wait_ns was measured (schedstat) */
#define GPR_TRACE_R_SIZE_MAP 0x2  /* bytes of a free came from the alloc */
#define GPR_TRACE_R_SIZE_NONE 0x4 /* free of an address never seen alloc'd */
#define GPR_TRACE_R_HOST 0x8	  /* cuMemCreate of memory on the host */

#define GPR_TRACE_NO_STRING 0xffffffffu
#define GPR_TRACE_NO_DEVICE (-1)

/*
 * The longest path a log may have, in bytes: PATH_MAX less room for the
 * ".<pid>" a second process of the same run adds. Longer ones are refused,
 * never cut.
 */
#define GPR_TRACE_MAX_PATH 4080

/* Bounds a reader enforces (a writer never exceeds them). */
#define GPR_TRACE_MAX_STRING 4096
#define GPR_TRACE_MAX_STRINGS (1u << 17) /* a writer interns <= 65,555 */
#define GPR_TRACE_MAX_META 256	  /* key=value lines in a log, all chunks */
#define GPR_TRACE_MAX_HEADER 4096 /* header_size of a later revision */

/*
 * META keys (values are text, at most GPR_TRACE_MAX_STRING bytes, no
 * newline; keys are [a-z0-9._-]):
 *   format     "1.1": a version-1 log with META chunks
 *   backend    what saw the driver calls: "interpose" (LD_PRELOAD
 *              wrappers of the driver's entry points) or "cupti" (CUPTI
 *              callbacks)
 *   wait       the source of the waiting time: "perf-gated" (schedstat's
 *              run_delay, read only after a context switch that the perf
 *              task-clock page showed), "getrusage-gated" (the same, the
 *              switch seen by getrusage), "none" (not measured)
 *   clock      how the calls read the clock: "tsc" (the TSC, turned into
 *              CLOCK_MONOTONIC ns by the writer) or "clock_gettime"
 *   started_by "gpureclaim trace", or "program" (gpureclaim_trace_start)
 *   tracer     the tracer library's version
 *   entry_points (interpose, at close) the driver entry points wrapped
 *              and how often each was handed out, "name=count,..."
 *   unrecognised (interpose, at close) memory entry points the driver
 *              answered with a function the tracer does not know (not
 *              recorded), "name=count,..."
 *   crosscheck (interpose with GPURECLAIM_TRACE_CROSSCHECK, at close)
 *              calls of each operation recorded / seen by CUPTI,
 *              "name=mine/cupti,..."
 */
#define GPR_TRACE_META_FORMAT "1.1"

/* The header, as laid out on disk (offsets in comments). */
struct gpr_trace_header {
	char magic[8];		    /* 0: "GPRTRACE" */
	uint16_t version;	    /* 8 */
	uint16_t header_size;	    /* 10: 64 */
	uint16_t record_size;	    /* 12: 72; readers accept more */
	uint16_t flags;		    /* 14: GPR_TRACE_F_* */
	uint32_t pid;		    /* 16 */
	uint32_t clock;		    /* 20: GPR_TRACE_CLOCK_MONOTONIC */
	uint64_t start_realtime_ns; /* 24: CLOCK_REALTIME at start */
	uint64_t start_mono_ns;	    /* 32: record times use this clock */
	uint64_t end_mono_ns;	    /* 40: when complete */
	uint64_t record_count;	    /* 48: when complete */
	uint32_t string_count;	    /* 56: when complete */
	uint32_t dropped;	    /* 60: records lost to full buffers */
};

/* One driver call (offsets in comments). */
struct gpr_trace_rec {
	uint64_t t_ns;	  /* 0: call entry, CLOCK_MONOTONIC ns */
	uint64_t dur_ns;  /* 8: entry to exit */
	uint64_t wait_ns; /* 16: runnable but not running during the call */
	uint64_t addr;	  /* 24: device/host address, 0 if none */
	uint64_t bytes;	  /* 32: size (for a free: of what was freed) */
	uint64_t aux;	  /* 40: VMM handle, pool, stream or context */
	uint32_t tid;	  /* 48: Linux thread id */
	uint32_t op;	  /* 52: string id of the operation name */
	uint32_t lib;	  /* 56: string id of the calling library */
	uint32_t site;	  /* 60: string id of the call site */
	int32_t result;	  /* 64: CUresult */
	int16_t device;	  /* 68: CUDA device ordinal, -1 unknown */
	uint16_t flags;	  /* 70: GPR_TRACE_R_* */
};

_Static_assert(sizeof(struct gpr_trace_header) == GPR_TRACE_HEADER_SIZE,
	       "header layout");
_Static_assert(sizeof(struct gpr_trace_rec) == GPR_TRACE_RECORD_SIZE,
	       "record layout");

#endif /* GPR_TRACE_FORMAT_H */
