/*
 * Where the time of one `gpureclaim ps` goes: each NVML step it takes,
 * timed alone in a fresh process (dlopen, nvmlInit_v2, the device calls,
 * the process lists, nvmlShutdown). Run on the GPU machine:
 * build/bench/nvml_cost [noattach] [parallel]. With "parallel" the first
 * handle of every GPU (which attaches it) is taken in a thread per GPU, at
 * once, as `gpureclaim ps` does: compare its wall time with the sum of
 * the "first handle" steps of a run without it. Skips (exit 0) without
 * NVML.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "driver/nvml_abi.h"

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

#define STEP(label, expr)                                                      \
	do {                                                                   \
		double t0_ = now_ms();                                         \
		int r_ = (int)(expr);                                          \
		printf("%-44s %8.3f ms  (rc %d)\n", label, now_ms() - t0_,     \
		       r_);                                                    \
	} while (0)

static nvmlReturn_t (*handle_fn)(unsigned, nvmlDevice_t *);

static void *attach(void *arg)
{
	nvmlDevice_t d;
	handle_fn((unsigned)(size_t)arg, &d);
	return NULL;
}

int main(int argc, char **argv)
{
	/* "noattach": nvmlInitWithFlags(NVML_INIT_FLAG_NO_ATTACH = 2) */
	int noattach = 0, parallel = 0;
	for (int i = 1; i < argc; i++) {
		noattach |= strcmp(argv[i], "noattach") == 0;
		parallel |= strcmp(argv[i], "parallel") == 0;
	}
	double start = now_ms();
	void *lib = NULL;
	STEP("dlopen libnvidia-ml.so.1",
	     (lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) ==
		 NULL);
	if (!lib) {
		printf("skipped: no NVML (%s)\n", dlerror());
		return 0;
	}
	nvmlReturn_t (*init)(void) =
	    (nvmlReturn_t(*)(void))dlsym(lib, "nvmlInit_v2");
	nvmlReturn_t (*shut)(void) =
	    (nvmlReturn_t(*)(void))dlsym(lib, "nvmlShutdown");
	nvmlReturn_t (*count)(unsigned *) =
	    (nvmlReturn_t(*)(unsigned *))dlsym(lib, "nvmlDeviceGetCount_v2");
	nvmlReturn_t (*handle)(unsigned, nvmlDevice_t *) =
	    (nvmlReturn_t(*)(unsigned, nvmlDevice_t *))dlsym(
		lib, "nvmlDeviceGetHandleByIndex_v2");
	nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned) = (nvmlReturn_t(*)(
	    nvmlDevice_t, char *, unsigned))dlsym(lib, "nvmlDeviceGetName");
	nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned) = (nvmlReturn_t(*)(
	    nvmlDevice_t, char *, unsigned))dlsym(lib, "nvmlDeviceGetUUID");
	nvmlReturn_t (*pci)(nvmlDevice_t, gpr_nvmlPciInfo_t *) =
	    (nvmlReturn_t(*)(nvmlDevice_t, gpr_nvmlPciInfo_t *))dlsym(
		lib, "nvmlDeviceGetPciInfo_v3");
	nvmlReturn_t (*mem)(nvmlDevice_t, gpr_nvmlMemory_v2_t *) =
	    (nvmlReturn_t(*)(nvmlDevice_t, gpr_nvmlMemory_v2_t *))dlsym(
		lib, "nvmlDeviceGetMemoryInfo_v2");
	nvmlReturn_t (*mig)(nvmlDevice_t, unsigned *, unsigned *) =
	    (nvmlReturn_t(*)(nvmlDevice_t, unsigned *, unsigned *))dlsym(
		lib, "nvmlDeviceGetMigMode");
	nvmlReturn_t (*procs)(nvmlDevice_t, unsigned *, void *) =
	    (nvmlReturn_t(*)(nvmlDevice_t, unsigned *, void *))dlsym(
		lib, "nvmlDeviceGetComputeRunningProcesses_v3");
	nvmlReturn_t (*gprocs)(nvmlDevice_t, unsigned *, void *) =
	    (nvmlReturn_t(*)(nvmlDevice_t, unsigned *, void *))dlsym(
		lib, "nvmlDeviceGetGraphicsRunningProcesses_v3");
	if (!init || !shut || !count || !handle || !name || !uuid || !pci ||
	    !mem || !mig || !procs || !gprocs) {
		printf("skipped: NVML lacks a symbol this tool times\n");
		return 0;
	}
	nvmlReturn_t (*initf)(unsigned) =
	    (nvmlReturn_t(*)(unsigned))dlsym(lib, "nvmlInitWithFlags");
	if (noattach && initf)
		STEP("nvmlInitWithFlags(NO_ATTACH)", initf(2));
	else
		STEP("nvmlInit_v2", init());
	unsigned n = 0;
	STEP("nvmlDeviceGetCount_v2", count(&n));
	if (parallel && n > 0) {
		pthread_t th[64];
		unsigned k = n < 64 ? n : 64;
		handle_fn = handle;
		double t0 = now_ms();
		for (unsigned i = 0; i < k; i++)
			pthread_create(&th[i], NULL, attach, (void *)(size_t)i);
		for (unsigned i = 0; i < k; i++)
			pthread_join(th[i], NULL);
		printf("%-44s %8.3f ms  (%u GPUs)\n",
		       "first handles, a thread per GPU, at once",
		       now_ms() - t0, k);
	}
	for (unsigned i = 0; i < n; i++) {
		nvmlDevice_t d;
		char buf[96];
		gpr_nvmlPciInfo_t pi;
		gpr_nvmlMemory_v2_t m = {0};
		m.version = GPR_NVML_STRUCT_VERSION(gpr_nvmlMemory_v2_t, 2);
		unsigned cur, pend, cnt = 64;
		gpr_nvmlProcessInfo_cc_t rec[64];
		printf("GPU %u\n", i);
		STEP("  nvmlDeviceGetHandleByIndex_v2", handle(i, &d));
		STEP("  nvmlDeviceGetName", name(d, buf, sizeof buf));
		STEP("  nvmlDeviceGetUUID", uuid(d, buf, sizeof buf));
		STEP("  nvmlDeviceGetPciInfo_v3", pci(d, &pi));
		STEP("  nvmlDeviceGetMemoryInfo_v2", mem(d, &m));
		STEP("  nvmlDeviceGetMigMode", mig(d, &cur, &pend));
		STEP("  nvmlDeviceGetComputeRunningProcesses_v3",
		     procs(d, &cnt, rec));
		cnt = 64;
		STEP("  nvmlDeviceGetGraphicsRunningProcesses_v3",
		     gprocs(d, &cnt, rec));
	}
	STEP("nvmlShutdown", shut());
	printf("%-44s %8.3f ms\n", "total", now_ms() - start);
	return 0;
}
