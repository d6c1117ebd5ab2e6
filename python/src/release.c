/*
 * release(): argument checks, the core's release with the GIL released, and
 * the report turned into plain Python values (the documented Release class
 * is built from them in __init__.py). Every framework, Metal's included,
 * runs inside the core's release as a registered releaser; the core's
 * release lock serializes concurrent calls.
 */
#include "ext.h"

#include <stdlib.h>
#include <string.h>

/* The release running on this thread: the core calls the releasers back on
 * the thread that called gpr_release. */
static _Thread_local struct gpr_py_call current;

const struct gpr_py_call *gpr_py_call_options(void)
{
	return &current;
}

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

/* One GPU row: a CUDA GPU with NVML's figures, or the Metal GPU, whose only
 * figure is this process's (shown as its use; free and total unknown). */
static PyObject *gpu_row(const struct gpr_report_gpu *g)
{
	if (g->name)
		return Py_BuildValue("{s:s,s:O,s:O,s:L,s:K,s:K,s:K,s:O,s:O}",
				     "device", g->name, "nvml_index", Py_None,
				     "known", g->known ? Py_True : Py_False,
				     "released", (long long)g->released,
				     "before", (unsigned long long)g->before,
				     "after", (unsigned long long)g->after,
				     "used", (unsigned long long)g->after,
				     "free", Py_None, "total", Py_None);
	return Py_BuildValue(
	    "{s:i,s:i,s:O,s:L,s:K,s:K,s:K,s:K,s:K}", "device", g->device,
	    "nvml_index", g->nvml_index, "known", g->known ? Py_True : Py_False,
	    "released", (long long)g->released, "before",
	    (unsigned long long)g->before, "after",
	    (unsigned long long)g->after, "used", (unsigned long long)g->used,
	    "free", (unsigned long long)g->free, "total",
	    (unsigned long long)g->total);
}

/* The GPU rows; *only_metal = 1 when every row is the Metal GPU. */
static int add_gpus(const gpr_report *rep, PyObject *gpus, int *only_metal)
{
	size_t n = gpr_report_gpu_count(rep);
	*only_metal = n > 0;
	for (size_t i = 0; i < n; i++) {
		struct gpr_report_gpu g;
		if (gpr_report_gpu(rep, i, &g))
			continue;
		*only_metal &= g.name && !strcmp(g.name, GPR_PY_METAL_DEVICE);
		PyObject *d = gpu_row(&g);
		if (!d || PyList_Append(gpus, d)) {
			Py_XDECREF(d);
			return -1;
		}
		Py_DECREF(d);
	}
	return 0;
}

/* The report as a dict (new reference) or NULL with an error set. */
static PyObject *to_dict(const gpr_report *rep)
{
	PyObject *gpus = PyList_New(0), *rows = PyList_New(0),
		 *notes = PyList_New(0), *out = NULL;
	int only_metal = 0;
	if (!gpus || !rows || !notes || add_gpus(rep, gpus, &only_metal) ||
	    add_rows(rep, rows, notes))
		goto done;
	double cs = 0;
	int collected = gpr_report_collected(rep, &cs);
	const char *source = gpr_report_source(rep);
	/* the driver's figure there is Metal's per-process total */
	if (only_metal && strcmp(source, "driver") == 0)
		source = "metal";
	out =
	    Py_BuildValue("{s:L,s:s,s:d,s:O,s:d,s:O,s:O,s:O}", "bytes",
			  (long long)gpr_report_bytes(rep), "source", source,
			  "elapsed", gpr_report_seconds(rep), "collected",
			  collected ? Py_True : Py_False, "collect_seconds", cs,
			  "gpus", gpus, "releasers", rows, "notes", notes);
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
	GPR_OPTS(gpr_release_opts, o, .devices = n >= 0 ? devs : NULL,
		 .n_devices = n >= 0 ? n : 0, .collect = collect,
		 .collect_fn = collect_full, .collect_young_fn = collect_young,
		 .collect_user = st);
	struct gpr_py_call saved = current;
	current.workspaces = ws == Py_True;
	gpr_report *rep = NULL;
	PyThreadState *ts = PyEval_SaveThread();
	int rc = gpr_release(st->ctx, &o, &rep);
	PyEval_RestoreThread(ts);
	current = saved;
	if (rc)
		gpr_py_raise(st, rc, "release");
	else
		out = to_dict(rep);
	gpr_report_free(rep);
done:
	PyMem_Free(devs);
	return out;
}
