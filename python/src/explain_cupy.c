/*
 * CuPy's share of a GPU (only when cupy is imported). Its pools and its
 * cuFFT plan cache belong to the current device, so the GPU is made
 * current through cupy.cuda.runtime and the previous device restored, as
 * the releaser does (and skipped, with a note, when restoring would open a
 * context). The default pool gives used_bytes (live) and total_bytes; the
 * difference is what release() returns: CuPy does not expose how much of
 * it split chunks pin, so it is all counted as returnable. The plan cache
 * of this thread and GPU holds work areas taken from the pool: its
 * get_curr_memsize() is moved from "live" to a cuFFT workspace part. The
 * stream-ordered pool is read where CuPy allocates from it.
 */
#include "ext.h"

#include <stdio.h>

/* The plan cache's bytes in *bytes and plan count in *n; 0 or -1. */
static int plan_bytes(int64_t *bytes, int64_t *n)
{
	*bytes = 0;
	*n = 0;
	PyObject *cfg = gpr_py_imported("cupy.fft.config");
	if (!cfg)
		return 0;
	PyObject *cache = gpr_py_call(cfg, "get_plan_cache", NULL);
	Py_DECREF(cfg);
	if (!cache)
		return -1;
	int rc = gpr_py_call_i64(cache, "get_curr_size", n, NULL);
	if (rc == 0 && *n > 0 &&
	    PyObject_HasAttrString(cache, "get_curr_memsize"))
		rc = gpr_py_call_i64(cache, "get_curr_memsize", bytes, NULL);
	Py_DECREF(cache);
	return rc;
}

/* The MemoryAsyncPool CuPy allocates from, if any (new ref). */
static PyObject *async_pool(PyObject *cupy)
{
	PyObject *cuda = gpr_py_attr(cupy, "cuda");
	PyObject *alloc =
	    cuda ? gpr_py_call(cuda, "get_allocator", NULL) : NULL;
	PyObject *cls = cuda ? gpr_py_attr(cuda, "MemoryAsyncPool") : NULL;
	PyObject *owner = alloc ? gpr_py_attr(alloc, "__self__") : NULL;
	PyObject *pool = NULL;
	if (cls && owner && PyObject_IsInstance(owner, cls) == 1)
		pool = Py_NewRef(owner);
	PyErr_Clear();
	Py_XDECREF(cuda);
	Py_XDECREF(alloc);
	Py_XDECREF(cls);
	Py_XDECREF(owner);
	return pool;
}

static int pool_parts(struct gpr_py_xgpu *g, PyObject *pool, const char *source,
		      int64_t plans)
{
	int64_t used = 0, total = 0;
	if (gpr_py_call_i64(pool, "used_bytes", &used, NULL) ||
	    gpr_py_call_i64(pool, "total_bytes", &total, NULL))
		return -1;
	if (gpr_py_xadd(g, &(struct gpr_py_part){
			       .kind = "live",
			       .source = source,
			       .bytes = used - plans,
			       .known = 1,
			       .exact = 1,
			       .advice = "free_arrays",
			       .how = plans ? "used_bytes() minus the cuFFT "
					      "plans' work areas"
					    : "used_bytes()"}))
		return -1;
	return gpr_py_xadd(g, &(struct gpr_py_part){
				  .kind = "releasable",
				  .source = source,
				  .bytes = total - used,
				  .known = 1,
				  .exact = 1,
				  .advice = "release",
				  .how = "total_bytes() - used_bytes(); CuPy "
					 "does not say how much of it split "
					 "chunks pin"});
}

static int parts(struct gpr_py_xgpu *g, PyObject *cupy)
{
	int64_t plans = 0, nplans = 0;
	if (plan_bytes(&plans, &nplans))
		return -1;
	PyObject *pool = gpr_py_call(cupy, "get_default_memory_pool", NULL);
	if (!pool)
		return -1;
	int rc = pool_parts(g, pool, "cupy", plans);
	Py_DECREF(pool);
	PyObject *apool = rc ? NULL : async_pool(cupy);
	if (apool) {
		rc = pool_parts(g, apool, "cupy (async pool)", 0);
		Py_DECREF(apool);
	}
	if (rc || nplans == 0)
		return rc;
	char how[200];
	snprintf(how, sizeof how,
		 "%lld plan(s) in this thread's plan cache for this GPU: "
		 "get_curr_memsize(), work areas from the pool",
		 (long long)nplans);
	PyObject *d = Py_BuildValue("{s:L}", "plans", (long long)nplans);
	rc = d ? gpr_py_xadd(
		     g, &(struct gpr_py_part){.kind = "workspace",
					      .source = "cuFFT plans (cupy)",
					      .bytes = plans,
					      .known = 1,
					      .exact = 1,
					      .advice = "release",
					      .how = how,
					      .detail = d})
	       : -1;
	Py_XDECREF(d);
	return rc;
}

int gpr_py_explain_cupy(struct gpr_py_xcall *c, struct gpr_py_xgpu *g)
{
	PyObject *cupy = gpr_py_cupy(NULL, 0);
	if (!cupy)
		return 0;
	int rc = -1;
	int64_t prev = -1;
	PyObject *rt = gpr_py_attr(cupy, "cuda.runtime");
	if (!rt) {
		PyErr_SetString(PyExc_AttributeError,
				"cupy.cuda.runtime missing");
		goto done;
	}
	int in = gpr_py_enter_device(c->st, rt, g->device, &prev);
	if (in == 0)
		rc = gpr_py_xnote(
		    g,
		    "cupy: GPU %d not read: GPU %lld, CuPy's current "
		    "device in this thread, has no context, and "
		    "restoring it would open one; its bytes are in "
		    "the rest",
		    g->device, (long long)prev);
	else if (in == 1)
		rc = gpr_py_leave_device(rt, g->device, prev, parts(g, cupy));
done:
	Py_XDECREF(rt);
	Py_DECREF(cupy);
	return rc;
}
