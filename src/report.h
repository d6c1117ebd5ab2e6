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

/* ---- the views' shared parts (report_view.c) ---- */

struct gpr__buf;
struct gpr__table;

/* "released 1.0 GiB (1073741824 bytes) from the driver in 1.2 ms". */
void gpr__report_headline(struct gpr__buf *b, const gpr_report *r);

/* "0", or a named GPU's name ("mps"). */
void gpr__report_gpu_label(const struct gpr_report_gpu *g, char *out,
			   size_t len);

/* The table of visited GPUs; free it with gpr__table_free. */
void gpr__report_gpu_table(const gpr_report *r, struct gpr__table *t);

/* The table of releaser rows that measured something or failed; returns
 * how many rows it left out. */
size_t gpr__report_releaser_table(const gpr_report *r, struct gpr__table *t);

/* The line that says how many rows were left out. */
void gpr__report_hidden_line(struct gpr__buf *b, size_t hidden);

#endif /* GPR_REPORT_H */
