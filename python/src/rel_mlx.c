/*
 * MLX on Apple silicon: its buffer cache is emptied with mx.clear_cache()
 * (MLX >= 0.22) or mx.metal.clear_cache() (older). Its own counters
 * (active and cache memory) count MLX only; Metal's per-process total comes
 * from torch.mps when Torch is there too. Tested with a fake mlx only.
 */
#include "ext.h"

#include <stdio.h>

static PyObject *mlx_core(char *why, size_t len)
{
	PyObject *mx = gpr_py_imported("mlx.core");
	snprintf(why, len, mx ? "mlx.core imported" : "mlx not imported");
	return mx;
}

static int status(char *why, size_t len)
{
	PyObject *mx = mlx_core(why, len);
	Py_XDECREF(mx);
	return mx != NULL;
}

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
	if (!r)
		return -1;
	long long v = PyLong_AsLongLong(r);
	Py_DECREF(r);
	if (v == -1 && PyErr_Occurred())
		return -1;
	*out = v;
	return 0;
}

static int held(struct gpr_held *out)
{
	char why[64];
	int64_t active = 0, cache = 0;
	out->known = 0;
	PyObject *mx = mlx_core(why, sizeof why);
	if (!mx)
		return 0;
	int rc = i64_of(mx, "get_active_memory", &active);
	if (!rc)
		rc = i64_of(mx, "get_cache_memory", &cache);
	Py_DECREF(mx);
	if (rc)
		return -1;
	out->live = (uint64_t)active;
	out->cached = (uint64_t)cache;
	out->known = 1;
	return 0;
}

/* MLX alone: its counters stand in for the driver's figure. */
static int driver_bytes(int64_t *out)
{
	struct gpr_held h;
	if (held(&h))
		return -1;
	if (!h.known)
		return 0;
	*out = (int64_t)(h.live + h.cached);
	return 1;
}

static int release(void)
{
	char why[64];
	PyObject *mx = mlx_core(why, sizeof why);
	if (!mx)
		return 0;
	PyObject *r = call_either(mx, "clear_cache");
	Py_DECREF(mx);
	Py_XDECREF(r);
	return r ? 0 : -1;
}

const struct gpr_py_metal gpr_py_rel_mlx = {
    .name = "mlx",
    .status = status,
    .driver_bytes = driver_bytes,
    .held = held,
    .release = release,
};
