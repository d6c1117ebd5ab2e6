/*
 * The CUDA driver (libcuda.so.1), looked up only among the libraries this
 * process already loaded: dlopen(RTLD_NOLOAD) never maps it, and cuInit is
 * not even in the symbol table, so asking "which GPUs does this process
 * hold" can never create the state it asks about.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "driver.h"
#include "gpureclaim.h"
#include "loader.h"

#define CUDA_ROW(field, sym, req)                                              \
	GPR__DL_ROW(struct gpr__cuda_api, field, sym, req)
static const struct gpr__dl_sym cuda_syms[] = {GPR__CUDA_SYMBOLS(CUDA_ROW)};
#undef CUDA_ROW

#define CUDA_CHECK(field, sym, req) GPR__DL_CHECK(struct gpr__cuda_api, field)
GPR__CUDA_SYMBOLS(CUDA_CHECK)
#undef CUDA_CHECK

const char *gpr__cuda_library(const char *path)
{
	return gpr__dl_choose(path, "GPURECLAIM_CUDA_LIBRARY", "libcuda.so.1");
}

/* dlopen with `flags`, then the symbol table; RTLD_NOLOAD says which
 * failure a missing library is. */
static int open_with(struct gpr__cuda *c, const char *path, int flags,
		     char *err, size_t errlen)
{
	memset(c, 0, sizeof *c);
	snprintf(c->path, sizeof c->path, "%s", gpr__cuda_library(path));
	char why[GPR__ERRLEN];
	void *lib = gpr__dl_open(c->path, flags, why, sizeof why);
	if (!lib && (flags & RTLD_NOLOAD)) {
		gpr__errf(err, errlen, "%s is not loaded in this process",
			  c->path);
		return GPR_E_NOT_LOADED;
	}
	if (!lib) {
		gpr__errf(err, errlen, "cannot load %s: %s", c->path, why);
		return GPR_E_NO_DRIVER;
	}
	int r = gpr__dl_resolve(lib, c->path, "a CUDA driver", cuda_syms,
				sizeof cuda_syms / sizeof cuda_syms[0], &c->api,
				sizeof c->api, err, errlen);
	if (r) {
		dlclose(lib);
		memset(&c->api, 0, sizeof c->api);
		return r;
	}
	c->lib = lib;
	return 0;
}

int gpr__cuda_open(struct gpr__cuda *c, const char *path, char *err,
		   size_t errlen)
{
	return open_with(c, path, RTLD_NOW | RTLD_NOLOAD, err, errlen);
}

int gpr__cuda_load(struct gpr__cuda *c, const char *path, char *err,
		   size_t errlen)
{
	return open_with(c, path, RTLD_NOW | RTLD_LOCAL, err, errlen);
}

void gpr__cuda_close(struct gpr__cuda *c)
{
	if (c->lib)
		dlclose(c->lib);
	c->lib = NULL;
	memset(&c->api, 0, sizeof c->api);
}

void gpr__cuda_describe(struct gpr__cuda *c, CUresult r, char *buf, size_t len)
{
	const char *name = NULL, *text = NULL;
	if (c && c->lib && c->api.get_error_name &&
	    c->api.get_error_name(r, &name) != CUDA_SUCCESS)
		name = NULL;
	if (c && c->lib && c->api.get_error_string &&
	    c->api.get_error_string(r, &text) != CUDA_SUCCESS)
		text = NULL;
	/* the driver's own strings, read no further than a message needs */
	if (name && text)
		gpr__errf(buf, len, "%.64s (%.160s)", name, text);
	else if (name)
		gpr__errf(buf, len, "%.64s", name);
	else
		gpr__errf(buf, len, "CUresult %d", r);
}

/* "<call>: CUDA_ERROR_X (text)" into err; returns GPR_E_DRIVER. */
static int fail(struct gpr__cuda *c, const char *call, CUresult r, char *err,
		size_t errlen)
{
	char what[GPR__ERRLEN];
	gpr__cuda_describe(c, r, what, sizeof what);
	gpr__errf(err, errlen, "%s: %s", call, what);
	return GPR_E_DRIVER;
}

int gpr__cuda_driver_version(struct gpr__cuda *c, int *version, char *err,
			     size_t errlen)
{
	*version = 0;
	CUresult r = c->api.driver_get_version(version);
	return r == CUDA_SUCCESS
		   ? 0
		   : fail(c, "cuDriverGetVersion", r, err, errlen);
}

static int not_open(char *err, size_t errlen)
{
	gpr__errf(err, errlen, "the CUDA driver is not loaded in this process");
	return GPR_E_NOT_LOADED;
}

int gpr__cuda_device_count(struct gpr__cuda *c, int *n, char *err,
			   size_t errlen)
{
	*n = 0;
	if (!c->lib)
		return not_open(err, errlen);
	int count = 0;
	CUresult r = c->api.device_get_count(&count);
	/*
	 * Loaded but never initialised (a library linked libcuda without
	 * using it), or torn down at exit: no context can exist.
	 */
	if (r == CUDA_ERROR_NOT_INITIALIZED || r == CUDA_ERROR_DEINITIALIZED)
		return 0;
	if (r != CUDA_SUCCESS)
		return fail(c, "cuDeviceGetCount", r, err, errlen);
	*n = count < 0 ? 0 : count;
	return 0;
}

/* The CUdevice of an ordinal; GPR_E_RANGE for an ordinal the driver lacks. */
static int device(struct gpr__cuda *c, int ordinal, CUdevice *dev, char *err,
		  size_t errlen)
{
	if (!c->lib)
		return not_open(err, errlen);
	if (ordinal < 0) {
		gpr__errf(err, errlen, "CUDA ordinal %d out of range", ordinal);
		return GPR_E_RANGE;
	}
	CUresult r = c->api.device_get(dev, ordinal);
	if (r == CUDA_ERROR_INVALID_DEVICE) {
		gpr__errf(err, errlen, "CUDA ordinal %d out of range", ordinal);
		return GPR_E_RANGE;
	}
	if (r != CUDA_SUCCESS)
		return fail(c, "cuDeviceGet", r, err, errlen);
	return 0;
}

static int primary_state(struct gpr__cuda *c, CUdevice dev, int *active,
			 char *err, size_t errlen)
{
	unsigned int flags = 0;
	int on = 0;
	CUresult r = c->api.primary_ctx_get_state(dev, &flags, &on);
	if (r != CUDA_SUCCESS)
		return fail(c, "cuDevicePrimaryCtxGetState", r, err, errlen);
	*active = on != 0;
	return 0;
}

int gpr__cuda_primary_active(struct gpr__cuda *c, int ordinal, int *active,
			     char *err, size_t errlen)
{
	*active = 0;
	CUdevice dev;
	int e = device(c, ordinal, &dev, err, errlen);
	return e ? e : primary_state(c, dev, active, err, errlen);
}

int gpr__cuda_uuid(struct gpr__cuda *c, int ordinal, char *uuid, size_t len,
		   char *err, size_t errlen)
{
	if (len)
		uuid[0] = '\0';
	CUdevice dev;
	int e = device(c, ordinal, &dev, err, errlen);
	if (e)
		return e;
	if (!c->api.device_get_uuid) {
		gpr__errf(err, errlen, "%s exports no cuDeviceGetUuid",
			  c->path);
		return GPR_E_NOT_FOUND;
	}
	if (len < sizeof "GPU-00000000-0000-0000-0000-000000000000") {
		gpr__errf(err, errlen, "UUID buffer too small");
		return GPR_E_INVAL;
	}
	CUuuid u;
	memset(&u, 0, sizeof u);
	CUresult r = c->api.device_get_uuid(&u, dev);
	if (r != CUDA_SUCCESS)
		return fail(c, "cuDeviceGetUuid", r, err, errlen);
	const unsigned char *b = u.bytes;
	snprintf(uuid, len,
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		 "%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
		 b[10], b[11], b[12], b[13], b[14], b[15]);
	return 0;
}

int gpr__cuda_pci_bus_id(struct gpr__cuda *c, int ordinal, char *bus,
			 size_t len, char *err, size_t errlen)
{
	if (len)
		bus[0] = '\0';
	CUdevice dev;
	int e = device(c, ordinal, &dev, err, errlen);
	if (e)
		return e;
	if (!c->api.device_get_pci_bus_id) {
		gpr__errf(err, errlen, "%s exports no cuDeviceGetPCIBusId",
			  c->path);
		return GPR_E_NOT_FOUND;
	}
	/* cuda.h: 13 bytes suffice ("0000:00:00.0"); NVML's form needs 17 */
	if (len < 13 || len > (size_t)INT_MAX) {
		gpr__errf(err, errlen, "bus id buffer too small");
		return GPR_E_INVAL;
	}
	CUresult r = c->api.device_get_pci_bus_id(bus, (int)len, dev);
	if (r != CUDA_SUCCESS) {
		bus[0] = '\0';
		return fail(c, "cuDeviceGetPCIBusId", r, err, errlen);
	}
	bus[len - 1] = '\0';
	return 0;
}

/* ---------------- memory pools ---------------- */

static int no_pools(struct gpr__cuda *c, char *err, size_t errlen)
{
	gpr__errf(err, errlen,
		  "%s lacks the memory-pool calls (CUDA 11.2 or later)",
		  c->path);
	return GPR_E_BAD_LIBRARY;
}

/*
 * Makes the active primary context of `ordinal` current in this thread:
 * retained, the previous context kept in *prev for leave_primary.
 * GPR_E_NOT_FOUND when it is not active (retaining would create it).
 */
static int enter_primary(struct gpr__cuda *c, int ordinal, CUdevice *dev,
			 CUcontext *prev, char *err, size_t errlen)
{
	const struct gpr__cuda_api *a = &c->api;
	if (!a->primary_ctx_retain || !a->primary_ctx_release ||
	    !a->ctx_get_current || !a->ctx_set_current)
		return no_pools(c, err, errlen);
	int active = 0;
	int e = device(c, ordinal, dev, err, errlen);
	if (e == 0)
		e = primary_state(c, *dev, &active, err, errlen);
	if (e)
		return e;
	if (!active) {
		gpr__errf(err, errlen,
			  "GPU %d: this process's primary context there is "
			  "not active",
			  ordinal);
		return GPR_E_NOT_FOUND;
	}
	CUresult r = a->ctx_get_current(prev);
	if (r != CUDA_SUCCESS)
		return fail(c, "cuCtxGetCurrent", r, err, errlen);
	CUcontext ctx = NULL;
	r = a->primary_ctx_retain(&ctx, *dev);
	if (r != CUDA_SUCCESS)
		return fail(c, "cuDevicePrimaryCtxRetain", r, err, errlen);
	r = a->ctx_set_current(ctx);
	if (r != CUDA_SUCCESS) {
		a->primary_ctx_release(*dev);
		return fail(c, "cuCtxSetCurrent", r, err, errlen);
	}
	return 0;
}

static void leave_primary(struct gpr__cuda *c, CUdevice dev, CUcontext prev)
{
	c->api.ctx_set_current(prev);
	c->api.primary_ctx_release(dev);
}

int gpr__cuda_pool_of(struct gpr__cuda *c, int ordinal, CUdeviceptr ptr,
		      CUmemoryPool *pool, char *err, size_t errlen)
{
	*pool = NULL;
	if (!c->lib)
		return not_open(err, errlen);
	if (!c->api.pointer_get_attribute)
		return no_pools(c, err, errlen);
	CUdevice dev;
	CUcontext prev;
	int e = enter_primary(c, ordinal, &dev, &prev, err, errlen);
	if (e)
		return e;
	CUresult r = c->api.pointer_get_attribute(
	    pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, ptr);
	leave_primary(c, dev, prev);
	if (r != CUDA_SUCCESS) {
		*pool = NULL;
		return fail(c, "cuPointerGetAttribute(MEMPOOL_HANDLE)", r, err,
			    errlen);
	}
	return 0;
}

int gpr__cuda_pool_bytes(struct gpr__cuda *c, CUmemoryPool pool,
			 uint64_t *reserved, uint64_t *used, char *err,
			 size_t errlen)
{
	if (!c->lib)
		return not_open(err, errlen);
	if (!c->api.mem_pool_get_attribute)
		return no_pools(c, err, errlen);
	CUresult r = c->api.mem_pool_get_attribute(
	    pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, reserved);
	if (r == CUDA_SUCCESS)
		r = c->api.mem_pool_get_attribute(
		    pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, used);
	if (r != CUDA_SUCCESS)
		return fail(c, "cuMemPoolGetAttribute", r, err, errlen);
	return 0;
}

int gpr__cuda_pool_trim(struct gpr__cuda *c, int ordinal, CUmemoryPool pool,
			uint64_t keep, char *err, size_t errlen)
{
	if (!c->lib)
		return not_open(err, errlen);
	if (!c->api.ctx_synchronize || !c->api.mem_pool_trim_to)
		return no_pools(c, err, errlen);
	CUdevice dev;
	CUcontext prev;
	int e = enter_primary(c, ordinal, &dev, &prev, err, errlen);
	if (e)
		return e;
	/* frees made with cuMemFreeAsync count as used until observed */
	CUresult r = c->api.ctx_synchronize();
	const char *call = "cuCtxSynchronize";
	if (r == CUDA_SUCCESS) {
		r = c->api.mem_pool_trim_to(pool, (size_t)keep);
		call = "cuMemPoolTrimTo";
	}
	leave_primary(c, dev, prev);
	return r == CUDA_SUCCESS ? 0 : fail(c, call, r, err, errlen);
}
