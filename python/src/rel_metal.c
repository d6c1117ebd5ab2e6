/*
 * What the releasers of Apple silicon's GPU (mps.c, mlx.c) share: held()
 * and release() at the once step of the GPU the core calls "mps", over a
 * framework's counters and its empty call. Their data is the framework's
 * struct gpr_py_metal_fw.
 */
#include "ext.h"

int gpr_py_metal_held(void *data, int device, struct gpr_held *out)
{
	const struct gpr_py_metal_fw *fw = data;
	out->known = 0;
	if (device != GPR_DEVICE_ONCE)
		return 0;
	PyGILState_STATE g = PyGILState_Ensure();
	int64_t live = 0, cached = 0;
	int rc = 0;
	PyObject *handle = fw->probe(NULL, 0);
	if (handle) {
		rc = fw->counters(handle, &live, &cached);
		Py_DECREF(handle);
		if (rc) {
			gpr_py_error_note(NULL, 0, "");
		} else {
			out->live = live > 0 ? (uint64_t)live : 0;
			out->cached = cached > 0 ? (uint64_t)cached : 0;
			out->known = 1;
		}
	}
	PyGILState_Release(g);
	return rc ? GPR_E_RELEASER : 0;
}

int gpr_py_metal_release(void *data, int device, char *note, size_t note_sz)
{
	const struct gpr_py_metal_fw *fw = data;
	if (device != GPR_DEVICE_ONCE)
		return 0;
	PyGILState_STATE g = PyGILState_Ensure();
	int rc = 0;
	PyObject *handle = fw->probe(NULL, 0);
	PyObject *r = handle ? fw->empty(handle) : NULL;
	if (handle && !r) {
		gpr_py_error_note(note, note_sz, "");
		rc = GPR_E_RELEASER;
	}
	Py_XDECREF(r);
	Py_XDECREF(handle);
	PyGILState_Release(g);
	return rc;
}
