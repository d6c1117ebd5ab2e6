/*
 * GPUs as NVML sees them: their number, each one's name, ids and memory,
 * the processes on each, and which of them did work lately. These open NVML
 * (once per handle) but never the CUDA driver, which is only asked for the
 * ordinal of an NVML index where it is already loaded.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "driver_info.h"
#include "gpu_map.h"
#include "gpus.h"
#include "sized.h"

/* NVML open and its GPU count; failures recorded for gpr_last_error. */
static int nvml_count(gpr_ctx *ctx, int *n)
{
	char err[GPR__ERRLEN] = "";
	int rc = gpr__ensure_nvml(ctx, err, sizeof err);
	if (rc == 0)
		rc = gpr__nvml_count(&ctx->nvml, n, err, sizeof err);
	return rc ? gpr__fail(ctx, rc, "%s", err) : 0;
}

/* nvml_count, then GPR_E_RANGE unless 0 <= index < count. */
static int nvml_index_ok(gpr_ctx *ctx, int index)
{
	int n = 0;
	int rc = nvml_count(ctx, &n);
	if (rc)
		return rc;
	if (index < 0 || index >= n)
		return gpr__fail(ctx, GPR_E_RANGE, "NVML index %d of %d", index,
				 n);
	return 0;
}

int gpr_gpu_count(gpr_ctx *ctx, int *n)
{
	if (!ctx || !n)
		return GPR_E_INVAL;
	*n = 0;
	int rc = gpr__fork_check(ctx);
	return rc ? rc : nvml_count(ctx, n);
}

int gpr__driver_version(gpr_ctx *ctx, char *out, size_t len)
{
	if (!ctx || !out || !len)
		return GPR_E_INVAL;
	out[0] = '\0';
	int rc = gpr__fork_check(ctx);
	if (rc)
		return rc;
	char err[GPR__ERRLEN] = "";
	rc = gpr__ensure_nvml(ctx, err, sizeof err);
	if (rc == 0)
		rc = gpr__nvml_driver_version(&ctx->nvml, out, len, err,
					      sizeof err);
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
	return gpr__ordinal_of(ctx, count, index);
}

int gpr_gpu_info_sz(gpr_ctx *ctx, int index, struct gpr_gpu *out, size_t *sz)
{
	if (!ctx || !out || !sz || !*sz)
		return GPR_E_INVAL;
	struct gpr_gpu info;
	memset(&info, 0, sizeof info);
	int rc = gpr__fork_check(ctx);
	if (!rc)
		rc = nvml_index_ok(ctx, index);
	char err[GPR__ERRLEN] = "";
	struct gpr__nvml_gpu g;
	if (!rc &&
	    (rc = gpr__nvml_gpu_info(&ctx->nvml, index, &g, err, sizeof err)))
		rc = gpr__fail(ctx, rc, "NVML GPU %d: %s", index, err);
	if (!rc) {
		info.index = index;
		info.cuda_ordinal = ordinal_of(ctx, index);
		memcpy(info.name, g.name, sizeof info.name);
		memcpy(info.uuid, g.uuid, sizeof info.uuid);
		memcpy(info.pci_bus_id, g.pci_bus_id, sizeof info.pci_bus_id);
		info.name[sizeof info.name - 1] = '\0';
		info.uuid[sizeof info.uuid - 1] = '\0';
		info.pci_bus_id[sizeof info.pci_bus_id - 1] = '\0';
		info.total = g.total;
		info.used = g.used;
		info.free = g.free;
		info.reserved = g.reserved;
		info.mig = g.mig;
		info.memory_info_v2 = g.memory_info_v2;
	}
	/* zeroed on failure too, as the caller's struct always was */
	gpr__out_copy(out, sz, &info, sizeof info);
	return rc;
}

/* A GPU's query may start: not in a forked child, index an NVML GPU. */
static int may_query(gpr_ctx *ctx, int index)
{
	int rc = gpr__fork_check(ctx);
	return rc ? rc : nvml_index_ok(ctx, index);
}

int gpr_gpu_processes(gpr_ctx *ctx, int index, struct gpr_process **procs,
		      size_t *n)
{
	if (!ctx || !procs || !n)
		return GPR_E_INVAL;
	*procs = NULL;
	*n = 0;
	int rc = may_query(ctx, index);
	if (rc)
		return rc;
	char err[GPR__ERRLEN] = "";
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

int gpr__gpu_work(gpr_ctx *ctx, int index, uint64_t since_us,
		  struct gpr__work **out, size_t *n)
{
	if (!ctx || !out || !n)
		return GPR_E_INVAL;
	*out = NULL;
	*n = 0;
	int rc = may_query(ctx, index);
	char err[GPR__ERRLEN] = "";
	struct gpr__nvml_work *raw = NULL;
	size_t k = 0;
	if (!rc && (rc = gpr__nvml_work(&ctx->nvml, index, since_us, &raw, &k,
					err, sizeof err)))
		return gpr__fail(ctx, rc, "NVML GPU %d: %s", index, err);
	struct gpr__work *w = !rc && k ? calloc(k, sizeof *w) : NULL;
	if (!rc && k && !w)
		rc = GPR_E_NOMEM;
	for (size_t i = 0; w && i < k; i++) /* the same facts, our type */
		w[i] = (struct gpr__work){raw[i].pid, raw[i].time_us, raw[i].sm,
					  raw[i].mem};
	free(raw);
	*out = w;
	*n = w ? k : 0;
	return rc;
}

int gpr__gpu_memory(gpr_ctx *ctx, int index, struct gpr__nvml_gpu *out)
{
	char err[GPR__ERRLEN] = "";
	int rc = gpr__ensure_nvml(ctx, err, sizeof err);
	if (rc == 0)
		rc = gpr__nvml_memory(&ctx->nvml, index, out, err, sizeof err);
	return rc;
}
