/*
 * explain(): where this process's GPU memory goes. For each GPU on which
 * the process holds a context (the GPUs release() visits; nothing is
 * opened), the explainers of the framework table (frameworks.c) add the
 * parts they can measure, then the driver's
 * per-process figure is read, and explain_rest.c splits off what a trace
 * or a context probe can attribute; the rest is what no part accounts
 * for. The rest is never clamped: a negative one is flagged as an
 * inconsistency. Where the driver has no per-process figure the total is the
 * sum of the parts (source "allocators"). On Apple silicon one more entry,
 * "mps", splits Metal's per-process total (the Metal releasers' figure(), as a
 * release reads it) the same way.
 */
#include "ext.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The GPUs with a context of this process, into out[GPR_PY_MAX_DEVICES]. */
static int in_use(struct gpr_py_state *st, int *out, int *n)
{
	PyThreadState *ts = PyEval_SaveThread();
	int rc = gpr_devices_in_use(st->ctx, out, GPR_PY_MAX_DEVICES, n);
	PyEval_RestoreThread(ts);
	if (rc == 0 && *n > GPR_PY_MAX_DEVICES)
		*n = GPR_PY_MAX_DEVICES;
	return rc;
}

/* The GPU's entry: driver figure, parts, rest (new reference). */
static PyObject *gpu_entry(struct gpr_py_xgpu *g, PyObject *device,
			   const char *label, int known, int64_t driver,
			   const char *source, PyObject *rest_part)
{
	int64_t total = known ? driver : g->sum;
	int64_t rest = total - g->sum;
	if (known && rest < 0 &&
	    gpr_py_xnote(
		g,
		"GPU %s: inconsistent: the parts add up to %lld bytes, "
		"%lld more than the driver's figure of %lld bytes "
		"(memory allocated or freed while explain() read the "
		"allocators, or an allocator counting memory it does "
		"not hold)",
		label, (long long)g->sum, (long long)-rest, (long long)driver))
		return NULL;
	return Py_BuildValue(
	    "{s:O,s:O,s:L,s:s,s:O,s:L,s:L,s:O,s:O}", "device", device, "known",
	    known ? Py_True : Py_False, "driver", (long long)total, "source",
	    source, "parts", g->parts, "sum", (long long)g->sum, "rest",
	    (long long)rest, "consistent", rest >= 0 ? Py_True : Py_False,
	    "rest_part", rest_part);
}

/*
 * The explainers of one kind of framework ("cuda" or "metal") on g; a
 * failing one becomes a note. *present (may be NULL) = 1 if one of them is
 * active.
 */
static int explain_parts(struct gpr_py_xcall *c, struct gpr_py_xgpu *g,
			 const char *kind, const char *label, int *present)
{
	char msg[600], prefix[64];
	if (present)
		*present = 0;
	for (size_t i = 0; i < gpr_py_n_frameworks; i++) {
		const struct gpr_py_framework *f = &gpr_py_frameworks[i];
		if (strcmp(f->kind, kind) != 0 || !f->explain)
			continue;
		if (present)
			*present |= gpr_py_active(f, NULL, 0);
		if (f->explain(c, g) == 0)
			continue;
		snprintf(prefix, sizeof prefix, "%s: GPU %s", f->releaser->name,
			 label);
		gpr_py_error_note(msg, sizeof msg, prefix);
		if (gpr_py_xnote(g, "%s", msg))
			return -1;
	}
	return 0;
}

static int explain_gpu(struct gpr_py_xcall *c, int device, PyObject *notes,
		       PyObject *gpus)
{
	struct gpr_py_xgpu g = {.device = device, .notes = notes};
	g.parts = PyList_New(0);
	if (!g.parts)
		return -1;
	char label[16];
	snprintf(label, sizeof label, "%d", device);
	int rc = -1;
	if (explain_parts(c, &g, "cuda", label, NULL))
		goto done;
	uint64_t bytes = 0;
	PyThreadState *ts = PyEval_SaveThread();
	int err = gpr_process_bytes(c->st->ctx, device, &bytes);
	PyEval_RestoreThread(ts);
	if (err &&
	    gpr_py_xnote(&g,
			 "GPU %d: the driver has no per-process figure here "
			 "(%s): the total is the sum of the parts (source: "
			 "allocators); the context and unreported allocations "
			 "cannot be shown",
			 device, gpr_strerror(err)))
		goto done;
	PyObject *rest = NULL;
	if (gpr_py_explain_rest(c, &g, !err, (int64_t)bytes, &rest))
		goto done;
	PyObject *dev = PyLong_FromLong(device);
	PyObject *e = dev ? gpu_entry(&g, dev, label, !err, (int64_t)bytes,
				      err ? "allocators" : "driver", rest)
			  : NULL;
	Py_XDECREF(dev);
	Py_DECREF(rest);
	rc = e ? PyList_Append(gpus, e) : -1;
	Py_XDECREF(e);
done:
	Py_DECREF(g.parts);
	return rc;
}

/* Metal's per-process total: the first Metal releaser's figure(), as a
 * release reads it; 1 if one answered. */
static int metal_figure(struct gpr_py_state *st, int64_t *bytes)
{
	char why[256];
	for (size_t i = 0; i < gpr_py_n_frameworks; i++) {
		const struct gpr_releaser *r = gpr_py_frameworks[i].releaser;
		uint64_t b = 0;
		if (strcmp(gpr_py_frameworks[i].kind, "metal") == 0 &&
		    r->figure &&
		    r->figure(st, &b, why, sizeof why) == GPR_FIGURE_KNOWN) {
			*bytes = (int64_t)b;
			return 1;
		}
	}
	return 0;
}

/* The "mps" entry on Apple silicon: Metal's per-process total split. */
static int explain_metal(struct gpr_py_xcall *c, PyObject *notes,
			 PyObject *gpus)
{
	struct gpr_py_xgpu g = {.device = GPR_DEVICE_NAMED, .notes = notes};
	g.parts = PyList_New(0);
	if (!g.parts)
		return -1;
	int present = 0, rc = -1;
	if (explain_parts(c, &g, "metal", GPR_PY_METAL_DEVICE, &present))
		goto done;
	rc = 0;
	if (!present)
		goto done;
	int64_t driver = 0;
	int known = metal_figure(c->st, &driver);
	PyObject *dev = PyUnicode_FromString(GPR_PY_METAL_DEVICE);
	/* MLX alone: its counters are the figure, nothing is left over. */
	PyObject *rest = gpr_py_part_dict(&(struct gpr_py_part){
	    .kind = "rest",
	    .source = "context, modules, unreported",
	    .bytes = known ? driver - g.sum : 0,
	    .known = known,
	    .exact = known,
	    .evidence = "residual",
	    .hint = "process_exit",
	    .how = known ? "Metal's per-process total minus every part above"
			 : "unknown: no per-process figure"});
	PyObject *e =
	    dev && rest ? gpu_entry(&g, dev, GPR_PY_METAL_DEVICE, known, driver,
				    known ? "driver" : "allocators", rest)
			: NULL;
	Py_XDECREF(rest);
	Py_XDECREF(dev);
	rc = e ? PyList_Append(gpus, e) : -1;
	Py_XDECREF(e);
done:
	Py_DECREF(g.parts);
	return rc;
}

static int add_note(PyObject *notes, const char *text)
{
	PyObject *s = PyUnicode_FromString(text);
	int rc = s ? PyList_Append(notes, s) : -1;
	Py_XDECREF(s);
	return rc;
}

PyObject *gpr_py_explain(PyObject *module, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"devices", "measure_context", NULL};
	struct gpr_py_state *st = gpr_py_state(module);
	PyObject *devices = Py_None, *measure = Py_False;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:explain", kwlist,
					 &devices, &measure))
		return NULL;
	if (measure != Py_True && measure != Py_False) {
		PyErr_SetString(PyExc_TypeError,
				"explain(): measure_context must be True or "
				"False");
		return NULL;
	}
	if (!st->ctx)
		return gpr_py_raise(st, st->open_error, "explain");
	double t0 = now();
	int *want = PyMem_Malloc(2 * GPR_PY_MAX_DEVICES * sizeof *want);
	if (!want)
		return PyErr_NoMemory();
	int *have = want + GPR_PY_MAX_DEVICES;
	int n_want = -1, n_have = 0;
	struct gpr_py_xcall c = {.st = st,
				 .measure_context = measure == Py_True};
	PyObject *gpus = PyList_New(0), *notes = PyList_New(0), *out = NULL;
	if (!gpus || !notes ||
	    gpr_py_parse_devices(devices, "explain", want, &n_want))
		goto done;
	int rc = in_use(st, have, &n_have);
	int forked = rc == GPR_E_FORKED;
	if (rc && !forked) {
		gpr_py_raise(st, rc, "explain");
		goto done;
	}
	/* A forked child, as with release(): an empty answer that says why. */
	if (forked && add_note(notes, "a forked child: the parent's CUDA state "
				      "is off limits; nothing is explained"))
		goto done;
	if (forked)
		n_have = 0;
	else if (n_have == 0 && !gpr_cuda_loaded(st->ctx) &&
		 add_note(notes,
			  "CUDA is not loaded in this process: it holds no "
			  "CUDA GPU memory"))
		goto done;
	for (int i = 0; n_want >= 0 && i < n_want; i++) {
		int found = 0;
		for (int j = 0; j < n_have; j++)
			found |= have[j] == want[i];
		char buf[128];
		snprintf(buf, sizeof buf,
			 "GPU %d: this process holds no context there; not "
			 "visited",
			 want[i]);
		if (!found && add_note(notes, buf))
			goto done;
	}
	for (int j = 0; j < n_have; j++) {
		int visit = n_want < 0;
		for (int i = 0; !visit && i < n_want; i++)
			visit = have[j] == want[i];
		if (visit && explain_gpu(&c, have[j], notes, gpus))
			goto done;
	}
	if (n_want < 0 && explain_metal(&c, notes, gpus))
		goto done;
	out = Py_BuildValue("{s:O,s:O,s:d}", "gpus", gpus, "notes", notes,
			    "seconds", now() - t0);
done:
	gpr_py_scan_free(&c.scan);
	Py_XDECREF(c.torch_snapshot);
	Py_XDECREF(gpus);
	Py_XDECREF(notes);
	PyMem_Free(want);
	return out;
}
