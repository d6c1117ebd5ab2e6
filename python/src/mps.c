/*
 * Torch MPS on Apple silicon: its releaser, of the GPU the core calls
 * "mps", and its explainer. torch.mps.driver_allocated_memory() is Metal's
 * per-process total (currentAllocatedSize): it counts MLX's buffers as well
 * as Torch's, so it is the figure a release there is measured with
 * (figure(), read before any garbage collection: Metal buffers go back to
 * the driver as soon as their objects are collected). Its tensor counter
 * (current_allocated_memory) is the live part: it reads zero as soon as a
 * tensor is dropped, while the driver still holds the block.
 * Tested on this project with a fake torch.mps only (no Apple machine).
 */
#include "ext.h"

#include <stdio.h>

/* driver - live also counts MLX's buffers: an upper bound of the cache */
static int counters(PyObject *mps, int64_t *live, int64_t *cached)
{
	int64_t driver = 0;
	if (gpr_py_call_i64(mps, "current_allocated_memory", live, NULL) ||
	    gpr_py_call_i64(mps, "driver_allocated_memory", &driver, NULL))
		return -1;
	*cached = driver > *live ? driver - *live : 0;
	return 0;
}

static PyObject *empty(PyObject *mps)
{
	return gpr_py_call(mps, "empty_cache", NULL);
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

static struct gpr_py_metal_fw mps_fw = {gpr_py_torch_mps, counters, empty};

const struct gpr_releaser gpr_py_mps_releaser = {
    .sz = sizeof(struct gpr_releaser),
    .name = "mps",
    .data = &mps_fw,
    .held = gpr_py_metal_held,
    .release = gpr_py_metal_release,
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
	int64_t live = 0, cached = 0;
	int rc = counters(mps, &live, &cached);
	Py_DECREF(mps);
	if (rc)
		return -1;
	return gpr_py_xadd(g,
			   &(struct gpr_py_part){
			       .kind = "live",
			       .source = "torch.mps",
			       .bytes = live,
			       .known = 1,
			       .exact = 1,
			       .advice = "free_arrays",
			       .how = "torch.mps.current_allocated_memory()"});
}
