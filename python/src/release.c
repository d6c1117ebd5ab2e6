/*
 * release(): argument checks, the core's release with the GIL released, and
 * the report as a handle (view.c renders it: the documented Release class
 * of __init__.py is built from its JSON and shows its text and HTML). Every
 * framework, Metal's included, runs inside the core's release as a releaser
 * registered through releaser.c; the options the frameworks read
 * (workspaces=) are set by __init__.py around this call. The core's release
 * lock serializes concurrent calls.
 */
#include "ext.h"

#include <stdlib.h>
#include <string.h>

/* gc.collect(generation), or gc.collect() for generation < 0; called by
 * the core with the GIL released. */
static int run_gc(struct gpr_py_state *st, int generation)
{
	PyGILState_STATE g = PyGILState_Ensure();
	PyObject *r = generation < 0 ? PyObject_CallNoArgs(st->gc_collect)
				     : PyObject_CallFunction(st->gc_collect,
							     "(i)", generation);
	int rc = r ? 0 : -1;
	if (!r)
		PyErr_Clear();
	Py_XDECREF(r);
	PyGILState_Release(g);
	return rc;
}

static int collect_full(void *user)
{
	return run_gc(user, -1);
}

/* The young generations (0 and 1): ~0 ms where a full collection with
 * torch imported takes 40-90 ms; the core runs the full one only if
 * framework memory is still live after it. */
static int collect_young(void *user)
{
	return run_gc(user, 1);
}

static int parse_collect(PyObject *obj, int *out)
{
	if (obj == Py_True || obj == Py_False) {
		*out = obj == Py_True ? GPR_COLLECT_ALWAYS : GPR_COLLECT_NEVER;
		return 0;
	}
	if (PyUnicode_Check(obj)) {
		const char *s = PyUnicode_AsUTF8AndSize(obj, NULL);
		if (s && strcmp(s, "auto") == 0) {
			*out = GPR_COLLECT_AUTO;
			return 0;
		}
		PyErr_Format(PyExc_ValueError,
			     "release(): collect must be \"auto\", True or "
			     "False, not %R",
			     obj);
		return -1;
	}
	PyErr_Format(PyExc_TypeError,
		     "release(): collect must be \"auto\", True or False, not "
		     "%s",
		     PyLong_Check(obj) ? "an int" : "that type");
	return -1;
}

PyObject *gpr_py_release(PyObject *module, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"devices", "collect", NULL};
	struct gpr_py_state *st = gpr_py_state(module);
	PyObject *devices = Py_None, *collect_o = NULL;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OO:release", kwlist,
					 &devices, &collect_o))
		return NULL;
	int *devs = PyMem_Malloc(GPR_PY_MAX_DEVICES * sizeof *devs);
	if (!devs)
		return PyErr_NoMemory();
	int n = -1, collect = GPR_COLLECT_AUTO;
	PyObject *out = NULL;
	if (gpr_py_parse_devices(devices, "release", devs, &n) ||
	    (collect_o && parse_collect(collect_o, &collect)))
		goto done;
	if (!st->ctx) {
		gpr_py_raise(st, st->open_error, "release");
		goto done;
	}
	GPR_OPTS(gpr_release_opts, o, .devices = n >= 0 ? devs : NULL,
		 .n_devices = n >= 0 ? n : 0, .collect = collect,
		 .collect_fn = collect_full, .collect_young_fn = collect_young,
		 .collect_user = st);
	gpr_report *rep = NULL;
	PyThreadState *ts = PyEval_SaveThread();
	int rc = gpr_release(st->ctx, &o, &rep);
	PyEval_RestoreThread(ts);
	if (rc)
		gpr_py_raise(st, rc, "release");
	else
		out = gpr_py_report_handle(rep); /* owns rep */
done:
	PyMem_Free(devs);
	return out;
}
