/*
 * `gpureclaim version`: our version, and what this machine's NVIDIA
 * driver offers. Never fails for want of a driver: a missing library is
 * an answer ("not found"), not an error.
 *
 * The driver version is not part of the library's API, so this file
 * reads it itself, cheaply: NVML's nvmlSystemGetDriverVersion and
 * libcuda's cuDriverGetVersion (which needs no cuInit and opens no
 * context). Both libraries are loaded and unloaded here only.
 */
#include "cli.h"

#include <dlfcn.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_abi.h"
#include "gpureclaim.h"
#include "nvml_abi.h"
#include "out/buf.h"
#include "out/json.h"

static struct env {
	int json; /* --json: one JSON document */
} env = {
    .json = 0,
};

static const char usage_text[] =
    "USAGE: gpureclaim version [--json]\n"
    "\n"
    "Show gpureclaim's version, the NVIDIA driver's version (through\n"
    "NVML) and the CUDA driver API version (libcuda), or why they\n"
    "cannot be read. Honours GPURECLAIM_NVML_LIBRARY and\n"
    "GPURECLAIM_CUDA_LIBRARY.\n"
    "\n"
    "OPTIONS:\n"
    "    --json      one JSON document\n"
    "    -h, --help  show this help\n"
    "\n"
    "EXAMPLES:\n"
    "    gpureclaim version\n"
    "    gpureclaim version --json | jq -r .nvml.driver_version\n"
    "\n"
    "Exit status: 0 (also without a driver), 2 bad usage.\n";

struct probe {
	const char *library; /* the path or soname tried */
	int available;
	char version[96]; /* NVML: "580.65.06"; CUDA: "13.0" */
	int number;	  /* NVML: GPU count; CUDA: cuDriverGetVersion */
	char error[512];  /* why not available */
};

static const char *lib_path(const char *var, const char *dflt)
{
	const char *p = getenv(var);
	return p && *p ? p : dflt;
}

static void *open_lib(struct probe *p)
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

static void *sym(void *lib, const char *name, struct probe *p)
{
	dlerror();
	void *s = dlsym(lib, name);
	if (!s)
		snprintf(p->error, sizeof(p->error), "%s: no symbol %s",
			 p->library, name);
	return s;
}

static void probe_nvml(struct probe *p)
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
	shutdown();
out:
	dlclose(lib);
}

static void probe_cuda(struct probe *p)
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
	dlclose(lib);
}

static void json_probe(struct gpr__json *j, const char *key,
		       const struct probe *p, const char *number_key)
{
	gpr__json_key(j, key);
	gpr__json_object(j);
	gpr__json_kv_bool(j, "available", p->available);
	gpr__json_kv_str(j, "library", p->library);
	gpr__json_kv_str(j, "version", p->available ? p->version : NULL);
	gpr__json_key(j, number_key);
	if (p->available)
		gpr__json_i64(j, p->number);
	else
		gpr__json_null(j);
	gpr__json_kv_str(j, "error", p->available ? NULL : p->error);
	gpr__json_object_end(j);
}

int gpr_cli_version(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	opterr = 0;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			env.json = 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return GPR_CLI_OK;
		default:
			fprintf(stderr,
				"gpureclaim version: unknown option '%s'\n"
				"Run 'gpureclaim version --help' for the "
				"options.\n",
				argv[optind - 1]);
			return GPR_CLI_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr,
			"gpureclaim version: unexpected argument '%s'\n",
			argv[optind]);
		return GPR_CLI_USAGE;
	}

	struct probe nvml = {0}, cuda = {0};
	probe_nvml(&nvml);
	probe_cuda(&cuda);

	struct gpr__buf b = {0};
	if (env.json) {
		struct gpr__json j;
		gpr__json_init(&j, &b);
		gpr__json_object(&j);
		gpr__json_kv_str(&j, "version", gpr_version());
		json_probe(&j, "nvml", &nvml, "gpus");
		json_probe(&j, "cuda", &cuda, "driver_api");
		gpr__json_object_end(&j);
		gpr__buf_puts(&b, "\n");
	} else {
		gpr__buf_printf(&b, "gpureclaim %s\n", gpr_version());
		if (nvml.available)
			gpr__buf_printf(
			    &b, "NVIDIA driver: %s (NVML %s, %d GPU%s)\n",
			    nvml.version, nvml.library, nvml.number,
			    nvml.number == 1 ? "" : "s");
		else
			gpr__buf_printf(&b, "NVIDIA driver: not found (%s)\n",
					nvml.error);
		if (cuda.available)
			gpr__buf_printf(&b, "CUDA driver API: %s (%s)\n",
					cuda.version, cuda.library);
		else
			gpr__buf_printf(&b, "CUDA driver API: not found (%s)\n",
					cuda.error);
	}
	int code = GPR_CLI_OK;
	if (b.oom || gpr__buf_write(&b, stdout) != 0) {
		fprintf(stderr,
			"gpureclaim version: cannot write the output\n");
		code = GPR_CLI_ERROR;
	}
	gpr__buf_free(&b);
	return code;
}
