/*
 * The queries: devices_in_use(), process_memory(), releasers(), and the
 * fork hook. None of them opens a context or initialises the driver.
 */
#include "ext.h"

#include <stdlib.h>

static const struct gpr_py_framework *const cuda_frameworks[] = {
    &gpr_py_rel_torch,
    &gpr_py_rel_cupy,
    &gpr_py_rel_numba,
    &gpr_py_rel_jax,
};
#define N_CUDA (sizeof cuda_frameworks / sizeof cuda_frameworks[0])

static const struct gpr_py_metal *const metal_frameworks[] = {
    &gpr_py_rel_mps,
    &gpr_py_rel_mlx,
};
#define N_METAL (sizeof metal_frameworks / sizeof metal_frameworks[0])

int gpr_py_register_builtin(struct gpr_py_state *st)
{
	for (size_t i = 0; i < N_CUDA; i++) {
		struct gpr_releaser r = cuda_frameworks[i]->c;
		r.data = st;
		int rc = gpr_register(st->ctx, &r);
		if (rc)
			return rc;
	}
	return 0;
}

/* The GPUs in use, into a PyMem buffer; *n set. 0 or a GPR_E_* code. */
static int in_use(struct gpr_py_state *st, int **out, int *n)
{
	int cap = 16;
	*out = NULL;
	for (;;) {
		int *buf = PyMem_Realloc(*out, (size_t)cap * sizeof *buf);
		if (!buf)
			return GPR_E_NOMEM;
		*out = buf;
		PyThreadState *ts = PyEval_SaveThread();
		int rc = gpr_devices_in_use(st->ctx, buf, cap, n);
		PyEval_RestoreThread(ts);
		if (rc || *n <= cap)
			return rc;
		cap = *n;
	}
}

PyObject *gpr_py_devices_in_use(PyObject *module, PyObject *unused)
{
	(void)unused;
	struct gpr_py_state *st = gpr_py_state(module);
	if (!st->ctx)
		return gpr_py_raise(st, st->open_error, "devices_in_use");
	int *devs, n = 0;
	int rc = in_use(st, &devs, &n);
	PyObject *list = rc ? NULL : PyList_New(0);
	for (int i = 0; list && i < n; i++) {
		PyObject *v = PyLong_FromLong(devs[i]);
		if (!v || PyList_Append(list, v)) {
			Py_CLEAR(list);
		}
		Py_XDECREF(v);
	}
	PyMem_Free(devs);
	if (rc)
		return gpr_py_raise(st, rc, "devices_in_use");
	return list;
}

PyObject *gpr_py_process_memory(PyObject *module, PyObject *unused)
{
	(void)unused;
	struct gpr_py_state *st = gpr_py_state(module);
	if (!st->ctx)
		return gpr_py_raise(st, st->open_error, "process_memory");
	int *devs, n = 0;
	int rc = in_use(st, &devs, &n);
	if (rc) {
		PyMem_Free(devs);
		return gpr_py_raise(st, rc, "process_memory");
	}
	PyObject *d = PyDict_New();
	for (int i = 0; d && i < n; i++) {
		uint64_t bytes = 0;
		PyThreadState *ts = PyEval_SaveThread();
		rc = gpr_process_bytes(st->ctx, devs[i], &bytes);
		PyEval_RestoreThread(ts);
		PyObject *k = PyLong_FromLong(devs[i]);
		/* None: the driver has no per-process figure there. */
		PyObject *v = rc ? Py_NewRef(Py_None)
				 : PyLong_FromUnsignedLongLong(bytes);
		if (!k || !v || PyDict_SetItem(d, k, v))
			Py_CLEAR(d);
		Py_XDECREF(k);
		Py_XDECREF(v);
	}
	PyMem_Free(devs);
	return d;
}

static int add(PyObject *list, const char *name, const char *kind, int active,
	       const char *why)
{
	PyObject *d =
	    Py_BuildValue("{s:s,s:s,s:O,s:s}", "name", name, "kind", kind,
			  "active", active ? Py_True : Py_False, "why", why);
	int rc = d ? PyList_Append(list, d) : -1;
	Py_XDECREF(d);
	return rc;
}

PyObject *gpr_py_releasers(PyObject *module, PyObject *unused)
{
	(void)unused;
	struct gpr_py_state *st = gpr_py_state(module);
	char why[128];
	PyObject *list = PyList_New(0);
	if (!list)
		return NULL;
	for (size_t i = 0; i < N_CUDA; i++) {
		int a = cuda_frameworks[i]->status(st, why, sizeof why);
		if (add(list, cuda_frameworks[i]->name, "cuda", a, why))
			goto fail;
	}
	for (size_t i = 0; i < N_METAL; i++) {
		int a = metal_frameworks[i]->status(why, sizeof why);
		if (add(list, metal_frameworks[i]->name, "metal", a, why))
			goto fail;
	}
	PyObject *key, *val;
	Py_ssize_t pos = 0;
	while (PyDict_Next(st->users, &pos, &key, &val)) {
		const char *name = PyUnicode_AsUTF8AndSize(key, NULL);
		if (!name ||
		    add(list, name, "user", 1, "registered with register()"))
			goto fail;
	}
	return list;
fail:
	Py_DECREF(list);
	return NULL;
}

PyObject *gpr_py_after_fork_child(PyObject *module, PyObject *unused)
{
	(void)unused;
	struct gpr_py_state *st = gpr_py_state(module);
	/* Only this thread exists in the child: a lock another thread held
	 * at fork would never be released. */
	pthread_mutex_init(&st->lock, NULL);
	st->busy = 0;
	Py_RETURN_NONE;
}
