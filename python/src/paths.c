/*
 * paths(): the breadth-first search up the holders' graph that names an
 * allocation's chains (gpureclaim/_explain/_holders.py, _chains), in C
 * because through an autograd graph it reads thousands of nodes per
 * allocation, ten allocations and more per walk.
 *
 * _paths(graph, roots, starts, max_nodes, max_found)
 *     -> (via, found, outside, left)
 *
 * graph: {id(node): (ext, parents)} (the climb's, with the frameworks'
 * graphs merged in); roots: a dict whose keys are the ids of the roots
 * (every class is a root too); starts: the allocation's arrays. From the
 * starts, breadth first, over each node's parents that are in the graph:
 * via {id(node): its child on the way down, None for a start} for every
 * node reached (at most max_nodes), found [(root, node)] each edge from a
 * root to a node reached (at most max_found, in the order found: shortest
 * first), outside the nodes reached with references from outside the heap
 * (ext > 0; a node missing from the graph counts as one), left whether
 * the search stopped at max_nodes with nodes left to read. Reads dicts and
 * tuples only: no user code runs.
 */
#include "ext.h"

/* id(o) as the graph's and the roots' keys have it; NULL with an error */
static PyObject *key_of(PyObject *o)
{
	return PyLong_FromVoidPtr(o);
}

/* whether p is a root: its id among the roots', or a class; -1 error */
static int is_root(PyObject *roots, PyObject *p)
{
	if (PyType_Check(p))
		return 1;
	PyObject *k = key_of(p);
	int r = k ? PyDict_Contains(roots, k) : -1;
	Py_XDECREF(k);
	return r;
}

PyObject *gpr_py_paths(PyObject *module, PyObject *args)
{
	(void)module;
	PyObject *graph, *roots, *starts;
	Py_ssize_t max_nodes, max_found;
	if (!PyArg_ParseTuple(args, "O!O!O!nn:paths", &PyDict_Type, &graph,
			      &PyDict_Type, &roots, &PyList_Type, &starts,
			      &max_nodes, &max_found))
		return NULL;
	PyObject *via = PyDict_New();
	PyObject *found = PyList_New(0);
	PyObject *todo = PyList_New(0); /* the queue, read from `head` */
	PyObject *out = NULL;
	Py_ssize_t outside = 0, head = 0;
	if (!via || !found || !todo)
		goto done;
	Py_ssize_t ns = PyList_Size(starts);
	for (Py_ssize_t i = 0; i < ns; i++) {
		PyObject *a = PyList_GetItem(starts, i);
		PyObject *k = key_of(a);
		int has = k ? PyDict_Contains(via, k) : -1;
		if (has == 0 &&
		    (PyDict_SetItem(via, k, Py_None) || PyList_Append(todo, a)))
			has = -1;
		Py_XDECREF(k);
		if (has < 0)
			goto done;
	}
	while (head < PyList_Size(todo) && PyDict_Size(via) < max_nodes) {
		PyObject *n = PyList_GetItem(todo, head++);
		PyObject *k = key_of(n);
		if (!k)
			goto done;
		PyObject *e = PyDict_GetItemWithError(graph, k); /* borrowed */
		Py_DECREF(k);
		if (!e && PyErr_Occurred())
			goto done;
		PyObject *ext = e && PyTuple_Check(e) && PyTuple_Size(e) == 2
				    ? PyTuple_GetItem(e, 0)
				    : NULL;
		PyObject *parents = ext ? PyTuple_GetItem(e, 1) : NULL;
		long x = ext ? PyLong_AsLong(ext) : 1;
		if (x == -1 && PyErr_Occurred())
			goto done;
		outside += x > 0;
		Py_ssize_t np = parents && PyTuple_Check(parents)
				    ? PyTuple_Size(parents)
				    : 0;
		for (Py_ssize_t j = 0; j < np; j++) {
			PyObject *p = PyTuple_GetItem(parents, j);
			int root = is_root(roots, p);
			if (root < 0)
				goto done;
			if (root) {
				if (PyList_Size(found) < max_found) {
					PyObject *pair = PyTuple_Pack(2, p, n);
					int bad =
					    !pair || PyList_Append(found, pair);
					Py_XDECREF(pair);
					if (bad)
						goto done;
				}
				continue;
			}
			PyObject *pk = key_of(p);
			int seen = pk ? PyDict_Contains(via, pk) : -1;
			int in = seen == 0 ? PyDict_Contains(graph, pk) : 0;
			if (seen == 0 && in == 1 &&
			    (PyDict_SetItem(via, pk, n) ||
			     PyList_Append(todo, p)))
				in = -1;
			Py_XDECREF(pk);
			if (seen < 0 || in < 0)
				goto done;
		}
	}
	out = Py_BuildValue("(OOnO)", via, found, outside,
			    head < PyList_Size(todo) ? Py_True : Py_False);
done:
	Py_XDECREF(via);
	Py_XDECREF(found);
	Py_XDECREF(todo);
	return out;
}
