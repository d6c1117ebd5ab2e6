/*
 * Torch's CUDA caching allocator. Per visited GPU where Torch reserved
 * bytes, with that device current in Torch (the previous one restored):
 * empty_cache and ipc_collect; with
 * workspaces=True the cuBLAS/cuBLASLt workspaces are dropped first, so that
 * empty_cache returns them too, and what the drop did is kept in the
 * module state for explain(): the bytes it freed (allocated before -
 * after: it frees workspaces only) and the blocks of a workspace's size
 * that survived it, which are therefore not workspaces. Once per call:
 * the host (pinned) cache.
 * Nothing runs unless the user imported torch and torch.cuda is initialised:
 * any other call could initialise CUDA.
 */
#include "ext.h"

#include <stdio.h>
#include <time.h>

/* Blocks of a workspace's size, before the clear. */
struct sized {
	int n;
	struct {
		uint64_t address, size;
	} b[GPR_PY_SURVIVORS * 4];
};

/* The live blocks of `device` with a workspace's size (keep: a block of
 * `before` to look for, NULL: every one). */
static int sized_blocks(PyObject *cuda, int device, struct sized *out,
			const struct sized *before)
{
	int64_t ws = 0, lt = 0;
	char from[160];
	gpr_py_torch_ws_sizes(cuda, device, &ws, &lt, from, sizeof from);
	PyObject *snap = gpr_py_torch_snapshot(cuda);
	if (!snap)
		return -1;
	out->n = 0;
	Py_ssize_t n = PyList_Check(snap) ? PyList_Size(snap) : 0;
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *seg = PyList_GetItem(snap, i);
		PyObject *blocks = PyDict_Check(seg)
				       ? PyDict_GetItemString(seg, "blocks")
				       : NULL;
		if (!blocks || !PyList_Check(blocks) ||
		    gpr_py_item_i64(seg, "device") != device)
			continue;
		for (Py_ssize_t k = 0; k < PyList_Size(blocks); k++) {
			PyObject *b = PyList_GetItem(blocks, k);
			PyObject *st = PyDict_Check(b)
					   ? PyDict_GetItemString(b, "state")
					   : NULL;
			if (!st || !PyUnicode_Check(st) ||
			    PyUnicode_CompareWithASCIIString(
				st, "active_allocated") ||
			    !gpr_py_torch_ws_sized(b, ws, lt))
				continue;
			uint64_t a = (uint64_t)gpr_py_item_i64(b, "address");
			uint64_t sz = (uint64_t)gpr_py_item_i64(b, "size");
			int keep = !before;
			for (int j = 0; before && j < before->n; j++)
				keep |= before->b[j].address == a &&
					before->b[j].size == sz;
			int cap = (int)(sizeof out->b / sizeof out->b[0]);
			if (keep && out->n < cap) {
				out->b[out->n].address = a;
				out->b[out->n++].size = sz;
			}
		}
	}
	Py_DECREF(snap);
	return 0;
}

/* Keeps what the clear did on `device` for explain(). */
static void remember(struct gpr_py_state *st, int device, int64_t freed,
		     const struct sized *survivors)
{
	struct gpr_py_ws_release *r = NULL;
	for (int i = 0; i < GPR_PY_SLOTS && !r; i++)
		if (st->ws_release[i].used &&
		    st->ws_release[i].device == device)
			r = &st->ws_release[i];
	for (int i = 0; i < GPR_PY_SLOTS && !r; i++)
		if (!st->ws_release[i].used)
			r = &st->ws_release[i];
	if (!r)
		return; /* more GPUs than slots: explain says less */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	r->used = 1;
	r->device = device;
	r->at = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	r->freed = freed;
	r->n = 0;
	for (int i = 0; i < survivors->n && r->n < GPR_PY_SURVIVORS; i++) {
		r->survivors[r->n].address = survivors->b[i].address;
		r->survivors[r->n++].size = survivors->b[i].size;
	}
}

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
static int release_device(struct gpr_py_state *st, PyObject *cuda, int device,
			  char *note, size_t note_sz)
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
	struct sized before = {0}, after = {0};
	int64_t alloc_after = 0, reserved_after = 0;
	int sized =
	    workspaces && sized_blocks(cuda, device, &before, NULL) == 0;
	if (workspaces && !sized)
		PyErr_Clear();
	if (workspaces && clear_workspaces(note, note_sz))
		rc = -1;
	if (rc == 0 && sized &&
	    torch_memory(cuda, device, &alloc_after, &reserved_after) == 0 &&
	    sized_blocks(cuda, device, &after, &before) == 0) {
		remember(st, device, alloc - alloc_after, &after);
		snprintf(note, note_sz,
			 "cuBLAS/cuBLASLt workspaces: %lld bytes freed on "
			 "GPU %d",
			 (long long)(alloc - alloc_after), device);
	}
	PyErr_Clear();
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
	PyGILState_STATE g = PyGILState_Ensure();
	int rc = 0;
	PyObject *cuda = gpr_py_torch_cuda(NULL, 0);
	if (cuda) {
		rc = device == GPR_DEVICE_ONCE
			 ? release_once(cuda, note, note_sz)
			 : release_device(data, cuda, device, note, note_sz);
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
