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

/* sys.modules[name] (new reference), or NULL with why "<name> not
 * imported". */
static PyObject *user_module(const char *name, char *why, size_t len)
{
	PyObject *m = gpr_py_imported(name);
	if (!m)
		snprintf(why, len, "%s not imported", name);
	return m;
}

PyObject *gpr_py_torch_cuda(char *why, size_t len)
{
	PyObject *torch = user_module("torch", why, len);
	if (!torch)
		return NULL;
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
	PyObject *torch = user_module("torch", why, len);
	if (!torch)
		return NULL;
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

/* A framework that is active once imported: sys.modules[name]. */
static PyObject *module(const char *name, const char *yes, const char *no,
			char *why, size_t len)
{
	PyObject *m = gpr_py_imported(name);
	snprintf(why, len, "%s", m ? yes : no);
	return m;
}

PyObject *gpr_py_cupy(char *why, size_t len)
{
	return module("cupy", "cupy imported", "cupy not imported", why, len);
}

/*
 * The attribute `attr` of module `inner`, loaded by `outer`, the module
 * the user imports: NULL with why "<outer> not imported" when the user did
 * not (*imported = 0); NULL without why when the attribute is missing.
 */
static PyObject *inner_attr(const char *outer, const char *inner,
			    const char *attr, int *imported, char *why,
			    size_t len)
{
	PyObject *m = user_module(outer, why, len);
	*imported = m != NULL;
	if (!m)
		return NULL;
	Py_DECREF(m);
	PyObject *mod = gpr_py_imported(inner);
	PyObject *a = mod ? gpr_py_attr(mod, attr) : NULL;
	Py_XDECREF(mod);
	return a;
}

/* Numba's driver object once Numba initialised it: asking for a context
 * before that (numba.cuda.current_context()) would create one. */
PyObject *gpr_py_numba(char *why, size_t len)
{
	int imported;
	PyObject *drv = inner_attr("numba.cuda", "numba.cuda.cudadrv.driver",
				   "driver", &imported, why, len);
	if (!imported)
		return NULL;
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
	int imported;
	PyObject *b = inner_attr("jax", "jax._src.xla_bridge", "_backends",
				 &imported, why, len);
	if (!imported)
		return NULL;
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

/* rmm.mr, once the user imported rmm (which imports rmm.mr). */
PyObject *gpr_py_rmm(char *why, size_t len)
{
	PyObject *rmm = user_module("rmm", why, len);
	if (!rmm)
		return NULL;
	Py_DECREF(rmm);
	PyObject *mr = gpr_py_imported("rmm.mr");
	snprintf(why, len, "%s",
		 mr ? "rmm imported" : "rmm imported, no rmm.mr");
	return mr;
}

PyObject *gpr_py_mlx(char *why, size_t len)
{
	return module("mlx.core", "mlx.core imported", "mlx not imported", why,
		      len);
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
