/*
 * The NVIDIA libraries as the tool reads them itself: the driver's
 * version (NVML) and the CUDA driver API version (libcuda), which the
 * core's API does not give. Each probe loads its library, asks, and
 * unloads it (a library already loaded in the process, as NVML is by
 * `ps`'s handle, only has its counts raised and lowered), unless asked to
 * keep it: `version` ends next, and its exit does that work (cli/util_exit.c
 * hands it to a detached process).
 */
#include "cli.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_abi.h"
#include "nvml_abi.h"

static const char *lib_path(const char *var, const char *dflt)
{
	const char *p = getenv(var);
	return p && *p ? p : dflt;
}

static void *open_lib(struct gpr_cli_probe *p)
{
	dlerror();
	void *lib = dlopen(p->library, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char *e = dlerror();
		snprintf(p->error, sizeof(p->error), "%s",
			 e ? e : "dlopen failed");
	}
	return lib;
}

static void *sym(void *lib, const char *name, struct gpr_cli_probe *p)
{
	dlerror();
	void *s = dlsym(lib, name);
	if (!s)
		snprintf(p->error, sizeof(p->error), "%s: no symbol %s",
			 p->library, name);
	return s;
}

void gpr_cli_probe_nvml(struct gpr_cli_probe *p)
{
	p->library = lib_path("GPURECLAIM_NVML_LIBRARY", "libnvidia-ml.so.1");
	void *lib = open_lib(p);
	if (!lib)
		return;
	nvmlReturn_t (*init)(void) =
	    (nvmlReturn_t(*)(void))sym(lib, "nvmlInit_v2", p);
	nvmlReturn_t (*shutdown)(void) =
	    (nvmlReturn_t(*)(void))sym(lib, "nvmlShutdown", p);
	nvmlReturn_t (*drv)(char *, unsigned int) = (nvmlReturn_t(*)(
	    char *, unsigned int))sym(lib, "nvmlSystemGetDriverVersion", p);
	nvmlReturn_t (*count)(unsigned int *) =
	    (nvmlReturn_t(*)(unsigned int *))sym(lib, "nvmlDeviceGetCount_v2",
						 p);
	const char *(*errstr)(nvmlReturn_t) =
	    (const char *(*)(nvmlReturn_t))dlsym(lib, "nvmlErrorString");
	if (!init || !shutdown || !drv || !count)
		goto out;
	nvmlReturn_t r = init();
	if (r != NVML_SUCCESS) {
		snprintf(p->error, sizeof(p->error), "nvmlInit_v2: %s (%d)",
			 errstr ? errstr(r) : "error", r);
		goto out;
	}
	unsigned int n = 0;
	r = drv(p->version, sizeof(p->version));
	if (r == NVML_SUCCESS)
		r = count(&n);
	if (r == NVML_SUCCESS) {
		p->available = 1;
		p->number = (int)n;
	} else {
		snprintf(p->error, sizeof(p->error), "NVML: %s (%d)",
			 errstr ? errstr(r) : "error", r);
	}
	if (p->keep)
		return; /* initialised and loaded, for the exit to end */
	shutdown();
out:
	dlclose(lib);
}

void gpr_cli_probe_cuda(struct gpr_cli_probe *p)
{
	p->library = lib_path("GPURECLAIM_CUDA_LIBRARY", "libcuda.so.1");
	void *lib = open_lib(p);
	if (!lib)
		return;
	CUresult (*ver)(int *) =
	    (CUresult(*)(int *))sym(lib, "cuDriverGetVersion", p);
	if (ver) {
		int v = 0;
		CUresult r = ver(&v);
		if (r == 0) {
			p->available = 1;
			p->number = v;
			snprintf(p->version, sizeof(p->version), "%d.%d",
				 v / 1000, v % 1000 / 10);
		} else {
			snprintf(p->error, sizeof(p->error),
				 "cuDriverGetVersion: CUresult %d", r);
		}
	}
	if (!p->keep)
		dlclose(lib);
}
