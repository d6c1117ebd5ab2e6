/*
 * The one C-to-Python releaser trampoline: register(name, release,
 * held=None, *, once=False, device=None, figure=None) makes a Python
 * releaser a core releaser (gpr_register). Every framework of
 * gpureclaim/frameworks/ and every pool a user registers with
 * gpureclaim.register() goes through here, each under its own name.
 *
 * The Python side of the contract (called with the GIL, on the thread
 * that called release()):
 * - release(device) -> None, or a str: a note for the report. Raising
 *   marks a failure whose note is "<ExcType>: <message>", or the message
 *   alone for a ReleaseFailed (a framework that names the step it was on).
 * - held(device) -> (live, cached) in bytes, or None: cannot tell. Raising
 *   or anything else counts as "cannot tell".
 * - once: also called with DEVICE_ONCE (-1), the once-per-call step.
 * - device: the name of a GPU that CUDA does not see ("mps"): release and
 *   held are then called with DEVICE_ONCE only, in the releases where
 *   figure() says the framework is in use. figure() -> None (not in use
 *   here), an int (the driver's figure of this process there), or a str
 *   (in use, no figure: why).
 * A releaser's exception never leaves release(): it becomes a note, and
 * the other releasers still run.
 */
#include "ext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct releaser {
	struct gpr_py_state *st;
	PyObject *release, *held, *figure; /* held and figure may be NULL */
	int once;			   /* called with GPR_DEVICE_ONCE */
	char name[];
};

static void destroy(void *data)
{
	struct releaser *r = data;
	PyGILState_STATE g = PyGILState_Ensure();
	Py_XDECREF(r->release);
	Py_XDECREF(r->held);
	Py_XDECREF(r->figure);
	PyGILState_Release(g);
	free(r);
}

/* fn(device); new reference or NULL with an error set. */
static PyObject *call_device(PyObject *fn, int device)
{
	PyObject *d = PyLong_FromLong(device);
	PyObject *res = d ? PyObject_CallFunctionObjArgs(fn, d, NULL) : NULL;
	Py_XDECREF(d);
	return res;
}

/* A non-negative int as a uint64: 0, or -1 with an error set. */
static int bytes_of(PyObject *v, uint64_t *out)
{
	int64_t x = 0;
	if (gpr_py_i64(v, &x))
		return -1;
	if (x < 0) {
		PyErr_Format(PyExc_ValueError, "%lld bytes", (long long)x);
		return -1;
	}
	*out = (uint64_t)x;
	return 0;
}

static int held(void *data, int device, struct gpr_held *out)
{
	struct releaser *r = data;
	out->known = 0;
	if (!r->held || (device == GPR_DEVICE_ONCE && !r->once))
		return 0;
	PyGILState_STATE g = PyGILState_Ensure();
	PyObject *res = call_device(r->held, device);
	uint64_t live = 0, cached = 0;
	int rc = res ? 0 : -1;
	if (res && res != Py_None) {
		rc = PyTuple_Check(res) && PyTuple_Size(res) == 2 &&
			     !bytes_of(PyTuple_GetItem(res, 0), &live) &&
			     !bytes_of(PyTuple_GetItem(res, 1), &cached)
			 ? 0
			 : -1;
		if (!rc) {
			out->live = live;
			out->cached = cached;
			out->known = 1;
		}
	}
	Py_XDECREF(res);
	PyErr_Clear();
	PyGILState_Release(g);
	return rc ? GPR_E_RELEASER : 0;
}

static int release(void *data, int device, char *note, size_t note_sz)
{
	struct releaser *r = data;
	if (device == GPR_DEVICE_ONCE && !r->once)
		return 0;
	PyGILState_STATE g = PyGILState_Ensure();
	int rc = 0;
	PyObject *res = call_device(r->release, device);
	if (!res) {
		gpr_py_error_note(r->st, note, note_sz);
		rc = GPR_E_RELEASER;
	} else if (PyUnicode_Check(res)) {
		const char *s = PyUnicode_AsUTF8AndSize(res, NULL);
		snprintf(note, note_sz, "%s", s ? s : "?");
		PyErr_Clear();
	}
	Py_XDECREF(res);
	PyGILState_Release(g);
	return rc;
}

static int figure(void *data, uint64_t *bytes, char *why, size_t why_sz)
{
	struct releaser *r = data;
	PyGILState_STATE g = PyGILState_Ensure();
	PyObject *res = PyObject_CallNoArgs(r->figure);
	int rc = GPR_FIGURE_UNUSED;
	if (!res) {
		gpr_py_error_note(r->st, why, why_sz);
		rc = GPR_E_RELEASER;
	} else if (PyUnicode_Check(res)) {
		const char *s = PyUnicode_AsUTF8AndSize(res, NULL);
		snprintf(why, why_sz, "%s", s ? s : "?");
		rc = GPR_FIGURE_UNKNOWN;
	} else if (res != Py_None) {
		rc = bytes_of(res, bytes) ? GPR_E_RELEASER : GPR_FIGURE_KNOWN;
		if (rc < 0)
			gpr_py_error_note(r->st, why, why_sz);
	}
	Py_XDECREF(res);
	PyErr_Clear();
	PyGILState_Release(g);
	return rc;
}

static int optional_callable(PyObject *o, const char *what)
{
	if (o == Py_None || PyCallable_Check(o))
		return 0;
	PyErr_Format(PyExc_TypeError, "register(): %s must be callable or None",
		     what);
	return -1;
}

PyObject *gpr_py_register(PyObject *module, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"name",   "release", "held", "once",
				 "device", "figure",  NULL};
	struct gpr_py_state *st = gpr_py_state(module);
	PyObject *name, *rel, *h = Py_None, *fig = Py_None, *dev = Py_None;
	int once = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "UO|O$pOO:register", kwlist,
					 &name, &rel, &h, &once, &dev, &fig))
		return NULL;
	Py_ssize_t n;
	const char *cname = PyUnicode_AsUTF8AndSize(name, &n);
	if (!cname)
		return NULL;
	if (n == 0 || n > 100 || strlen(cname) != (size_t)n) {
		PyErr_SetString(PyExc_ValueError,
				"register(): name must be 1 to 100 characters");
		return NULL;
	}
	if (!PyCallable_Check(rel)) {
		PyErr_SetString(PyExc_TypeError,
				"register(): release must be callable");
		return NULL;
	}
	const char *device = NULL;
	if (dev != Py_None &&
	    (!PyUnicode_Check(dev) ||
	     !(device = PyUnicode_AsUTF8AndSize(dev, NULL)) || !*device)) {
		PyErr_Clear();
		PyErr_SetString(PyExc_TypeError,
				"register(): device must be a GPU's name or "
				"None");
		return NULL;
	}
	if (optional_callable(h, "held") || optional_callable(fig, "figure"))
		return NULL;
	if (!gpr_py_ctx(st, "register"))
		return NULL;
	struct releaser *u = calloc(1, sizeof *u + (size_t)n + 1);
	if (!u)
		return PyErr_NoMemory();
	memcpy(u->name, cname, (size_t)n + 1);
	u->st = st;
	u->once = once || device;
	u->release = Py_NewRef(rel);
	u->held = h == Py_None ? NULL : Py_NewRef(h);
	u->figure = fig == Py_None ? NULL : Py_NewRef(fig);
	struct gpr_releaser r = {.sz = sizeof r,
				 .name = u->name,
				 .data = u,
				 .held = held,
				 .release = release,
				 .destroy = destroy,
				 .device_name = device,
				 .figure = u->figure ? figure : NULL};
	PyThreadState *ts = PyEval_SaveThread();
	int rc = gpr_register(st->ctx, &r);
	PyEval_RestoreThread(ts);
	if (rc) {
		destroy(u);
		if (rc == GPR_E_EXISTS)
			return PyErr_Format(PyExc_ValueError,
					    "register(): a releaser named %R "
					    "is already registered",
					    name);
		return gpr_py_raise(st, rc, "register");
	}
	Py_RETURN_NONE;
}

PyObject *gpr_py_unregister(PyObject *module, PyObject *args)
{
	struct gpr_py_state *st = gpr_py_state(module);
	PyObject *name;
	if (!PyArg_ParseTuple(args, "U:unregister", &name))
		return NULL;
	const char *cname = PyUnicode_AsUTF8AndSize(name, NULL);
	if (!cname || !gpr_py_ctx(st, "unregister"))
		return NULL;
	PyThreadState *ts = PyEval_SaveThread();
	int rc = gpr_unregister(st->ctx, cname);
	PyEval_RestoreThread(ts);
	if (rc == GPR_E_NOT_FOUND)
		return PyErr_Format(PyExc_KeyError,
				    "unregister(): no releaser named %R was "
				    "registered with register()",
				    name);
	if (rc)
		return gpr_py_raise(st, rc, "unregister");
	Py_RETURN_NONE;
}

/* The core's releasers, in registration order ([] without a handle, and
 * in a forked child: the parent's list is off limits there). */
PyObject *gpr_py_releaser_names(PyObject *module, PyObject *unused)
{
	(void)unused;
	struct gpr_py_state *st = gpr_py_state(module);
	PyObject *list = PyList_New(0);
	size_t n = 0;
	int rc = list && st->ctx ? gpr_releaser_count(st->ctx, &n) : 0;
	for (size_t i = 0; list && rc == 0 && i < n; i++) {
		char *name = NULL;
		rc = gpr_releaser_name(st->ctx, i, &name);
		if (rc == GPR_E_RANGE) /* unregistered meanwhile */
			return list;
		PyObject *s = rc ? NULL : PyUnicode_FromString(name);
		gpr_free(name);
		if (!rc && (!s || PyList_Append(list, s)))
			Py_CLEAR(list);
		Py_XDECREF(s);
	}
	if (list && rc && rc != GPR_E_FORKED) {
		Py_DECREF(list);
		return gpr_py_raise(st, rc, "releasers");
	}
	return list;
}
