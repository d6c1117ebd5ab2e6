/*
 * RMM's replay log, from a trace: the CSV that RMM's
 * logging_resource_adaptor writes (rapidsai/rmm, README "Memory Event
 * Logging"; columns Thread,Time,Action,Pointer,Size,Stream), which its
 * REPLAY_BENCH replays and its log parser reads.
 */
#ifndef GPR_TRACE_LOG_RMM_H
#define GPR_TRACE_LOG_RMM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../format/log_read.h"

/*
 * The first line of every RMM log, ours and RMM's alike (the format has
 * no room for a mark of ours): `gpureclaim report --rmm-csv` replaces a
 * file that begins so without --force.
 */
#define GPR_TRACE_RMM_SIGNATURE "Thread,Time,Action,Pointer,Size,Stream\n"

/* What an export left out, and why. */
struct gpr_trace_rmm_counts {
	uint64_t rows;	    /* written, header not counted */
	uint64_t implied;   /* frees missing from the log, written */
	uint64_t unmatched; /* frees of memory never seen allocated: left out */
	uint64_t unknown;   /* rows of an unknown device: left out */
};

/* The devices a log can name: CUDA ordinals 0 .. 32767 (an int16). */
#define GPR_TRACE_RMM_DEVICES 32768

/*
 * Where a device's rows go, asked once per device, the first time the
 * replay meets a row of it: 0 with *f the stream for them (the export
 * writes RMM's header line first) and *counts where to count them, or
 * *f NULL to leave the device out; -1 stops the export (GPR_E_IO).
 */
typedef int (*gpr_trace_rmm_open_fn)(void *ctx, int device, FILE **f,
				     struct gpr_trace_rmm_counts **counts);

/*
 * Writes every device's rows, in one replay of t, each to the stream
 * open_fn gives for it: RMM's header line, then in effect order (the
 * report's) an `allocate` per allocation of device memory (classic,
 * pitched, managed, stream-ordered; cuMemCreate on a device, its handle
 * as the pointer), a `free` per free or cuMemRelease whose allocation is
 * in the log (and one for each free the log lacks, where the same address
 * was allocated again), an `allocate failure` per failed allocation. Host
 * memory, mappings and address ranges move no device memory and are left
 * out. Time is the local wall-clock time of the call's effect
 * (HH:MM:SS.microseconds, TZ as the process has it), Pointer and Stream as
 * RMM prints them (printf %p; 0 or 0x...). *unknown: the rows whose device
 * the log does not know (in no file). 0, GPR_E_NOMEM or GPR_E_IO (a write
 * failed, errno says why, or open_fn refused).
 */
int gpr_trace_export_rmm(const struct gpr_trace *t,
			 gpr_trace_rmm_open_fn open_fn, void *ctx,
			 uint64_t *unknown);

#endif /* GPR_TRACE_LOG_RMM_H */
