/*
 * trace_live(): the tracer's live table, when this process is traced (the
 * tracer, libgpureclaim_trace.so, is in the process and exports
 * gpureclaim_trace_live): a row per (device, kind, library) of what was
 * allocated through the driver and not freed, as plain tuples
 * (device, kind, library or None, bytes, count); None when the tracer is
 * not here or not recording. What the rows mean for explain() (which
 * library is whose) is gpureclaim/_explain/_parts.py's.
 */
#include "ext.h"
#include "gpureclaim_trace.h"
#include "../../trace/inject/locate.h"

#include <stdlib.h>

#define MAX_ROWS 4096

/* The tracer's live query, when the tracer is in this process
 * (trace/inject/locate.h). */
static gpureclaim_trace_live_fn *find_tracer(void)
{
	gpureclaim_trace_live_fn *fn = NULL;
	*(void **)&fn = gpr_inj_locate_loaded("gpureclaim_trace_live");
	return fn;
}

PyObject *gpr_py_trace_live(PyObject *module, PyObject *unused)
{
	(void)module;
	(void)unused;
	gpureclaim_trace_live_fn *fn = find_tracer();
	if (!fn)
		Py_RETURN_NONE;
	size_t cap = 256, n = 0;
	struct gpureclaim_trace_live *rows = NULL;
	for (;;) {
		PyMem_Free(rows);
		rows = PyMem_Calloc(cap, sizeof *rows);
		if (!rows)
			return PyErr_NoMemory();
		rows[0].sz = sizeof *rows;
		if (fn(rows, cap, &n) != 0) {
			PyMem_Free(rows);
			Py_RETURN_NONE; /* loaded, not recording */
		}
		if (n <= cap || cap >= MAX_ROWS)
			break;
		cap = n < MAX_ROWS ? n : MAX_ROWS;
	}
	PyObject *list = PyList_New(0);
	for (size_t i = 0; list && i < n && i < cap; i++) {
		const struct gpureclaim_trace_live *r = &rows[i];
		PyObject *t = Py_BuildValue(
		    "(iizKK)", r->device, r->kind, r->library,
		    (unsigned long long)r->bytes, (unsigned long long)r->count);
		if (!t || PyList_Append(list, t))
			Py_CLEAR(list);
		Py_XDECREF(t);
	}
	PyMem_Free(rows);
	return list;
}
