/*
 * Tracing from inside the program (gpureclaim.trace): the tracer library
 * found or loaded, its sessions started and stopped, and a log rendered
 * by the trace reader's own renderers (text, JSON, HTML with the plot).
 * The policy (warn or raise, one session per Trace object) lives in
 * __init__.py; this file says what happened.
 *
 * The tracer is found in the process first (preloaded by `gpureclaim
 * trace`, or loaded before). Otherwise it is loaded, RTLD_GLOBAL (so that
 * gpureclaim.explain and the program find its functions the same way),
 * from where the command would find it too (trace/inject/locate.h:
 * $GPURECLAIM_TRACE_LIBRARY, else beside this module, where the build and
 * the wheel put it).
 */
#include "ext.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpureclaim_trace.h"
#include "out/text.h"
#include "../../trace/inject/locate.h"
#include "../../trace/read/log_path.h"
#include "../../trace/format/log_read.h"
#include "../../trace/read/log_report.h"
#include "../../trace/read/log_stats.h"

/* s into why (len bytes) as the terminal rule shows it (out/text.h): a
 * warning may be printed on a terminal. */
static void shown(char *why, size_t len, const char *s)
{
	struct gpr__buf b = {0};
	gpr__text_put(&b, s, 0, 0);
	snprintf(why, len, "%s", b.oom ? "out of memory" : gpr__buf_str(&b));
	gpr__buf_free(&b);
}

/*
 * The tracer's function `name`, loading the library when `load`; NULL
 * with why[] saying why: every place the locator looked, or why the
 * library it found would not load.
 */
static void *tracer_fn(const char *name, int load, char *why, size_t len)
{
	void *p = gpr_inj_locate_loaded(name);
	if (p || !load)
		return p;
	char path[PATH_MAX];
	struct gpr__buf tried = {0}, msg = {0};
	if (gpr_inj_locate(GPR_INJ_FROM_MODULE, path, sizeof(path), &tried) ==
	    0) {
		dlerror();
		void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
		if (h && (p = dlsym(h, name)) != NULL) {
			gpr__buf_free(&tried);
			return p;
		}
		const char *e = dlerror();
		gpr__buf_printf(&msg, "the tracer %s could not be loaded: %s",
				path, e ? e : "no such function");
	} else {
		/* the places, one line of the warning */
		gpr__buf_puts(&msg, "the tracer library is not loaded and was "
				    "not found; looked at");
		const char *t = gpr__buf_str(&tried);
		for (int first = 1; *t; first = 0) {
			t += strspn(t, " ");
			size_t n = strcspn(t, "\n");
			gpr__buf_printf(&msg, "%s %.*s", first ? ":" : ";",
					(int)n, t);
			t += n;
			t += *t == '\n';
		}
		gpr__buf_puts(&msg, " (set GPURECLAIM_TRACE_LIBRARY to "
				    "libgpureclaim_trace.so)");
	}
	shown(why, len, msg.oom ? "out of memory" : gpr__buf_str(&msg));
	gpr__buf_free(&msg);
	gpr__buf_free(&tried);
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
 * _trace_start(path, backend) -> (result, why, status): result the name
 * of an enum gpureclaim_trace_result without its prefix ("OK",
 * "E_ACTIVE"...), "E_UNAVAILABLE" when the tracer cannot be found; raises
 * gpureclaim.Error when path holds a file that is not a trace log.
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
	const char *name = gpureclaim_trace_errname(rc);
	static const char prefix[] = "GPURECLAIM_TRACE_";
	name = name ? name + sizeof(prefix) - 1 : "E_UNKNOWN";
	return Py_BuildValue("(ssN)", name, why, status);
}

/* _trace_stop() -> the log's path, or None when no session was open. */
PyObject *gpr_py_trace_stop(PyObject *module, PyObject *unused)
{
	(void)module;
	(void)unused;
	char path[4096] = "", why[8];
	int rc = GPURECLAIM_TRACE_E_NOT_TRACED;
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
