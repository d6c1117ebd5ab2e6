/*
 * The NVIDIA libraries as `gpureclaim version` reads them: the driver's
 * version and GPU count (NVML) and the CUDA driver API version (libcuda),
 * which the core's API does not give. Both go through the core's driver
 * layer (src/driver/), so the command loads each library by the same rule
 * and with the same symbol tables as the library does. Each probe loads
 * its library, asks, and unloads it, unless asked to keep it: `version`
 * ends next, and its exit does that work (cli/util_exit.c hands it to a
 * detached process).
 */
#include "cli.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"

/* The driver layer's handles, kept by a probe with p->keep until the
 * exit (reachable here, for leak checkers). */
static struct gpr__nvml kept_nvml;
static struct gpr__cuda kept_cuda;

void gpr_cli_probe_nvml(struct gpr_cli_probe *p)
{
	struct gpr__nvml *m = &kept_nvml;
	p->library = gpr__nvml_library(NULL);
	int rc = gpr__nvml_open(m, NULL, p->error, sizeof(p->error));
	if (rc)
		return;
	int n = 0;
	rc = gpr__nvml_driver_version(m, p->version, sizeof(p->version),
				      p->error, sizeof(p->error));
	if (rc == 0)
		rc = gpr__nvml_count(m, &n, p->error, sizeof(p->error));
	if (rc == 0) {
		p->available = 1;
		p->number = n;
	}
	if (!p->keep)
		gpr__nvml_close(m);
}

void gpr_cli_probe_cuda(struct gpr_cli_probe *p)
{
	struct gpr__cuda *c = &kept_cuda;
	p->library = gpr__cuda_library(NULL);
	int rc = gpr__cuda_load(c, NULL, p->error, sizeof(p->error));
	if (rc)
		return;
	int v = 0;
	rc = gpr__cuda_driver_version(c, &v, p->error, sizeof(p->error));
	if (rc == 0) {
		p->available = 1;
		p->number = v;
		snprintf(p->version, sizeof(p->version), "%d.%d", v / 1000,
			 v % 1000 / 10);
	}
	if (!p->keep)
		gpr__cuda_close(c);
}

/* path as the user can type it from the current folder: relative when
 * below it, else whole */
static const char *typed(const char *path, const char *cwd)
{
	size_t n = strlen(cwd);
	if (n > 1 && strncmp(path, cwd, n) == 0 && path[n] == '/')
		return path + n + 1;
	return path;
}

void gpr_cli_sim_hint(void)
{
	if (getenv("GPURECLAIM_NVML_LIBRARY"))
		return; /* a library named by the user: no guess */
	char build[PATH_MAX], sim[PATH_MAX + 32], cwd[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", build, sizeof(build) - 1);
	if (n <= 0)
		return;
	build[n] = '\0';
	/* a build folder's command: <build>/cli/gpureclaim */
	char *slash = strrchr(build, '/');
	if (!slash || slash - build < 4 || strncmp(slash - 4, "/cli", 4) != 0)
		return;
	slash[-4] = '\0';
	snprintf(sim, sizeof(sim), "%s/sim/libnvidia-ml.so.1", build);
	if (access(sim, R_OK) != 0)
		return;
	if (!getcwd(cwd, sizeof(cwd)))
		cwd[0] = '\0';
	const char *b = typed(build, cwd);
	fprintf(stderr,
		"gpureclaim: no GPU driver here; this build's simulated "
		"driver (the one make demo runs on) lists its GPUs with: "
		"GPURECLAIM_SIM='gpus=2;extra=0:1:3GiB' LD_LIBRARY_PATH=%s/sim "
		"%s/cli/gpureclaim ps (docs/sim.md)\n",
		b, b);
}
