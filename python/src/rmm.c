/*
 * RMM's resources as its Python layer holds them (rmm.mr): which GPUs
 * have one, the chain of adaptors down to the resource that allocates,
 * what the counting adaptors say. Shared by RMM's explainer and releaser.
 * Types are told apart with PyType_IsSubtype against rmm.mr's classes.
 */
#include "ext.h"

#include <string.h>

/* 1 if o is an instance of rmm.mr.<name>. */
static int is_a(PyObject *mr, PyObject *o, const char *name)
{
	PyObject *cls = gpr_py_attr(mr, name);
	int yes = cls && PyType_Check(cls) &&
		  PyType_IsSubtype(Py_TYPE(o), (PyTypeObject *)cls);
	Py_XDECREF(cls);
	return yes;
}

/* The resource of `device` if the user set one (new ref), else NULL. */
static PyObject *resource_of(PyObject *mr, int device)
{
	PyObject *names = gpr_py_call(mr, "get_log_filenames", NULL);
	PyObject *key = PyLong_FromLong(device);
	int has = names && key && PyDict_Check(names) &&
		  PyDict_Contains(names, key) == 1;
	Py_XDECREF(names);
	Py_XDECREF(key);
	PyErr_Clear();
	return has ? gpr_py_call(mr, "get_per_device_resource", "(i)", device)
		   : NULL;
}

int gpr_py_rmm_chain(PyObject *mr, int device, struct gpr_py_rmm_chain *c)
{
	memset(c, 0, sizeof *c);
	c->top = resource_of(mr, device);
	if (!c->top)
		return PyErr_Occurred() ? -1 : 0;
	c->names = PyList_New(0);
	if (!c->names) {
		gpr_py_rmm_chain_free(c);
		return -1;
	}
	PyObject *r = Py_NewRef(c->top);
	for (int depth = 0; r && depth < 32; depth++) {
		PyObject *name =
		    gpr_py_attr((PyObject *)Py_TYPE(r), "__name__");
		if (name && PyList_Append(c->names, name)) {
			Py_DECREF(name);
			Py_DECREF(r);
			gpr_py_rmm_chain_free(c);
			return -1;
		}
		Py_XDECREF(name);
		if (!c->stats && is_a(mr, r, "StatisticsResourceAdaptor"))
			c->stats = Py_NewRef(r);
		if (!c->tracking && is_a(mr, r, "TrackingResourceAdaptor"))
			c->tracking = Py_NewRef(r);
		if (!c->pool && is_a(mr, r, "PoolMemoryResource"))
			c->pool = Py_NewRef(r);
		PyObject *up = PyObject_HasAttrString(r, "upstream_mr")
				   ? gpr_py_attr(r, "upstream_mr")
				   : NULL;
		if (!up || up == Py_None) {
			Py_XDECREF(up);
			c->leaf = r;
			r = NULL;
			break;
		}
		Py_DECREF(r);
		r = up;
	}
	Py_XDECREF(r);
	PyErr_Clear();
	c->async = c->leaf && is_a(mr, c->leaf, "CudaAsyncMemoryResource");
	return 1;
}

void gpr_py_rmm_chain_free(struct gpr_py_rmm_chain *c)
{
	Py_CLEAR(c->top);
	Py_CLEAR(c->leaf);
	Py_CLEAR(c->pool);
	Py_CLEAR(c->stats);
	Py_CLEAR(c->tracking);
	Py_CLEAR(c->names);
}

int gpr_py_rmm_live(const struct gpr_py_rmm_chain *c, int64_t *live)
{
	int rc = -1;
	if (c->stats) {
		PyObject *s = gpr_py_attr(c->stats, "allocation_counts");
		PyObject *b = s ? gpr_py_attr(s, "current_bytes") : NULL;
		rc = b ? gpr_py_i64(b, live) : -1;
		Py_XDECREF(b);
		Py_XDECREF(s);
	}
	if (rc && c->tracking)
		rc = gpr_py_call_i64(c->tracking, "get_allocated_bytes", live,
				     NULL);
	PyErr_Clear();
	return rc;
}

struct gpr_py_rmm_pool *gpr_py_rmm_pool(struct gpr_py_state *st, int device,
					PyObject *leaf)
{
	for (int i = 0; i < GPR_PY_SLOTS; i++) {
		struct gpr_py_rmm_pool *p = &st->rmm_pools[i];
		if (p->used && p->device == device &&
		    p->owner == (uintptr_t)leaf)
			return p;
	}
	return NULL;
}
