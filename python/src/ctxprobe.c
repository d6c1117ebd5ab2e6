/*
 * _context_probe(uuid): the probe process's side of measuring a bare
 * context (gpureclaim/_explain/_parts.py starts it for
 * explain(measure_context=True)). Only ever called in that child, never in
 * a user's process: it loads the driver, calls cuInit and opens the
 * primary context of the GPU with that UUID, which is why it resolves its
 * four calls itself (the core's driver layer never loads the driver or
 * initialises it), through the driver layer's loader and its rule for
 * which library (GPURECLAIM_CUDA_LIBRARY, else libcuda.so.1); then it
 * reads this process's NVML figure there through the core, as explain()
 * does.
 */
#include "ext.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "driver/loader.h"

/* The calls the probe makes (cuda.h, CUDA 12). */
struct probe_api {
	int (*init)(unsigned flags);
	int (*count)(int *n);
	int (*uuid)(unsigned char *uuid, int device);
	int (*retain)(void **ctx, int device);
};

static const struct gpr__dl_sym probe_syms[] = {
    {offsetof(struct probe_api, init), "cuInit", 1},
    {offsetof(struct probe_api, count), "cuDeviceGetCount", 1},
    {offsetof(struct probe_api, uuid), "cuDeviceGetUuid_v2", 0},
    {offsetof(struct probe_api, uuid), "cuDeviceGetUuid", 1},
    {offsetof(struct probe_api, retain), "cuDevicePrimaryCtxRetain", 1},
};

PyObject *gpr_py_context_probe(PyObject *module, PyObject *arg)
{
	struct gpr_py_state *st = gpr_py_state(module);
	const char *want =
	    PyUnicode_Check(arg) ? PyUnicode_AsUTF8AndSize(arg, NULL) : NULL;
	if (!want)
		return PyErr_Format(PyExc_TypeError,
				    "_context_probe(uuid): a str");
	if (!gpr_py_ctx(st, "_context_probe"))
		return NULL;
	char err[512] = "";
	const char *path =
	    gpr__dl_choose(NULL, "GPURECLAIM_CUDA_LIBRARY", "libcuda.so.1");
	void *lib = gpr__dl_open(path, RTLD_NOW | RTLD_GLOBAL, err, sizeof err);
	if (!lib)
		return PyErr_Format(PyExc_OSError, "cannot load the driver: %s",
				    err);
	struct probe_api api;
	if (gpr__dl_resolve(lib, path, "the CUDA driver", probe_syms,
			    sizeof probe_syms / sizeof probe_syms[0], &api,
			    sizeof api, err, sizeof err))
		return PyErr_Format(PyExc_OSError, "cannot load the driver: %s",
				    err);
	int n = 0, found = -1;
	int r = api.init(0);
	if (r == 0)
		r = api.count(&n);
	for (int d = 0; r == 0 && d < n && found < 0; d++) {
		unsigned char b[16];
		char s[64];
		if (api.uuid(b, d))
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
	if (r || found < 0 || api.retain(&ctx, found))
		return PyErr_Format(PyExc_RuntimeError,
				    "no context opened on %s (CUresult %d)",
				    want, r);
	uint64_t bytes = 0;
	int rc = gpr_process_bytes(st->ctx, found, &bytes);
	if (rc)
		return gpr_py_raise(st, rc, "_context_probe");
	return PyLong_FromUnsignedLongLong(bytes);
}
