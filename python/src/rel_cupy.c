/*
 * CuPy. Its pools and its cuFFT plan cache belong to the current device, so
 * each visited GPU is made current in turn through cupy.cuda.runtime and
 * the previous device restored (not with cupy.cuda.Device: its __exit__
 * calls cudaSetDevice on the previous device even where that opens a
 * context). Per GPU: the plan cache is
 * cleared only when it holds plans (PlanCache.clear() costs ~78 ms even on
 * an empty cache), then the default pool is emptied, then the stream-ordered
 * (async) pool is trimmed if CuPy allocates from it. Once per call: the
 * pinned host pool. Nothing runs unless the user imported cupy.
 */
#include "ext.h"

#include <stdio.h>

/*
 * Makes `device` current in CuPy's runtime (gpr_py_enter_device); *prev is
 * the device it replaced. Returns the runtime module (new ref) for
 * gpr_py_leave_device; NULL with an error set on failure, NULL without one
 * (*prev set) when this GPU is skipped for CuPy: the thread's current
 * device has no context, which restoring it would open.
 */
static PyObject *enter(struct gpr_py_state *st, PyObject *cupy, int device,
		       int64_t *prev)
{
	PyObject *rt = gpr_py_attr(cupy, "cuda.runtime");
	if (!rt) {
		PyErr_SetString(PyExc_AttributeError,
				"cupy.cuda.runtime missing");
		return NULL;
	}
	if (gpr_py_enter_device(st, rt, device, prev) == 1)
		return rt;
	Py_DECREF(rt);
	return NULL;
}

/* The allocator's async pool or malloc_async in use: 1, else 0. */
static int async_in_use(PyObject *cuda, PyObject **pool_out)
{
	*pool_out = NULL;
	PyObject *alloc = gpr_py_call(cuda, "get_allocator", NULL);
	if (!alloc) {
		PyErr_Clear();
		return 0;
	}
	int used = 0;
	PyObject *cls = gpr_py_attr(cuda, "MemoryAsyncPool");
	PyObject *owner = gpr_py_attr(alloc, "__self__");
	if (cls && owner && PyObject_IsInstance(owner, cls) == 1) {
		*pool_out = Py_NewRef(owner);
		used = 1;
	}
	PyErr_Clear();
	if (!used) {
		PyObject *fn = gpr_py_attr(cuda, "memory.malloc_async");
		used = fn && fn == alloc;
		Py_XDECREF(fn);
	}
	Py_XDECREF(cls);
	Py_XDECREF(owner);
	Py_DECREF(alloc);
	return used;
}

static int held(void *data, int device, struct gpr_held *out)
{
	struct gpr_py_state *st = data;
	out->known = 0;
	if (device < 0)
		return 0;
	PyGILState_STATE g = PyGILState_Ensure();
	int rc = 0;
	PyObject *cupy = gpr_py_cupy(NULL, 0);
	if (!cupy)
		goto done;
	int64_t prev = -1;
	PyObject *rt = enter(st, cupy, device, &prev);
	if (!rt) {
		rc = PyErr_Occurred() ? -1 : 0; /* skipped: known = 0 */
		goto clear;
	}
	int64_t used = 0, total = 0;
	PyObject *pool = gpr_py_call(cupy, "get_default_memory_pool", NULL);
	if (!pool || gpr_py_call_i64(pool, "used_bytes", &used, NULL) ||
	    gpr_py_call_i64(pool, "total_bytes", &total, NULL))
		rc = -1;
	Py_XDECREF(pool);
	if (rc == 0) {
		out->live = (uint64_t)used;
		out->cached = total > used ? (uint64_t)(total - used) : 0;
		out->known = 1;
	}
	rc = gpr_py_leave_device(rt, device, prev, rc);
	Py_DECREF(rt);
clear:
	if (rc)
		gpr_py_error_note(NULL, 0, "");
	Py_DECREF(cupy);
done:
	PyGILState_Release(g);
	return rc;
}

/* Clears the current device's (and thread's) plan cache if it has plans. */
static int clear_plans(char *note, size_t note_sz)
{
	/* cupy.fft.config is imported with cupy; absent means no plans. */
	PyObject *cfg = gpr_py_imported("cupy.fft.config");
	if (!cfg)
		return 0;
	int64_t n = 0;
	PyObject *cache = gpr_py_call(cfg, "get_plan_cache", NULL);
	Py_DECREF(cfg);
	if (!cache)
		goto fail;
	if (gpr_py_call_i64(cache, "get_curr_size", &n, NULL)) {
		Py_DECREF(cache);
		goto fail;
	}
	if (n > 0) {
		PyObject *r = gpr_py_call(cache, "clear", NULL);
		Py_XDECREF(r);
		if (!r) {
			Py_DECREF(cache);
			goto fail;
		}
	}
	Py_DECREF(cache);
	return 0;
fail:
	gpr_py_error_note(note, note_sz, "plan cache");
	return -1;
}

static int trim_async(PyObject *cuda, int device)
{
	PyObject *pool = NULL;
	if (!async_in_use(cuda, &pool))
		return 0;
	PyObject *r = NULL;
	if (pool) {
		/* MemoryAsyncPool.free_all_blocks trims the device's pool. */
		r = gpr_py_call(pool, "free_all_blocks", NULL);
		Py_DECREF(pool);
	} else {
		PyObject *rt = gpr_py_attr(cuda, "runtime");
		PyObject *mp = NULL;
		if (rt && PyObject_HasAttrString(rt, "memPoolTrimTo"))
			mp = gpr_py_call(rt, "deviceGetDefaultMemPool", "(i)",
					 device);
		if (mp)
			r = gpr_py_call(rt, "memPoolTrimTo", "(Oi)", mp, 0);
		else if (!PyErr_Occurred())
			r = Py_NewRef(Py_None); /* too old a CuPy: nothing */
		Py_XDECREF(mp);
		Py_XDECREF(rt);
	}
	Py_XDECREF(r);
	return r ? 0 : -1;
}

static int release_device(struct gpr_py_state *st, PyObject *cupy, int device,
			  char *note, size_t note_sz)
{
	int64_t prev = -1;
	PyObject *rt = enter(st, cupy, device, &prev);
	const char *where = "";
	if (!rt && !PyErr_Occurred()) {
		snprintf(note, note_sz,
			 "skipped: GPU %lld, CuPy's current device in this "
			 "thread, has no context, and restoring it would open "
			 "one",
			 (long long)prev);
		return 0;
	}
	if (!rt) {
		gpr_py_error_note(note, note_sz, where);
		return -1;
	}
	int rc = clear_plans(note, note_sz);
	PyObject *pool = gpr_py_call(cupy, "get_default_memory_pool", NULL);
	PyObject *r = pool ? gpr_py_call(pool, "free_all_blocks", NULL) : NULL;
	Py_XDECREF(pool);
	PyObject *cuda = r ? gpr_py_attr(cupy, "cuda") : NULL;
	int bad = !r || !cuda || trim_async(cuda, device);
	Py_XDECREF(r);
	Py_XDECREF(cuda);
	if (bad && !PyErr_Occurred())
		PyErr_SetString(PyExc_AttributeError, "cupy.cuda missing");
	/* bad: its exception is pending, kept through the restore */
	int back = gpr_py_leave_device(rt, device, prev, -bad);
	Py_DECREF(rt);
	if (back) {
		if (rc == 0)
			gpr_py_error_note(note, note_sz, where);
		else
			PyErr_Clear();
		rc = -1;
	}
	return rc;
}

static int release_once(PyObject *cupy, char *note, size_t note_sz)
{
	PyObject *pool =
	    gpr_py_call(cupy, "get_default_pinned_memory_pool", NULL);
	PyObject *r = pool ? gpr_py_call(pool, "free_all_blocks", NULL) : NULL;
	Py_XDECREF(pool);
	if (!r) {
		gpr_py_error_note(note, note_sz, "pinned pool");
		return -1;
	}
	Py_DECREF(r);
	return 0;
}

static int release(void *data, int device, char *note, size_t note_sz)
{
	struct gpr_py_state *st = data;
	PyGILState_STATE g = PyGILState_Ensure();
	int rc = 0;
	PyObject *cupy = gpr_py_cupy(NULL, 0);
	if (cupy) {
		rc = device == GPR_DEVICE_ONCE
			 ? release_once(cupy, note, note_sz)
			 : release_device(st, cupy, device, note, note_sz);
		Py_DECREF(cupy);
	}
	PyGILState_Release(g);
	return rc;
}

const struct gpr_releaser gpr_py_cupy_releaser = {
    .sz = sizeof(struct gpr_releaser),
    .name = "cupy",
    .held = held,
    .release = release,
};
