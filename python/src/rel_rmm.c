/*
 * RMM (rmm.mr, once the user imported rmm). Per visited GPU with a
 * resource set from Python:
 * - a CudaAsyncMemoryResource keeps its own pool of the driver's
 *   stream-ordered allocator, whose handle Python does not expose: the
 *   first release finds it from one 256-byte allocation
 *   (cuPointerGetAttribute MEMPOOL_HANDLE, through gpr_pool_of) and keeps
 *   it; each release trims the pool to its live bytes (gpr_pool_trim
 *   synchronizes first: frees in flight count as used until observed),
 *   with the GPU current in RMM and the previous one restored;
 * - a PoolMemoryResource is reported, never released: RMM has no public
 *   shrink, and rmm.reinitialize() behind the program's back would
 *   invalidate every buffer it allocated.
 * Nothing is done on a GPU the program set no resource for (asking RMM
 * for it would insert a default one).
 */
#include "ext.h"

#include <stdio.h>

static int held(void *data, int device, struct gpr_held *out)
{
	struct gpr_py_state *st = data;
	out->known = 0;
	if (device < 0)
		return 0;
	PyGILState_STATE gs = PyGILState_Ensure();
	PyObject *mr = gpr_py_rmm(NULL, 0);
	struct gpr_py_rmm_chain ch;
	int found = mr ? gpr_py_rmm_chain(mr, device, &ch) : 0;
	int64_t live = 0, size = 0;
	uint64_t reserved = 0, used = 0;
	struct gpr_py_rmm_pool *p = found == 1 && ch.async
					? gpr_py_rmm_pool(st, device, ch.leaf)
					: NULL;
	if (found == 1 && ch.pool && gpr_py_rmm_live(&ch, &live) == 0 &&
	    gpr_py_call_i64(ch.pool, "pool_size", &size, NULL) == 0) {
		out->live = (uint64_t)live;
		out->cached = size > live ? (uint64_t)(size - live) : 0;
		out->known = 1;
	} else if (p &&
		   gpr_pool_bytes(st->ctx, p->pool, &reserved, &used) == 0) {
		out->live = used;
		out->cached = reserved - used;
		out->known = 1;
	}
	PyErr_Clear();
	if (found == 1)
		gpr_py_rmm_chain_free(&ch);
	Py_XDECREF(mr);
	PyGILState_Release(gs);
	return 0;
}

/* The pool of the async resource `leaf`: found once, kept. */
static struct gpr_py_rmm_pool *find_pool(struct gpr_py_state *st,
					 PyObject *leaf, int device)
{
	struct gpr_py_rmm_pool *p = gpr_py_rmm_pool(st, device, leaf);
	if (p)
		return p;
	int64_t addr = 0;
	PyObject *r = gpr_py_call(leaf, "allocate", "(n)", (Py_ssize_t)256);
	if (!r || gpr_py_i64(r, &addr)) {
		Py_XDECREF(r);
		return NULL;
	}
	Py_DECREF(r);
	uint64_t pool = 0;
	PyThreadState *ts = PyEval_SaveThread();
	int err = gpr_pool_of(st->ctx, device, (uint64_t)addr, &pool);
	PyEval_RestoreThread(ts);
	r = gpr_py_call(leaf, "deallocate", "(Ln)", (long long)addr,
			(Py_ssize_t)256);
	if (!r)
		return NULL;
	Py_DECREF(r);
	if (err || !pool) {
		PyErr_Format(PyExc_RuntimeError,
			     "the pool of RMM's CUDA async resource not found "
			     "(%s)",
			     err ? gpr_strerror(err) : "not a pool allocation");
		return NULL;
	}
	for (int i = 0; i < GPR_PY_SLOTS && !p; i++) {
		struct gpr_py_rmm_pool *s = &st->rmm_pools[i];
		if (!s->used || s->device == device)
			p = s;
	}
	if (!p) {
		PyErr_SetString(PyExc_RuntimeError, "too many RMM pools");
		return NULL;
	}
	*p = (struct gpr_py_rmm_pool){.used = 1,
				      .device = device,
				      .owner = (uintptr_t)leaf,
				      .pool = pool,
				      .trimmed_to = UINT64_MAX};
	return p;
}

/* Trims the async pool with `device` current in RMM. */
static int trim(struct gpr_py_state *st, PyObject *leaf, int device, char *note,
		size_t note_sz)
{
	PyObject *gpu = gpr_py_imported("rmm._cuda.gpu");
	if (!gpu) {
		PyErr_SetString(PyExc_RuntimeError, "rmm._cuda.gpu missing");
		return -1;
	}
	int64_t prev = -1;
	int in = gpr_py_enter_device(st, gpu, device, &prev);
	if (in != 1) {
		if (in == 0)
			snprintf(note, note_sz,
				 "not trimmed: GPU %lld, RMM's current device, "
				 "has no context, and restoring it would open "
				 "one",
				 (long long)prev);
		Py_DECREF(gpu);
		return in;
	}
	struct gpr_py_rmm_pool *p = find_pool(st, leaf, device);
	int rc = p ? 0 : -1;
	uint64_t reserved = 0, used = 0;
	int err = 0;
	if (p) {
		PyThreadState *ts = PyEval_SaveThread();
		err = gpr_pool_trim(st->ctx, device, p->pool, 0);
		if (!err)
			err =
			    gpr_pool_bytes(st->ctx, p->pool, &reserved, &used);
		PyEval_RestoreThread(ts);
		if (err) {
			PyErr_Format(PyExc_RuntimeError,
				     "trimming RMM's CUDA async pool: %s (%s)",
				     gpr_strerror(err),
				     gpr_last_error(st->ctx));
			rc = -1;
		} else {
			p->trimmed_to = reserved;
		}
	}
	rc = gpr_py_leave_device(gpu, device, prev, rc);
	Py_DECREF(gpu);
	return rc;
}

static int release(void *data, int device, char *note, size_t note_sz)
{
	struct gpr_py_state *st = data;
	if (device == GPR_DEVICE_ONCE)
		return 0;
	PyGILState_STATE gs = PyGILState_Ensure();
	PyObject *mr = gpr_py_rmm(NULL, 0);
	struct gpr_py_rmm_chain ch;
	int found = mr ? gpr_py_rmm_chain(mr, device, &ch) : 0;
	int rc = found < 0 ? -1 : 0;
	int64_t size = 0;
	if (found == 1 && ch.pool) {
		if (gpr_py_call_i64(ch.pool, "pool_size", &size, NULL))
			PyErr_Clear();
		snprintf(note, note_sz,
			 "a PoolMemoryResource of %lld bytes: RMM pools never "
			 "shrink, not released (gpureclaim.explain() says "
			 "what to configure)",
			 (long long)size);
	} else if (found == 1 && ch.async) {
		rc = trim(st, ch.leaf, device, note, note_sz);
	}
	if (rc)
		gpr_py_error_note(note, note_sz, "");
	if (found == 1)
		gpr_py_rmm_chain_free(&ch);
	Py_XDECREF(mr);
	PyGILState_Release(gs);
	return rc;
}

const struct gpr_releaser gpr_py_rmm_releaser = {
    .sz = sizeof(struct gpr_releaser),
    .name = "rmm",
    .held = held,
    .release = release,
};
