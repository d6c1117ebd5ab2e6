/*
 * Torch's CUDA caching allocator. Per visited GPU where Torch reserved
 * bytes, with that device current in Torch (the previous one restored):
 * empty_cache and ipc_collect; with
 * workspaces=True the cuBLAS/cuBLASLt workspaces are dropped first, so that
 * empty_cache returns them too. Once per call: the host (pinned) cache.
 * Nothing runs unless the user imported torch and torch.cuda is initialised:
 * any other call could initialise CUDA.
 */
#include "ext.h"

#include <stdio.h>

/* stats["<key>"]["all"]["current"] of a nested stats dict; -1 if absent. */
static int64_t nested_current(PyObject *stats, const char *key)
{
	PyObject *k = PyDict_GetItemString(stats, key); /* borrowed */
	PyObject *all =
	    k && PyDict_Check(k) ? PyDict_GetItemString(k, "all") : NULL;
	return gpr_py_item_i64(all, "current");
}

/*
 * Torch's allocated and reserved bytes on `device`. memory_allocated() and
 * memory_reserved() each rebuild and flatten the whole statistics dict in
 * Python (~60 us each); torch._C._cuda_memoryStats, the C call beneath
 * them, gives both in one nested dict. The public pair is the fallback
 * where that private call is missing or changed shape.
 */
static int torch_memory(PyObject *cuda, int device, int64_t *alloc,
			int64_t *reserved)
{
	PyObject *torch = gpr_py_imported("torch");
	PyObject *c = torch ? PyObject_GetAttrString(torch, "_C") : NULL;
	Py_XDECREF(torch);
	PyObject *stats =
	    c && PyObject_HasAttrString(c, "_cuda_memoryStats")
		? PyObject_CallMethod(c, "_cuda_memoryStats", "(i)", device)
		: NULL;
	Py_XDECREF(c);
	if (stats && PyDict_Check(stats)) {
		int64_t a = nested_current(stats, "allocated_bytes");
		int64_t r = nested_current(stats, "reserved_bytes");
		Py_DECREF(stats);
		if (a >= 0 && r >= 0) {
			*alloc = a;
			*reserved = r;
			return 0;
		}
	} else {
		Py_XDECREF(stats);
	}
	PyErr_Clear();
	if (gpr_py_call_i64(cuda, "memory_allocated", alloc, "(i)", device) ||
	    gpr_py_call_i64(cuda, "memory_reserved", reserved, "(i)", device))
		return -1;
	return 0;
}

static int held(void *data, int device, struct gpr_held *out)
{
	(void)data;
	out->known = 0;
	if (device < 0)
		return 0;
	PyGILState_STATE g = PyGILState_Ensure();
	int rc = 0;
	PyObject *cuda = gpr_py_torch_cuda(NULL, 0);
	int64_t alloc = 0, reserved = 0;
	if (cuda) {
		if (torch_memory(cuda, device, &alloc, &reserved)) {
			gpr_py_error_note(NULL, 0, "");
			rc = -1;
		} else {
			out->live = (uint64_t)alloc;
			out->cached =
			    reserved > alloc ? (uint64_t)(reserved - alloc) : 0;
			out->known = 1;
		}
		Py_DECREF(cuda);
	}
	PyGILState_Release(g);
	return rc;
}

/* The once-per-call step: Torch's pinned host cache. */
static int release_once(PyObject *cuda, char *note, size_t note_sz)
{
	PyObject *torch = gpr_py_imported("torch");
	PyObject *fn = torch ? gpr_py_attr(torch, "_C._host_emptyCache") : NULL;
	Py_XDECREF(torch);
	if (!fn)
		return 0; /* older Torch: no host cache call */
	(void)cuda;
	PyObject *r = PyObject_CallFunctionObjArgs(fn, NULL);
	Py_DECREF(fn);
	if (!r) {
		gpr_py_error_note(note, note_sz, "host cache");
		return -1;
	}
	Py_DECREF(r);
	return 0;
}

static int clear_workspaces(char *note, size_t note_sz)
{
	PyObject *torch = gpr_py_imported("torch");
	PyObject *fn =
	    torch ? gpr_py_attr(torch, "_C._cuda_clearCublasWorkspaces") : NULL;
	Py_XDECREF(torch);
	if (!fn) {
		snprintf(note, note_sz,
			 "this Torch cannot free cuBLAS workspaces "
			 "(no torch._C._cuda_clearCublasWorkspaces)");
		return 0;
	}
	PyObject *r = PyObject_CallFunctionObjArgs(fn, NULL);
	Py_DECREF(fn);
	if (!r) {
		gpr_py_error_note(note, note_sz, "cuBLAS workspaces");
		return -1;
	}
	Py_DECREF(r);
	return 0;
}

/*
 * torch.cuda.device(d) is Torch's device guard: on exit it restores the
 * previous device through MaybeExchangeDevice, which does not create a
 * context on a previous device that has none (torch.cuda.set_device would).
 */
static int release_device(PyObject *cuda, int device, char *note,
			  size_t note_sz)
{
	int workspaces = gpr_py_call_options()->workspaces;
	int64_t alloc = 0, reserved = 0;
	if (torch_memory(cuda, device, &alloc, &reserved))
		goto fail;
	/* Nothing reserved there: leave Torch's device alone. */
	if (reserved == 0 && !workspaces)
		return 0;
	PyObject *guard = gpr_py_call(cuda, "device", "(i)", device);
	PyObject *r = guard ? gpr_py_call(guard, "__enter__", NULL) : NULL;
	if (!r) {
		Py_XDECREF(guard);
		goto fail;
	}
	Py_DECREF(r);
	int rc = 0;
	if (workspaces && clear_workspaces(note, note_sz))
		rc = -1;
	r = rc ? NULL : gpr_py_call(cuda, "empty_cache", NULL);
	if (r) {
		Py_DECREF(r);
		r = gpr_py_call(cuda, "ipc_collect", NULL);
	}
	if (!r && !rc) {
		gpr_py_error_note(note, note_sz, "");
		rc = -1;
	}
	Py_XDECREF(r);
	/* Restore even after a failure; keep the first error. */
	PyObject *back =
	    gpr_py_call(guard, "__exit__", "(OOO)", Py_None, Py_None, Py_None);
	Py_DECREF(guard);
	if (!back) {
		if (rc == 0)
			gpr_py_error_note(note, note_sz,
					  "restoring the device");
		else
			PyErr_Clear();
		rc = -1;
	}
	Py_XDECREF(back);
	return rc;
fail:
	gpr_py_error_note(note, note_sz, "");
	return -1;
}

static int release(void *data, int device, char *note, size_t note_sz)
{
	(void)data;
	PyGILState_STATE g = PyGILState_Ensure();
	int rc = 0;
	PyObject *cuda = gpr_py_torch_cuda(NULL, 0);
	if (cuda) {
		rc = device == GPR_DEVICE_ONCE
			 ? release_once(cuda, note, note_sz)
			 : release_device(cuda, device, note, note_sz);
		Py_DECREF(cuda);
	}
	PyGILState_Release(g);
	return rc;
}

const struct gpr_releaser gpr_py_torch_releaser = {
    .sz = sizeof(struct gpr_releaser),
    .name = "torch",
    .held = held,
    .release = release,
};
