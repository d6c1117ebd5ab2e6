/*
 * Torch MPS on Apple silicon: its releaser, of the GPU the core calls
 * "mps", and its explainer.
 * torch.mps.driver_allocated_memory() is Metal's per-process total
 * (currentAllocatedSize): it counts MLX's buffers as well as Torch's, so it
 * is the figure a release there is measured with (figure(), read before
 * any garbage collection: Metal buffers go back to the driver as soon as
 * their objects are collected). Its tensor counter
 * (current_allocated_memory) is the live part: it reads zero as soon as a
 * tensor is dropped, while the driver still holds the block.
 * Tested on this project with a fake torch.mps only (no Apple machine).
 */
#include "ext.h"

#include <stdio.h>

static int held(void *data, int device, struct gpr_held *out)
{
	(void)data;
	out->known = 0;
	if (device != GPR_DEVICE_ONCE)
		return 0;
	PyGILState_STATE g = PyGILState_Ensure();
	int64_t live = 0, driver = 0;
	int rc = 0;
	PyObject *mps = gpr_py_torch_mps(NULL, 0);
	if (mps) {
		rc = gpr_py_call_i64(mps, "current_allocated_memory", &live,
				     NULL) ||
		     gpr_py_call_i64(mps, "driver_allocated_memory", &driver,
				     NULL);
		Py_DECREF(mps);
		if (rc) {
			gpr_py_error_note(NULL, 0, "");
		} else {
			/* driver - live also counts MLX's buffers: an upper
			 * bound */
			out->live = (uint64_t)live;
			out->cached =
			    driver > live ? (uint64_t)(driver - live) : 0;
			out->known = 1;
		}
	}
	PyGILState_Release(g);
	return rc ? GPR_E_RELEASER : 0;
}

static int release(void *data, int device, char *note, size_t note_sz)
{
	(void)data;
	if (device != GPR_DEVICE_ONCE)
		return 0;
	PyGILState_STATE g = PyGILState_Ensure();
	int rc = 0;
	PyObject *mps = gpr_py_torch_mps(NULL, 0);
	PyObject *r = mps ? gpr_py_call(mps, "empty_cache", NULL) : NULL;
	if (mps && !r) {
		gpr_py_error_note(note, note_sz, "");
		rc = GPR_E_RELEASER;
	}
	Py_XDECREF(r);
	Py_XDECREF(mps);
	PyGILState_Release(g);
	return rc;
}

static int figure(void *data, uint64_t *bytes, char *why, size_t why_sz)
{
	(void)data;
	PyGILState_STATE g = PyGILState_Ensure();
	int rc = GPR_FIGURE_UNUSED;
	int64_t v = 0;
	PyObject *mps = gpr_py_torch_mps(why, why_sz);
	if (mps && gpr_py_call_i64(mps, "driver_allocated_memory", &v, NULL)) {
		gpr_py_error_note(why, why_sz,
				  "torch.mps.driver_allocated_memory()");
		rc = GPR_E_RELEASER;
	} else if (mps) {
		*bytes = v > 0 ? (uint64_t)v : 0;
		rc = GPR_FIGURE_KNOWN;
	}
	Py_XDECREF(mps);
	PyGILState_Release(g);
	return rc;
}

const struct gpr_releaser gpr_py_mps_releaser = {
    .sz = sizeof(struct gpr_releaser),
    .name = "mps",
    .held = held,
    .release = release,
    .device_name = GPR_PY_METAL_DEVICE,
    .figure = figure,
};

/* Torch's live tensors in the Metal entry; Torch's MPS cache is not
 * reported apart from MLX's buffers: it stays in the rest. */
int gpr_py_explain_mps(struct gpr_py_xcall *c, struct gpr_py_xgpu *g)
{
	(void)c;
	PyObject *mps = gpr_py_torch_mps(NULL, 0);
	if (!mps)
		return 0;
	int64_t live = 0;
	int rc = gpr_py_call_i64(mps, "current_allocated_memory", &live, NULL);
	Py_DECREF(mps);
	if (rc)
		return -1;
	return gpr_py_xpart(g, "live", "torch.mps", live, 1,
			    "torch.mps.current_allocated_memory()", NULL);
}
