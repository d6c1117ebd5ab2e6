/*
 * heap_scan(objects, tensor_type, graph_type): one pass over a list of
 * objects (gc.get_objects(), objects of gc.freeze() are not in it) for
 * explain(): which device addresses live tensors point into (a block that
 * one points into is the user's, not a workspace), and which private
 * pools live CUDA graphs hold. It costs milliseconds per 100,000 objects,
 * which is why it is C: gpureclaim/frameworks/torch.py runs it only when
 * a block's owner or a pool's graphs are otherwise unknown.
 *
 * Returns (pointers, pools, tensors, odd): the tensors' data pointers,
 * sorted, without 0; (a, b) of each graph's pool() with a completed
 * capture; the tensors found; those whose data_ptr() raised (a fake or
 * meta tensor, a wrapper), skipped. graph_type may be None.
 *
 * Types are compared with PyType_IsSubtype: isinstance() falls back to an
 * object's __class__, which can run a module's __getattr__ (a warning, an
 * import) in the middle of the walk.
 */
#include "ext.h"

#include <stdlib.h>

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* g.pool() of a graph with a completed capture as a tuple (new ref), or
 * NULL (skip it), no error set. */
static PyObject *graph_pool(PyObject *g)
{
	PyObject *p = PyObject_CallMethod(g, "pool", NULL);
	int64_t a = 0, b = 0;
	int ok = p && PyTuple_Check(p) && PyTuple_Size(p) == 2 &&
		 gpr_py_i64(PyTuple_GetItem(p, 0), &a) == 0 &&
		 gpr_py_i64(PyTuple_GetItem(p, 1), &b) == 0;
	Py_XDECREF(p);
	PyErr_Clear();
	return ok ? Py_BuildValue("(LL)", (long long)a, (long long)b) : NULL;
}

/* A tensor's data pointer: 1 with *v, 0 if data_ptr() raised. */
static int data_ptr(PyObject *o, uint64_t *v)
{
	PyObject *p = PyObject_CallMethod(o, "data_ptr", NULL);
	int64_t x = 0;
	int ok = p && gpr_py_i64(p, &x) == 0;
	Py_XDECREF(p);
	if (!ok)
		PyErr_Clear();
	*v = (uint64_t)x;
	return ok;
}

PyObject *gpr_py_heap_scan(PyObject *module, PyObject *args)
{
	(void)module;
	PyObject *objs, *tensor, *graph;
	if (!PyArg_ParseTuple(args, "O!O!O:heap_scan", &PyList_Type, &objs,
			      &PyType_Type, &tensor, &graph))
		return NULL;
	PyTypeObject *gt = PyType_Check(graph) ? (PyTypeObject *)graph : NULL;
	Py_ssize_t n = PyList_Size(objs);
	uint64_t *ptrs = NULL;
	size_t np = 0, cap = 0;
	long tensors = 0, odd = 0;
	PyObject *pools = PyList_New(0);
	for (Py_ssize_t i = 0; pools && i < n; i++) {
		PyObject *o = PyList_GetItem(objs, i);
		if (!o) { /* the list shrank under us: what is left */
			PyErr_Clear();
			break;
		}
		PyTypeObject *t = Py_TYPE(o);
		if (PyType_IsSubtype(t, (PyTypeObject *)tensor)) {
			tensors++;
			uint64_t v = 0;
			Py_INCREF(o); /* data_ptr() runs Python code */
			int ok = data_ptr(o, &v);
			Py_DECREF(o);
			if (!ok) {
				odd++;
				continue;
			}
			if (!v)
				continue;
			if (np == cap) {
				size_t c = cap ? cap * 2 : 256;
				uint64_t *a =
				    PyMem_Realloc(ptrs, c * sizeof *a);
				if (!a) {
					Py_CLEAR(pools);
					PyErr_NoMemory();
					break;
				}
				ptrs = a;
				cap = c;
			}
			ptrs[np++] = v;
		} else if (gt && PyType_IsSubtype(t, gt)) {
			Py_INCREF(o);
			PyObject *id = graph_pool(o);
			Py_DECREF(o);
			if (id && PyList_Append(pools, id))
				Py_CLEAR(pools);
			Py_XDECREF(id);
		}
	}
	PyObject *list = pools ? PyList_New((Py_ssize_t)np) : NULL;
	if (list) {
		if (np) /* qsort(NULL, 0) is undefined */
			qsort(ptrs, np, sizeof *ptrs, cmp_u64);
		for (size_t i = 0; i < np; i++) {
			PyObject *v = PyLong_FromUnsignedLongLong(ptrs[i]);
			if (!v) {
				Py_CLEAR(list);
				break;
			}
			PyList_SetItem(list, (Py_ssize_t)i, v);
		}
	}
	PyMem_Free(ptrs);
	if (!list) {
		Py_XDECREF(pools);
		return NULL;
	}
	return Py_BuildValue("(NNll)", list, pools, tensors, odd);
}
