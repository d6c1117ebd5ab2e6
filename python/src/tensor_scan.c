/*
 * One pass over the Python heap for explain(): which device addresses
 * live tensors point into (a block that one points into is the user's,
 * not a workspace), and which private pools live CUDA graphs hold. It
 * costs milliseconds per 100,000 objects, so explain_torch.c runs it only
 * when a block's owner or a pool's graphs are otherwise unknown; its cost
 * goes into the part's detail.
 *
 * Types are compared with PyType_IsSubtype: isinstance() falls back to an
 * object's __class__, which can run a module's __getattr__ (a warning, an
 * import) in the middle of the walk. A tensor subclass whose data_ptr()
 * raises (a fake or meta tensor, a wrapper) is counted as odd and skipped.
 */
#include "ext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The type at a dotted path under torch, if it is a type (new ref). */
static PyObject *torch_type(PyObject *torch, const char *path)
{
	PyObject *t = gpr_py_attr(torch, path);
	if (t && !PyType_Check(t))
		Py_CLEAR(t);
	return t;
}

/* g.pool() of a graph with a completed capture; 0, or -1 (skip it). */
static int graph_pool(PyObject *g, struct gpr_py_pool_id *id)
{
	PyObject *p = gpr_py_call(g, "pool", NULL);
	int ok = p && PyTuple_Check(p) && PyTuple_Size(p) == 2 &&
		 gpr_py_i64(PyTuple_GetItem(p, 0), &id->a) == 0 &&
		 gpr_py_i64(PyTuple_GetItem(p, 1), &id->b) == 0;
	Py_XDECREF(p);
	PyErr_Clear();
	return ok ? 0 : -1;
}

static int add(void **arr, size_t *n, size_t *cap, size_t elem, const void *v)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 256;
		void *a = PyMem_Realloc(*arr, c * elem);
		if (!a)
			return -1;
		*arr = a;
		*cap = c;
	}
	memcpy((char *)*arr + *n * elem, v, elem);
	(*n)++;
	return 0;
}

static int walk(struct gpr_py_scan *s, PyObject *objs, PyTypeObject *tensor,
		PyTypeObject *graph)
{
	size_t cap_p = 0, cap_g = 0;
	Py_ssize_t n = PyList_Size(objs);
	s->objects = (long)n;
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *o = PyList_GetItem(objs, i);
		PyTypeObject *t = o ? Py_TYPE(o) : NULL;
		if (t && tensor && PyType_IsSubtype(t, tensor)) {
			s->tensors++;
			PyObject *p = gpr_py_call(o, "data_ptr", NULL);
			int64_t v = 0;
			if (!p || gpr_py_i64(p, &v)) {
				s->odd++;
				PyErr_Clear();
			} else if (v && add((void **)&s->ptrs, &s->nptrs,
					    &cap_p, sizeof *s->ptrs, &v)) {
				Py_XDECREF(p);
				return -1;
			}
			Py_XDECREF(p);
		} else if (t && graph && PyType_IsSubtype(t, graph)) {
			struct gpr_py_pool_id id;
			if (graph_pool(o, &id) == 0 &&
			    add((void **)&s->graphs, &s->ngraphs, &cap_g,
				sizeof id, &id))
				return -1;
		}
	}
	qsort(s->ptrs, s->nptrs, sizeof *s->ptrs, cmp_u64);
	return 0;
}

int gpr_py_scan_heap(struct gpr_py_scan *s)
{
	if (s->done)
		return 0;
	s->done = 1;
	double t0 = now_ms();
	PyObject *torch = gpr_py_imported("torch");
	PyObject *gc = PyImport_ImportModule("gc");
	PyObject *tensor = torch ? torch_type(torch, "_C.TensorBase") : NULL;
	PyObject *graph = torch ? torch_type(torch, "cuda.CUDAGraph") : NULL;
	PyObject *objs =
	    gc && tensor ? gpr_py_call(gc, "get_objects", NULL) : NULL;
	int rc = 0;
	if (!objs || !PyList_Check(objs)) {
		snprintf(s->why, sizeof s->why, "%s",
			 !tensor ? "torch._C.TensorBase not found"
				 : "gc.get_objects() failed");
		PyErr_Clear();
	} else {
		if (gpr_py_call_i64(gc, "get_freeze_count", &s->frozen, NULL))
			PyErr_Clear();
		rc = walk(s, objs, (PyTypeObject *)tensor,
			  (PyTypeObject *)graph);
		s->ok = rc == 0;
	}
	if (rc)
		PyErr_NoMemory();
	Py_XDECREF(objs);
	Py_XDECREF(graph);
	Py_XDECREF(tensor);
	Py_XDECREF(gc);
	Py_XDECREF(torch);
	s->ms = now_ms() - t0;
	return rc;
}

int gpr_py_scan_holds(const struct gpr_py_scan *s, uint64_t address,
		      uint64_t size)
{
	/* the first pointer >= address, then: is it below the end? */
	size_t lo = 0, hi = s->nptrs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->ptrs[mid] < address)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->nptrs && s->ptrs[lo] < address + size;
}

void gpr_py_scan_free(struct gpr_py_scan *s)
{
	PyMem_Free(s->ptrs);
	PyMem_Free(s->graphs);
	memset(s, 0, sizeof *s);
}
