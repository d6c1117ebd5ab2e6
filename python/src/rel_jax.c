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

static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v ? v : "unset";
}

/* Describes JAX's GPU `device` among the backend's devices into note; 1 if
 * the backend has it. */
static int describe(PyObject *backend, int device, char *note, size_t note_sz)
{
	PyObject *d = gpr_py_jax_device(backend, device);
	if (!d)
		return 0;
	PyObject *stats = gpr_py_call(d, "memory_stats", NULL);
	Py_DECREF(d);
	int64_t pool = gpr_py_item_i64(stats, "pool_bytes");
	if (pool < 0)
		pool = gpr_py_item_i64(stats, "bytes_limit");
	int64_t in_use = gpr_py_item_i64(stats, "bytes_in_use");
	PyErr_Clear();
	Py_XDECREF(stats);
	snprintf(note, note_sz,
		 "jax: GPU %d: XLA pool of %.3f GB (%lld bytes in use) cannot "
		 "be released; it is set by XLA_PYTHON_CLIENT_PREALLOCATE=%s, "
		 "XLA_PYTHON_CLIENT_MEM_FRACTION=%s, "
		 "XLA_PYTHON_CLIENT_ALLOCATOR=%s before JAX starts",
		 device, pool < 0 ? 0.0 : (double)pool / 1e9, (long long)in_use,
		 env("XLA_PYTHON_CLIENT_PREALLOCATE"),
		 env("XLA_PYTHON_CLIENT_MEM_FRACTION"),
		 env("XLA_PYTHON_CLIENT_ALLOCATOR"));
	return 1;
}

static int release(void *data, int device, char *note, size_t note_sz)
{
	(void)data;
	if (device < 0)
		return 0;
	PyGILState_STATE g = PyGILState_Ensure();
	PyObject *b = gpr_py_jax(NULL, 0);
	if (b) {
		PyObject *key, *backend;
		Py_ssize_t pos = 0;
		while (PyDict_Next(b, &pos, &key, &backend))
			if (describe(backend, device, note, note_sz))
				break;
		Py_DECREF(b);
	}
	PyErr_Clear();
	PyGILState_Release(g);
	return 0;
}

const struct gpr_releaser gpr_py_jax_releaser = {
    .sz = sizeof(struct gpr_releaser),
    .name = "jax",
    .release = release,
};
