/*
 * gpureclaim: the command-line tool's entry point. Dispatches
 * `gpureclaim <command> [args]` to gpr_cli_<command> (cli/cli.h states the
 * contract); exit 2 on a command it does not know. `python -m gpureclaim`
 * runs this same program (python/gpureclaim/__main__.py).
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#include "gpureclaim.h"

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static const struct command commands[] = {
    {"ps", gpr_cli_ps, "list the processes holding memory on each GPU"},
    {"trace", gpr_cli_trace,
     "run a command and record its GPU allocations and frees"},
    {"report", gpr_cli_report, "summarise a trace log"},
    {"version", gpr_cli_version,
     "show the version, the NVIDIA driver's and what can be loaded"},
    {"explain", gpr_cli_explain,
     "run a Python script, then say where its GPU memory went"},
    {"demo", gpr_cli_demo,
     "drop Torch and CuPy arrays, release, show the before and after"},
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct command *find(const char *name)
{
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f, "USAGE: gpureclaim <command> [options]\n"
		   "\n"
		   "See and give back the GPU memory of processes.\n"
		   "\n"
		   "COMMANDS:\n");
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(f, "    %-9s %s\n", commands[i].name,
			commands[i].summary);
	fprintf(f, "\n"
		   "OPTIONS:\n"
		   "    -h, --help     show this help\n"
		   "    -V, --version  show the version\n"
		   "\n"
		   "EXAMPLES:\n"
		   "    gpureclaim ps                 # who holds memory on "
		   "each GPU\n"
		   "    gpureclaim ps --json -i 0     # GPU 0, as JSON\n"
		   "    gpureclaim trace -- python train.py\n"
		   "    gpureclaim explain train.py   # where the memory went\n"
		   "    gpureclaim help ps            # a command's options\n"
		   "\n"
		   "Exit status: 0 ok, 1 runtime error, 2 bad usage.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return GPR_CLI_USAGE;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
		usage(stdout);
		return GPR_CLI_OK;
	}
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
		printf("gpureclaim %s\n", gpr_version());
		return GPR_CLI_OK;
	}
	if (strcmp(cmd, "help") == 0) {
		if (argc < 3) {
			usage(stdout);
			return GPR_CLI_OK;
		}
		const struct command *c = find(argv[2]);
		if (!c) {
			fprintf(stderr,
				"gpureclaim: unknown command '%s' (see "
				"'gpureclaim --help')\n",
				argv[2]);
			return GPR_CLI_USAGE;
		}
		char *hargv[] = {(char *)c->name, "--help", NULL};
		return c->run(2, hargv);
	}
	const struct command *c = find(cmd);
	if (!c) {
		if (cmd[0] == '-')
			fprintf(stderr, "gpureclaim: unknown option '%s'\n",
				cmd);
		else
			fprintf(stderr, "gpureclaim: unknown command '%s'\n",
				cmd);
		fprintf(stderr, "Run 'gpureclaim --help' for the commands.\n");
		return GPR_CLI_USAGE;
	}
	return c->run(argc - 1, argv + 1);
}
