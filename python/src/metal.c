/*
 * The Metal pass. The core measures what the CUDA driver got back through
 * NVML; Apple silicon has neither, so the extension runs the Metal
 * allocators itself, around the core's release, and reads Metal's
 * per-process total before and after. The figure is read before any
 * garbage collection: Metal buffers go straight back to the driver when
 * their objects are collected, so a later first read would miss them.
 */
#include "ext.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static const struct gpr_py_metal *const frameworks[] = {
    &gpr_py_rel_mps,
    &gpr_py_rel_mlx,
};
#define N_FRAMEWORKS (sizeof frameworks / sizeof frameworks[0])

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int gpr_py_metal_begin(struct gpr_py_metal_result *m)
{
	char why[96];
	memset(m, 0, sizeof *m);
	for (size_t i = 0; i < N_FRAMEWORKS; i++) {
		if (!frameworks[i]->status(why, sizeof why))
			continue;
		m->present = 1;
		if (m->figure)
			continue;
		int r = frameworks[i]->driver_bytes(&m->before);
		if (r < 0)
			PyErr_Clear(); /* reported by end() as unknown */
		if (r == 1)
			m->figure = frameworks[i];
	}
	return 0;
}

static int add_note(PyObject *notes, const char *text)
{
	PyObject *s = PyUnicode_FromString(text);
	int rc = s ? PyList_Append(notes, s) : -1;
	Py_XDECREF(s);
	return rc;
}

static PyObject *row(const char *name, const struct gpr_held *b,
		     const struct gpr_held *a, int status)
{
	return Py_BuildValue(
	    "{s:s,s:i,s:O,s:K,s:K,s:K,s:K,s:i}", "name", name, "device",
	    GPR_DEVICE_ONCE, "known", b->known && a->known ? Py_True : Py_False,
	    "before_live", (unsigned long long)b->live, "before_cached",
	    (unsigned long long)b->cached, "after_live",
	    (unsigned long long)a->live, "after_cached",
	    (unsigned long long)a->cached, "status", status);
}

/* Runs every active framework's release; 1 if live bytes remain. */
static int release_all(const int *active, int *status, PyObject *notes)
{
	int live = 0;
	char msg[512];
	for (size_t i = 0; i < N_FRAMEWORKS; i++) {
		if (!active[i])
			continue;
		if (frameworks[i]->release()) {
			gpr_py_error_note(msg, sizeof msg, frameworks[i]->name);
			add_note(notes, msg);
			status[i] = GPR_E_RELEASER;
		}
		struct gpr_held h = {0};
		if (frameworks[i]->held(&h))
			PyErr_Clear();
		if (h.known && h.live)
			live = 1;
	}
	return live;
}

int gpr_py_metal_end(struct gpr_py_state *st, struct gpr_py_metal_result *m,
		     int collect, int collected, PyObject *rows,
		     PyObject *notes)
{
	int active[N_FRAMEWORKS] = {0}, status[N_FRAMEWORKS] = {0};
	struct gpr_held before[N_FRAMEWORKS] = {0}, after[N_FRAMEWORKS] = {0};
	char why[96];
	if (!m->present)
		return 0;
	for (size_t i = 0; i < N_FRAMEWORKS; i++) {
		active[i] = frameworks[i]->status(why, sizeof why);
		if (active[i] && frameworks[i]->held(&before[i]))
			PyErr_Clear();
	}
	int live = release_all(active, status, notes);
	int need = collect == GPR_COLLECT_ALWAYS ||
		   (collect == GPR_COLLECT_AUTO && live);
	if (need && !collected) {
		double t0 = now();
		PyObject *r =
		    PyObject_CallFunctionObjArgs(st->gc_collect, NULL);
		if (!r)
			return -1;
		Py_DECREF(r);
		m->collected = 1;
		m->collect_seconds = now() - t0;
		release_all(active, status, notes);
	}
	for (size_t i = 0; i < N_FRAMEWORKS; i++) {
		if (!active[i])
			continue;
		if (frameworks[i]->held(&after[i]))
			PyErr_Clear();
		PyObject *r =
		    row(frameworks[i]->name, &before[i], &after[i], status[i]);
		if (!r || PyList_Append(rows, r)) {
			Py_XDECREF(r);
			return -1;
		}
		Py_DECREF(r);
	}
	if (m->figure) {
		int r = m->figure->driver_bytes(&m->after);
		char msg[512] = "metal: the figure after could not be read";
		if (r < 0)
			gpr_py_error_note(msg, sizeof msg,
					  "metal: figure after");
		if (r == 1)
			m->known = 1;
		else
			add_note(notes, msg);
	} else {
		add_note(notes, "metal: no per-process figure (neither "
				"torch.mps nor mlx could be read)");
	}
	if (m->figure == &gpr_py_rel_mlx)
		add_note(notes,
			 "metal: figure from MLX's own counters (torch.mps "
			 "absent): Torch's buffers are not counted");
	return 0;
}
