/*
 * The driver's checkpoint calls (driver 570 and later), made by a
 * controller process on another process's pid: lock its CUDA calls, copy
 * its GPU memory to host memory and give the GPU back (checkpoint), copy
 * it back (restore), let it go on (unlock). The controller must have
 * called cuInit (gpr__cuda_init); nothing here opens a context.
 *
 * Arguments are zeroed structs of the cuda.h they mirror (cuda_abi.h):
 * reserved fields must be zero, and a newer driver reads a zeroed field
 * as "as before" (host memory, the same GPUs).
 */
#include <dlfcn.h>
#include <string.h>

#include "driver.h"
#include "gpureclaim.h"
#include "loader.h"

int gpr__cuda_init(struct gpr__cuda *c, char *err, size_t errlen)
{
	if (!c->lib) {
		gpr__errf(err, errlen, "the CUDA driver is not loaded");
		return GPR_E_NOT_LOADED;
	}
	CUresult (*init)(unsigned int) = NULL;
	dlerror();
	void *sym = dlsym(c->lib, "cuInit");
	if (!sym) {
		gpr__errf(err, errlen,
			  "%s is not a CUDA driver: cuInit missing", c->path);
		return GPR_E_BAD_LIBRARY;
	}
	memcpy(&init, &sym, sizeof init);
	CUresult r = init(0);
	if (r == CUDA_SUCCESS)
		return 0;
	char what[GPR__ERRLEN];
	gpr__cuda_describe(c, r, what, sizeof what);
	gpr__errf(err, errlen, "cuInit: %s", what);
	return GPR_E_DRIVER;
}

const char *gpr__ckpt_missing(const struct gpr__cuda *c)
{
	const struct gpr__cuda_api *a = &c->api;
	if (!a->ckpt_get_state)
		return "cuCheckpointProcessGetState";
	if (!a->ckpt_lock)
		return "cuCheckpointProcessLock";
	if (!a->ckpt_checkpoint)
		return "cuCheckpointProcessCheckpoint";
	if (!a->ckpt_restore)
		return "cuCheckpointProcessRestore";
	if (!a->ckpt_unlock)
		return "cuCheckpointProcessUnlock";
	return NULL;
}

/* The answer of one call: 0, or its CUresult described into err. */
static int answer(struct gpr__cuda *c, const char *call, CUresult r,
		  CUresult *res, char *err, size_t errlen)
{
	*res = r;
	if (r == CUDA_SUCCESS)
		return 0;
	char what[GPR__ERRLEN];
	gpr__cuda_describe(c, r, what, sizeof what);
	gpr__errf(err, errlen, "%s: %s", call, what);
	return GPR_E_DRIVER;
}

static int lacks(struct gpr__cuda *c, const char *call, CUresult *res,
		 char *err, size_t errlen)
{
	*res = CUDA_ERROR_NOT_SUPPORTED;
	gpr__errf(err, errlen, "%s exports no %s", c->path, call);
	return GPR_E_BAD_LIBRARY;
}

int gpr__ckpt_state(struct gpr__cuda *c, int pid, int *state, CUresult *res,
		    char *err, size_t errlen)
{
	const char *call = "cuCheckpointProcessGetState";
	*state = -1;
	if (!c->api.ckpt_get_state)
		return lacks(c, call, res, err, errlen);
	CUprocessState s = CU_PROCESS_STATE_RUNNING;
	int rc =
	    answer(c, call, c->api.ckpt_get_state(pid, &s), res, err, errlen);
	if (rc == 0)
		*state = (int)s;
	return rc;
}

int gpr__ckpt_lock(struct gpr__cuda *c, int pid, unsigned timeout_ms,
		   CUresult *res, char *err, size_t errlen)
{
	const char *call = "cuCheckpointProcessLock";
	if (!c->api.ckpt_lock)
		return lacks(c, call, res, err, errlen);
	CUcheckpointLockArgs args;
	memset(&args, 0, sizeof args);
	args.timeoutMs = timeout_ms;
	return answer(c, call, c->api.ckpt_lock(pid, &args), res, err, errlen);
}

int gpr__ckpt_checkpoint(struct gpr__cuda *c, int pid, CUresult *res, char *err,
			 size_t errlen)
{
	const char *call = "cuCheckpointProcessCheckpoint";
	if (!c->api.ckpt_checkpoint)
		return lacks(c, call, res, err, errlen);
	CUcheckpointCheckpointArgs args;
	memset(&args, 0, sizeof args);
	return answer(c, call, c->api.ckpt_checkpoint(pid, &args), res, err,
		      errlen);
}

int gpr__ckpt_restore(struct gpr__cuda *c, int pid,
		      const CUcheckpointGpuPair *pairs, unsigned n,
		      CUresult *res, char *err, size_t errlen)
{
	const char *call = "cuCheckpointProcessRestore";
	if (!c->api.ckpt_restore)
		return lacks(c, call, res, err, errlen);
	CUcheckpointRestoreArgs args;
	memset(&args, 0, sizeof args);
	if (pairs && n) {
		/* the driver only reads them */
		args.gpuPairs = (CUcheckpointGpuPair *)(uintptr_t)pairs;
		args.gpuPairsCount = n;
	}
	return answer(c, call, c->api.ckpt_restore(pid, &args), res, err,
		      errlen);
}

int gpr__ckpt_unlock(struct gpr__cuda *c, int pid, CUresult *res, char *err,
		     size_t errlen)
{
	const char *call = "cuCheckpointProcessUnlock";
	if (!c->api.ckpt_unlock)
		return lacks(c, call, res, err, errlen);
	CUcheckpointUnlockArgs args;
	memset(&args, 0, sizeof args);
	return answer(c, call, c->api.ckpt_unlock(pid, &args), res, err,
		      errlen);
}

int gpr__ckpt_restore_tid(struct gpr__cuda *c, int pid, int *tid, CUresult *res,
			  char *err, size_t errlen)
{
	const char *call = "cuCheckpointProcessGetRestoreThreadId";
	*tid = 0;
	if (!c->api.ckpt_restore_tid)
		return lacks(c, call, res, err, errlen);
	return answer(c, call, c->api.ckpt_restore_tid(pid, tid), res, err,
		      errlen);
}
