/*
 * release(): argument checks, the core's release with the GIL released, the
 * Metal pass around it, and the report turned into plain Python values
 * (the documented Release class is built from them in __init__.py).
 */
#include "ext.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int gpr_py_collect(void *user)
{
	struct gpr_py_state *st = user;
	PyGILState_STATE g = PyGILState_Ensure();
	PyObject *r = PyObject_CallFunctionObjArgs(st->gc_collect, NULL);
	int rc = r ? 0 : -1;
	if (!r)
		PyErr_Clear();
	Py_XDECREF(r);
	PyGILState_Release(g);
	return rc;
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

/* Appends the report's releaser rows and notes to the lists. */
static int add_rows(const gpr_report *rep, PyObject *rows, PyObject *notes)
{
	size_t n = gpr_report_releaser_count(rep);
	for (size_t i = 0; i < n; i++) {
		struct gpr_report_releaser r;
		if (gpr_report_releaser(rep, i, &r))
			continue;
		PyObject *d = Py_BuildValue(
		    "{s:s,s:i,s:O,s:K,s:K,s:K,s:K,s:i}", "name", r.name,
		    "device", r.device, "known", r.known ? Py_True : Py_False,
		    "before_live", (unsigned long long)r.before.live,
		    "before_cached", (unsigned long long)r.before.cached,
		    "after_live", (unsigned long long)r.after.live,
		    "after_cached", (unsigned long long)r.after.cached,
		    "status", r.status);
		if (!d || PyList_Append(rows, d)) {
			Py_XDECREF(d);
			return -1;
		}
		Py_DECREF(d);
	}
	n = gpr_report_note_count(rep);
	for (size_t i = 0; i < n; i++) {
		const char *t = gpr_report_note(rep, i);
		PyObject *s = t ? PyUnicode_DecodeUTF8(t, (Py_ssize_t)strlen(t),
						       "replace")
				: NULL;
		if (!t)
			continue;
		if (!s || PyList_Append(notes, s)) {
			Py_XDECREF(s);
			return -1;
		}
		Py_DECREF(s);
	}
	return 0;
}

static int add_gpus(const gpr_report *rep, PyObject *gpus)
{
	size_t n = gpr_report_gpu_count(rep);
	for (size_t i = 0; i < n; i++) {
		struct gpr_report_gpu g;
		if (gpr_report_gpu(rep, i, &g))
			continue;
		PyObject *d = Py_BuildValue(
		    "{s:i,s:i,s:O,s:L,s:K,s:K,s:K,s:K,s:K}", "device", g.device,
		    "nvml_index", g.nvml_index, "known",
		    g.known ? Py_True : Py_False, "released",
		    (long long)g.released, "before",
		    (unsigned long long)g.before, "after",
		    (unsigned long long)g.after, "used",
		    (unsigned long long)g.used, "free",
		    (unsigned long long)g.free, "total",
		    (unsigned long long)g.total);
		if (!d || PyList_Append(gpus, d)) {
			Py_XDECREF(d);
			return -1;
		}
		Py_DECREF(d);
	}
	return 0;
}

static int add_metal(const struct gpr_py_metal_result *m, PyObject *gpus)
{
	PyObject *d = Py_BuildValue(
	    "{s:s,s:O,s:O,s:L,s:L,s:L,s:L,s:O,s:O}", "device", "mps",
	    "nvml_index", Py_None, "known", m->known ? Py_True : Py_False,
	    "released", (long long)(m->known ? m->before - m->after : 0),
	    "before", (long long)m->before, "after", (long long)m->after,
	    "used", (long long)m->after, "free", Py_None, "total", Py_None);
	int rc = d ? PyList_Append(gpus, d) : -1;
	Py_XDECREF(d);
	return rc;
}

/* The report as a dict (new reference) or NULL with an error set. */
static PyObject *to_dict(struct gpr_py_state *st, const gpr_report *rep,
			 struct gpr_py_metal_result *m, int collect, double t0)
{
	PyObject *gpus = PyList_New(0), *rows = PyList_New(0),
		 *notes = PyList_New(0), *out = NULL;
	if (!gpus || !rows || !notes)
		goto done;
	if (add_gpus(rep, gpus) || add_rows(rep, rows, notes))
		goto done;
	double cs = 0;
	int collected = gpr_report_collected(rep, &cs);
	if (gpr_py_metal_end(st, m, collect, collected, rows, notes))
		goto done;
	int64_t bytes = gpr_report_bytes(rep);
	const char *source = gpr_report_source(rep);
	if (m->present && m->known) {
		if (add_metal(m, gpus))
			goto done;
		bytes += m->before - m->after;
		if (gpr_report_gpu_count(rep) == 0)
			source = m->figure == &gpr_py_rel_mps ? "metal"
							      : "allocators";
	}
	out = Py_BuildValue("{s:L,s:s,s:d,s:O,s:d,s:O,s:O,s:O}", "bytes",
			    (long long)bytes, "source", source, "elapsed",
			    now() - t0, "collected",
			    collected || m->collected ? Py_True : Py_False,
			    "collect_seconds", cs + m->collect_seconds, "gpus",
			    gpus, "releasers", rows, "notes", notes);
done:
	Py_XDECREF(gpus);
	Py_XDECREF(rows);
	Py_XDECREF(notes);
	return out;
}

PyObject *gpr_py_release(PyObject *module, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"devices", "collect", "workspaces", NULL};
	struct gpr_py_state *st = gpr_py_state(module);
	PyObject *devices = Py_None, *collect_o = NULL, *ws = Py_False;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOO:release", kwlist,
					 &devices, &collect_o, &ws))
		return NULL;
	int *devs = PyMem_Malloc(GPR_PY_MAX_DEVICES * sizeof *devs);
	if (!devs)
		return PyErr_NoMemory();
	int n = -1, collect = GPR_COLLECT_AUTO;
	PyObject *out = NULL;
	if (gpr_py_parse_devices(devices, "release", devs, &n) ||
	    (collect_o && parse_collect(collect_o, &collect)))
		goto done;
	if (ws != Py_True && ws != Py_False) {
		PyErr_SetString(PyExc_TypeError,
				"release(): workspaces must be True or False");
		goto done;
	}
	if (!st->ctx) {
		gpr_py_raise(st, st->open_error, "release");
		goto done;
	}
	if (st->busy && pthread_equal(st->owner, pthread_self())) {
		PyErr_SetString(PyExc_RuntimeError,
				"release() called from inside a releaser");
		goto done;
	}
	PyThreadState *ts = PyEval_SaveThread();
	pthread_mutex_lock(&st->lock);
	PyEval_RestoreThread(ts);
	st->busy = 1;
	st->owner = pthread_self();
	st->call.workspaces = ws == Py_True;

	double t0 = now();
	struct gpr_py_metal_result m;
	gpr_py_metal_begin(&m);
	struct gpr_release_opts o = {.sz = sizeof o,
				     .devices = n >= 0 ? devs : NULL,
				     .n_devices = n >= 0 ? n : 0,
				     .collect = collect,
				     .collect_fn = gpr_py_collect,
				     .collect_user = st};
	gpr_report *rep = NULL;
	ts = PyEval_SaveThread();
	int rc = gpr_release(st->ctx, &o, &rep);
	PyEval_RestoreThread(ts);
	if (rc)
		gpr_py_raise(st, rc, "release");
	else
		out = to_dict(st, rep, &m, collect, t0);
	gpr_report_free(rep);

	st->busy = 0;
	pthread_mutex_unlock(&st->lock);
done:
	PyMem_Free(devs);
	return out;
}
