/*
 * The queries: devices_in_use(), process_memory(), releasers(). None of
 * them opens a context or initialises the driver.
 */
#include "ext.h"

#include <stdlib.h>

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

/* The users' releasers: those the core lists that are no framework's (in
 * a forked child, none: the parent's list is off limits). */
static int add_users(struct gpr_py_state *st, PyObject *list)
{
	size_t n = 0;
	int rc = gpr_releaser_count(st->ctx, &n);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		char *name = NULL;
		rc = gpr_releaser_name(st->ctx, i, &name);
		if (rc == GPR_E_RANGE) /* unregistered meanwhile */
			return 0;
		int bad =
		    rc == 0 && !gpr_py_framework(name) &&
		    add(list, name, "user", 1, "registered with register()");
		gpr_free(name);
		if (bad)
			return -1;
	}
	if (rc && rc != GPR_E_FORKED) {
		gpr_py_raise(st, rc, "releasers");
		return -1;
	}
	return 0;
}

PyObject *gpr_py_releasers(PyObject *module, PyObject *unused)
{
	(void)unused;
	struct gpr_py_state *st = gpr_py_state(module);
	char why[128];
	PyObject *list = PyList_New(0);
	if (!list)
		return NULL;
	for (size_t i = 0; i < gpr_py_n_frameworks; i++) {
		const struct gpr_py_framework *f = &gpr_py_frameworks[i];
		int a = gpr_py_active(f, why, sizeof why);
		if (add(list, f->releaser->name, f->kind, a, why))
			goto fail;
	}
	if (st->ctx && add_users(st, list))
		goto fail;
	return list;
fail:
	Py_DECREF(list);
	return NULL;
}
