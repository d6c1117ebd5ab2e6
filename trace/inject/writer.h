/*
 * The writer of a session's log (inject_writer.c): a thread that drains
 * the rings into the log, and the log's life from creation to close.
 */
#ifndef GPR_TRACE_INJECT_WRITER_H
#define GPR_TRACE_INJECT_WRITER_H

#include <stddef.h>
#include <stdint.h>

/* The META lines a session's log ends with, into kv (at most max, their
 * text in buf); returns how many. */
typedef uint32_t (*gpr_inj_meta_fn)(const char **kv, uint32_t max, char *buf,
				    size_t len);
/*
 * Opens the log (META lines kv[0..n-1]) and starts the writer; sets
 * gpr_inj_state.active to the session's backend. A log of that name
 * already there (O_EXCL) is an error, or with `shared` (every process of
 * a `gpureclaim trace` run gets the same name) the log is PATH.<pid>.
 * 0, or -1 (said why).
 */
int gpr_inj_writer_start(const char *path, int shared, const char *const *kv,
			 uint32_t n, gpr_inj_meta_fn closing);
/* Ends the session: records stop, the rings are drained, the closing
 * META lines are added, the log is closed. 0, or -1 when none is open in
 * this process. */
int gpr_inj_writer_stop(void);
/* Wakes the writer (async-signal-safe; no descriptor involved). */
void gpr_inj_writer_wake(void);
/* The open log's path into out ("" when none); 1 when one is open. */
int gpr_inj_writer_path(char *out, size_t len);
/* 1 in a child forked while a log was open. */
int gpr_inj_writer_forked(void);

#endif /* GPR_TRACE_INJECT_WRITER_H */
