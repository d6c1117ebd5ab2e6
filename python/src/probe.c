/*
 * Is a framework active in this process? One probe per framework, shared by
 * its releaser (rel_*.c) and its explainer (explain_*.c), and behind
 * releasers(). A probe reads sys.modules and what the framework already
 * set up: it never imports a module nor calls anything that could
 * initialise CUDA, start a JAX backend (jax.devices() takes XLA's pool) or
 * create a context.
 */
#include "ext.h"

#include <stdio.h>
#include <string.h>

PyObject *gpr_py_torch_cuda(char *why, size_t len)
{
	PyObject *torch = gpr_py_imported("torch");
	if (!torch) {
		snprintf(why, len, "torch not imported");
		return NULL;
	}
	PyObject *cuda = gpr_py_attr(torch, "cuda");
	Py_DECREF(torch);
	if (!cuda) {
		snprintf(why, len, "torch has no torch.cuda");
		return NULL;
	}
	PyObject *r = gpr_py_call(cuda, "is_initialized", NULL);
	int init = gpr_py_truth(r);
	Py_XDECREF(r);
	if (init != 1) {
		PyErr_Clear();
		snprintf(why, len, "torch imported, CUDA not initialised");
		Py_DECREF(cuda);
		return NULL;
	}
	snprintf(why, len, "torch.cuda initialised");
	return cuda;
}

PyObject *gpr_py_torch_mps(char *why, size_t len)
{
	PyObject *torch = gpr_py_imported("torch");
	if (!torch) {
		snprintf(why, len, "torch not imported");
		return NULL;
	}
	PyObject *backend = gpr_py_attr(torch, "backends.mps");
	PyObject *r =
	    backend ? gpr_py_call(backend, "is_available", NULL) : NULL;
	int ok = gpr_py_truth(r);
	Py_XDECREF(r);
	Py_XDECREF(backend);
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

PyObject *gpr_py_cupy(char *why, size_t len)
{
	PyObject *cupy = gpr_py_imported("cupy");
	snprintf(why, len, cupy ? "cupy imported" : "cupy not imported");
	return cupy;
}

/* Numba's driver object once Numba initialised it: asking for a context
 * before that (numba.cuda.current_context()) would create one. */
PyObject *gpr_py_numba(char *why, size_t len)
{
	PyObject *nc = gpr_py_imported("numba.cuda");
	if (!nc) {
		snprintf(why, len, "numba.cuda not imported");
		return NULL;
	}
	Py_DECREF(nc);
	PyObject *mod = gpr_py_imported("numba.cuda.cudadrv.driver");
	PyObject *drv = mod ? gpr_py_attr(mod, "driver") : NULL;
	Py_XDECREF(mod);
	PyObject *init = drv ? gpr_py_attr(drv, "is_initialized") : NULL;
	int ok = init ? PyObject_IsTrue(init) : 0;
	Py_XDECREF(init);
	PyErr_Clear();
	if (ok != 1) {
		snprintf(why, len,
			 "numba.cuda imported, driver not initialised");
		Py_XDECREF(drv);
		return NULL;
	}
	snprintf(why, len, "numba.cuda driver initialised");
	return drv;
}

/* The dict of JAX backends already started (jax.devices() would start one
 * and take its pool). */
PyObject *gpr_py_jax(char *why, size_t len)
{
	PyObject *jax = gpr_py_imported("jax");
	if (!jax) {
		snprintf(why, len, "jax not imported");
		return NULL;
	}
	Py_DECREF(jax);
	PyObject *xb = gpr_py_imported("jax._src.xla_bridge");
	PyObject *b = xb ? gpr_py_attr(xb, "_backends") : NULL;
	Py_XDECREF(xb);
	if (!b || !PyDict_Check(b) || PyDict_Size(b) == 0) {
		snprintf(why, len,
			 b ? "jax imported, no backend started"
			   : "jax imported; cannot tell whether a backend "
			     "started");
		Py_XDECREF(b);
		return NULL;
	}
	snprintf(why, len, "jax backend started (its pool cannot be released)");
	return b;
}

PyObject *gpr_py_mlx(char *why, size_t len)
{
	PyObject *mx = gpr_py_imported("mlx.core");
	snprintf(why, len, mx ? "mlx.core imported" : "mlx not imported");
	return mx;
}

/* 1 if the JAX device d is a GPU with hardware id `device`. */
static int is_gpu(PyObject *d, int device)
{
	PyObject *plat = gpr_py_attr(d, "platform");
	const char *p = plat ? PyUnicode_AsUTF8AndSize(plat, NULL) : NULL;
	int gpu = p && (!strcmp(p, "gpu") || !strcmp(p, "cuda") ||
			!strcmp(p, "rocm"));
	Py_XDECREF(plat);
	PyErr_Clear();
	PyObject *hw = gpu ? gpr_py_attr(d, "local_hardware_id") : NULL;
	if (!hw && gpu)
		hw = gpr_py_attr(d, "id");
	int64_t id = -1;
	if (hw && gpr_py_i64(hw, &id))
		id = -1;
	Py_XDECREF(hw);
	PyErr_Clear();
	return gpu && id == device;
}

PyObject *gpr_py_jax_device(PyObject *backend, int device)
{
	PyObject *devs = gpr_py_call(backend, "local_devices", NULL);
	PyObject *it = devs ? PyObject_GetIter(devs) : NULL;
	Py_XDECREF(devs);
	PyObject *d, *found = NULL;
	while (it && !found && (d = PyIter_Next(it))) {
		if (is_gpu(d, device))
			found = Py_NewRef(d);
		Py_DECREF(d);
	}
	Py_XDECREF(it);
	PyErr_Clear();
	return found;
}
