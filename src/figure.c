/*
 * This process in NVML's lists: our pid's entry in one GPU's process list
 * (the one scan of it, shared by devices.c and by a release's "before" and
 * "after"), the driver's per-process figure that a release is measured
 * with, and gpr_process_bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "figure.h"
#include "gpu_map.h"

int gpr__read_mine(gpr_ctx *ctx, int idx, struct gpr__mine *m, char *err,
		   size_t errlen)
{
	memset(m, 0, sizeof *m);
	struct gpr__nvml_proc *procs = NULL;
	size_t np = 0;
	int rc = gpr__nvml_processes(&ctx->nvml, idx, &procs, &np, err, errlen);
	if (rc)
		return rc;
	m->read = 1;
	uint32_t me = (uint32_t)getpid();
	for (size_t k = 0; k < np; k++) {
		if (procs[k].pid != me)
			continue;
		m->found = 1;
		if (procs[k].bytes == GPR_NVML_VALUE_NOT_AVAILABLE)
			m->hidden = 1;
		else
			m->bytes += procs[k].bytes;
	}
	free(procs);
	return 0;
}

void gpr__process_figure(gpr_ctx *ctx, int ordinal, struct gpr__figure *f,
			 const struct gpr__mine *mine, int n_mine)
{
	memset(f, 0, sizeof *f);
	f->nvml_index = -1;
	f->state = GPR__FIG_ERROR;
	char err[GPR__ERRLEN] = "";
	f->rc = gpr__ensure_nvml(ctx, err, sizeof err);
	if (f->rc) {
		snprintf(f->why, sizeof f->why, "NVML unavailable: %s", err);
		return;
	}
	int idx = -1;
	f->rc = gpr__nvml_index_of(ctx, ordinal, &idx, err, sizeof err);
	if (f->rc) {
		snprintf(f->why, sizeof f->why, "no NVML index: %s", err);
		return;
	}
	if (idx < 0) {
		f->rc = GPR_E_NOT_FOUND;
		snprintf(f->why, sizeof f->why,
			 "no NVML GPU matches its UUID or PCI bus id");
		return;
	}
	f->nvml_index = idx;
	struct gpr__mine m;
	if (mine && idx < n_mine && mine[idx].read) {
		m = mine[idx];
	} else {
		f->rc = gpr__read_mine(ctx, idx, &m, err, sizeof err);
		if (f->rc) {
			snprintf(f->why, sizeof f->why, "NVML process list: %s",
				 err);
			return;
		}
	}
	if (m.found && !m.hidden) {
		f->bytes = m.bytes;
		f->known = 1;
		f->state = GPR__FIG_KNOWN;
		return;
	}
	if (!m.found) {
		f->state = GPR__FIG_ABSENT;
		snprintf(f->why, sizeof f->why,
			 "pid %u absent from NVML's process list (a pid "
			 "namespace?)",
			 (unsigned)getpid());
		return;
	}
	f->state = GPR__FIG_HIDDEN;
	struct gpr__nvml_gpu info;
	if (gpr__nvml_gpu_info(&ctx->nvml, idx, &info, err, sizeof err) == 0 &&
	    info.mig)
		snprintf(f->why, sizeof f->why,
			 "MIG: NVML has no per-process figure");
	else
		snprintf(f->why, sizeof f->why,
			 "NVML withholds the per-process figure");
}

int gpr_process_bytes(gpr_ctx *ctx, int device, uint64_t *bytes)
{
	if (!ctx || !bytes)
		return GPR_E_INVAL;
	*bytes = 0;
	int rc = gpr__fork_check(ctx);
	if (rc)
		return rc;
	if (device < 0)
		return gpr__fail(ctx, GPR_E_RANGE, "CUDA ordinal %d", device);
	char err[GPR__ERRLEN] = "";
	rc = gpr__ensure_cuda(ctx, err, sizeof err);
	if (rc == GPR_E_NOT_LOADED)
		return 0; /* no driver, no context: the process holds nothing */
	rc = gpr__check_ordinal(ctx, device);
	if (rc)
		return rc;
	struct gpr__figure f;
	gpr__process_figure(ctx, device, &f, NULL, 0);
	if (f.known) {
		*bytes = f.bytes;
		return 0;
	}
	if (f.state == GPR__FIG_ABSENT) {
		/* Without a context the process holds nothing there; with one,
		 * NVML lists other pids than ours: a pid namespace. */
		int active = 0;
		if (gpr__cuda_primary_active(&ctx->cuda, device, &active, err,
					     sizeof err) == 0 &&
		    !active)
			return 0;
		return gpr__fail(ctx, GPR_E_NO_PER_PROCESS, "GPU %d: %s",
				 device, f.why);
	}
	if (f.state == GPR__FIG_HIDDEN)
		return gpr__fail(ctx, GPR_E_NO_PER_PROCESS, "GPU %d: %s",
				 device, f.why);
	return gpr__fail(ctx, f.rc, "GPU %d: %s", device, f.why);
}
