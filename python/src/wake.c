/*
 * Resume on demand from inside a Python process (docs/suspend.md): the
 * process's page (include/gpureclaim_wake.h) and the ask, for the agent's
 * notebook hook (gpureclaim/agent/_cells.py), which decides when to ask
 * (before a cell). The tracer's page when the tracer is in the process
 * (one page: its interposer asks from the same one), else this module's
 * own copy of the process's side (trace/inject/wake.c, compiled in).
 *
 *   _wake_start() -> None: the page made (once); OSError if it cannot be
 *   _wake_state() -> int: 0 running, 1 suspended (a watcher holds it),
 *                         2 asked
 *   _wake_ask(max_seconds) -> int: 1 resumed, 0 nothing to do, -1 not
 *                         resumed (GIL released while it waits)
 */
#include "ext.h"
#include "gpureclaim_wake.h"
#include "../../trace/inject/locate.h"
#include "../../trace/inject/wake.h"

#include <string.h>

struct wake_fns {
	gpureclaim_wake_start_fn *start;
	gpureclaim_wake_state_fn *state;
	gpureclaim_wake_ask_fn *ask;
};

/* The tracer's three, when it is here; else this module's. */
static void fns(struct wake_fns *f)
{
	*(void **)&f->start = gpr_inj_locate_loaded("gpureclaim_wake_start");
	*(void **)&f->state = gpr_inj_locate_loaded("gpureclaim_wake_state");
	*(void **)&f->ask = gpr_inj_locate_loaded("gpureclaim_wake_ask");
	if (!f->start || !f->state || !f->ask) {
		f->start = gpr_inj_wake_start;
		f->state = gpr_inj_wake_state;
		f->ask = gpr_inj_wake_ask;
	}
}

PyObject *gpr_py_wake_start(PyObject *module, PyObject *unused)
{
	(void)module;
	(void)unused;
	struct wake_fns f;
	fns(&f);
	int rc = f.start();
	if (rc < 0) {
		PyErr_Format(PyExc_OSError, "no page for resume on demand: %s",
			     strerror(-rc));
		return NULL;
	}
	Py_RETURN_NONE;
}

PyObject *gpr_py_wake_state(PyObject *module, PyObject *unused)
{
	(void)module;
	(void)unused;
	struct wake_fns f;
	fns(&f);
	return PyLong_FromLong(f.state());
}

PyObject *gpr_py_wake_ask(PyObject *module, PyObject *arg)
{
	(void)module;
	double max_s = PyFloat_AsDouble(arg);
	if (max_s == -1.0 && PyErr_Occurred())
		return NULL;
	struct wake_fns f;
	fns(&f);
	int rc;
	Py_BEGIN_ALLOW_THREADS rc = f.ask(max_s);
	Py_END_ALLOW_THREADS return PyLong_FromLong(rc);
}
