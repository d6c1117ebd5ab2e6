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

/*
 * The CUDA devices that have device memory rows, ascending, into devs
 * (at most cap); returns how many there are. *unknown: rows whose device
 * the log does not know. 0 devices and GPR_E_NOMEM are told apart by *rc.
 */
size_t gpr_trace_rmm_devices(const struct gpr_trace *t, int *devs, size_t cap,
			     uint64_t *unknown, int *rc);

/*
 * Writes device `device`'s rows to f: RMM's header line, then in effect
 * order (the report's) an `allocate` per allocation of device memory
 * (classic, pitched, managed, stream-ordered; cuMemCreate on a device,
 * its handle as the pointer), a `free` per free or cuMemRelease whose
 * allocation is in the log (and one for each free the log lacks, where
 * the same address was allocated again), an `allocate failure` per failed
 * allocation. Host memory, mappings and address ranges move no device
 * memory and are left out. Time is the local wall-clock time of the
 * call's effect (HH:MM:SS.microseconds, TZ as the process has it),
 * Pointer and Stream as RMM prints them (printf %p; 0 or 0x...). 0,
 * GPR_E_NOMEM or GPR_E_IO.
 */
int gpr_trace_export_rmm(const struct gpr_trace *t, int device, FILE *f,
			 struct gpr_trace_rmm_counts *counts);

#endif /* GPR_TRACE_LOG_RMM_H */
