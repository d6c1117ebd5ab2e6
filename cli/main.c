/*
 * gpureclaim: the command-line tool's entry point. Dispatches
 * `gpureclaim <command> [args]` to gpr_cli_<command> (cli/cli.h states the
 * contract); exit 2 on a command it does not know. `python -m gpureclaim`
 * runs this same program (python/gpureclaim/__main__.py).
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
    {"top", gpr_cli_top,
     "the GPUs' memory live by part and process; release at a key"},
    {"trace", gpr_cli_trace,
     "run a command and record its GPU allocations and frees"},
    {"report", gpr_cli_report, "summarise a trace log"},
    {"version", gpr_cli_version,
     "show the version, the NVIDIA driver's and what can be loaded"},
    {"explain", gpr_cli_explain,
     "say where a script's or a process's (--pid) GPU memory went"},
    {"release", gpr_cli_cluster,
     "ask a process (--pid) or a Dask cluster to give cached memory back"},
    {"reclaim", gpr_cli_reclaim,
     "ask every process with an agent to give cached memory back"},
    {"suspend", gpr_cli_suspend,
     "move a whole process's GPU memory to host memory (--pid)"},
    {"resume", gpr_cli_resume,
     "bring a suspended process's memory back to its GPU (--pid)"},
    {"agent", gpr_cli_agent,
     "list the agents, or start one in a running process (Python 3.14)"},
    {"demo", gpr_cli_demo,
     "drop Torch and CuPy arrays, release, show the before and after"},
    {"run", gpr_cli_run,
     "run a command with post-mortems or the agent in its Python"},
    {"exporter", gpr_cli_exporter,
     "serve GPU memory per GPU and process as Prometheus metrics"},
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct command *find(const char *name)
{
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

/*
 * The edit distance of a and b (insertions, deletions, substitutions and
 * swaps of two neighbours count one each: "trcae" is 1 from "trace"), for
 * names of at most 31 bytes; 99 for longer ones.
 */
static int distance(const char *a, const char *b)
{
	size_t n = strlen(a), m = strlen(b);
	if (n > 31 || m > 31)
		return 99;
	int d[32][32];
	for (size_t i = 0; i <= n; i++)
		d[i][0] = (int)i;
	for (size_t j = 0; j <= m; j++)
		d[0][j] = (int)j;
	for (size_t i = 1; i <= n; i++) {
		for (size_t j = 1; j <= m; j++) {
			int cost = a[i - 1] != b[j - 1];
			int v = d[i - 1][j - 1] + cost;
			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
			    a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	}
	return d[n][m];
}

/* The command `name` was probably meant to be (two edits at most, and
 * fewer than its length), or NULL. */
static const char *suggestion(const char *name)
{
	static const char *const extra[] = {"help"};
	const char *best = NULL;
	int best_d = 3;
	for (size_t i = 0; i < N_COMMANDS + 1; i++) {
		const char *c = i < N_COMMANDS ? commands[i].name : extra[0];
		int d = distance(name, c);
		if (d < best_d && d < (int)strlen(name)) {
			best = c;
			best_d = d;
		}
	}
	return best;
}

/* The two lines of a command this program does not know: what it is, a
 * guess at what was meant, and where the commands are listed. */
static int unknown_command(const char *name)
{
	const char *guess = suggestion(name);
	if (guess)
		fprintf(stderr,
			"gpureclaim: unknown command '%s' (did you mean "
			"'%s'?)\n",
			name, guess);
	else
		fprintf(stderr, "gpureclaim: unknown command '%s'\n", name);
	fprintf(stderr, "Run 'gpureclaim --help' for the commands.\n");
	return GPR_CLI_USAGE;
}

static void usage(FILE *f)
{
	fprintf(f,
		"USAGE: gpureclaim <command> [options]\n"
		"       gpureclaim help <command>\n"
		"\n"
		"See which processes hold GPU memory, and record where a "
		"program's GPU\n"
		"memory goes. Only the process that holds memory can give it "
		"back, by\n"
		"calling gpureclaim.release_cached_memory() in Python "
		"(docs/python.md)\n"
		"or gpr_release() in C (docs/c-api.md); `release --pid` and "
		"`reclaim` ask\n"
		"processes running the agent to do so (docs/agent.md), "
		"`release --dask`\n"
		"each worker of a Dask cluster.\n"
		"\n"
		"COMMANDS:\n");
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(f, "    %-9s %s\n", commands[i].name,
			commands[i].summary);
	fprintf(f, "    %-9s %s\n", "help", "show a command's options");
	fprintf(f, "\n"
		   "With --dask ADDRESS, ps, explain and release ask every "
		   "worker of a Dask\n"
		   "cluster, each about its own process (docs/cluster.md); "
		   "with --pid N,\n"
		   "explain and release ask process N's agent, and ps "
		   "--explain every agent.\n");
	fprintf(f, "\n"
		   "OPTIONS:\n"
		   "    -h, --help [COMMAND]   show this help, or a command's\n"
		   "    -V, --version          show the version\n"
		   "\n"
		   "EXAMPLES:\n"
		   "    gpureclaim ps                 # who holds memory on "
		   "each GPU\n"
		   "    gpureclaim ps --json -i 0     # GPU 0, as JSON\n"
		   "    gpureclaim trace -- python train.py   # log its "
		   "allocations\n"
		   "    gpureclaim explain train.py   # where the memory went\n"
		   "    gpureclaim help ps            # a command's options\n"
		   "\n"
		   "Exit status: 0 ok, 1 runtime error, 2 bad usage.\n");
}

/*
 * The Python package's forms: `release` (--pid or --dask), `ps` given
 * --dask (a Dask cluster's report), and the help of `ps --explain` (the
 * listing itself is cli/ps_explain.c's). (`explain` goes there anyway.)
 */
static int for_cluster(int argc, char **argv)
{
	if (strcmp(argv[0], "release") == 0)
		return 1;
	if (strcmp(argv[0], "ps") != 0)
		return 0;
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strncmp(argv[i], "--dask", 6) == 0)
			return 1;
	/* ps --explain is this command's (cli/ps_explain.c); its help the
	 * package's */
	int explain = 0, help = 0;
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		explain |= strcmp(argv[i], "--explain") == 0;
		help |= strcmp(argv[i], "-h") == 0 ||
			strcmp(argv[i], "--help") == 0;
	}
	return explain && help;
}

/* The help of command `name` (`gpureclaim help ps`, `gpureclaim --help ps`),
 * the same text as `gpureclaim ps --help`. */
static int command_help(const char *name)
{
	const struct command *c = find(name);
	if (!c)
		return unknown_command(name);
	char *hargv[] = {(char *)c->name, "--help", NULL};
	int rc = gpr_cli_python_help(2, hargv);
	return rc >= 0 ? rc : c->run(2, hargv);
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
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 ||
	    strcmp(cmd, "help") == 0) {
		if (argc > 3) {
			fprintf(stderr,
				"gpureclaim: %s takes one command, not also "
				"'%s'\n"
				"Run 'gpureclaim --help' for the commands.\n",
				cmd, argv[3]);
			return GPR_CLI_USAGE;
		}
		/* `help help`, `help --help`, `--help -h`: this help */
		if (argc == 3 && strcmp(argv[2], "help") != 0 &&
		    strcmp(argv[2], "--help") != 0 &&
		    strcmp(argv[2], "-h") != 0)
			return command_help(argv[2]);
		usage(stdout);
		return GPR_CLI_OK;
	}
	if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
		printf("gpureclaim %s\n", gpr_version());
		return GPR_CLI_OK;
	}
	/* the help of the subcommands Python runs, said here: no --help
	 * needs Python (cli/help_python.c) */
	int help = gpr_cli_python_help(argc - 1, argv + 1);
	if (help >= 0)
		return help;
	/* one process's agent, asked from here: no interpreter's start in
	 * front of it (cli/cmd_agent.c) */
	if ((strcmp(cmd, "release") == 0 || strcmp(cmd, "explain") == 0) &&
	    gpr_cli_has_pid(argc - 1, argv + 1))
		return gpr_cli_agent_ask(argc - 1, argv + 1);
	if (for_cluster(argc - 1, argv + 1))
		return gpr_cli_cluster(argc - 1, argv + 1);
	const struct command *c = find(cmd);
	if (!c && cmd[0] == '-') {
		fprintf(stderr,
			"gpureclaim: unknown option '%s'\n"
			"Run 'gpureclaim --help' for the commands.\n",
			cmd);
		return GPR_CLI_USAGE;
	}
	if (!c)
		return unknown_command(cmd);
	return c->run(argc - 1, argv + 1);
}
