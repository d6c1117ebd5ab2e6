/*
 * A user's own pool: register(name, release, held=None, live=None).
 * release(device) is called once per visited GPU with its CUDA ordinal;
 * held(device) returns the bytes the pool holds there (live and cached),
 * live(device) the bytes of live allocations (what makes collect="auto"
 * run the garbage collector). An exception in a callback becomes a note in
 * the report; the other releasers still run.
 */
#include "ext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct user {
	PyObject *release, *held, *live; /* held and live may be NULL */
	char name[];
};

static void destroy(void *data)
{
	struct user *u = data;
	PyGILState_STATE g = PyGILState_Ensure();
	Py_XDECREF(u->release);
	Py_XDECREF(u->held);
	Py_XDECREF(u->live);
	PyGILState_Release(g);
	free(u);
}

/* fn(device) as a non-negative int; 0 or -1 with an error set. */
static int bytes_of(PyObject *fn, int device, uint64_t *out)
{
	PyObject *r = PyObject_CallFunction(fn, "(i)", device);
	int64_t v = 0;
	int rc = gpr_py_i64(r, &v);
	Py_XDECREF(r);
	if (rc)
		return -1;
	if (v < 0) {
		PyErr_Format(PyExc_ValueError, "returned %lld bytes",
			     (long long)v);
		return -1;
	}
	*out = (uint64_t)v;
	return 0;
}

static int held(void *data, int device, struct gpr_held *out)
{
	struct user *u = data;
	out->known = 0;
	if (device < 0 || (!u->held && !u->live))
		return 0;
	PyGILState_STATE g = PyGILState_Ensure();
	uint64_t total = 0, live = 0;
	int rc = (u->held && bytes_of(u->held, device, &total)) ||
		 (u->live && bytes_of(u->live, device, &live));
	if (rc) {
		gpr_py_error_note(NULL, 0, "");
	} else {
		out->live = live;
		out->cached = total > live ? total - live : 0;
		out->known = 1;
	}
	PyGILState_Release(g);
	return rc ? GPR_E_RELEASER : 0;
}

static int release(void *data, int device, char *note, size_t note_sz)
{
	struct user *u = data;
	if (device < 0)
		return 0;
	PyGILState_STATE g = PyGILState_Ensure();
	int rc = 0;
	PyObject *r = PyObject_CallFunction(u->release, "(i)", device);
	if (!r) {
		gpr_py_error_note(note, note_sz, "");
		rc = GPR_E_RELEASER;
	}
	Py_XDECREF(r);
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
	static char *kwlist[] = {"name", "release", "held", "live", NULL};
	struct gpr_py_state *st = gpr_py_state(module);
	PyObject *name, *rel, *h = Py_None, *l = Py_None;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "UO|OO:register", kwlist,
					 &name, &rel, &h, &l))
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
	if (optional_callable(h, "held") || optional_callable(l, "live"))
		return NULL;
	if (!st->ctx)
		return gpr_py_raise(st, st->open_error, "register");
	struct user *u = calloc(1, sizeof *u + (size_t)n + 1);
	if (!u)
		return PyErr_NoMemory();
	memcpy(u->name, cname, (size_t)n + 1);
	u->release = Py_NewRef(rel);
	u->held = h == Py_None ? NULL : Py_NewRef(h);
	u->live = l == Py_None ? NULL : Py_NewRef(l);
	struct gpr_releaser r = {.sz = sizeof r,
				 .name = u->name,
				 .data = u,
				 .held = held,
				 .release = release,
				 .destroy = destroy};
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
	if (!cname)
		return NULL;
	/* the frameworks' releasers are not the user's to remove */
	int rc = gpr_py_framework(cname) ? GPR_E_NOT_FOUND : 0;
	if (!rc && !st->ctx)
		return gpr_py_raise(st, st->open_error, "unregister");
	if (!rc) {
		PyThreadState *ts = PyEval_SaveThread();
		rc = gpr_unregister(st->ctx, cname);
		PyEval_RestoreThread(ts);
	}
	if (rc == GPR_E_NOT_FOUND)
		return PyErr_Format(PyExc_KeyError,
				    "unregister(): no releaser named %R was "
				    "registered with register()",
				    name);
	if (rc)
		return gpr_py_raise(st, rc, "unregister");
	Py_RETURN_NONE;
}
