/*
 * Small helpers over the limited API: the one int64 conversion, the
 * devices= argument, and exceptions turned into report notes or raised
 * from GPR_E_* codes.
 */
#include "ext.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

struct gpr_py_state *gpr_py_state(PyObject *module)
{
	return PyModule_GetState(module);
}

int gpr_py_i64(PyObject *obj, int64_t *out)
{
	if (!obj) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_TypeError, "no value");
		return -1;
	}
	long long v = PyLong_AsLongLong(obj);
	if (v == -1 && PyErr_Occurred())
		return -1;
	*out = (int64_t)v;
	return 0;
}

/* Copies str(obj) into buf; "?" if that fails. */
static void str_into(PyObject *obj, char *buf, size_t len)
{
	PyObject *s = obj ? PyObject_Str(obj) : NULL;
	const char *u = s ? PyUnicode_AsUTF8AndSize(s, NULL) : NULL;
	if (!u) {
		PyErr_Clear();
		u = "?";
	}
	snprintf(buf, len, "%s", u);
	Py_XDECREF(s);
}

void gpr_py_error_note(struct gpr_py_state *st, char *buf, size_t len)
{
	PyObject *type, *value, *tb;
	PyErr_Fetch(&type, &value, &tb);
	if (buf && len) {
		char tname[96] = "Exception", msg[480] = "";
		if (value)
			str_into(value, msg, sizeof msg);
		if (st && st->failed && type &&
		    PyErr_GivenExceptionMatches(type, st->failed)) {
			snprintf(buf, len, "%s", msg);
		} else {
			PyObject *qn =
			    type ? PyObject_GetAttrString(type, "__qualname__")
				 : NULL;
			if (qn)
				str_into(qn, tname, sizeof tname);
			else
				PyErr_Clear();
			Py_XDECREF(qn);
			snprintf(buf, len, "%s%s%s", tname, *msg ? ": " : "",
				 msg);
		}
	}
	Py_XDECREF(type);
	Py_XDECREF(value);
	Py_XDECREF(tb);
}

PyObject *gpr_py_raise(struct gpr_py_state *st, int err, const char *what)
{
	const char *detail = st && st->ctx ? gpr_last_error(st->ctx) : "";
	PyObject *runtime = st ? st->error : PyExc_RuntimeError;
	PyObject *type = runtime;
	/* the kind column of GPR_ERRORS says which exception */
#define KIND_NONE runtime
#define KIND_RUNTIME runtime
#define KIND_ARG PyExc_ValueError
#define KIND_LOOKUP PyExc_KeyError
#define KIND_MEMORY PyExc_MemoryError
	switch (err) {
#define GPR_X_TYPE(name, value, kind, msg)                                     \
	case value:                                                            \
		type = KIND_##kind;                                            \
		break;
		GPR_ERRORS(GPR_X_TYPE)
#undef GPR_X_TYPE
	}
#undef KIND_NONE
#undef KIND_RUNTIME
#undef KIND_ARG
#undef KIND_LOOKUP
#undef KIND_MEMORY
	if (type == PyExc_MemoryError)
		return PyErr_NoMemory();
	const char *sep = what ? ": " : "";
	if (!what)
		what = "";
	if (detail && *detail)
		PyErr_Format(type, "%s%s%s (%s)", what, sep, gpr_strerror(err),
			     detail);
	else
		PyErr_Format(type, "%s%s%s", what, sep, gpr_strerror(err));
	return NULL;
}

gpr_ctx *gpr_py_ctx(struct gpr_py_state *st, const char *fn)
{
	if (!st->ctx)
		gpr_py_raise(st, st->open_error, fn);
	return st->ctx;
}

int gpr_py_parse_devices(PyObject *obj, const char *fn, int *out, int *n)
{
	*n = -1;
	if (obj == Py_None)
		return 0;
	if (PyUnicode_Check(obj) || PyBytes_Check(obj) || PyLong_Check(obj)) {
		PyErr_Format(
		    PyExc_TypeError,
		    "%s(): devices must be an iterable of GPU "
		    "indices (ints) or None, not %s",
		    fn, PyLong_Check(obj) ? "an int (use [n])" : "a string");
		return -1;
	}
	PyObject *it = PyObject_GetIter(obj);
	if (!it) {
		PyErr_Clear();
		PyErr_Format(PyExc_TypeError,
			     "%s(): devices must be an iterable of GPU "
			     "indices (ints) or None",
			     fn);
		return -1;
	}
	PyObject *item;
	*n = 0;
	while ((item = PyIter_Next(it))) {
		int bad_type = !PyLong_Check(item) || PyBool_Check(item);
		long v = bad_type ? 0 : PyLong_AsLong(item);
		Py_DECREF(item);
		if (bad_type) {
			PyErr_Format(PyExc_TypeError,
				     "%s(): devices must contain ints", fn);
			goto fail;
		}
		if ((v == -1 && PyErr_Occurred()) || v < 0 || v > INT_MAX) {
			PyErr_Clear();
			PyErr_Format(PyExc_ValueError,
				     "%s(): a device index must be a "
				     "non-negative int",
				     fn);
			goto fail;
		}
		int seen = 0;
		for (int i = 0; i < *n; i++)
			seen |= out[i] == (int)v;
		if (seen)
			continue;
		if (*n == GPR_PY_MAX_DEVICES) {
			PyErr_Format(PyExc_ValueError, "%s(): too many devices",
				     fn);
			goto fail;
		}
		out[(*n)++] = (int)v;
	}
	Py_DECREF(it);
	return PyErr_Occurred() ? -1 : 0;
fail:
	Py_DECREF(it);
	return -1;
}
