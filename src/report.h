/*
 * The report object shared by release.c (which fills it), report.c (its
 * accessors) and the renderers. Internal.
 */
#ifndef GPR_REPORT_H
#define GPR_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "gpureclaim.h"

struct gpr__rrow {
	char *name;
	int device;
	int known; /* before and after both known */
	struct gpr_held before, after;
	int status;
};

struct gpr_report {
	int64_t bytes;
	const char *source; /* static: "driver", "allocators", "none" */
	double seconds;
	int collected;
	double collect_seconds;
	struct gpr_report_gpu *gpus;
	size_t n_gpus, cap_gpus;
	struct gpr__rrow *rel;
	size_t n_rel, cap_rel;
	char **notes;
	size_t n_notes, cap_notes;
	int oom; /* an addition failed: the report is incomplete */
};

gpr_report *gpr__report_new(void);

/* Appends a note (printf format). NULL report: a no-op. On OOM sets oom. */
void gpr__report_note(gpr_report *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A zeroed new row, or NULL (and oom set) when out of memory. */
struct gpr_report_gpu *gpr__report_add_gpu(gpr_report *r);
struct gpr__rrow *gpr__report_add_releaser(gpr_report *r, const char *name,
					   int device);

/* Human units of 1e9/1e6/1e3 bytes ("2.147 GB", "512.0 MB"), as used by the
 * text table; `buf` of at least 32 bytes. */
const char *gpr__human_bytes(int64_t bytes, char *buf, size_t len);

#endif /* GPR_REPORT_H */
