/*
 * Tracing from inside the program (gpureclaim.trace): the tracer library
 * found or loaded, its sessions started and stopped, and a log rendered
 * by the trace reader's own renderers (text, JSON, HTML with the plot).
 * The policy (warn or raise, one session per Trace object) lives in
 * __init__.py; this file says what happened.
 *
 * The tracer is found in the process first (preloaded by `gpureclaim
 * trace`, or loaded before): dlsym(RTLD_DEFAULT). Otherwise it is loaded,
 * RTLD_GLOBAL (so that gpureclaim.explain and the program find its
 * functions the same way), from $GPURECLAIM_TRACE_LIBRARY or beside this
 * module, where the build and the wheel put it.
 */
#include "ext.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpureclaim_trace.h"
#include "../../trace/read/log_path.h"
#include "../../trace/format/log_read.h"
#include "../../trace/read/log_report.h"
#include "../../trace/read/log_stats.h"

/* The tracer's function `name`, loading the library when `load`; NULL
 * with why[] saying where it looked. */
static void *tracer_fn(const char *name, int load, char *why, size_t len)
{
	void *p = dlsym(RTLD_DEFAULT, name);
	if (p || !load)
		return p;
	char paths[3][4200];
	int n = 0;
	const char *env = getenv("GPURECLAIM_TRACE_LIBRARY");
	if (env && *env)
		snprintf(paths[n++], sizeof(paths[0]), "%s", env);
	Dl_info di;
	if (dladdr((const void *)tracer_fn, &di) && di.dli_fname) {
		const char *slash = strrchr(di.dli_fname, '/');
		int dir = slash ? (int)(slash - di.dli_fname) : 0;
		const char *sep = slash ? "/" : "";
		snprintf(paths[n++], sizeof(paths[0]),
			 "%.*s%slibgpureclaim_trace.so", dir, di.dli_fname,
			 sep);
		snprintf(paths[n++], sizeof(paths[0]),
			 "%.*s%slibgpureclaim_trace.abi3.so", dir, di.dli_fname,
			 sep);
	}
	for (int i = 0; i < n; i++) {
		void *h = dlopen(paths[i], RTLD_NOW | RTLD_GLOBAL);
		if (h && (p = dlsym(h, name)) != NULL)
			return p;
	}
	snprintf(why, len,
		 "the tracer library is not loaded and was not found "
		 "(GPURECLAIM_TRACE_LIBRARY, or %s)",
		 n ? paths[n - 1] : "beside the module");
	return NULL;
}

static const char *backend_name(int b)
{
	return b == GPURECLAIM_TRACE_INTERPOSE ? "interpose"
	       : b == GPURECLAIM_TRACE_CUPTI   ? "cupti"
					       : "none";
}

static const char *const wait_names[] = {"none", "perf-gated",
					 "getrusage-gated"};

/* {"session": ..., "backend": ..., "interposer": ..., "wait": ...,
 * "path": ...}, or None when the tracer is not in the process. */
PyObject *gpr_py_trace_status(PyObject *module, PyObject *unused)
{
	(void)module;
	(void)unused;
	char why[8];
	gpureclaim_trace_status_fn *status = NULL;
	*(void **)&status =
	    tracer_fn("gpureclaim_trace_status", 0, why, sizeof(why));
	struct gpureclaim_trace_status st = {.sz = sizeof(st)};
	if (!status || status(&st) != 0)
		Py_RETURN_NONE;
	int wait = st.wait >= 0 && st.wait <= 2 ? st.wait : 0;
	return Py_BuildValue("{s:i,s:s,s:O,s:s,s:s}", "session", st.session,
			     "backend", backend_name(st.backend), "interposer",
			     st.interposer ? Py_True : Py_False, "wait",
			     wait_names[wait], "path", st.path);
}

/*
 * _trace_start(path, backend) -> (result, why, status): result an enum
 * gpureclaim_trace_result, or GPURECLAIM_TRACE_E_UNAVAILABLE when the
 * tracer cannot be found; raises gpureclaim.Error when path holds a file
 * that is not a trace log.
 */
PyObject *gpr_py_trace_start(PyObject *module, PyObject *args)
{
	struct gpr_py_state *st = gpr_py_state(module);
	const char *path;
	int backend;
	if (!PyArg_ParseTuple(args, "si:_trace_start", &path, &backend))
		return NULL;
	char why[600] = "";
	int rc;
	Py_BEGIN_ALLOW_THREADS;
	gpureclaim_trace_start_fn *start = NULL;
	*(void **)&start =
	    tracer_fn("gpureclaim_trace_start", 1, why, sizeof(why));
	if (!start) {
		rc = GPURECLAIM_TRACE_E_UNAVAILABLE;
	} else if (gpr_trace_clear_path(path, why, sizeof(why)) < 0) {
		rc = GPURECLAIM_TRACE_E_LOG;
	} else {
		struct gpureclaim_trace_start_opts o = {
		    sizeof(o), path, backend, NULL, why, sizeof(why)};
		rc = start(&o);
	}
	Py_END_ALLOW_THREADS;
	if (rc == GPURECLAIM_TRACE_E_LOG && strstr(why, "not a trace log")) {
		PyErr_SetString(st->error, why);
		return NULL;
	}
	PyObject *status = gpr_py_trace_status(module, NULL);
	if (!status)
		return NULL;
	return Py_BuildValue("(isN)", rc, why, status);
}

/* _trace_stop() -> the log's path, or None when no session was open. */
PyObject *gpr_py_trace_stop(PyObject *module, PyObject *unused)
{
	(void)module;
	(void)unused;
	char path[4096] = "", why[8];
	int rc = -1;
	gpureclaim_trace_stop_fn *stop = NULL;
	*(void **)&stop =
	    tracer_fn("gpureclaim_trace_stop", 0, why, sizeof(why));
	if (stop) {
		Py_BEGIN_ALLOW_THREADS;
		rc = stop(path, sizeof(path));
		Py_END_ALLOW_THREADS;
	}
	if (rc != 0)
		Py_RETURN_NONE;
	return PyUnicode_DecodeFSDefault(path);
}

/* The report of one log, rendered into b by format. 0 or -1 (err). */
static int render(const char *path, const char *format, int top,
		  struct gpr__buf *b, char *err, size_t len)
{
	struct gpr_trace t;
	if (gpr_trace_load(path, &t, err, len) < 0)
		return -1;
	struct gpr_trace_stats s;
	if (gpr_trace_stats_compute(&t, &s) < 0) {
		gpr_trace_free(&t);
		snprintf(err, len, "out of memory");
		return -1;
	}
	int rc = 0;
	if (strcmp(format, "json") == 0)
		gpr_trace_report_json(b, path, &t, &s, top);
	else if (strcmp(format, "html") == 0) /* a notebook's fragment */
		gpr_trace_report_html(b, path, &t, &s, top, 0);
	else
		gpr_trace_report_text(b, path, &t, &s, top, 0);
	if (rc || b->oom) {
		snprintf(err, len, "out of memory");
		rc = -1;
	}
	gpr_trace_stats_free(&s);
	gpr_trace_free(&t);
	return rc;
}

/* _trace_report(path, format, top) -> str: "text", "json" or "html". */
PyObject *gpr_py_trace_report(PyObject *module, PyObject *args)
{
	struct gpr_py_state *st = gpr_py_state(module);
	const char *path, *format;
	int top;
	if (!PyArg_ParseTuple(args, "ssi:_trace_report", &path, &format, &top))
		return NULL;
	if (strcmp(format, "text") != 0 && strcmp(format, "json") != 0 &&
	    strcmp(format, "html") != 0) {
		PyErr_Format(PyExc_ValueError, "unknown report format %s",
			     format);
		return NULL;
	}
	if (top < 1) {
		PyErr_SetString(PyExc_ValueError, "top must be at least 1");
		return NULL;
	}
	struct gpr__buf b = {0};
	char err[512] = "";
	int rc;
	Py_BEGIN_ALLOW_THREADS;
	rc = render(path, format, top, &b, err, sizeof(err));
	Py_END_ALLOW_THREADS;
	PyObject *out = NULL;
	if (rc < 0)
		PyErr_Format(st->error, "%s: %s", path, err);
	else
		out = PyUnicode_DecodeUTF8(b.data ? b.data : "",
					   (Py_ssize_t)b.len, "replace");
	gpr__buf_free(&b);
	return out;
}
