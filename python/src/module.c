/*
 * gpureclaim._gpureclaim: the method table and the module's life (PEP 489
 * multi-phase init, state per module object). The functions live in
 * release.c (the core's release), releaser.c (the one releaser trampoline,
 * through which gpureclaim/frameworks/ and users register), query.c and
 * pools.c (what the core knows), gpus.c, view.c (renderings), the parts
 * explain() needs C for in torch_wsmap.c, tensor_scan.c, referrers.c
 * follow.c and paths.c (the holders' walk), trace_live.c and ctxprobe.c,
 * tracing from inside in trace.c, the processes gpureclaim suspended in
 * suspended.c, the agent's socket on a fatal signal in agent_signal.c; the
 * documented API is
 * __init__.py, the frameworks' policy gpureclaim/frameworks/. No file
 * calls back into this one: the method files sit below it, the helpers
 * (pyutil.c) below them.
 */
#include "ext.h"

#include "suspend.h"

static PyObject *version(PyObject *module, PyObject *unused)
{
	(void)module;
	(void)unused;
	return PyUnicode_FromString(gpr_version());
}

#define FN(f) ((PyCFunction)(void (*)(void))(f))

static PyMethodDef methods[] = {
    {"release", FN(gpr_py_release), METH_VARARGS | METH_KEYWORDS,
     "release(*, devices=None, collect='auto') -> report handle"},
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
    {"devices_in_use", gpr_py_devices_in_use, METH_NOARGS,
     "devices_in_use() -> list of CUDA ordinals with a context"},
    {"process_memory", gpr_py_process_memory, METH_NOARGS,
     "process_memory() -> {device: driver bytes of this process or None}"},
    {"gpus", FN(gpr_py_gpus), METH_VARARGS | METH_KEYWORDS,
     "gpus(*, host=False) -> list of {device, uuid, name, held, ...}"},
    {"register", FN(gpr_py_register), METH_VARARGS | METH_KEYWORDS,
     "register(name, release, held=None, *, once=False, device=None, "
     "figure=None): a Python releaser as a core releaser"},
    {"unregister", gpr_py_unregister, METH_VARARGS, "unregister(name)"},
    {"releaser_names", gpr_py_releaser_names, METH_NOARGS,
     "releaser_names() -> the core's releasers, in registration order"},
    {"version", version, METH_NOARGS, "version of the C library"},
    {"_in_use", gpr_py_in_use, METH_O,
     "_in_use(fn) -> CUDA ordinals with a context; None in a forked child"},
    {"_process_figure", gpr_py_process_figure, METH_O,
     "_process_figure(device) -> (bytes, None) or (None, why)"},
    {"_cuda_loaded", gpr_py_cuda_loaded, METH_NOARGS,
     "_cuda_loaded() -> whether libcuda is loaded in this process"},
    {"_primary_active", gpr_py_primary_active, METH_O,
     "_primary_active(device) -> bool; None: no such GPU"},
    {"_gpu_uuid", gpr_py_gpu_uuid, METH_O,
     "_gpu_uuid(device) -> NVML's UUID of a CUDA ordinal, or None"},
    {"_devices_arg", gpr_py_devices_arg, METH_VARARGS,
     "_devices_arg(devices, fn) -> None or the ordinals, checked"},
    {"_pool_of", gpr_py_pool_of, METH_VARARGS,
     "_pool_of(device, address) -> the driver pool of an allocation, or 0"},
    {"_pool_bytes", gpr_py_pool_bytes, METH_O,
     "_pool_bytes(pool) -> (reserved, used)"},
    {"_pool_trim", gpr_py_pool_trim, METH_VARARGS,
     "_pool_trim(device, pool, keep): synchronize, then trim"},
    {"_torch_wsmap", gpr_py_torch_wsmap, METH_O,
     "_torch_wsmap(version) -> (rows, None) or (None, why)"},
    {"_heap_scan", gpr_py_heap_scan, METH_VARARGS,
     "_heap_scan(objects, tensor_type, graph_type) -> (pointers, pools, "
     "tensors, odd)"},
    {"_heap", gpr_py_heap, METH_VARARGS,
     "_heap(objects, stops, skips, budget_s, max_objects, groups[, threads])"
     " -> (heap, objects of each group, examined, total, stopped, ms)"},
    {"_climb", gpr_py_climb, METH_VARARGS,
     "_climb(heap, targets) -> (graph, ms)"},
    {"_namespaces", gpr_py_namespaces, METH_VARARGS,
     "_namespaces(modules, roots) -> None: each module's namespace into "
     "roots"},
    {"_instance_dict", gpr_py_instance_dict, METH_O,
     "_instance_dict(obj) -> its own __dict__, or None"},
    {"_dict_items", gpr_py_dict_items, METH_O,
     "_dict_items(d) -> [(key, value)] of a dict, read at once, hashing "
     "nothing"},
    {"_of_types", gpr_py_of_types, METH_VARARGS,
     "_of_types(objects, types[, threads]) -> the objects of those types"},
    {"_paths", gpr_py_paths, METH_VARARGS,
     "_paths(graph, roots, starts, max_nodes, max_found) -> (via, found, "
     "outside, left)"},
    {"_follow", gpr_py_follow, METH_VARARGS,
     "_follow(starts, first, leaf, kinds, bases, guard, budget_s, "
     "max_nodes, state, todo) -> (heads, pending, stopped)"},
    {"_trace_live", gpr_py_trace_live, METH_NOARGS,
     "_trace_live() -> None or [(device, kind, library, bytes, count)]"},
    {"_agent_signals", gpr_py_agent_signals, METH_VARARGS,
     "_agent_signals(path=None, dev=0, ino=0): the agent's socket removed "
     "on SIGTERM and SIGHUP at their default action (None: not)"},
    {"_context_probe", gpr_py_context_probe, METH_O,
     "_context_probe(uuid) -> int: the probe process of "
     "explain(measure_context=True); never call it in a program"},
    {"_trace_start", gpr_py_trace_start, METH_VARARGS,
     "_trace_start(path, backend) -> (result, why, status)"},
    {"_trace_stop", gpr_py_trace_stop, METH_NOARGS,
     "_trace_stop() -> the log's path, or None"},
    {"_trace_status", gpr_py_trace_status, METH_NOARGS,
     "_trace_status() -> dict, or None without the tracer"},
    {"_suspended", gpr_py_suspended, METH_NOARGS,
     "_suspended() -> the processes gpureclaim suspended, with the "
     "driver's state of each"},
    {"_wake_start", gpr_py_wake_start, METH_NOARGS,
     "_wake_start() -> None: this process's page for resume on demand"},
    {"_wake_state", gpr_py_wake_state, METH_NOARGS,
     "_wake_state() -> 0 running, 1 suspended, 2 asked"},
    {"_wake_ask", gpr_py_wake_ask, METH_O,
     "_wake_ask(max_seconds) -> 1 resumed, 0 nothing to do, -1 not"},
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
	/* A releaser raises it to name its own note (releaser.c). */
	st->failed = PyErr_NewException("gpureclaim._gpureclaim.ReleaseFailed",
					PyExc_Exception, NULL);
	PyObject *gc = PyImport_ImportModule("gc");
	st->gc_collect = gc ? PyObject_GetAttrString(gc, "collect") : NULL;
	Py_XDECREF(gc);
	if (!st->error || !st->failed || !st->gc_collect)
		return -1;
	if (PyModule_AddObjectRef(m, "Error", st->error) ||
	    PyModule_AddObjectRef(m, "ReleaseFailed", st->failed) ||
	    PyModule_AddIntConstant(m, "DEVICE_ONCE", GPR_DEVICE_ONCE) ||
	    add_errors(m))
		return -1;
	/* A failed open is kept, not raised: import still works and each
	 * call says why it cannot run. The frameworks' releasers are
	 * registered by gpureclaim/frameworks/, as a user's are. */
	st->open_error = gpr_open(NULL, &st->ctx);
	if (st->open_error)
		st->ctx = NULL;
	return 0;
}

static int traverse(PyObject *m, visitproc visit, void *arg)
{
	struct gpr_py_state *st = gpr_py_state(m);
	if (!st)
		return 0;
	Py_VISIT(st->error);
	Py_VISIT(st->failed);
	Py_VISIT(st->gc_collect);
	return 0;
}

static int clear(PyObject *m)
{
	struct gpr_py_state *st = gpr_py_state(m);
	if (!st)
		return 0;
	Py_CLEAR(st->error);
	Py_CLEAR(st->failed);
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
	gpr__suspender_close(st->suspender);
	st->suspender = NULL;
	gpr_close(st->ctx); /* destroys the releasers (takes the GIL) */
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
