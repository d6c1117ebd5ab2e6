/*
 * Which GPUs this process holds a context on, opening none: the primary
 * context state of each CUDA ordinal (cuDevicePrimaryCtxGetState, ~1 us)
 * united with the GPUs whose NVML process list holds our pid (non-primary
 * contexts: cuCtxCreate). Nothing here calls cuInit: when no one in the
 * process has, there is no context and the answer is "none" at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "devices.h"
#include "figure.h"
#include "gpu_map.h"
#include "report.h"

#define WHY (GPR__ERRLEN + 64)

/* The union with NVML's lists; NVML missing only loses non-primary ones. */
static void add_nvml(gpr_ctx *ctx, int count, int *in, char (*why)[WHY],
		     struct gpr__mine **mine, int *n_mine)
{
	char err[GPR__ERRLEN] = "";
	int nn = 0;
	if (gpr__ensure_nvml(ctx, err, sizeof err) ||
	    gpr__nvml_count(&ctx->nvml, &nn, err, sizeof err)) {
		gpr__log(ctx, GPR_LOG_INFO,
			 "NVML unavailable (%s): only primary contexts seen",
			 err);
		return;
	}
	if (mine && nn > 0) {
		*mine = calloc((size_t)nn, sizeof **mine);
		*n_mine = *mine ? nn : 0;
	}
	for (int i = 0; i < nn; i++) {
		struct gpr__mine m;
		int rc = gpr__read_mine(ctx, i, &m, err, sizeof err);
		int d = rc || m.found ? gpr__ordinal_of(ctx, count, i) : -1;
		if (rc) {
			gpr__log(ctx, GPR_LOG_WARN,
				 "NVML GPU %d: process list: %s", i, err);
			if (d >= 0 && !why[d][0])
				snprintf(why[d], sizeof why[d],
					 "NVML process list: %s", err);
			continue;
		}
		if (mine && *mine)
			(*mine)[i] = m;
		if (d >= 0)
			in[d] = 1;
		else if (m.found)
			gpr__log(ctx, GPR_LOG_DEBUG,
				 "NVML GPU %d lists us but no CUDA ordinal "
				 "matches it",
				 i);
	}
}

int gpr__devices_in_use(gpr_ctx *ctx, int **devs, int *n, int *count,
			gpr_report *notes, struct gpr__mine **mine, int *n_mine)
{
	if (mine) {
		*mine = NULL;
		*n_mine = 0;
	}
	*devs = NULL;
	*n = 0;
	*count = 0;
	char err[GPR__ERRLEN] = "";
	int cnt = 0;
	int rc = gpr__cuda_count(ctx, &cnt);
	if (rc)
		return rc;
	*count = cnt;
	if (cnt <= 0)
		return 0;
	int *in = calloc((size_t)cnt, sizeof *in);
	char(*why)[WHY] = calloc((size_t)cnt, sizeof *why);
	if (!in || !why) {
		free(in);
		free(why);
		return GPR_E_NOMEM;
	}
	for (int d = 0; d < cnt; d++) {
		int active = 0;
		if (gpr__cuda_primary_active(&ctx->cuda, d, &active, err,
					     sizeof err))
			snprintf(why[d], sizeof why[d],
				 "primary context state: %s", err);
		else
			in[d] = active;
	}
	add_nvml(ctx, cnt, in, why, mine, n_mine);
	int k = 0;
	for (int d = 0; d < cnt; d++) {
		if (in[d])
			in[k++] = d;
		else if (why[d][0]) {
			gpr__report_note(notes,
					 "GPU %d: cannot be queried (%s): "
					 "skipped",
					 d, why[d]);
			gpr__log(ctx, GPR_LOG_WARN,
				 "GPU %d: cannot be queried (%s): skipped", d,
				 why[d]);
		}
	}
	free(why);
	*devs = in;
	*n = k;
	return 0;
}

int gpr_devices_in_use(gpr_ctx *ctx, int *devices, int cap, int *n)
{
	if (!ctx || !n || cap < 0 || (cap > 0 && !devices))
		return GPR_E_INVAL;
	*n = 0;
	int rc = gpr__fork_check(ctx);
	if (rc)
		return rc;
	int *devs = NULL, count = 0, k = 0;
	rc = gpr__devices_in_use(ctx, &devs, &k, &count, NULL, NULL, NULL);
	if (rc == GPR_E_NOT_LOADED)
		return 0;
	if (rc)
		return rc;
	for (int i = 0; i < k && i < cap; i++)
		devices[i] = devs[i];
	*n = k;
	free(devs);
	return 0;
}

int gpr_primary_context_active(gpr_ctx *ctx, int device, int *active)
{
	if (!ctx || !active || device < 0)
		return GPR_E_INVAL;
	*active = 0;
	int rc = gpr__fork_check(ctx);
	if (rc)
		return rc;
	char err[GPR__ERRLEN] = "";
	int count = 0;
	rc = gpr__cuda_count(ctx, &count);
	if (rc)
		return rc == GPR_E_NOT_LOADED ? 0 : rc;
	if (count == 0)
		return 0; /* not initialised: no context anywhere */
	if (device >= count)
		return gpr__fail(ctx, GPR_E_RANGE, "GPU %d of %d", device,
				 count);
	rc = gpr__cuda_primary_active(&ctx->cuda, device, active, err,
				      sizeof err);
	if (rc)
		return gpr__fail(ctx, rc, "GPU %d: %s", device, err);
	return 0;
}
