/*
 * _suspended(): the processes gpureclaim suspended, for the exporter
 * (gpureclaim/metrics/): gpureclaim's records (the core's
 * src/suspend_record.h: the folders this user, or root, may read), each
 * with the driver's state of it read now (cuCheckpointProcessGetState),
 * never taken from the record. A record whose pid is gone or is another
 * process now, or whose process runs again, is left out (and removed
 * when it is this user's). The CUDA driver is loaded and initialised
 * (cuInit: no context) at the first call that finds a record, and kept in
 * the module's state; without a record nothing is loaded.
 *
 * -> [{"pid": int, "uid": int, "time": float, "state": str ("suspended",
 *      "locked", "failed", "unknown"), "host_bytes": int or None,
 *      "gpus": [(nvml_index, uuid, bytes released)]}]
 */
#include "ext.h"

#include <stdlib.h>
#include <unistd.h>

#include "suspend.h"
#include "suspend_record.h"

struct found {
	struct gpr__record rec;
	int state;
};

/* The state of pid (GIL released): the suspender opened once. */
static int state_of(struct gpr_py_state *st, gpr_ctx *ctx, int pid)
{
	char err[512];
	if (!st->suspender && !st->suspender_failed &&
	    gpr__suspender_open(ctx, &st->suspender, err, sizeof err) != 0)
		st->suspender_failed = 1;
	int state = GPR__PS_UNKNOWN;
	if (!st->suspender ||
	    gpr__suspend_state(st->suspender, pid, &state, err, sizeof err))
		return GPR__PS_UNKNOWN;
	return state;
}

/* Every current record of the folders (GIL released); *out malloc'd. */
static int gather(struct gpr_py_state *st, gpr_ctx *ctx, struct found **out,
		  size_t *n)
{
	struct gpr__record_folder *dirs = NULL;
	size_t nd = 0, cap = 0;
	*out = NULL;
	*n = 0;
	int rc = gpr__record_dirs(&dirs, &nd);
	for (size_t d = 0; rc == 0 && d < nd; d++) {
		int *pids = NULL;
		size_t np = 0;
		rc = gpr__record_pids(dirs[d].path, &pids, &np);
		int mine = dirs[d].uid == (long)getuid();
		for (size_t i = 0; rc == 0 && i < np; i++) {
			struct found f;
			if (gpr__record_read(dirs[d].path, pids[i], &f.rec))
				continue;
			if (!gpr__record_current(&f.rec, dirs[d].uid)) {
				if (mine)
					gpr__record_remove(dirs[d].path,
							   f.rec.pid);
				continue;
			}
			f.state = state_of(st, ctx, f.rec.pid);
			if (f.state == GPR__PS_RUNNING) {
				if (mine)
					gpr__record_remove(dirs[d].path,
							   f.rec.pid);
				continue;
			}
			if (*n == cap) {
				cap = cap ? 2 * cap : 8;
				struct found *g =
				    realloc(*out, cap * sizeof *g);
				if (!g) {
					rc = GPR_E_NOMEM;
					break;
				}
				*out = g;
			}
			(*out)[(*n)++] = f;
		}
		free(pids);
	}
	free(dirs);
	return rc;
}

static PyObject *one(const struct found *f)
{
	PyObject *gpus = PyList_New(0);
	for (size_t i = 0; gpus && i < f->rec.n_gpus; i++) {
		PyObject *t = Py_BuildValue(
		    "(isK)", f->rec.gpu[i].index, f->rec.gpu[i].uuid,
		    (unsigned long long)f->rec.gpu[i].bytes);
		if (!t || PyList_Append(gpus, t)) {
			Py_XDECREF(t);
			Py_CLEAR(gpus);
		}
		Py_XDECREF(t);
	}
	if (!gpus)
		return NULL;
	PyObject *host = f->rec.host_known
			     ? PyLong_FromUnsignedLongLong(f->rec.host_bytes)
			     : Py_NewRef(Py_None);
	PyObject *d =
	    host ? Py_BuildValue("{s:i,s:l,s:d,s:s,s:O,s:O}", "pid", f->rec.pid,
				 "uid", f->rec.uid, "time", f->rec.time,
				 "state", gpr__pstate_name(f->state),
				 "host_bytes", host, "gpus", gpus)
		 : NULL;
	Py_XDECREF(host);
	Py_DECREF(gpus);
	return d;
}

PyObject *gpr_py_suspended(PyObject *module, PyObject *unused)
{
	(void)unused;
	struct gpr_py_state *st = gpr_py_state(module);
	gpr_ctx *ctx = gpr_py_ctx(st, "_suspended");
	if (!ctx)
		return NULL;
	struct found *f = NULL;
	size_t n = 0;
	int rc;
	Py_BEGIN_ALLOW_THREADS rc = gather(st, ctx, &f, &n);
	Py_END_ALLOW_THREADS if (rc)
	{
		free(f);
		return gpr_py_raise(st, rc, "_suspended");
	}
	PyObject *list = PyList_New(0);
	for (size_t i = 0; list && i < n; i++) {
		PyObject *d = one(&f[i]);
		if (!d || PyList_Append(list, d))
			Py_CLEAR(list);
		Py_XDECREF(d);
	}
	free(f);
	return list;
}
