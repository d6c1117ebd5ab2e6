/*
 * _context_probe(uuid): the probe process's side of measuring a bare
 * context (explain_rest.c starts it with explain(measure_context=True)).
 * Only ever called in that child, never in a user's process: it loads the
 * driver, calls cuInit and opens the primary context of the GPU with that
 * UUID, which is why it resolves its four calls itself (the core's driver
 * layer never loads the driver or initialises it), then reads this
 * process's NVML figure there through the core, as explain() does.
 */
#include "ext.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int cu_init_fn(unsigned);
typedef int cu_count_fn(int *);
typedef int cu_uuid_fn(unsigned char *, int);
typedef int cu_retain_fn(void **, int);

PyObject *gpr_py_context_probe(PyObject *module, PyObject *arg)
{
	struct gpr_py_state *st = gpr_py_state(module);
	const char *want =
	    PyUnicode_Check(arg) ? PyUnicode_AsUTF8AndSize(arg, NULL) : NULL;
	if (!want)
		return PyErr_Format(PyExc_TypeError,
				    "_context_probe(uuid): a str");
	if (!st->ctx)
		return gpr_py_raise(st, st->open_error, "_context_probe");
	const char *path = secure_getenv("GPURECLAIM_CUDA_LIBRARY");
	void *lib = dlopen(path && *path ? path : "libcuda.so.1",
			   RTLD_NOW | RTLD_GLOBAL);
	if (!lib)
		return PyErr_Format(PyExc_OSError, "cannot load the driver: %s",
				    dlerror());
	cu_init_fn *init;
	cu_count_fn *count;
	cu_uuid_fn *uuid;
	cu_retain_fn *retain;
	*(void **)&init = dlsym(lib, "cuInit");
	*(void **)&count = dlsym(lib, "cuDeviceGetCount");
	*(void **)&uuid = dlsym(lib, "cuDeviceGetUuid_v2");
	if (!uuid)
		*(void **)&uuid = dlsym(lib, "cuDeviceGetUuid");
	*(void **)&retain = dlsym(lib, "cuDevicePrimaryCtxRetain");
	int n = 0, found = -1, r = -1;
	if (init && count && uuid && retain)
		r = init(0);
	if (r == 0)
		r = count(&n);
	for (int d = 0; r == 0 && d < n && found < 0; d++) {
		unsigned char b[16];
		char s[64];
		if (uuid(b, d))
			continue;
		snprintf(s, sizeof s,
			 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
			 "%02x%02x%02x%02x%02x%02x",
			 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8],
			 b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
		if (!strcmp(s, want))
			found = d;
	}
	void *ctx = NULL;
	if (r || found < 0 || retain(&ctx, found))
		return PyErr_Format(PyExc_RuntimeError,
				    "no context opened on %s (CUresult %d)",
				    want, r);
	uint64_t bytes = 0;
	int err = gpr_process_bytes(st->ctx, found, &bytes);
	if (err)
		return gpr_py_raise(st, err, "_context_probe");
	return PyLong_FromUnsignedLongLong(bytes);
}
