/*
 * Numba CUDA frees device arrays lazily: a dropped array joins the current
 * context's pending deallocations, flushed when the list grows. Flushing it
 * hands those blocks to the driver. Runs once per call, only if the user
 * imported numba.cuda and Numba's driver already has a current context:
 * numba.cuda.current_context() would otherwise create one.
 */
#include "ext.h"

#include <stdio.h>

/* 1 if this thread has a current CUDA context in Numba's view. */
static int has_context(PyObject *drv)
{
	PyObject *ac = gpr_py_call(drv, "get_active_context", NULL);
	if (!ac)
		return -1;
	PyObject *in = gpr_py_call(ac, "__enter__", NULL);
	if (!in) { /* no __exit__ after a failed __enter__ */
		Py_DECREF(ac);
		return -1;
	}
	int active = PyObject_IsTrue(in);
	Py_DECREF(in);
	/* __exit__ must not run with an exception pending: keep the first */
	PyObject *type, *value, *tb;
	PyErr_Fetch(&type, &value, &tb);
	PyObject *out =
	    gpr_py_call(ac, "__exit__", "(OOO)", Py_None, Py_None, Py_None);
	Py_DECREF(ac);
	if (type) {
		Py_XDECREF(out);
		PyErr_Clear();
		PyErr_Restore(type, value, tb);
		return -1;
	}
	if (!out)
		return -1;
	Py_DECREF(out);
	return active;
}

static int release(void *data, int device, char *note, size_t note_sz)
{
	(void)data;
	if (device != GPR_DEVICE_ONCE)
		return 0;
	PyGILState_STATE g = PyGILState_Ensure();
	int rc = 0;
	PyObject *drv = gpr_py_numba(NULL, 0);
	if (!drv)
		goto done;
	int active = has_context(drv);
	Py_DECREF(drv);
	if (active < 0) {
		gpr_py_error_note(note, note_sz, "active context");
		rc = -1;
		goto done;
	}
	if (active == 0) {
		snprintf(note, note_sz,
			 "no current context in this thread; pending "
			 "deallocations of other threads stay");
		goto done;
	}
	PyObject *nc = gpr_py_imported("numba.cuda");
	PyObject *ctx = nc ? gpr_py_call(nc, "current_context", NULL) : NULL;
	Py_XDECREF(nc);
	PyObject *deallocs = ctx ? gpr_py_attr(ctx, "deallocations") : NULL;
	PyObject *r = deallocs ? gpr_py_call(deallocs, "clear", NULL) : NULL;
	if (!r) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_AttributeError,
					"no context.deallocations");
		gpr_py_error_note(note, note_sz, "deallocations");
		rc = -1;
	}
	Py_XDECREF(r);
	Py_XDECREF(deallocs);
	Py_XDECREF(ctx);
done:
	PyGILState_Release(g);
	return rc;
}

const struct gpr_releaser gpr_py_numba_releaser = {
    .sz = sizeof(struct gpr_releaser),
    .name = "numba",
    .release = release,
};
