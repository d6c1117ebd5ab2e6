/*
 * This process in NVML's process lists: the driver's per-process figure
 * (figure.c). Internal.
 */
#ifndef GPR_FIGURE_H
#define GPR_FIGURE_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"

/* Our pid's entry in one GPU's NVML process list, as one read found it. */
struct gpr__mine {
	int read;   /* the list was read (rc 0) */
	int found;  /* our pid is in it */
	int hidden; /* listed without a figure */
	uint64_t bytes;
};

/* Reads NVML GPU `index`'s process list and keeps our pid's entry. */
int gpr__read_mine(gpr_ctx *ctx, int index, struct gpr__mine *m, char *err,
		   size_t errlen);

/* The driver's figure for this process on one device. */
enum gpr__figure_state {
	GPR__FIG_KNOWN,	 /* bytes is the driver's per-process figure */
	GPR__FIG_ERROR,	 /* NVML missing or failing: rc says which */
	GPR__FIG_ABSENT, /* our pid is not in the list */
	GPR__FIG_HIDDEN	 /* listed without a figure (MIG) */
};
struct gpr__figure {
	int known; /* state == GPR__FIG_KNOWN */
	int state;
	int rc; /* GPR_E_* for GPR__FIG_ERROR */
	uint64_t bytes;
	int nvml_index;		    /* -1 if unmatched */
	char why[GPR__ERRLEN + 64]; /* why not known */
};
/*
 * The figure of CUDA ordinal `ordinal`. `mine` (n_mine entries by NVML
 * index, may be NULL) is a scan already made: where it read the GPU's list,
 * NVML is not asked again (a release reuses the scan that found its GPUs as
 * the "before" figure: ~0.35 ms a GPU on an H200).
 */
void gpr__process_figure(gpr_ctx *ctx, int ordinal, struct gpr__figure *f,
			 const struct gpr__mine *mine, int n_mine);

#endif /* GPR_FIGURE_H */
