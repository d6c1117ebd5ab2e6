/*
 * gpureclaim: the command-line tool's entry point. Dispatches
 * `gpureclaim <command> [args]` to gpr_cli_<command> (cli/cli.h states the
 * contract); exit 2 on a command it does not know.
 */
#include "cli.h"

#include <malloc.h>
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
		   "    --version      show the version\n"
		   "\n"
		   "EXAMPLES:\n"
		   "    gpureclaim ps                 # who holds memory on "
		   "each GPU\n"
		   "    gpureclaim ps --json -i 0     # GPU 0, as JSON\n"
		   "    gpureclaim help ps            # a command's options\n"
		   "\n"
		   "Exit status: 0 ok, 1 runtime error, 2 bad usage.\n");
}

int main(int argc, char **argv)
{
	/*
	 * Large blocks (a trace's records, the report's maps) straight from
	 * the kernel and back to it when freed: glibc would otherwise raise
	 * this threshold as they are freed and keep later ones in its heap,
	 * where the memory a phase of the report frees stays resident.
	 */
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	if (argc < 2) {
		usage(stderr);
		return GPR_CLI_USAGE;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
		usage(stdout);
		return GPR_CLI_OK;
	}
	if (strcmp(cmd, "--version") == 0) {
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
