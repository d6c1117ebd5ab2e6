/*
 * The queries: what the core knows of this process's GPUs, as plain
 * values. None of them opens a context or initialises the driver; each
 * driver or NVML call is made with the GIL released.
 */
#include "ext.h"

#include <limits.h>
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

static PyObject *int_list(const int *v, int n)
{
	PyObject *list = PyList_New(0);
	for (int i = 0; list && i < n; i++) {
		PyObject *x = PyLong_FromLong(v[i]);
		if (!x || PyList_Append(list, x))
			Py_CLEAR(list);
		Py_XDECREF(x);
	}
	return list;
}

PyObject *gpr_py_devices_in_use(PyObject *module, PyObject *unused)
{
	(void)unused;
	struct gpr_py_state *st = gpr_py_state(module);
	if (!gpr_py_ctx(st, "devices_in_use"))
		return NULL;
	int *devs, n = 0;
	int rc = in_use(st, &devs, &n);
	PyObject *list = rc ? NULL : int_list(devs, n);
	PyMem_Free(devs);
	if (rc)
		return gpr_py_raise(st, rc, "devices_in_use");
	return list;
}

/* _in_use(fn) -> list of CUDA ordinals, or None in a forked child (the
 * parent's CUDA state is off limits there); errors name fn. */
PyObject *gpr_py_in_use(PyObject *module, PyObject *fn)
{
	struct gpr_py_state *st = gpr_py_state(module);
	const char *name =
	    PyUnicode_Check(fn) ? PyUnicode_AsUTF8AndSize(fn, NULL) : NULL;
	if (!name)
		return PyErr_Format(PyExc_TypeError, "_in_use(fn): a str");
	if (!gpr_py_ctx(st, name))
		return NULL;
	int *devs, n = 0;
	int rc = in_use(st, &devs, &n);
	PyObject *list = rc ? NULL : int_list(devs, n);
	PyMem_Free(devs);
	if (rc == GPR_E_FORKED)
		Py_RETURN_NONE;
	if (rc)
		return gpr_py_raise(st, rc, name);
	return list;
}

/* The driver's figure of this process on CUDA ordinal `device`: 0 with
 * *bytes, or a GPR_E_* code. */
static int figure_of(struct gpr_py_state *st, int device, uint64_t *bytes)
{
	PyThreadState *ts = PyEval_SaveThread();
	int rc = gpr_process_bytes(st->ctx, device, bytes);
	PyEval_RestoreThread(ts);
	return rc;
}

PyObject *gpr_py_process_memory(PyObject *module, PyObject *unused)
{
	(void)unused;
	struct gpr_py_state *st = gpr_py_state(module);
	if (!gpr_py_ctx(st, "process_memory"))
		return NULL;
	int *devs, n = 0;
	int rc = in_use(st, &devs, &n);
	if (rc) {
		PyMem_Free(devs);
		return gpr_py_raise(st, rc, "process_memory");
	}
	PyObject *d = PyDict_New();
	for (int i = 0; d && i < n; i++) {
		uint64_t bytes = 0;
		rc = figure_of(st, devs[i], &bytes);
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

/* A CUDA ordinal argument: 0 with *out, or -1 with an error set. */
static int ordinal(PyObject *obj, int *out)
{
	int64_t v = 0;
	if (gpr_py_i64(obj, &v))
		return -1;
	*out = v < 0 || v > INT_MAX ? -1 : (int)v;
	return 0;
}

/* _process_figure(device) -> (bytes, None), or (None, why) where the
 * driver has no per-process figure (the code's message). */
PyObject *gpr_py_process_figure(PyObject *module, PyObject *device)
{
	struct gpr_py_state *st = gpr_py_state(module);
	int d = 0;
	if (ordinal(device, &d) || !gpr_py_ctx(st, "_process_figure"))
		return NULL;
	uint64_t bytes = 0;
	int rc = d < 0 ? GPR_E_RANGE : figure_of(st, d, &bytes);
	if (rc)
		return Py_BuildValue("(Os)", Py_None, gpr_strerror(rc));
	return Py_BuildValue("(KO)", (unsigned long long)bytes, Py_None);
}

PyObject *gpr_py_cuda_loaded(PyObject *module, PyObject *unused)
{
	(void)unused;
	struct gpr_py_state *st = gpr_py_state(module);
	if (!gpr_py_ctx(st, "_cuda_loaded"))
		return NULL;
	return PyBool_FromLong(gpr_cuda_loaded(st->ctx));
}

/* _primary_active(device) -> True if this process holds the primary
 * context of that ordinal (the CUDA runtime can make it current without
 * creating one), False if not or on error, None if the driver has no such
 * GPU. ~1 us; never NVML. */
PyObject *gpr_py_primary_active(PyObject *module, PyObject *device)
{
	struct gpr_py_state *st = gpr_py_state(module);
	int d = 0, active = 0;
	if (ordinal(device, &d))
		return NULL;
	if (d < 0 || !st->ctx)
		Py_RETURN_FALSE;
	PyThreadState *ts = PyEval_SaveThread();
	int rc = gpr_primary_context_active(st->ctx, d, &active);
	PyEval_RestoreThread(ts);
	if (rc == GPR_E_RANGE)
		Py_RETURN_NONE;
	return PyBool_FromLong(rc == 0 && active);
}

/* _gpu_uuid(device) -> NVML's UUID of that CUDA ordinal, or None where
 * NVML cannot say. */
PyObject *gpr_py_gpu_uuid(PyObject *module, PyObject *device)
{
	struct gpr_py_state *st = gpr_py_state(module);
	int d = 0, index = -1;
	if (ordinal(device, &d) || !gpr_py_ctx(st, "_gpu_uuid"))
		return NULL;
	struct gpr_gpu info;
	PyThreadState *ts = PyEval_SaveThread();
	int err = d < 0 ? GPR_E_RANGE : gpr_nvml_index(st->ctx, d, &index);
	if (!err)
		err = gpr_gpu_info(st->ctx, index, &info);
	PyEval_RestoreThread(ts);
	if (err)
		Py_RETURN_NONE;
	return PyUnicode_FromString(info.uuid);
}

/* _devices_arg(devices, fn) -> None or the list of ordinals, checked as
 * release() checks its own (errors name fn). */
PyObject *gpr_py_devices_arg(PyObject *module, PyObject *args)
{
	(void)module;
	PyObject *devices;
	const char *fn;
	if (!PyArg_ParseTuple(args, "Os:_devices_arg", &devices, &fn))
		return NULL;
	int *devs = PyMem_Malloc(GPR_PY_MAX_DEVICES * sizeof *devs);
	if (!devs)
		return PyErr_NoMemory();
	int n = -1;
	PyObject *out = NULL;
	if (gpr_py_parse_devices(devices, fn, devs, &n) == 0)
		out = n < 0 ? Py_NewRef(Py_None) : int_list(devs, n);
	PyMem_Free(devs);
	return out;
}
