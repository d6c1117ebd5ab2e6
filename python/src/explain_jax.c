/*
 * JAX/XLA's share of a GPU, from the memory_stats() of its device in a
 * backend already started (jax.devices() would start one and take the
 * pool): bytes_in_use is live, pool_bytes (bytes_reserved on allocators
 * without a pool figure) minus that is a pool that never shrinks: XLA
 * returns it only when the process ends.
 */
#include "ext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The started backends' dict (new ref) or NULL (no error). */
static PyObject *backends(void)
{
	PyObject *jax = gpr_py_imported("jax");
	if (!jax)
		return NULL;
	Py_DECREF(jax);
	PyObject *xb = gpr_py_imported("jax._src.xla_bridge");
	PyObject *b = xb ? gpr_py_attr(xb, "_backends") : NULL;
	Py_XDECREF(xb);
	if (b && (!PyDict_Check(b) || PyDict_Size(b) == 0))
		Py_CLEAR(b);
	return b;
}

/* The JAX device of CUDA ordinal `device` in the backend (new ref). */
static PyObject *find(PyObject *backend, int device)
{
	PyObject *devs = gpr_py_call(backend, "local_devices", NULL);
	PyObject *it = devs ? PyObject_GetIter(devs) : NULL;
	Py_XDECREF(devs);
	PyObject *d, *found = NULL;
	while (it && !found && (d = PyIter_Next(it))) {
		PyObject *plat = gpr_py_attr(d, "platform");
		const char *p =
		    plat ? PyUnicode_AsUTF8AndSize(plat, NULL) : NULL;
		int gpu = p && (!strcmp(p, "gpu") || !strcmp(p, "cuda"));
		Py_XDECREF(plat);
		PyObject *hw = gpu ? gpr_py_attr(d, "local_hardware_id") : NULL;
		long id = hw ? PyLong_AsLong(hw) : -1;
		Py_XDECREF(hw);
		PyErr_Clear();
		if (gpu && id == device)
			found = Py_NewRef(d);
		Py_DECREF(d);
	}
	Py_XDECREF(it);
	PyErr_Clear();
	return found;
}

int gpr_py_explain_jax(struct gpr_py_xcall *c, struct gpr_py_xgpu *g)
{
	(void)c;
	PyObject *b = backends();
	if (!b)
		return 0;
	PyObject *key, *backend, *dev = NULL;
	Py_ssize_t pos = 0;
	while (!dev && PyDict_Next(b, &pos, &key, &backend))
		dev = find(backend, g->device);
	Py_DECREF(b);
	if (!dev)
		return 0;
	PyObject *stats = gpr_py_call(dev, "memory_stats", NULL);
	Py_DECREF(dev);
	if (!stats)
		return -1;
	int64_t in_use = gpr_py_xint(stats, "bytes_in_use");
	int64_t pool = gpr_py_xint(stats, "pool_bytes");
	const char *what = "pool_bytes - bytes_in_use";
	if (pool < 0) {
		pool = gpr_py_xint(stats, "bytes_reserved");
		what = "bytes_reserved - bytes_in_use";
	}
	Py_DECREF(stats);
	if (in_use < 0 || pool < 0)
		return gpr_py_xnote(
		    g,
		    "jax: GPU %d: memory_stats() gives no bytes_in_use or "
		    "pool_bytes; JAX's memory is in the rest",
		    g->device);
	char how[300];
	const char *pre = getenv("XLA_PYTHON_CLIENT_PREALLOCATE");
	const char *frac = getenv("XLA_PYTHON_CLIENT_MEM_FRACTION");
	snprintf(how, sizeof how,
		 "%s of the device's memory_stats(); "
		 "XLA_PYTHON_CLIENT_PREALLOCATE=%s, "
		 "XLA_PYTHON_CLIENT_MEM_FRACTION=%s",
		 what, pre ? pre : "unset", frac ? frac : "unset");
	if (gpr_py_xpart(g, "live", "jax", in_use, 1,
			 "bytes_in_use of the device's memory_stats()", NULL))
		return -1;
	return gpr_py_xpart(g, "pool", "jax", pool - in_use, 1, how, NULL);
}
