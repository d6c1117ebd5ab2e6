/*
 * The driver's stream-ordered pools (gpr_pool_of, gpr_pool_bytes,
 * gpr_pool_trim), for a framework that keeps a pool whose handle its
 * Python layer does not expose (RMM's CudaAsyncMemoryResource:
 * gpureclaim/frameworks/rmm.py). A pool is the driver's handle as an int.
 * A failure raises gpureclaim.Error (or the code's kind) with the code's
 * message and the driver's detail.
 */
#include "ext.h"

#include <limits.h>

static int device_of(PyObject *obj, int *out)
{
	int64_t v = 0;
	if (gpr_py_i64(obj, &v))
		return -1;
	if (v < 0 || v > INT_MAX) {
		PyErr_SetString(PyExc_ValueError, "not a CUDA ordinal");
		return -1;
	}
	*out = (int)v;
	return 0;
}

/* _pool_of(device, address) -> the pool the live allocation at address
 * came from, 0 for none. */
PyObject *gpr_py_pool_of(PyObject *module, PyObject *args)
{
	struct gpr_py_state *st = gpr_py_state(module);
	PyObject *dev;
	unsigned long long address;
	int d = 0;
	if (!PyArg_ParseTuple(args, "OK:_pool_of", &dev, &address) ||
	    device_of(dev, &d) || !gpr_py_ctx(st, "_pool_of"))
		return NULL;
	uint64_t pool = 0;
	PyThreadState *ts = PyEval_SaveThread();
	int rc = gpr_pool_of(st->ctx, d, (uint64_t)address, &pool);
	PyEval_RestoreThread(ts);
	if (rc)
		return gpr_py_raise(st, rc, NULL);
	return PyLong_FromUnsignedLongLong(pool);
}

/* _pool_bytes(pool) -> (reserved, used) */
PyObject *gpr_py_pool_bytes(PyObject *module, PyObject *pool)
{
	struct gpr_py_state *st = gpr_py_state(module);
	unsigned long long p = PyLong_AsUnsignedLongLong(pool);
	if (PyErr_Occurred() || !gpr_py_ctx(st, "_pool_bytes"))
		return NULL;
	uint64_t reserved = 0, used = 0;
	PyThreadState *ts = PyEval_SaveThread();
	int rc = gpr_pool_bytes(st->ctx, (uint64_t)p, &reserved, &used);
	PyEval_RestoreThread(ts);
	if (rc)
		return gpr_py_raise(st, rc, NULL);
	return Py_BuildValue("(KK)", (unsigned long long)reserved,
			     (unsigned long long)used);
}

/* _pool_trim(device, pool, keep) -> None: synchronizes the device's
 * context, then trims the pool to keep bytes. */
PyObject *gpr_py_pool_trim(PyObject *module, PyObject *args)
{
	struct gpr_py_state *st = gpr_py_state(module);
	PyObject *dev;
	unsigned long long pool, keep;
	int d = 0;
	if (!PyArg_ParseTuple(args, "OKK:_pool_trim", &dev, &pool, &keep) ||
	    device_of(dev, &d) || !gpr_py_ctx(st, "_pool_trim"))
		return NULL;
	PyThreadState *ts = PyEval_SaveThread();
	int rc = gpr_pool_trim(st->ctx, d, (uint64_t)pool, (uint64_t)keep);
	PyEval_RestoreThread(ts);
	if (rc)
		return gpr_py_raise(st, rc, NULL);
	Py_RETURN_NONE;
}
