/*
 * gpus(host=False): the GPUs as NVML names them, so that a report gathered
 * from several processes can key a GPU by its UUID and count it once when
 * processes share it (the cluster reports, gpureclaim/cluster).
 *
 * host=False: the GPUs on which this process holds a context; host=True:
 * every GPU NVML sees on this host. Per GPU: the CUDA ordinal in this
 * process (None if CUDA is not in use here), the NVML index, UUID, name,
 * bus id, the whole GPU's total/used/free, this process's driver bytes
 * (the core's per-process figure, None where the driver has none) and the
 * process list. A GPU NVML cannot describe carries `error` and None for
 * what is missing; no call here opens a context or initialises CUDA.
 */
#include "ext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct one_gpu {
	int device; /* CUDA ordinal, -1 if none in this process */
	int have;   /* info valid */
	struct gpr_gpu info;
	int held_rc; /* 0: held valid */
	uint64_t held;
	struct gpr_process *procs; /* gpr_free */
	size_t n_procs;
	int procs_rc;
	char error[192]; /* why info is missing, "" if it is not */
};

static void set_error(struct gpr_py_state *st, struct one_gpu *g, int rc,
		      const char *what)
{
	const char *detail = gpr_last_error(st->ctx);
	snprintf(g->error, sizeof g->error, "%s: %s%s%s%s", what,
		 gpr_strerror(rc), *detail ? " (" : "", detail,
		 *detail ? ")" : "");
}

/* Fills g from NVML index idx (GIL released). */
static void describe(struct gpr_py_state *st, struct one_gpu *g, int idx)
{
	int rc = gpr_gpu_info(st->ctx, idx, &g->info);
	if (rc) {
		set_error(st, g, rc, "NVML");
		return;
	}
	g->have = 1;
	if (g->device < 0)
		g->device = g->info.cuda_ordinal;
	g->procs_rc = gpr_gpu_processes(st->ctx, idx, &g->procs, &g->n_procs);
	/* Without CUDA in this process it holds nothing on any GPU. */
	g->held_rc =
	    g->device < 0 ? 0 : gpr_process_bytes(st->ctx, g->device, &g->held);
}

/* The GPUs this process holds a context on (GIL released). */
static int collect_in_use(struct gpr_py_state *st, struct one_gpu **out, int *n)
{
	int devs[GPR_PY_MAX_DEVICES];
	int rc = gpr_devices_in_use(st->ctx, devs, GPR_PY_MAX_DEVICES, n);
	if (rc)
		return rc;
	if (*n > GPR_PY_MAX_DEVICES)
		*n = GPR_PY_MAX_DEVICES;
	*out = calloc(*n ? (size_t)*n : 1, sizeof **out);
	if (!*out)
		return GPR_E_NOMEM;
	for (int i = 0; i < *n; i++) {
		struct one_gpu *g = &(*out)[i];
		g->device = devs[i];
		int idx = -1;
		rc = gpr_nvml_index(st->ctx, devs[i], &idx);
		if (rc) {
			set_error(st, g, rc, "no NVML index");
			/* the figure may still come from NVML's list */
			g->held_rc =
			    gpr_process_bytes(st->ctx, g->device, &g->held);
			continue;
		}
		describe(st, g, idx);
	}
	return 0;
}

/* Every GPU NVML sees (GIL released). */
static int collect_host(struct gpr_py_state *st, struct one_gpu **out, int *n)
{
	int rc = gpr_gpu_count(st->ctx, n);
	if (rc)
		return rc;
	*out = calloc(*n ? (size_t)*n : 1, sizeof **out);
	if (!*out)
		return GPR_E_NOMEM;
	for (int i = 0; i < *n; i++) {
		(*out)[i].device = -1;
		describe(st, &(*out)[i], i);
	}
	return 0;
}

static PyObject *int_or_none(int ok, unsigned long long v)
{
	return ok ? PyLong_FromUnsignedLongLong(v) : Py_NewRef(Py_None);
}

static PyObject *processes(const struct one_gpu *g)
{
	PyObject *list = PyList_New(0);
	for (size_t i = 0; list && g->procs_rc == 0 && i < g->n_procs; i++) {
		const struct gpr_process *p = &g->procs[i];
		PyObject *b = int_or_none(p->bytes_known, p->bytes);
		PyObject *t = b ? Py_BuildValue("(IO)", p->pid, b) : NULL;
		if (!t || PyList_Append(list, t))
			Py_CLEAR(list);
		Py_XDECREF(t);
		Py_XDECREF(b);
	}
	return list;
}

static PyObject *str_or_none(int ok, const char *s)
{
	return ok ? PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace")
		  : Py_NewRef(Py_None);
}

static PyObject *to_dict(const struct one_gpu *g)
{
	int h = g->have;
	PyObject *v[] = {
	    g->device >= 0 ? PyLong_FromLong(g->device) : Py_NewRef(Py_None),
	    h ? PyLong_FromLong(g->info.index) : Py_NewRef(Py_None),
	    str_or_none(h, g->info.uuid),
	    str_or_none(h, g->info.name),
	    str_or_none(h, g->info.pci_bus_id),
	    int_or_none(h, g->info.total),
	    int_or_none(h, g->info.used),
	    int_or_none(h, g->info.free),
	    int_or_none(g->held_rc == 0, g->held),
	    processes(g),
	    str_or_none(!h, g->error),
	};
	static const char *const keys[] = {
	    "device", "nvml_index", "uuid", "name",	 "pci_bus_id", "total",
	    "used",   "free",	    "held", "processes", "error",
	};
	size_t n = sizeof v / sizeof v[0];
	PyObject *d = PyDict_New();
	for (size_t i = 0; i < n; i++) {
		if (d && (!v[i] || PyDict_SetItemString(d, keys[i], v[i])))
			Py_CLEAR(d);
		Py_XDECREF(v[i]);
	}
	if (d && PyDict_SetItemString(d, "mig",
				      h && g->info.mig ? Py_True : Py_False))
		Py_CLEAR(d);
	return d;
}

PyObject *gpr_py_gpus(PyObject *module, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"host", NULL};
	struct gpr_py_state *st = gpr_py_state(module);
	int host = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|$p:gpus", kwlist, &host))
		return NULL;
	if (!st->ctx)
		return gpr_py_raise(st, st->open_error, "gpus");
	struct one_gpu *gs = NULL;
	int n = 0;
	PyThreadState *ts = PyEval_SaveThread();
	int rc = host ? collect_host(st, &gs, &n) : collect_in_use(st, &gs, &n);
	PyEval_RestoreThread(ts);
	PyObject *list = rc ? gpr_py_raise(st, rc, "gpus") : PyList_New(0);
	for (int i = 0; list && i < n; i++) {
		PyObject *d = to_dict(&gs[i]);
		if (!d || PyList_Append(list, d))
			Py_CLEAR(list);
		Py_XDECREF(d);
	}
	for (int i = 0; gs && i < n; i++)
		gpr_free(gs[i].procs);
	free(gs);
	return list;
}
