/*
 * gpureclaim._gpureclaim: the method table and the module's life (PEP 489
 * multi-phase init, state per module object). The functions live in
 * release.c, query.c, rel_user.c, explain.c and view.c (renderings), the
 * frameworks in frameworks.c (one table) with their probes (probe.c), releasers
 * (rel_*.c, mps.c, mlx.c) and explainers (explain_*.c, mps.c, mlx.c), tracing
 * from inside in trace.c; the documented API in __init__.py. No file calls
 * back into this one: the method files sit below it, the helpers (pyutil.c)
 * below them.
 */
#include "ext.h"

static PyObject *version(PyObject *module, PyObject *unused)
{
	(void)module;
	(void)unused;
	return PyUnicode_FromString(gpr_version());
}

static PyMethodDef methods[] = {
    {"release", (PyCFunction)(void (*)(void))gpr_py_release,
     METH_VARARGS | METH_KEYWORDS,
     "release(*, devices=None, collect='auto', workspaces=False) -> report "
     "handle"},
    {"report_text", gpr_py_report_text, METH_O,
     "report_text(handle) -> str: gpr_report_text"},
    {"report_json", gpr_py_report_json, METH_O,
     "report_json(handle) -> str: gpr_report_json"},
    {"report_html", gpr_py_report_html, METH_O,
     "report_html(handle) -> str: gpr_report_html"},
    {"render", gpr_py_render, METH_VARARGS,
     "render(view, form) -> str: a view as 'text', 'html' or 'document'"},
    {"format_bytes", gpr_py_format_bytes, METH_O,
     "format_bytes(n) -> str: binary units ('1.5 GiB'); None: '-'"},
    {"format_seconds", gpr_py_format_seconds, METH_O,
     "format_seconds(s) -> str: '85.6 ms', '1.25 s'"},
    {"explain", (PyCFunction)(void (*)(void))gpr_py_explain,
     METH_VARARGS | METH_KEYWORDS,
     "explain(devices=None, measure_context=False) -> dict: where this "
     "process's GPU memory goes"},
    {"_context_probe", gpr_py_context_probe, METH_O,
     "_context_probe(uuid) -> int: the probe process of "
     "explain(measure_context=True); never call it in a program"},
    {"devices_in_use", gpr_py_devices_in_use, METH_NOARGS,
     "devices_in_use() -> list of CUDA ordinals with a context"},
    {"process_memory", gpr_py_process_memory, METH_NOARGS,
     "process_memory() -> {device: driver bytes of this process or None}"},
    {"gpus", (PyCFunction)(void (*)(void))gpr_py_gpus,
     METH_VARARGS | METH_KEYWORDS,
     "gpus(*, host=False) -> list of {device, uuid, name, held, ...}"},
    {"releasers", gpr_py_releasers, METH_NOARGS,
     "releasers() -> list of {name, kind, active, why}"},
    {"register", (PyCFunction)(void (*)(void))gpr_py_register,
     METH_VARARGS | METH_KEYWORDS,
     "register(name, release, held=None, live=None)"},
    {"unregister", gpr_py_unregister, METH_VARARGS, "unregister(name)"},
    {"version", version, METH_NOARGS, "version of the C library"},
    {"_trace_start", gpr_py_trace_start, METH_VARARGS,
     "_trace_start(path, backend) -> (result, why, status)"},
    {"_trace_stop", gpr_py_trace_stop, METH_NOARGS,
     "_trace_stop() -> the log's path, or None"},
    {"_trace_status", gpr_py_trace_status, METH_NOARGS,
     "_trace_status() -> dict, or None without the tracer"},
    {"_trace_report", gpr_py_trace_report, METH_VARARGS,
     "_trace_report(path, format, top) -> str"},
    {NULL, NULL, 0, NULL},
};

static int add_errors(PyObject *m)
{
	PyObject *d = PyDict_New();
	if (!d)
		return -1;
#define GPR_X_ADD(name, value, kind, msg)                                      \
	do {                                                                   \
		PyObject *v = Py_BuildValue("(is)", value, msg);               \
		if (!v || PyDict_SetItemString(d, #name, v)) {                 \
			Py_XDECREF(v);                                         \
			Py_DECREF(d);                                          \
			return -1;                                             \
		}                                                              \
		Py_DECREF(v);                                                  \
	} while (0);
	GPR_ERRORS(GPR_X_ADD)
#undef GPR_X_ADD
	int rc = PyModule_AddObjectRef(m, "errors", d);
	Py_DECREF(d);
	return rc;
}

static int module_exec(PyObject *m)
{
	struct gpr_py_state *st = gpr_py_state(m);
	st->error =
	    PyErr_NewException("gpureclaim.Error", PyExc_RuntimeError, NULL);
	PyObject *gc = PyImport_ImportModule("gc");
	st->gc_collect = gc ? PyObject_GetAttrString(gc, "collect") : NULL;
	Py_XDECREF(gc);
	if (!st->error || !st->gc_collect)
		return -1;
	if (PyModule_AddObjectRef(m, "Error", st->error) ||
	    PyModule_AddIntConstant(m, "DEVICE_ONCE", GPR_DEVICE_ONCE) ||
	    add_errors(m))
		return -1;
	/* A failed open is kept, not raised: import still works and each
	 * call says why it cannot run. */
	st->open_error = gpr_open(NULL, &st->ctx);
	if (st->open_error)
		st->ctx = NULL;
	else if ((st->open_error = gpr_py_register_builtin(st))) {
		gpr_close(st->ctx);
		st->ctx = NULL;
	}
	return 0;
}

static int traverse(PyObject *m, visitproc visit, void *arg)
{
	struct gpr_py_state *st = gpr_py_state(m);
	if (!st)
		return 0;
	Py_VISIT(st->error);
	Py_VISIT(st->gc_collect);
	return 0;
}

static int clear(PyObject *m)
{
	struct gpr_py_state *st = gpr_py_state(m);
	if (!st)
		return 0;
	Py_CLEAR(st->error);
	Py_CLEAR(st->gc_collect);
	return 0;
}

static void free_module(void *p)
{
	PyObject *m = p;
	struct gpr_py_state *st = gpr_py_state(m);
	if (!st)
		return;
	clear(m);
	gpr_close(st->ctx); /* destroys the user releasers (takes the GIL) */
	st->ctx = NULL;
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, (void *)module_exec},
    {0, NULL},
};

static struct PyModuleDef def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "gpureclaim._gpureclaim",
    .m_doc = "C layer of gpureclaim; use the gpureclaim package.",
    .m_size = sizeof(struct gpr_py_state),
    .m_methods = methods,
    .m_slots = slots,
    .m_traverse = traverse,
    .m_clear = clear,
    .m_free = free_module,
};

PyMODINIT_FUNC PyInit__gpureclaim(void)
{
	return PyModuleDef_Init(&def);
}
