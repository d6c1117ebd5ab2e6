/*
 * What NVML says about GPUs and processes: the per-process driver figure
 * (the number a release is measured with), GPU totals, process lists, and
 * the CUDA-ordinal-to-NVML-index mapping.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctx.h"

#define FORK_CHECK(ctx)                                                        \
	do {                                                                   \
		if (gpr__forked(ctx))                                          \
			return gpr__fail(ctx, GPR_E_FORKED,                    \
					 "handle opened by pid %ld",           \
					 (long)(ctx)->pid);                    \
	} while (0)

/* Our pid's entry in GPU idx's list, read now. */
static int read_mine(gpr_ctx *ctx, int idx, struct gpr__mine *m, char *err,
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
		f->rc = read_mine(ctx, idx, &m, err, sizeof err);
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

int gpr_gpu_count(gpr_ctx *ctx, int *n)
{
	if (!ctx || !n)
		return GPR_E_INVAL;
	*n = 0;
	FORK_CHECK(ctx);
	char err[GPR__ERRLEN] = "";
	int rc = gpr__ensure_nvml(ctx, err, sizeof err);
	if (rc == 0)
		rc = gpr__nvml_count(&ctx->nvml, n, err, sizeof err);
	return rc ? gpr__fail(ctx, rc, "%s", err) : 0;
}

/* The CUDA ordinal of NVML index `index`, -1 if CUDA is not in use here. */
static int ordinal_of(gpr_ctx *ctx, int index)
{
	char err[GPR__ERRLEN];
	int count = 0;
	if (gpr__ensure_cuda(ctx, err, sizeof err) ||
	    gpr__cuda_device_count(&ctx->cuda, &count, err, sizeof err))
		return -1;
	for (int d = 0; d < count; d++) {
		int idx = -1;
		if (gpr__nvml_index_of(ctx, d, &idx, err, sizeof err) == 0 &&
		    idx == index)
			return d;
	}
	return -1;
}

int gpr_gpu_info(gpr_ctx *ctx, int index, struct gpr_gpu *out)
{
	if (!ctx || !out)
		return GPR_E_INVAL;
	memset(out, 0, sizeof *out);
	FORK_CHECK(ctx);
	char err[GPR__ERRLEN] = "";
	int n = 0;
	int rc = gpr__ensure_nvml(ctx, err, sizeof err);
	if (rc == 0)
		rc = gpr__nvml_count(&ctx->nvml, &n, err, sizeof err);
	if (rc)
		return gpr__fail(ctx, rc, "%s", err);
	if (index < 0 || index >= n)
		return gpr__fail(ctx, GPR_E_RANGE, "NVML index %d of %d", index,
				 n);
	struct gpr__nvml_gpu g;
	rc = gpr__nvml_gpu_info(&ctx->nvml, index, &g, err, sizeof err);
	if (rc)
		return gpr__fail(ctx, rc, "NVML GPU %d: %s", index, err);
	out->index = index;
	out->cuda_ordinal = ordinal_of(ctx, index);
	memcpy(out->name, g.name, sizeof out->name);
	memcpy(out->uuid, g.uuid, sizeof out->uuid);
	memcpy(out->pci_bus_id, g.pci_bus_id, sizeof out->pci_bus_id);
	out->name[sizeof out->name - 1] = '\0';
	out->uuid[sizeof out->uuid - 1] = '\0';
	out->pci_bus_id[sizeof out->pci_bus_id - 1] = '\0';
	out->total = g.total;
	out->used = g.used;
	out->free = g.free;
	out->reserved = g.reserved;
	out->mig = g.mig;
	out->memory_info_v2 = g.memory_info_v2;
	return 0;
}

int gpr_gpu_processes(gpr_ctx *ctx, int index, struct gpr_process **procs,
		      size_t *n)
{
	if (!ctx || !procs || !n)
		return GPR_E_INVAL;
	*procs = NULL;
	*n = 0;
	FORK_CHECK(ctx);
	char err[GPR__ERRLEN] = "";
	int cnt = 0;
	int rc = gpr__ensure_nvml(ctx, err, sizeof err);
	if (rc == 0)
		rc = gpr__nvml_count(&ctx->nvml, &cnt, err, sizeof err);
	if (rc)
		return gpr__fail(ctx, rc, "%s", err);
	if (index < 0 || index >= cnt)
		return gpr__fail(ctx, GPR_E_RANGE, "NVML index %d of %d", index,
				 cnt);
	struct gpr__nvml_proc *raw = NULL;
	size_t np = 0;
	rc = gpr__nvml_processes(&ctx->nvml, index, &raw, &np, err, sizeof err);
	if (rc)
		return gpr__fail(ctx, rc, "NVML GPU %d: %s", index, err);
	struct gpr_process *out = calloc(np ? np : 1, sizeof *out);
	if (!out) {
		free(raw);
		return GPR_E_NOMEM;
	}
	for (size_t i = 0; i < np; i++) {
		out[i].pid = raw[i].pid;
		out[i].bytes_known =
		    raw[i].bytes != GPR_NVML_VALUE_NOT_AVAILABLE;
		out[i].bytes = out[i].bytes_known ? raw[i].bytes : 0;
		out[i].compute = raw[i].compute;
		out[i].graphics = raw[i].graphics;
	}
	free(raw);
	*procs = out;
	*n = np;
	return 0;
}

/* Checks that CUDA is usable and `device` is one of its ordinals. */
static int check_ordinal(gpr_ctx *ctx, int device)
{
	char err[GPR__ERRLEN] = "";
	int rc = gpr__ensure_cuda(ctx, err, sizeof err);
	if (rc == GPR_E_NOT_LOADED)
		return gpr__fail(ctx, rc, "no CUDA ordinals without libcuda");
	if (rc)
		return gpr__fail(ctx, rc, "%s", err);
	int count = 0;
	rc = gpr__cuda_device_count(&ctx->cuda, &count, err, sizeof err);
	if (rc)
		return gpr__fail(ctx, rc, "cuDeviceGetCount: %s", err);
	if (device < 0 || device >= count)
		return gpr__fail(ctx, GPR_E_RANGE, "CUDA ordinal %d of %d",
				 device, count);
	return 0;
}

int gpr_process_bytes(gpr_ctx *ctx, int device, uint64_t *bytes)
{
	if (!ctx || !bytes)
		return GPR_E_INVAL;
	*bytes = 0;
	FORK_CHECK(ctx);
	if (device < 0)
		return gpr__fail(ctx, GPR_E_RANGE, "CUDA ordinal %d", device);
	char err[GPR__ERRLEN] = "";
	int rc = gpr__ensure_cuda(ctx, err, sizeof err);
	if (rc == GPR_E_NOT_LOADED)
		return 0; /* no driver, no context: the process holds nothing */
	rc = check_ordinal(ctx, device);
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

int gpr_nvml_index(gpr_ctx *ctx, int device, int *index)
{
	if (!ctx || !index)
		return GPR_E_INVAL;
	*index = -1;
	FORK_CHECK(ctx);
	int rc = check_ordinal(ctx, device);
	if (rc)
		return rc;
	char err[GPR__ERRLEN] = "";
	rc = gpr__ensure_nvml(ctx, err, sizeof err);
	if (rc == 0)
		rc = gpr__nvml_index_of(ctx, device, index, err, sizeof err);
	if (rc)
		return gpr__fail(ctx, rc, "GPU %d: %s", device, err);
	if (*index < 0)
		return gpr__fail(ctx, GPR_E_NOT_FOUND,
				 "GPU %d: no NVML GPU with its UUID or bus id",
				 device);
	return 0;
}
