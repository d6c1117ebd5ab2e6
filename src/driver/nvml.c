/*
 * NVML (libnvidia-ml.so.1): loaded privately (RTLD_LOCAL, so it never
 * shadows or is shadowed by the copy PyTorch loads), initialised with
 * nvmlInit_v2 and shut down on close; NVML counts init/shutdown pairs, so
 * other users in the process are unaffected. Device facts and memory
 * figures; process lists live in nvml_procs.c. Each step can be timed for
 * a listener (m->step): the core logs them at GPR_LOG_DEBUG.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "driver.h"
#include "gpureclaim.h"
#include "loader.h"
#include "nvml_int.h"

#define NVML_ROW(field, sym, req)                                              \
	GPR__DL_ROW(struct gpr__nvml_api, field, sym, req)
static const struct gpr__dl_sym nvml_syms[] = {GPR__NVML_SYMBOLS(NVML_ROW)};
#undef NVML_ROW

#define NVML_CHECK(field, sym, req) GPR__DL_CHECK(struct gpr__nvml_api, field)
GPR__NVML_SYMBOLS(NVML_CHECK)
#undef NVML_CHECK

double gpr__nvml_step_start(const struct gpr__nvml *m)
{
	if (!m->step)
		return 0;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void gpr__nvml_step_end(const struct gpr__nvml *m, const char *call, int index,
			double t0, nvmlReturn_t r)
{
	if (m->step)
		m->step(m->step_user, call, index, gpr__nvml_step_start(m) - t0,
			r);
}

const char *gpr__nvml_library(const char *path)
{
	return gpr__dl_choose(path, "GPURECLAIM_NVML_LIBRARY",
			      "libnvidia-ml.so.1");
}

int gpr__nvml_open(struct gpr__nvml *m, const char *path, char *err,
		   size_t errlen)
{
	return gpr__nvml_open_timed(m, path, NULL, NULL, err, errlen);
}

int gpr__nvml_open_timed(struct gpr__nvml *m, const char *path,
			 gpr__nvml_step_fn step, void *user, char *err,
			 size_t errlen)
{
	memset(m, 0, sizeof *m);
	m->step = step;
	m->step_user = user;
	snprintf(m->path, sizeof m->path, "%s", gpr__nvml_library(path));
	char why[GPR__ERRLEN], call[sizeof m->path + 8];
	snprintf(call, sizeof call, "dlopen %s", m->path);
	double t0 = gpr__nvml_step_start(m);
	void *lib =
	    gpr__dl_open(m->path, RTLD_NOW | RTLD_LOCAL, why, sizeof why);
	gpr__nvml_step_end(m, call, -1, t0,
			   lib ? NVML_SUCCESS : NVML_ERROR_LIBRARY_NOT_FOUND);
	if (!lib) {
		gpr__errf(err, errlen, "cannot load %s: %s", m->path, why);
		return GPR_E_NO_NVML;
	}
	int r = gpr__dl_resolve(lib, m->path, "NVML", nvml_syms,
				sizeof nvml_syms / sizeof nvml_syms[0], &m->api,
				sizeof m->api, err, errlen);
	if (r) {
		dlclose(lib);
		memset(&m->api, 0, sizeof m->api);
		return r;
	}
	m->lib = lib;
	t0 = gpr__nvml_step_start(m);
	nvmlReturn_t nr = m->api.init();
	gpr__nvml_step_end(m, "nvmlInit_v2", -1, t0, nr);
	if (nr != NVML_SUCCESS) {
		char what[GPR__ERRLEN];
		gpr__nvml_describe(m, nr, what, sizeof what);
		gpr__errf(err, errlen, "nvmlInit_v2 (%s): %s", m->path, what);
		dlclose(lib);
		m->lib = NULL;
		m->step = NULL;
		memset(&m->api, 0, sizeof m->api);
		return GPR_E_NVML;
	}
	m->initialised = 1;
	return 0;
}

void gpr__nvml_close(struct gpr__nvml *m)
{
	if (m->lib && m->initialised)
		m->api.shutdown();
	if (m->lib)
		dlclose(m->lib);
	m->lib = NULL;
	m->initialised = 0;
	m->step = NULL;
	memset(&m->api, 0, sizeof m->api);
}

static const char *nvml_error_name(nvmlReturn_t r)
{
	switch (r) {
#define N(x)                                                                   \
	case x:                                                                \
		return #x;
		N(NVML_SUCCESS)
		N(NVML_ERROR_UNINITIALIZED)
		N(NVML_ERROR_INVALID_ARGUMENT)
		N(NVML_ERROR_NOT_SUPPORTED)
		N(NVML_ERROR_NO_PERMISSION)
		N(NVML_ERROR_ALREADY_INITIALIZED)
		N(NVML_ERROR_NOT_FOUND)
		N(NVML_ERROR_INSUFFICIENT_SIZE)
		N(NVML_ERROR_INSUFFICIENT_POWER)
		N(NVML_ERROR_DRIVER_NOT_LOADED)
		N(NVML_ERROR_TIMEOUT)
		N(NVML_ERROR_IRQ_ISSUE)
		N(NVML_ERROR_LIBRARY_NOT_FOUND)
		N(NVML_ERROR_FUNCTION_NOT_FOUND)
		N(NVML_ERROR_CORRUPTED_INFOROM)
		N(NVML_ERROR_GPU_IS_LOST)
		N(NVML_ERROR_RESET_REQUIRED)
		N(NVML_ERROR_OPERATING_SYSTEM)
		N(NVML_ERROR_LIB_RM_VERSION_MISMATCH)
		N(NVML_ERROR_IN_USE)
		N(NVML_ERROR_MEMORY)
		N(NVML_ERROR_NO_DATA)
		N(NVML_ERROR_VGPU_ECC_NOT_ENABLED)
		N(NVML_ERROR_INSUFFICIENT_RESOURCES)
		N(NVML_ERROR_FREQ_NOT_SUPPORTED)
		N(NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
		N(NVML_ERROR_DEPRECATED)
		N(NVML_ERROR_NOT_READY)
		N(NVML_ERROR_GPU_NOT_FOUND)
		N(NVML_ERROR_INVALID_STATE)
		N(NVML_ERROR_UNKNOWN)
#undef N
	}
	return NULL;
}

void gpr__nvml_describe(struct gpr__nvml *m, nvmlReturn_t r, char *buf,
			size_t len)
{
	const char *name = nvml_error_name(r);
	const char *text = NULL;
	if (m && m->lib && m->api.error_string)
		text = m->api.error_string(r);
	/* NVML's own string, read no further than a message needs */
	if (name && text)
		gpr__errf(buf, len, "%s (%.160s)", name, text);
	else if (name)
		gpr__errf(buf, len, "%s", name);
	else if (text)
		gpr__errf(buf, len, "nvmlReturn_t %d (%.160s)", r, text);
	else
		gpr__errf(buf, len, "nvmlReturn_t %d", r);
}

int gpr__nvml_fail(struct gpr__nvml *m, const char *call, int index,
		   nvmlReturn_t r, char *err, size_t errlen)
{
	char what[GPR__ERRLEN];
	gpr__nvml_describe(m, r, what, sizeof what);
	if (index >= 0)
		gpr__errf(err, errlen, "%s on GPU %d: %s", call, index, what);
	else
		gpr__errf(err, errlen, "%s: %s", call, what);
	return GPR_E_NVML;
}

static int not_open(char *err, size_t errlen)
{
	gpr__errf(err, errlen, "NVML is not open");
	return GPR_E_NO_NVML;
}

int gpr__nvml_count(struct gpr__nvml *m, int *n, char *err, size_t errlen)
{
	*n = 0;
	if (!m->lib)
		return not_open(err, errlen);
	unsigned int count = 0;
	double t0 = gpr__nvml_step_start(m);
	nvmlReturn_t r = m->api.device_get_count(&count);
	gpr__nvml_step_end(m, "nvmlDeviceGetCount_v2", -1, t0, r);
	if (r != NVML_SUCCESS)
		return gpr__nvml_fail(m, "nvmlDeviceGetCount_v2", -1, r, err,
				      errlen);
	/* a machine has a few dozen GPUs at most: clamp a garbage count */
	*n = count > 1024 ? 1024 : (int)count;
	return 0;
}

int gpr__nvml_driver_version(struct gpr__nvml *m, char *out, size_t len,
			     char *err, size_t errlen)
{
	if (len)
		out[0] = '\0';
	if (!m->lib)
		return not_open(err, errlen);
	if (!m->api.system_get_driver_version) {
		gpr__errf(err, errlen,
			  "%s exports no nvmlSystemGetDriverVersion", m->path);
		return GPR_E_NOT_FOUND;
	}
	if (len < 2 || len > UINT_MAX) {
		gpr__errf(err, errlen, "version buffer too small");
		return GPR_E_INVAL;
	}
	const char *call = "nvmlSystemGetDriverVersion";
	double t0 = gpr__nvml_step_start(m);
	nvmlReturn_t r = m->api.system_get_driver_version(out, (unsigned)len);
	gpr__nvml_step_end(m, call, -1, t0, r);
	out[len - 1] = '\0'; /* NVML writes at most len bytes, maybe no NUL */
	if (r != NVML_SUCCESS) {
		out[0] = '\0';
		return gpr__nvml_fail(m, call, -1, r, err, errlen);
	}
	return 0;
}

int gpr__nvml_handle(struct gpr__nvml *m, int index, nvmlDevice_t *dev,
		     char *err, size_t errlen)
{
	*dev = NULL;
	if (!m->lib)
		return not_open(err, errlen);
	if (index < 0) {
		gpr__errf(err, errlen, "NVML index %d out of range", index);
		return GPR_E_RANGE;
	}
	double t0 = gpr__nvml_step_start(m);
	nvmlReturn_t r = m->api.device_get_handle_by_index(index, dev);
	gpr__nvml_step_end(m, "nvmlDeviceGetHandleByIndex_v2", index, t0, r);
	if (r == NVML_ERROR_INVALID_ARGUMENT) {
		gpr__errf(err, errlen, "NVML index %d out of range", index);
		return GPR_E_RANGE;
	}
	if (r != NVML_SUCCESS)
		return gpr__nvml_fail(m, "nvmlDeviceGetHandleByIndex_v2", index,
				      r, err, errlen);
	return 0;
}

/* The v2 struct's version word was refused or the call is absent. */
static int v2_unavailable(nvmlReturn_t r)
{
	return r == NVML_ERROR_FUNCTION_NOT_FOUND ||
	       r == NVML_ERROR_NOT_SUPPORTED ||
	       r == NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
}

static int memory(struct gpr__nvml *m, nvmlDevice_t dev, int index,
		  struct gpr__nvml_gpu *out, char *err, size_t errlen)
{
	out->memory_info_v2 = 0;
	if (m->api.device_get_memory_info_v2) {
		gpr_nvmlMemory_v2_t v2;
		memset(&v2, 0, sizeof v2);
		v2.version = GPR_NVML_STRUCT_VERSION(gpr_nvmlMemory_v2_t, 2);
		double t0 = gpr__nvml_step_start(m);
		nvmlReturn_t r = m->api.device_get_memory_info_v2(dev, &v2);
		gpr__nvml_step_end(m, "nvmlDeviceGetMemoryInfo_v2", index, t0,
				   r);
		if (r == NVML_SUCCESS) {
			out->total = v2.total;
			out->reserved = v2.reserved;
			out->free = v2.free;
			out->used = v2.used;
			out->memory_info_v2 = 1;
			return 0;
		}
		if (!v2_unavailable(r))
			return gpr__nvml_fail(m, "nvmlDeviceGetMemoryInfo_v2",
					      index, r, err, errlen);
	}
	gpr_nvmlMemory_v1_t v1;
	memset(&v1, 0, sizeof v1);
	double t0 = gpr__nvml_step_start(m);
	nvmlReturn_t r = m->api.device_get_memory_info(dev, &v1);
	gpr__nvml_step_end(m, "nvmlDeviceGetMemoryInfo", index, t0, r);
	if (r != NVML_SUCCESS)
		return gpr__nvml_fail(m, "nvmlDeviceGetMemoryInfo", index, r,
				      err, errlen);
	out->total = v1.total;
	out->free = v1.free;
	out->used = v1.used;
	out->reserved = 0;
	return 0;
}

int gpr__nvml_memory(struct gpr__nvml *m, int index, struct gpr__nvml_gpu *out,
		     char *err, size_t errlen)
{
	nvmlDevice_t dev;
	int e = gpr__nvml_handle(m, index, &dev, err, errlen);
	if (e)
		return e;
	return memory(m, dev, index, out, err, errlen);
}

/* NVML writes at most `len` bytes; make sure the text ends inside. */
static int text(struct gpr__nvml *m, const char *call, int index,
		nvmlReturn_t (*fn)(nvmlDevice_t, char *, unsigned int),
		nvmlDevice_t dev, char *buf, size_t len, char *err,
		size_t errlen)
{
	buf[0] = '\0';
	if (!fn)
		return 0;
	double t0 = gpr__nvml_step_start(m);
	nvmlReturn_t r = fn(dev, buf, (unsigned int)len);
	gpr__nvml_step_end(m, call, index, t0, r);
	buf[len - 1] = '\0';
	if (r != NVML_SUCCESS) {
		buf[0] = '\0';
		return gpr__nvml_fail(m, call, index, r, err, errlen);
	}
	return 0;
}

static int mig_mode(struct gpr__nvml *m, nvmlDevice_t dev, int index, int *mig,
		    char *err, size_t errlen)
{
	*mig = 0;
	if (!m->api.device_get_mig_mode)
		return 0;
	unsigned int current = 0, pending = 0;
	double t0 = gpr__nvml_step_start(m);
	nvmlReturn_t r = m->api.device_get_mig_mode(dev, &current, &pending);
	gpr__nvml_step_end(m, "nvmlDeviceGetMigMode", index, t0, r);
	/* GPUs without MIG (all but A100/A30/H100/H200/B200...) say so */
	if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_FUNCTION_NOT_FOUND)
		return 0;
	if (r != NVML_SUCCESS)
		return gpr__nvml_fail(m, "nvmlDeviceGetMigMode", index, r, err,
				      errlen);
	*mig = current == 1; /* NVML_DEVICE_MIG_ENABLE */
	return 0;
}

int gpr__nvml_gpu_info(struct gpr__nvml *m, int index,
		       struct gpr__nvml_gpu *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	nvmlDevice_t dev;
	int e = gpr__nvml_handle(m, index, &dev, err, errlen);
	if (!e)
		e = text(m, "nvmlDeviceGetName", index, m->api.device_get_name,
			 dev, out->name, sizeof out->name, err, errlen);
	if (!e)
		e = text(m, "nvmlDeviceGetUUID", index, m->api.device_get_uuid,
			 dev, out->uuid, sizeof out->uuid, err, errlen);
	if (!e && m->api.device_get_pci_info) {
		gpr_nvmlPciInfo_t pci;
		memset(&pci, 0, sizeof pci);
		double t0 = gpr__nvml_step_start(m);
		nvmlReturn_t r = m->api.device_get_pci_info(dev, &pci);
		gpr__nvml_step_end(m, "nvmlDeviceGetPciInfo_v3", index, t0, r);
		if (r != NVML_SUCCESS)
			e = gpr__nvml_fail(m, "nvmlDeviceGetPciInfo_v3", index,
					   r, err, errlen);
		else
			snprintf(out->pci_bus_id, sizeof out->pci_bus_id,
				 "%.*s", (int)sizeof pci.busId, pci.busId);
	}
	if (!e)
		e = memory(m, dev, index, out, err, errlen);
	if (!e)
		e = mig_mode(m, dev, index, &out->mig, err, errlen);
	return e;
}

int gpr__nvml_index_by_uuid(struct gpr__nvml *m, const char *uuid, int *index,
			    char *err, size_t errlen)
{
	*index = -1;
	int n;
	int e = gpr__nvml_count(m, &n, err, errlen);
	if (e)
		return e;
	if (!m->api.device_get_uuid) {
		gpr__errf(err, errlen, "%s exports no nvmlDeviceGetUUID",
			  m->path);
		return GPR_E_NOT_FOUND;
	}
	/* a GPU that cannot be queried (lost) is skipped, not fatal */
	for (int i = 0; i < n; i++) {
		nvmlDevice_t dev;
		char u[GPR_NVML_DEVICE_UUID_V2_BUFFER_SIZE];
		if (gpr__nvml_handle(m, i, &dev, NULL, 0) ||
		    text(m, "nvmlDeviceGetUUID", i, m->api.device_get_uuid, dev,
			 u, sizeof u, NULL, 0))
			continue;
		if (strcasecmp(u, uuid) == 0) {
			*index = i;
			return 0;
		}
	}
	gpr__errf(err, errlen, "no NVML GPU has UUID %s", uuid);
	return GPR_E_NOT_FOUND;
}

/*
 * Domain, bus, device, function of "dddd:bb:dd.f" or "dddddddd:bb:dd.f"
 * (CUDA writes a 4-digit domain, NVML an 8-digit one).
 */
static int parse_bus(const char *s, unsigned int v[4])
{
	char tail;
	return sscanf(s, "%x:%x:%x.%x%c", &v[0], &v[1], &v[2], &v[3], &tail) ==
	       4;
}

int gpr__nvml_index_by_pci(struct gpr__nvml *m, const char *bus, int *index,
			   char *err, size_t errlen)
{
	*index = -1;
	unsigned int want[4];
	if (!bus || !parse_bus(bus, want)) {
		gpr__errf(err, errlen, "malformed PCI bus id \"%s\"",
			  bus ? bus : "(null)");
		return GPR_E_INVAL;
	}
	int n;
	int e = gpr__nvml_count(m, &n, err, errlen);
	if (e)
		return e;
	if (!m->api.device_get_pci_info) {
		gpr__errf(err, errlen, "%s exports no nvmlDeviceGetPciInfo_v3",
			  m->path);
		return GPR_E_NOT_FOUND;
	}
	for (int i = 0; i < n; i++) {
		nvmlDevice_t dev;
		gpr_nvmlPciInfo_t pci;
		memset(&pci, 0, sizeof pci);
		if (gpr__nvml_handle(m, i, &dev, NULL, 0) ||
		    m->api.device_get_pci_info(dev, &pci) != NVML_SUCCESS)
			continue;
		pci.busId[sizeof pci.busId - 1] = '\0';
		unsigned int have[4];
		if (parse_bus(pci.busId, have) &&
		    memcmp(have, want, sizeof have) == 0) {
			*index = i;
			return 0;
		}
	}
	gpr__errf(err, errlen, "no NVML GPU has PCI bus id %s", bus);
	return GPR_E_NOT_FOUND;
}
