/*
 * follow(): a graph that a framework keeps outside Python's heap (Torch's
 * autograd graph: its nodes are C++ objects whose Python wrappers
 * tp_traverse shows none of their edges), read through the descriptors
 * the framework's module (gpureclaim/frameworks/) names, for the holders'
 * walk (gpureclaim/_holders.py). C because the walk reads thousands of
 * nodes within its time budget, and because of the guard below.
 *
 * _follow(starts, first, leaf, kinds, bases, guard, budget_s, max_nodes,
 *         state, todo) -> (heads, pending, stopped)
 *
 * - starts: objects whose node is first.__get__(start) (a tensor's
 *   grad_fn); where that is None, leaf.__get__(start) (a leaf tensor's
 *   .grad) is read instead, if leaf is not None. heads: (start's place,
 *   its node's index or -1, the leaf's value or None) for every start
 *   with either.
 * - kinds: {id(type): (type, next, saved)} for each node type the caller
 *   knows; bases: ((type, next, saved), ...) for the subclasses of a type
 *   (PyType_IsSubtype). next: the descriptor of a node's next nodes (a
 *   tuple of (node or None, int) pairs: Torch's next_functions) or None;
 *   saved: descriptors of what the node holds (an object, None, or a tuple
 *   or list of them: Torch's _saved_* and saved_tensors).
 * - state: (nodes, index, links, saved, failed), lists and a dict the
 *   call adds to (a later call goes on where it stopped): nodes in the
 *   order found, index {id(node): its index}, links[q] the indices of
 *   node q's next nodes (-1 for None; None for a node of a type neither
 *   kinds nor bases describe: its index is in `pending`), saved entries
 *   (q, k, j, object) (descriptor k of node q, element j of a tuple or
 *   -1), failed entries (q, k, why) (q = -1 - the start's place for a
 *   start; k = -1 for `next`, -2 for first/leaf; why "user code" where the
 *   guard stopped it).
 * - todo: indices of nodes to read again (those a former call left
 *   pending, their types since described); then every node not read yet.
 *
 * The guard: guard = (forbid, exc) makes sys.setprofile(forbid) the
 * profile function of this thread while the descriptors are read, so a
 * Python function that one of them would call (a saved-tensor hook's
 * unpack: a recompute of activation checkpointing; a tensor subclass's
 * __torch_function__) raises exc at its first line instead of running,
 * and the read is recorded as failed "user code". The caller checks that
 * no profiler is set before (the guard would replace it). A read that
 * trips the guard removes it (sys.setprofile's trampoline does): it is
 * set again. Collections are off throughout: a finalizer is user code.
 * Nothing the reads return is dropped before the call ends, so no
 * object is freed (and no __del__ or weakref callback runs) under it.
 */
#include "ext.h"

#include <stdio.h>
#include <time.h>

struct follow {
	PyObject *nodes, *index, *links, *saved, *failed;
	PyObject *kinds, *bases;
	PyObject *forbid, *exc, *setprofile;
	PyObject *pending;
	Py_ssize_t max_nodes;
	int full;
	char why[256];
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* sys.setprofile(f): 0, or -1 with an error set */
static int set_profile(struct follow *f, PyObject *fn)
{
	if (!f->setprofile)
		return 0;
	PyObject *r = PyObject_CallFunctionObjArgs(f->setprofile, fn, NULL);
	Py_XDECREF(r);
	return r ? 0 : -1;
}

/*
 * desc.__get__(obj, type(obj)), called through the type's slot (no
 * attribute look-up on obj: no __getattr__ of a subclass). NULL with the
 * reason in f->why (the error cleared), *user set where the guard
 * stopped a Python function; -1 in *user where setting the guard again
 * failed (an error set).
 */
static PyObject *get(struct follow *f, PyObject *desc, PyObject *obj, int *user)
{
	descrgetfunc fn =
	    (descrgetfunc)PyType_GetSlot(Py_TYPE(desc), Py_tp_descr_get);
	*user = 0;
	if (!fn) {
		snprintf(f->why, sizeof f->why, "not a descriptor");
		return NULL;
	}
	PyObject *v = fn(desc, obj, (PyObject *)Py_TYPE(obj));
	if (v)
		return v;
	if (f->exc && PyErr_ExceptionMatches(f->exc)) {
		PyErr_Clear();
		snprintf(f->why, sizeof f->why, "user code");
		/* the trampoline took the guard off: on again */
		*user = set_profile(f, f->forbid) ? -1 : 1;
		return NULL;
	}
	gpr_py_error_note(NULL, f->why, sizeof f->why);
	return NULL;
}

static int add_failed(struct follow *f, Py_ssize_t q, int k)
{
	PyObject *e = Py_BuildValue("(nis)", q, k, f->why);
	int r = e ? PyList_Append(f->failed, e) : -1;
	Py_XDECREF(e);
	return r;
}

/* the index of node n, added to the nodes if new; -1 with an error set,
 * -2 when the nodes are at their most (f->full set) */
static Py_ssize_t node_index(struct follow *f, PyObject *n)
{
	PyObject *key = PyLong_FromVoidPtr(n);
	if (!key)
		return -1;
	PyObject *at = PyDict_GetItemWithError(f->index, key);
	Py_ssize_t q;
	if (at) {
		q = PyLong_AsSsize_t(at);
	} else if (PyErr_Occurred()) {
		q = -1;
	} else if (PyList_Size(f->nodes) >= f->max_nodes) {
		f->full = 1;
		q = -2;
	} else {
		q = PyList_Size(f->nodes);
		PyObject *v = PyLong_FromSsize_t(q);
		if (!v || PyDict_SetItem(f->index, key, v) ||
		    PyList_Append(f->nodes, n))
			q = -1;
		Py_XDECREF(v);
	}
	Py_DECREF(key);
	return q;
}

/* the (next, saved) of a node's type: borrowed, NULL when neither kinds
 * nor bases describe it (no error), or with an error set */
static PyObject *kind_of(struct follow *f, PyTypeObject *t)
{
	PyObject *key = PyLong_FromVoidPtr(t);
	if (!key)
		return NULL;
	PyObject *k = PyDict_GetItemWithError(f->kinds, key);
	Py_DECREF(key);
	if (k && PyTuple_Check(k) && PyTuple_Size(k) == 3 &&
	    PyTuple_GetItem(k, 0) == (PyObject *)t)
		return k;
	if (PyErr_Occurred())
		return NULL;
	Py_ssize_t nb = PyTuple_Size(f->bases);
	for (Py_ssize_t i = 0; i < nb; i++) {
		PyObject *b = PyTuple_GetItem(f->bases, i);
		PyObject *bt = PyTuple_Check(b) && PyTuple_Size(b) == 3
				   ? PyTuple_GetItem(b, 0)
				   : NULL;
		if (bt && PyType_Check(bt) &&
		    PyType_IsSubtype(t, (PyTypeObject *)bt))
			return b;
	}
	return NULL;
}

/* links[q] = v (appended when q is the next place); steals v */
static int set_link(struct follow *f, Py_ssize_t q, PyObject *v)
{
	if (!v)
		return -1;
	if (q < PyList_Size(f->links))
		return PyList_SetItem(f->links, q, v);
	int r = PyList_Append(f->links, v);
	Py_DECREF(v);
	return r;
}

/* the next nodes of node q from the value of its `next` descriptor; a
 * new tuple of indices, or NULL with an error set */
static PyObject *next_indices(struct follow *f, PyObject *nf)
{
	Py_ssize_t n = PyTuple_Size(nf);
	PyObject *out = PyTuple_New(n);
	for (Py_ssize_t i = 0; out && i < n; i++) {
		PyObject *pair = PyTuple_GetItem(nf, i);
		PyObject *fn = PyTuple_Check(pair) && PyTuple_Size(pair) >= 1
				   ? PyTuple_GetItem(pair, 0)
				   : Py_None;
		Py_ssize_t j = -1;
		if (fn != Py_None) {
			j = node_index(f, fn);
			if (j == -1) {
				Py_CLEAR(out);
				break;
			}
			if (j == -2)
				j = -1; /* the nodes are full: not followed */
		}
		PyObject *v = PyLong_FromSsize_t(j);
		if (!v || PyTuple_SetItem(out, i, v))
			Py_CLEAR(out);
	}
	return out;
}

static int add_saved(struct follow *f, Py_ssize_t q, Py_ssize_t k, Py_ssize_t j,
		     PyObject *v)
{
	PyObject *e = Py_BuildValue("(nnnO)", q, k, j, v);
	int r = e ? PyList_Append(f->saved, e) : -1;
	Py_XDECREF(e);
	return r;
}

/* reads node q: 0, or -1 with an error set */
static int expand(struct follow *f, Py_ssize_t q)
{
	PyObject *node = PyList_GetItem(f->nodes, q);
	if (!node)
		return -1;
	Py_INCREF(node);
	int r = -1, user = 0;
	PyObject *k = kind_of(f, Py_TYPE(node));
	if (!k) {
		if (PyErr_Occurred())
			goto done;
		PyObject *qv = PyLong_FromSsize_t(q);
		r = qv ? PyList_Append(f->pending, qv) : -1;
		Py_XDECREF(qv);
		if (!r)
			r = set_link(f, q, Py_NewRef(Py_None));
		goto done;
	}
	PyObject *next = PyTuple_GetItem(k, 1);
	PyObject *saved = PyTuple_GetItem(k, 2);
	PyObject *links = NULL;
	if (next != Py_None) {
		PyObject *nf = get(f, next, node, &user);
		if (user < 0)
			goto done;
		if (nf && PyTuple_Check(nf)) {
			links = next_indices(f, nf);
			Py_DECREF(nf);
			if (!links)
				goto done;
		} else {
			if (nf)
				snprintf(f->why, sizeof f->why,
					 "its next nodes are no tuple");
			Py_XDECREF(nf);
			if (add_failed(f, q, -1))
				goto done;
		}
	}
	if (set_link(f, q, links ? links : PyTuple_New(0)))
		goto done;
	Py_ssize_t ns = PyTuple_Check(saved) ? PyTuple_Size(saved) : 0;
	for (Py_ssize_t i = 0; i < ns; i++) {
		PyObject *v = get(f, PyTuple_GetItem(saved, i), node, &user);
		if (user < 0)
			goto done;
		if (!v) {
			if (add_failed(f, q, (int)i))
				goto done;
			continue;
		}
		int bad = 0;
		if (PyTuple_CheckExact(v) || PyList_CheckExact(v)) {
			Py_ssize_t n = PySequence_Size(v);
			for (Py_ssize_t j = 0; j < n && !bad; j++) {
				PyObject *e = PySequence_GetItem(v, j);
				bad = !e || (e != Py_None &&
					     add_saved(f, q, i, j, e));
				Py_XDECREF(e);
			}
		} else if (v != Py_None) {
			bad = add_saved(f, q, i, -1, v);
		}
		Py_DECREF(v);
		if (bad)
			goto done;
	}
	r = 0;
done:
	Py_DECREF(node);
	return r;
}

/* the starts: their nodes into the nodes, heads as described above */
static PyObject *read_starts(struct follow *f, PyObject *starts,
			     PyObject *first, PyObject *leaf)
{
	PyObject *heads = PyList_New(0);
	Py_ssize_t n = PyList_Size(starts);
	for (Py_ssize_t i = 0; heads && i < n; i++) {
		PyObject *s = PyList_GetItem(starts, i);
		int user = 0;
		PyObject *fn = get(f, first, s, &user);
		Py_ssize_t q = -1;
		PyObject *lv = NULL;
		if (user < 0)
			goto fail;
		if (!fn) {
			if (add_failed(f, -1 - i, -2))
				goto fail;
			continue;
		}
		if (fn != Py_None) {
			q = node_index(f, fn);
			if (q == -1) {
				Py_DECREF(fn);
				goto fail;
			}
		} else if (leaf != Py_None) {
			lv = get(f, leaf, s, &user);
			if (user < 0) {
				Py_DECREF(fn);
				goto fail;
			}
			if (!lv && add_failed(f, -1 - i, -2)) {
				Py_DECREF(fn);
				goto fail;
			}
		}
		Py_DECREF(fn);
		if (q == -2)
			q = -1;
		if (q >= 0 || (lv && lv != Py_None)) {
			PyObject *h = Py_BuildValue(
			    "(nnO)", i, q, lv && lv != Py_None ? lv : Py_None);
			if (!h || PyList_Append(heads, h))
				Py_CLEAR(heads);
			Py_XDECREF(h);
		}
		Py_XDECREF(lv);
		continue;
	fail:
		Py_CLEAR(heads);
	}
	return heads;
}

PyObject *gpr_py_follow(PyObject *module, PyObject *args)
{
	(void)module;
	PyObject *starts, *first, *leaf, *guard, *state, *todo;
	struct follow f = {0};
	double budget;
	if (!PyArg_ParseTuple(args, "O!OOO!O!OdnO!O!:follow", &PyList_Type,
			      &starts, &first, &leaf, &PyDict_Type, &f.kinds,
			      &PyTuple_Type, &f.bases, &guard, &budget,
			      &f.max_nodes, &PyTuple_Type, &state, &PyList_Type,
			      &todo))
		return NULL;
	if (!PyArg_ParseTuple(state, "O!O!O!O!O!:follow's state", &PyList_Type,
			      &f.nodes, &PyDict_Type, &f.index, &PyList_Type,
			      &f.links, &PyList_Type, &f.saved, &PyList_Type,
			      &f.failed))
		return NULL;
	if (guard != Py_None &&
	    !PyArg_ParseTuple(guard, "OO:follow's guard", &f.forbid, &f.exc))
		return NULL;
	if (f.exc && !PyExceptionClass_Check(f.exc))
		return PyErr_Format(PyExc_TypeError,
				    "follow: the guard's exception is no "
				    "exception class");
	if (f.forbid) {
		f.setprofile = PySys_GetObject("setprofile"); /* borrowed */
		if (!f.setprofile)
			return PyErr_Format(PyExc_RuntimeError,
					    "follow: no sys.setprofile");
	}
	f.pending = PyList_New(0);
	if (!f.pending)
		return NULL;
	double deadline = now() + budget;
	const char *stopped = NULL;
	PyObject *heads = NULL, *out = NULL;
	int was = PyGC_Disable();
	if (set_profile(&f, f.forbid))
		goto done;
	heads = read_starts(&f, starts, first, leaf);
	if (!heads)
		goto off;
	Py_ssize_t nt = PyList_Size(todo);
	for (Py_ssize_t i = 0; i < nt; i++) {
		Py_ssize_t q = PyLong_AsSsize_t(PyList_GetItem(todo, i));
		if (q < 0 || q >= PyList_Size(f.links)) {
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_IndexError,
						"follow: todo out of range");
			goto off;
		}
		if (expand(&f, q))
			goto off;
	}
	for (Py_ssize_t q = PyList_Size(f.links); q < PyList_Size(f.nodes);
	     q++) {
		if ((q & 63) == 0 && now() > deadline) {
			stopped = "time";
			break;
		}
		if (expand(&f, q))
			goto off;
	}
	if (!stopped && f.full)
		stopped = "nodes";
	out = Py_BuildValue("(OOz)", heads, f.pending, stopped);
off:
	/* the guard off, whatever happened; an error of this call kept */
	{
		PyObject *et, *ev, *tb;
		PyErr_Fetch(&et, &ev, &tb);
		if (set_profile(&f, Py_None))
			Py_CLEAR(out);
		if (et)
			PyErr_Restore(et, ev, tb);
	}
done:
	if (was)
		PyGC_Enable();
	Py_XDECREF(heads);
	Py_DECREF(f.pending);
	return out;
}
