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

#endif /* GPR_REPORT_H */
