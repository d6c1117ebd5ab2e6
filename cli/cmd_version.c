/*
 * `gpureclaim version`: our version, and what this machine's NVIDIA
 * driver offers (cli/util_driver.c reads it through the core's driver
 * layer). Never fails for want of a
 * driver: a missing library is an answer ("not found"), not an error.
 * Like a one-shot `ps`, it leaves NVML and libcuda loaded and returns to
 * the shell once its output is written, their release left to a
 * detached process (cli/util_exit.c).
 */
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpureclaim.h"
#include "out/buf.h"
#include "out/json.h"
#include "out/text.h"

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
    "    gpureclaim version --json | jq -r .nvml.version\n"
    "\n"
    "Exit status: 0 (also without a driver), 2 bad usage.\n";

static void json_probe(struct gpr__json *j, const char *key,
		       const struct gpr_cli_probe *p, const char *number_key)
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

	struct gpr_cli_probe nvml = {.keep = 1}, cuda = {.keep = 1};
	gpr_cli_probe_nvml(&nvml);
	gpr_cli_probe_cuda(&cuda);

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
		/* the vendors' strings (versions, paths, messages) may hold
		 * any byte: shown by the terminal-safe rule */
		gpr__buf_printf(&b, "gpureclaim %s\n", gpr_version());
		gpr__buf_puts(&b, "NVIDIA driver: ");
		if (nvml.available) {
			gpr__text_put(&b, nvml.version, 0, 0);
			gpr__buf_puts(&b, " (NVML ");
			gpr__text_put(&b, nvml.library, 0, 0);
			gpr__buf_printf(&b, ", %d GPU%s)\n", nvml.number,
					nvml.number == 1 ? "" : "s");
		} else {
			gpr__buf_puts(&b, "not found (");
			gpr__text_put(&b, nvml.error, 0, 0);
			gpr__buf_puts(&b, ")\n");
		}
		gpr__buf_puts(&b, "CUDA driver API: ");
		if (cuda.available) {
			gpr__text_put(&b, cuda.version, 0, 0);
			gpr__buf_puts(&b, " (");
			gpr__text_put(&b, cuda.library, 0, 0);
			gpr__buf_puts(&b, ")\n");
		} else {
			gpr__buf_puts(&b, "not found (");
			gpr__text_put(&b, cuda.error, 0, 0);
			gpr__buf_puts(&b, ")\n");
		}
	}
	int code = GPR_CLI_OK;
	if (b.oom || gpr__buf_write(&b, stdout) != 0) {
		fprintf(stderr,
			"gpureclaim version: cannot write the output\n");
		code = GPR_CLI_ERROR;
	}
	gpr__buf_free(&b);
	return gpr_cli_end(code, GPR_CLI_END_DETACH);
}
