/*
 * Small helpers over the limited API: sys.modules look-ups that never
 * import, attribute paths, calls, the one int64 conversion, and exceptions
 * turned into report notes or raised from GPR_E_* codes.
 */
#include "ext.h"

#include <limits.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct gpr_py_state *gpr_py_state(PyObject *module)
{
	return PyModule_GetState(module);
}

PyObject *gpr_py_imported(const char *name)
{
	PyObject *key = PyUnicode_FromString(name);
	if (!key) {
		PyErr_Clear();
		return NULL;
	}
	PyObject *mod = PyImport_GetModule(key);
	Py_DECREF(key);
	if (!mod) {
		PyErr_Clear();
		return NULL;
	}
	if (mod == Py_None) { /* sys.modules[name] = None blocks an import */
		Py_DECREF(mod);
		return NULL;
	}
	return mod;
}

PyObject *gpr_py_attr(PyObject *obj, const char *dotted)
{
	char part[128];
	PyObject *cur = Py_NewRef(obj);
	const char *p = dotted;
	while (cur && *p) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);
		if (n >= sizeof part) {
			Py_DECREF(cur);
			return NULL;
		}
		memcpy(part, p, n);
		part[n] = '\0';
		PyObject *next = PyObject_GetAttrString(cur, part);
		Py_DECREF(cur);
		cur = next;
		p = dot ? dot + 1 : p + n;
	}
	if (!cur)
		PyErr_Clear();
	return cur;
}

static PyObject *vcall(PyObject *obj, const char *name, const char *fmt,
		       va_list ap)
{
	PyObject *fn = PyObject_GetAttrString(obj, name);
	if (!fn)
		return NULL;
	PyObject *args = NULL;
	if (fmt && *fmt) {
		PyObject *v = Py_VaBuildValue(fmt, ap);
		if (!v) {
			Py_DECREF(fn);
			return NULL;
		}
		if (PyTuple_Check(v)) {
			args = v;
		} else {
			args = PyTuple_Pack(1, v);
			Py_DECREF(v);
		}
	} else {
		args = PyTuple_New(0);
	}
	if (!args) {
		Py_DECREF(fn);
		return NULL;
	}
	PyObject *r = PyObject_Call(fn, args, NULL);
	Py_DECREF(args);
	Py_DECREF(fn);
	return r;
}

PyObject *gpr_py_call(PyObject *obj, const char *name, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	PyObject *r = vcall(obj, name, fmt, ap);
	va_end(ap);
	return r;
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

int gpr_py_call_i64(PyObject *obj, const char *name, int64_t *out,
		    const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	PyObject *r = vcall(obj, name, fmt, ap);
	va_end(ap);
	int rc = gpr_py_i64(r, out);
	Py_XDECREF(r);
	return rc;
}

int64_t gpr_py_item_i64(PyObject *dict, const char *key)
{
	if (!dict || !PyDict_Check(dict))
		return -1;
	PyObject *v = PyDict_GetItemString(dict, key); /* borrowed */
	int64_t x = -1;
	if (!v || !PyLong_Check(v) || gpr_py_i64(v, &x)) {
		PyErr_Clear();
		return -1;
	}
	return x;
}

int gpr_py_truth(PyObject *obj)
{
	if (!obj)
		return -1;
	return PyObject_IsTrue(obj);
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

void gpr_py_error_note(char *buf, size_t len, const char *prefix)
{
	PyObject *type, *value, *tb;
	PyErr_Fetch(&type, &value, &tb);
	if (buf && len) {
		char tname[96] = "Exception", msg[384] = "";
		PyObject *qn =
		    type ? PyObject_GetAttrString(type, "__qualname__") : NULL;
		if (qn)
			str_into(qn, tname, sizeof tname);
		else
			PyErr_Clear();
		Py_XDECREF(qn);
		if (value)
			str_into(value, msg, sizeof msg);
		snprintf(buf, len, "%s%s%s%s%s", prefix, *prefix ? ": " : "",
			 tname, *msg ? ": " : "", msg);
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
	if (detail && *detail)
		PyErr_Format(type, "%s: %s (%s)", what, gpr_strerror(err),
			     detail);
	else
		PyErr_Format(type, "%s: %s", what, gpr_strerror(err));
	return NULL;
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

int gpr_py_primary_active(struct gpr_py_state *st, int device)
{
	int active = 0;
	PyThreadState *ts = PyEval_SaveThread();
	int rc = gpr_primary_context_active(st->ctx, device, &active);
	PyEval_RestoreThread(ts);
	return rc == 0 && active;
}

int gpr_py_enter_device(struct gpr_py_state *st, PyObject *obj, int device,
			int64_t *prev)
{
	if (gpr_py_call_i64(obj, "getDevice", prev, NULL))
		return -1;
	if (*prev == device)
		return 1;
	if (!gpr_py_primary_active(st, (int)*prev))
		return 0;
	PyObject *r = gpr_py_call(obj, "setDevice", "(i)", device);
	Py_XDECREF(r);
	return r ? 1 : -1;
}

int gpr_py_leave_device(PyObject *obj, int device, int64_t prev, int rc)
{
	if (prev == device)
		return rc;
	PyObject *type, *value, *tb;
	PyErr_Fetch(&type, &value, &tb);
	PyObject *r = gpr_py_call(obj, "setDevice", "(L)", (long long)prev);
	if (!r && !type)
		rc = -1;
	else if (!r)
		PyErr_Clear();
	Py_XDECREF(r);
	if (type)
		PyErr_Restore(type, value, tb);
	return rc;
}
