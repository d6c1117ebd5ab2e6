/*
 * The help of the subcommands that live in the Python package (explain,
 * release, reclaim, agent, ps --explain, the --dask reports, demo, run,
 * exporter): here, so that `--help` never needs Python (a build folder's
 * command, a Python without the package). `python -m gpureclaim ... --help`
 * prints it through this command too: one text, whichever way it is asked.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const char explain_help[] =
    "USAGE: gpureclaim explain [--holders] [--json] SCRIPT [ARGS...]\n"
    "       gpureclaim explain --pid N [--json] [--holders] [--timeout "
    "SECONDS]\n"
    "       gpureclaim explain --dask ADDRESS [--workers ADDR...]\n"
    "                          [--timeout SECONDS] [--json]\n"
    "\n"
    "Run the Python script SCRIPT (sys.argv = [SCRIPT, ARGS...]) and print\n"
    "gpureclaim.explain() when it ends (also after an exception) and on "
    "SIGUSR1\n"
    "while it runs: where this process's GPU memory goes. With --pid, ask\n"
    "running process N's agent instead (docs/agent.md; `gpureclaim explain\n"
    "--pid N --help`); with --dask, every worker of a Dask cluster, each "
    "about\n"
    "its own process (docs/cluster.md).\n"
    "\n"
    "OPTIONS:\n"
    "    --holders           also name who holds the largest live arrays\n"
    "                        (explain(holders=True): the script's globals,\n"
    "                        its traceback's frames, threads)\n"
    "    --json              the explanation as one JSON document (exact\n"
    "                        bytes), after what the script printed\n"
    "    --pid N             a process running the agent (with it: --json,\n"
    "                        --holders, --timeout)\n"
    "    --dask ADDRESS      a Dask scheduler, e.g. tcp://host:8786 (with it:\n"
    "                        --workers, --timeout and --json, as for\n"
    "                        `gpureclaim release --dask`)\n"
    "    -h, --help          show this help\n"
    "\n"
    "EXAMPLES:\n"
    "    gpureclaim explain train.py --epochs 1\n"
    "    gpureclaim explain --holders train.py\n"
    "    gpureclaim explain --json train.py | tail -1 | jq '.gpus[0].parts'\n"
    "    kill -USR1 <pid>            # an explanation now, the script goes on\n"
    "    gpureclaim explain --pid 4242\n"
    "    gpureclaim explain --dask tcp://10.0.0.5:8786 --timeout 10\n"
    "\n"
    "Exit status: the script's (1 if it raised), 2 bad usage (a SCRIPT that\n"
    "cannot be read included).\n";

static const char explain_pid_help[] =
    "USAGE: gpureclaim explain --pid N [--json] [--holders] [--timeout "
    "SECONDS]\n"
    "\n"
    "Ask process N's agent where its GPU memory goes: its own\n"
    "gpureclaim.explain(), as if it had called it (docs/agent.md). The "
    "process\n"
    "must run the agent (gpureclaim.agent.start(), GPURECLAIM_AGENT=1,\n"
    "`gpureclaim run --agent`, %load_ext gpureclaim) and be this user's (any\n"
    "user's, as root).\n"
    "\n"
    "OPTIONS:\n"
    "    --pid N             the process\n"
    "    --json              explain()'s JSON (exact bytes), as the process\n"
    "                        writes it\n"
    "    --holders           also what holds the memory, where that process's\n"
    "                        explain() can say (explain(holders=True))\n"
    "    --timeout SECONDS   the longest to wait for the answer (default 10)\n"
    "    -h, --help          show this help\n"
    "\n"
    "EXAMPLES:\n"
    "    gpureclaim explain --pid 4242\n"
    "    gpureclaim explain --pid 4242 --json | jq '.gpus[0].parts'\n"
    "\n"
    "Exit status: 0 answered, 1 the process could not be asked or its request\n"
    "failed (one line says why: no agent, refused, timeout, died, bad "
    "answer),\n"
    "2 bad usage.\n";

static const char release_help[] =
    "USAGE: gpureclaim release --pid N [--workspaces] [--collect WHEN]\n"
    "                          [--json] [--timeout SECONDS]\n"
    "       gpureclaim release --dask ADDRESS [--workers ADDR...]\n"
    "                          [--workspaces] [--collect WHEN]\n"
    "                          [--timeout SECONDS] [--json]\n"
    "\n"
    "Ask process N's agent to give its cached GPU memory back: its own\n"
    "gpureclaim.release(), as if it had called it; the bytes are the drop in\n"
    "the driver's figure for that process, exact (docs/agent.md). With "
    "--dask,\n"
    "every worker of a Dask cluster instead, each about its own process\n"
    "(docs/cluster.md; `gpureclaim release --dask ADDRESS --help`).\n"
    "\n"
    "OPTIONS:\n"
    "    --pid N             the process (it runs the agent: docs/agent.md)\n"
    "    --workspaces        also free Torch's cuBLAS workspaces\n"
    "    --collect WHEN      when it runs gc.collect(): auto (the default: "
    "only\n"
    "                        when live bytes remain), always, never\n"
    "    --json              release()'s JSON report (exact bytes)\n"
    "    --timeout SECONDS   the longest to wait for the answer (default 30)\n"
    "    --dask ADDRESS      a Dask scheduler, e.g. tcp://host:8786, instead\n"
    "    -h, --help          show this help\n"
    "\n"
    "EXAMPLES:\n"
    "    gpureclaim release --pid 4242\n"
    "    gpureclaim release --pid 4242 --workspaces --json | jq .released\n"
    "    gpureclaim release --dask tcp://10.0.0.5:8786\n"
    "\n"
    "Exit status: 0 answered, 1 the process could not be asked or its request\n"
    "failed (one line says why: no agent, refused, timeout, died, bad "
    "answer),\n"
    "2 bad usage.\n";

static const char reclaim_help[] =
    "USAGE: gpureclaim reclaim [--gpu INDEX] [--min SIZE] [--dry-run] "
    "[--json]\n"
    "                          [--timeout SECONDS]\n"
    "                          [--idle DURATION [--target SIZE|PERCENT%]]\n"
    "\n"
    "Ask every process of this user with an agent (every process, as root) to\n"
    "give its cached GPU memory back, all at once, and print what it "
    "released,\n"
    "exactly, per process and per GPU; then the processes on the GPUs that\n"
    "have no agent or did not answer, and why (docs/agent.md).\n"
    "\n"
    "With --idle, the node's policy (docs/suspend.md): then, on each GPU, the\n"
    "processes idle for at least DURATION (no GPU work in NVML's samples) are\n"
    "suspended, the largest first, each resumed at its next CUDA call, and\n"
    "with --target only until the GPU's used memory is at or below SIZE or\n"
    "PERCENT of it. A process opts out with GPURECLAIM_SUSPEND=never in its\n"
    "environment. Every action goes into the log with its exact bytes.\n"
    "\n"
    "OPTIONS:\n"
    "    -i, --gpu INDEX     only GPU INDEX (NVML's index, as ps lists it)\n"
    "    --min SIZE          only processes with at least SIZE releasable\n"
    "                        (e.g. 512MiB, 2GiB; each is asked first)\n"
    "    --dry-run           ask what each has releasable; release nothing;\n"
    "                        with --idle: what would be suspended, and why\n"
    "    --json              one JSON document (exact bytes)\n"
    "    --timeout SECONDS   the longest each process may take (default 30)\n"
    "    --idle DURATION     then suspend the processes idle that long\n"
    "                        (30m, 2h, 1d; seconds without a unit)\n"
    "    --target SIZE|PERCENT%\n"
    "                        only as far as each GPU's used memory is above\n"
    "                        it (8GiB, 50%)\n"
    "    -h, --help          show this help\n"
    "\n"
    "EXAMPLES:\n"
    "    gpureclaim reclaim\n"
    "    gpureclaim reclaim --gpu 0 --min 1GiB\n"
    "    gpureclaim reclaim --dry-run --json | jq '.total'\n"
    "    gpureclaim reclaim --idle 2h --dry-run\n"
    "    gpureclaim reclaim --idle 2h --target 50%   # from cron, every few "
    "minutes\n"
    "\n"
    "Exit status: 0 every agent answered (and every suspend worked), 1\n"
    "runtime error or a suspend that failed, 2 bad usage, 3 some agents did\n"
    "not answer (listed with the reason).\n";

static const char agent_help[] =
    "USAGE: gpureclaim agent start --pid N [--timeout SECONDS]\n"
    "       gpureclaim agent list [--json]\n"
    "\n"
    "start: start the agent in running process N, which never opted in,\n"
    "through sys.remote_exec (PEP 768: the process runs Python 3.14 or newer;\n"
    "the kernel's ptrace rules apply). Where this command's Python is another\n"
    "version, the process's own interpreter sends it. The process runs it in\n"
    "its main thread at its next Python bytecode; an idle Jupyter kernel is\n"
    "woken for it. list: the agents this user may ask (every user's, as "
    "root),\n"
    "with what each runs.\n"
    "\n"
    "OPTIONS:\n"
    "    --pid N             the process to start the agent in\n"
    "    --timeout SECONDS   how long to wait for its socket (default 10)\n"
    "    --json              the list as one JSON document\n"
    "    -h, --help          show this help\n"
    "\n"
    "EXAMPLES:\n"
    "    gpureclaim agent list\n"
    "    gpureclaim agent start --pid 4242\n"
    "\n"
    "Exit status: 0 ok, 1 the agent could not be started or asked, 2 bad\n"
    "usage.\n";

static const char ps_explain_help[] =
    "USAGE: gpureclaim ps --explain [-i INDEX]... [--json] [--timeout "
    "SECONDS]\n"
    "\n"
    "The rows of `gpureclaim ps`, and under each process that runs the agent\n"
    "its parts (live, releasable, not releasable, workspaces, pools, rest), "
    "as\n"
    "its own explain() says; per GPU, what is releasable: what a release of\n"
    "every process would give back (docs/agent.md). The processes are asked\n"
    "in parallel.\n"
    "\n"
    "OPTIONS:\n"
    "    --explain           ask the agents\n"
    "    -i, --gpu INDEX     only GPU INDEX (repeat it, or a comma list)\n"
    "    --json              ps's JSON document, each process with \"agent\" "
    "and\n"
    "                        each GPU with \"releasable\"\n"
    "    --timeout SECONDS   the longest each process may take (default 5)\n"
    "    -h, --help          show this help\n"
    "\n"
    "EXAMPLES:\n"
    "    gpureclaim ps --explain\n"
    "    gpureclaim ps --explain --json | jq '.gpus[].releasable'\n"
    "\n"
    "Exit status: 0 ok, 1 runtime error (no NVIDIA driver), 2 bad usage.\n";

static const char demo_help[] =
    "USAGE: gpureclaim demo\n"
    "\n"
    "Drop a 1 GiB Torch tensor held in a reference cycle and a 1 GiB CuPy "
    "array,\n"
    "then compare torch.cuda.empty_cache() + CuPy's free_all_blocks() with\n"
    "gpureclaim.release_cached_memory(): what each releases to the driver.\n"
    "Needs Torch and CuPy on a CUDA GPU (`make demo` in a source checkout runs "
    "it\n"
    "on the simulated driver).\n"
    "\n"
    "OPTIONS:\n"
    "    -h, --help          show this help\n"
    "\n"
    "Exit status: 0 ok, 1 something missing or failed (one line says what), 2 "
    "bad\n"
    "usage.\n";

static const char run_help[] =
    "USAGE: gpureclaim run [--oom[=PATH]] [--agent] [--resume-on-demand]\n"
    "                      -- CMD [ARGS...]\n"
    "\n"
    "Run CMD with gpureclaim started in each of its processes, through the\n"
    "environment (GPURECLAIM_OOM, GPURECLAIM_AGENT, LD_PRELOAD) and a\n"
    "startup hook, with no change to its code.\n"
    "\n"
    "OPTIONS:\n"
    "    --oom[=PATH]    on every out-of-memory error of Torch, CuPy or JAX, "
    "a\n"
    "                    post-mortem: a short text on stderr and a JSON file,\n"
    "                    gpureclaim-oom-<pid>-<n>.json in the current folder,\n"
    "                    or in PATH when it is a folder, else PATH itself "
    "(then\n"
    "                    PATH-2, ...); never replacing a file\n"
    "    --agent         the agent in each Python process: this user (and "
    "root)\n"
    "                    may then ask it from outside, `gpureclaim explain "
    "--pid\n"
    "                    N`, `release --pid N`, `reclaim` (docs/agent.md)\n"
    "    --resume-on-demand\n"
    "                    gpureclaim's interposer in front of the CUDA driver\n"
    "                    of every process (Python or not): once suspended\n"
    "                    (`gpureclaim suspend`), its next driver call has it\n"
    "                    resumed at once, without waiting for the watcher's\n"
    "                    look at its threads (docs/suspend.md)\n"
    "    -h, --help      show this help\n"
    "\n"
    "EXAMPLES:\n"
    "    gpureclaim run --oom -- python train.py --epochs 3\n"
    "    gpureclaim run --agent -- python serve.py\n"
    "    gpureclaim run --oom=/tmp/oom/ -- torchrun --nproc-per-node 8 "
    "train.py\n"
    "    gpureclaim run --agent --resume-on-demand -- jupyter lab\n"
    "    gpureclaim report gpureclaim-oom-1234-1.json\n"
    "\n"
    "Exit status: CMD's; 127 when CMD cannot be run, 2 bad usage.\n";

static const char exporter_help[] =
    "USAGE: gpureclaim exporter [--listen HOST:PORT] [--interval SECONDS]\n"
    "                           [--agent-timeout SECONDS] [--once [--json]]\n"
    "\n"
    "Serve the GPU memory of this host as Prometheus metrics on\n"
    "http://HOST:PORT/metrics: per GPU its total, used and free bytes; per\n"
    "process on it its driver bytes, user, command and container; for each\n"
    "process with an agent its parts as its own explain() splits them, what\n"
    "release() would give back included (kind=\"releasable\"). Needs\n"
    "prometheus_client: pip install 'gpureclaim[prometheus]'.\n"
    "\n"
    "OPTIONS:\n"
    "    --listen HOST:PORT  where to serve (default 127.0.0.1:9835, this\n"
    "                        machine only; [::1]:9835 for IPv6; port 0: any\n"
    "                        free port). Another address is printed at start\n"
    "    --interval SECONDS  take a reading every SECONDS (default 10); a\n"
    "                        scrape serves the latest\n"
    "    --agent-timeout SECONDS\n"
    "                        how long one agent may take to answer (default "
    "2)\n"
    "    --once              print one reading's metrics and exit\n"
    "    --json              with --once: the reading as JSON instead\n"
    "    -h, --help          show this help\n"
    "\n"
    "EXAMPLES:\n"
    "    gpureclaim exporter\n"
    "    gpureclaim exporter --listen 0.0.0.0:9835 --interval 15\n"
    "    gpureclaim exporter --once | promtool check metrics\n"
    "\n"
    "Exit status: 0 ok (stopped by SIGTERM or SIGINT), 1 cannot serve or\n"
    "prometheus_client missing, 2 bad usage.\n";

/* The --dask reports' help (gpureclaim/_commands/cluster.py): the same options
 * and ending for ps, explain and release, release's two more. */
static const char dask_common[] =
    "OPTIONS:\n"
    "    --dask ADDRESS      the Dask scheduler, e.g. tcp://host:8786\n"
    "    --workers ADDR...   only these workers (addresses); default: all\n"
    "    --timeout SECONDS   to connect, and for each worker to answer "
    "(default 30)\n"
    "    --json              the report as one JSON document (exact "
    "bytes)\n";

static const char dask_release[] =
    "    --collect WHEN      when each worker runs gc.collect(): auto (the "
    "default:\n"
    "                        only when live bytes remain after its caches "
    "were\n"
    "                        emptied), always, never\n"
    "    --workspaces        also free Torch's cuBLAS workspaces\n";

static const char dask_tail[] =
    "    -h, --help          show this help\n"
    "\n"
    "EXAMPLES:\n"
    "    gpureclaim ps --dask tcp://10.0.0.5:8786\n"
    "    gpureclaim release --dask tcp://10.0.0.5:8786 --json\n"
    "    gpureclaim explain --dask tcp://10.0.0.5:8786 --timeout 10\n"
    "\n"
    "Exit status: 0 every worker answered, 1 the scheduler could not be "
    "reached,\n"
    "2 bad usage, 3 some workers gave no report (listed with the "
    "reason).\n";

static const char *const dask_head[][2] = {
    {"ps", "USAGE: gpureclaim ps --dask ADDRESS [--workers ADDR...]\n"
	   "                     [--timeout SECONDS] [--json]\n"
	   "\n"
	   "List every GPU of the workers' hosts, once, and who holds what "
	   "on it, in\n"
	   "every worker of a Dask cluster (through Client.run: the workers "
	   "answer\n"
	   "while tasks run), each about its own process (docs/cluster.md).\n"
	   "\n"},
    {"release",
     "USAGE: gpureclaim release --dask ADDRESS [--workers ADDR...]\n"
     "                          [--timeout SECONDS] [--json]\n"
     "                          [--collect auto|always|never] "
     "[--workspaces]\n"
     "\n"
     "Give every worker's cached GPU memory back to the driver, in every\n"
     "worker of a Dask cluster (through Client.run: the workers answer "
     "while\n"
     "tasks run), each about its own process (docs/cluster.md).\n"
     "\n"},
    {"explain",
     "USAGE: gpureclaim explain --dask ADDRESS [--workers ADDR...]\n"
     "                          [--timeout SECONDS] [--json]\n"
     "\n"
     "Say where each worker's GPU memory goes, in every worker of a Dask\n"
     "cluster (through Client.run: the workers answer while tasks run), "
     "each\n"
     "about its own process (docs/cluster.md).\n"
     "\n"},
};

static int dask_help(const char *command)
{
	for (size_t i = 0; i < sizeof(dask_head) / sizeof(dask_head[0]); i++)
		if (strcmp(dask_head[i][0], command) == 0) {
			fputs(dask_head[i][1], stdout);
			fputs(dask_common, stdout);
			if (strcmp(command, "release") == 0)
				fputs(dask_release, stdout);
			fputs(dask_tail, stdout);
			return GPR_CLI_OK;
		}
	return -1;
}

static int is_help(const char *a)
{
	return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0;
}

/* Whether an option among argv[from..] (before `--`) is -h/--help, or
 * starts with `prefix` (--pid, --dask: the form the command takes). */
static int has(int argc, char **argv, int from, const char *prefix)
{
	for (int i = from; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (prefix ? strncmp(argv[i], prefix, strlen(prefix)) == 0
			   : is_help(argv[i]))
			return 1;
	return 0;
}

static int say(const char *text)
{
	fputs(text, stdout);
	return GPR_CLI_OK;
}

int gpr_cli_python_help(int argc, char **argv)
{
	if (argc < 1)
		return -1;
	const char *c = argv[0];
	int help = has(argc, argv, 1, NULL);
	if (strcmp(c, "explain") == 0) {
		if (has(argc, argv, 1, "--pid"))
			return help ? say(explain_pid_help) : -1;
		if (argc > 1 && strncmp(argv[1], "--dask", 6) == 0)
			return help ? dask_help(c) : -1;
		/* the script form: its options (--holders, --json) before
		 * SCRIPT, whose own options follow it */
		int i = 1;
		while (i < argc && (strcmp(argv[i], "--holders") == 0 ||
				    strcmp(argv[i], "--json") == 0))
			i++;
		return i < argc && is_help(argv[i]) ? say(explain_help) : -1;
	}
	if (strcmp(c, "release") == 0) {
		if (!has(argc, argv, 1, "--pid") &&
		    has(argc, argv, 1, "--dask"))
			return help ? dask_help(c) : -1;
		return help ? say(release_help) : -1;
	}
	if (strcmp(c, "ps") == 0) {
		if (has(argc, argv, 1, "--dask"))
			return help ? dask_help(c) : -1;
		if (has(argc, argv, 1, "--explain"))
			return help ? say(ps_explain_help) : -1;
		return -1; /* ps's own (cli/cmd_ps.c) */
	}
	if (strcmp(c, "run") == 0) {
		/* its options, up to `--` or CMD */
		for (int i = 1; i < argc && argv[i][0] == '-' &&
				strcmp(argv[i], "--") != 0;
		     i++)
			if (is_help(argv[i]))
				return say(run_help);
		return -1;
	}
	static const struct {
		const char *command, *text;
	} plain[] = {{"reclaim", reclaim_help},
		     {"agent", agent_help},
		     {"demo", demo_help},
		     {"exporter", exporter_help}};
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
		if (strcmp(c, plain[i].command) == 0)
			return help ? say(plain[i].text) : -1;
	return -1;
}
