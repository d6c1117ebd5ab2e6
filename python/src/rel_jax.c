/*
 * JAX/XLA keeps a pool that never shrinks (by default 75% of each GPU,
 * taken when its backend starts); nothing outside XLA can return it. This
 * releaser returns nothing: per visited GPU it writes a note with the pool's
 * size and the environment variables that change it. It reads only backends
 * already started: jax.devices() would start one and take the pool.
 * Its held() reports nothing (known = 0): live JAX arrays must not trigger a
 * garbage collection that could not give the driver anything back.
 */
#include "ext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The dict of started backends (new ref), or NULL and why. */
static PyObject *jax_backends(char *why, size_t len)
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

static int status(struct gpr_py_state *st, char *why, size_t len)
{
	(void)st;
	PyObject *b = jax_backends(why, len);
	Py_XDECREF(b);
	return b != NULL;
}

static int64_t stat_of(PyObject *stats, const char *key)
{
	PyObject *v = PyDict_GetItemString(stats, key); /* borrowed */
	long long x = v ? PyLong_AsLongLong(v) : -1;
	if (x == -1)
		PyErr_Clear();
	return x;
}

static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v ? v : "unset";
}

/* Describes JAX's GPU `device` among the backend's devices into note. */
static int describe(PyObject *backend, int device, char *note, size_t note_sz)
{
	PyObject *devs = gpr_py_call(backend, "local_devices", NULL);
	PyObject *it = devs ? PyObject_GetIter(devs) : NULL;
	Py_XDECREF(devs);
	if (!it)
		return -1;
	PyObject *d;
	int found = 0;
	while (!found && (d = PyIter_Next(it))) {
		PyObject *plat = gpr_py_attr(d, "platform");
		const char *p =
		    plat ? PyUnicode_AsUTF8AndSize(plat, NULL) : NULL;
		int gpu = p && (!strcmp(p, "gpu") || !strcmp(p, "cuda") ||
				!strcmp(p, "rocm"));
		Py_XDECREF(plat);
		PyErr_Clear();
		PyObject *hw = gpu ? gpr_py_attr(d, "local_hardware_id") : NULL;
		if (!hw && gpu)
			hw = gpr_py_attr(d, "id");
		long id = hw ? PyLong_AsLong(hw) : -1;
		Py_XDECREF(hw);
		PyErr_Clear();
		if (gpu && id == device) {
			found = 1;
			PyObject *stats = gpr_py_call(d, "memory_stats", NULL);
			int64_t pool = -1, in_use = -1;
			if (stats && PyDict_Check(stats)) {
				pool = stat_of(stats, "pool_bytes");
				if (pool < 0)
					pool = stat_of(stats, "bytes_limit");
				in_use = stat_of(stats, "bytes_in_use");
			}
			PyErr_Clear();
			Py_XDECREF(stats);
			snprintf(note, note_sz,
				 "jax: GPU %d: XLA pool of %.3f GB (%lld bytes "
				 "in use) cannot be released; it is set by "
				 "XLA_PYTHON_CLIENT_PREALLOCATE=%s, "
				 "XLA_PYTHON_CLIENT_MEM_FRACTION=%s, "
				 "XLA_PYTHON_CLIENT_ALLOCATOR=%s before JAX "
				 "starts",
				 device, pool < 0 ? 0.0 : (double)pool / 1e9,
				 (long long)in_use,
				 env("XLA_PYTHON_CLIENT_PREALLOCATE"),
				 env("XLA_PYTHON_CLIENT_MEM_FRACTION"),
				 env("XLA_PYTHON_CLIENT_ALLOCATOR"));
		}
		Py_DECREF(d);
	}
	Py_DECREF(it);
	PyErr_Clear();
	return found;
}

static int release(void *data, int device, char *note, size_t note_sz)
{
	(void)data;
	if (device < 0)
		return 0;
	char why[96];
	PyGILState_STATE g = PyGILState_Ensure();
	PyObject *b = jax_backends(why, sizeof why);
	if (b) {
		PyObject *key, *backend;
		Py_ssize_t pos = 0;
		while (PyDict_Next(b, &pos, &key, &backend))
			if (describe(backend, device, note, note_sz) > 0)
				break;
		Py_DECREF(b);
	}
	PyErr_Clear();
	PyGILState_Release(g);
	return 0;
}

const struct gpr_py_framework gpr_py_rel_jax = {
    .name = "jax",
    .status = status,
    .c = {.sz = sizeof(struct gpr_releaser), .name = "jax", .release = release},
};
