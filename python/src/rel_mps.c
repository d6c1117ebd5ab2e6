/*
 * Torch MPS on Apple silicon. torch.mps.driver_allocated_memory() is
 * Metal's per-process total (currentAllocatedSize): it counts MLX's buffers
 * as well as Torch's, so it is the figure the Metal pass reports. Its tensor
 * counter (current_allocated_memory) is the live part: it reads zero as
 * soon as a tensor is dropped, while the driver still holds the block.
 * Tested on this project with a fake torch.mps only (no Apple machine).
 */
#include "ext.h"

#include <stdio.h>

/* torch.mps when torch is imported and MPS is available (new ref). */
static PyObject *torch_mps(char *why, size_t len)
{
	PyObject *torch = gpr_py_imported("torch");
	if (!torch) {
		snprintf(why, len, "torch not imported");
		return NULL;
	}
	PyObject *avail = gpr_py_attr(torch, "backends.mps");
	PyObject *r = avail ? gpr_py_call(avail, "is_available", NULL) : NULL;
	int ok = gpr_py_truth(r);
	Py_XDECREF(r);
	Py_XDECREF(avail);
	PyObject *mps = ok == 1 ? gpr_py_attr(torch, "mps") : NULL;
	Py_DECREF(torch);
	PyErr_Clear();
	if (!mps) {
		snprintf(why, len, "torch imported, MPS not available");
		return NULL;
	}
	snprintf(why, len, "torch MPS available");
	return mps;
}

static int status(char *why, size_t len)
{
	PyObject *mps = torch_mps(why, len);
	Py_XDECREF(mps);
	return mps != NULL;
}

static int driver_bytes(int64_t *out)
{
	char why[64];
	PyObject *mps = torch_mps(why, sizeof why);
	if (!mps)
		return 0;
	int rc = gpr_py_call_i64(mps, "driver_allocated_memory", out, NULL);
	Py_DECREF(mps);
	return rc ? -1 : 1;
}

static int held(struct gpr_held *out)
{
	char why[64];
	int64_t live = 0, driver = 0;
	out->known = 0;
	PyObject *mps = torch_mps(why, sizeof why);
	if (!mps)
		return 0;
	int rc = gpr_py_call_i64(mps, "current_allocated_memory", &live, NULL);
	if (!rc)
		rc = gpr_py_call_i64(mps, "driver_allocated_memory", &driver,
				     NULL);
	Py_DECREF(mps);
	if (rc)
		return -1;
	/* driver - live also counts MLX's buffers: an upper bound. */
	out->live = (uint64_t)live;
	out->cached = driver > live ? (uint64_t)(driver - live) : 0;
	out->known = 1;
	return 0;
}

static int release(void)
{
	char why[64];
	PyObject *mps = torch_mps(why, sizeof why);
	if (!mps)
		return 0;
	PyObject *r = gpr_py_call(mps, "empty_cache", NULL);
	Py_DECREF(mps);
	Py_XDECREF(r);
	return r ? 0 : -1;
}

const struct gpr_py_metal gpr_py_rel_mps = {
    .name = "mps",
    .status = status,
    .driver_bytes = driver_bytes,
    .held = held,
    .release = release,
};
