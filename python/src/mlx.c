/*
 * MLX on Apple silicon: its releaser, of the GPU the core calls "mps", and
 * its explainer. Its buffer cache is emptied with mx.clear_cache() (MLX >=
 * 0.22) or mx.metal.clear_cache() (older). Its own counters (active and
 * cache memory) count MLX only, so it gives no figure of the GPU: Metal's
 * per-process total comes from torch.mps when Torch is there too, and the
 * core falls back to the allocators' counters when it is not.
 * Tested with a fake mlx only.
 */
#include "ext.h"

#include <stdio.h>

/* mx.<name>() or, for older MLX, mx.metal.<name>(). */
static PyObject *call_either(PyObject *mx, const char *name)
{
	if (PyObject_HasAttrString(mx, name))
		return gpr_py_call(mx, name, NULL);
	PyObject *metal = gpr_py_attr(mx, "metal");
	if (!metal) {
		PyErr_Format(PyExc_AttributeError, "mlx.core has no %s", name);
		return NULL;
	}
	PyObject *r = gpr_py_call(metal, name, NULL);
	Py_DECREF(metal);
	return r;
}

static int i64_of(PyObject *mx, const char *name, int64_t *out)
{
	PyObject *r = call_either(mx, name);
	int rc = gpr_py_i64(r, out);
	Py_XDECREF(r);
	return rc;
}

static int counters(PyObject *mx, int64_t *active, int64_t *cache)
{
	return i64_of(mx, "get_active_memory", active) ||
	       i64_of(mx, "get_cache_memory", cache);
}

static PyObject *empty(PyObject *mx)
{
	return call_either(mx, "clear_cache");
}

/* In use when imported; never the GPU's figure (its counters miss Torch's
 * buffers): the why says so where it is all there is. */
static int figure(void *data, uint64_t *bytes, char *why, size_t why_sz)
{
	(void)data;
	(void)bytes;
	PyGILState_STATE g = PyGILState_Ensure();
	PyObject *mx = gpr_py_mlx(why, why_sz);
	if (mx)
		snprintf(why, why_sz,
			 "MLX's own counters stand in: Metal's per-process "
			 "total is read through torch.mps, not in use here, "
			 "and MLX's counters miss other frameworks' buffers");
	int rc = mx ? GPR_FIGURE_UNKNOWN : GPR_FIGURE_UNUSED;
	Py_XDECREF(mx);
	PyGILState_Release(g);
	return rc;
}

static struct gpr_py_metal_fw mlx_fw = {gpr_py_mlx, counters, empty};

const struct gpr_releaser gpr_py_mlx_releaser = {
    .sz = sizeof(struct gpr_releaser),
    .name = "mlx",
    .data = &mlx_fw,
    .held = gpr_py_metal_held,
    .release = gpr_py_metal_release,
    .device_name = GPR_PY_METAL_DEVICE,
    .figure = figure,
};

/* MLX's live arrays and its cache in the Metal entry. */
int gpr_py_explain_mlx(struct gpr_py_xcall *c, struct gpr_py_xgpu *g)
{
	(void)c;
	PyObject *mx = gpr_py_mlx(NULL, 0);
	if (!mx)
		return 0;
	int64_t active = 0, cache = 0;
	int rc = counters(mx, &active, &cache);
	Py_DECREF(mx);
	if (rc || gpr_py_xadd(g, &(struct gpr_py_part){
				     .kind = "live",
				     .source = "mlx",
				     .bytes = active,
				     .known = 1,
				     .exact = 1,
				     .advice = "free_arrays",
				     .how = "mx.get_active_memory()"}))
		return -1;
	return gpr_py_xadd(
	    g, &(struct gpr_py_part){.kind = "releasable",
				     .source = "mlx",
				     .bytes = cache,
				     .known = 1,
				     .exact = 1,
				     .advice = "release",
				     .how = "mx.get_cache_memory()"});
}
