/*
 * gpureclaim trace [-o FILE] [--] CMD ARGS...: runs CMD with the CUPTI
 * injection library (libgpureclaim_trace.so) so that every driver-level
 * allocation and free of every CUDA process it starts is logged, then
 * prints a summary of the log. CMD's exit status is returned (128 + the
 * signal when it was killed); its stdout and stderr are left alone, our
 * own lines on stderr start with "gpureclaim trace:". The summary reads
 * the logs the traced processes say they wrote (trace_names.h).
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "out/buf.h"
#include "../trace/format/trace_switch.h"
#include "../trace/read/log_read.h"
#include "../trace/read/log_report.h"
#include "../trace/read/log_stats.h"
#include "locate.h"
#include "trace_names.h"

static struct env {
	const char *output; /* -o, --output FILE */
	int allow_untraced; /* --allow-untraced */
	int quiet;	    /* -q, --quiet: no summary */
	int full;	    /* --full: the whole report as summary */
} env;

static volatile sig_atomic_t child_pid;

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "USAGE: gpureclaim trace [-o FILE] [-q] [--full] "
	    "[--allow-untraced] [--] CMD [ARGS...]\n"
	    "\n"
	    "Run CMD and log every driver-level GPU allocation and free "
	    "(cuMemAlloc, cuMemFree,\n"
	    "VMM cuMemCreate/Map/Unmap/Release, async pools, pinned host "
	    "memory) with its size,\n"
	    "device, thread, latency, CPU-wait time and calling library. "
	    "Needs CUPTI (the CUDA\n"
	    "toolkit's extras/CUPTI or the nvidia-cuda-cupti wheel).\n"
	    "\n"
	    "OPTIONS:\n"
	    "    -o, --output FILE   the log (default "
	    "./gpureclaim-<pid>.trace); other CUDA\n"
	    "                        processes CMD starts write FILE.<pid>\n"
	    "    -q, --quiet         no summary at the end\n"
	    "    --full              the whole report as the summary\n"
	    "    --allow-untraced    run CMD even when CUPTI cannot be "
	    "found\n"
	    "    -h, --help          show this help\n"
	    "\n"
	    "ENVIRONMENT:\n"
	    "    GPURECLAIM_CUPTI_LIBRARY   path of libcupti.so to use (else: "
	    "the nvidia-cuda-cupti\n"
	    "                               wheel, Torch's, the CUDA "
	    "toolkit: docs/trace.md)\n"
	    "    GPURECLAIM_TRACE_LIBRARY   path of libgpureclaim_trace.so "
	    "to use\n"
	    "    GPURECLAIM_TRACE_*         the measurement switches "
	    "(docs/trace.md): 1/0/yes/no/\n"
	    "                               true/false, any case; "
	    "anything else is refused\n"
	    "\n"
	    "EXAMPLES:\n"
	    "    gpureclaim trace -- python train.py --epochs 1\n"
	    "    gpureclaim trace -o run.trace python -c 'import torch; "
	    "torch.ones(1, device=\"cuda\")'\n"
	    "    gpureclaim report run.trace --svg mem.svg\n"
	    "\n"
	    "Exit status: CMD's (128 + signal if it was killed); 1 when "
	    "tracing cannot be set up,\n"
	    "127 when CMD cannot be run, 2 on bad usage.\n");
}

/*
 * Clears the way for the log: an old trace log of this user at path is
 * removed; anything else there (another file, a link, a FIFO, another
 * user's log) is left alone, an error (cli/util_file.c's one rule for
 * files we replace). 0 or -1 with a message.
 */
static int prepare_output(const char *path)
{
	if (gpr_cli_out_check("trace", path, GPR_TRACE_MAGIC, "a trace log", -1,
			      NULL) < 0)
		return -1;
	if (unlink(path) != 0 && errno != ENOENT) {
		fprintf(stderr, "gpureclaim trace: cannot replace %s: %s\n",
			path, strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * The injection library's on/off switches: a bad value is refused here,
 * before CMD runs (the library itself could only warn and go on).
 */
static int check_switches(void)
{
	static const char *const names[] = {
#define GPR_X_NAME(name) name,
	    GPR_TRACE_SWITCHES(GPR_X_NAME)
#undef GPR_X_NAME
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *v = getenv(names[i]);
		if (gpr_trace_switch_parse(v) < 0) {
			fprintf(stderr,
				"gpureclaim trace: %s='%.64s' is not one of "
				"%s\n",
				names[i], v, GPR_TRACE_SWITCH_WORDS);
			return -1;
		}
	}
	return 0;
}

static void forward(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	/*
	 * A signal from the terminal reached the whole process group, CMD
	 * included; one sent to us alone (kill) is passed on.
	 */
	if (child_pid > 0 && si->si_code <= 0)
		kill((pid_t)child_pid, sig);
}

/* The summary of one log on stderr. */
static void summarise(const struct gpr_cli_trace_log *log)
{
	struct gpr_trace t;
	char err[256];
	if (gpr_trace_load(log->path, &t, err, sizeof(err)) < 0) {
		fprintf(stderr, "gpureclaim trace: %s: %s\n", log->path, err);
		return;
	}
	if (t.hdr.pid != (uint32_t)log->pid) {
		fprintf(stderr,
			"gpureclaim trace: %s is not the log of process %ld "
			"(it was replaced); not reading it\n",
			log->path, log->pid);
		gpr_trace_free(&t);
		return;
	}
	struct gpr_trace_stats s;
	if (gpr_trace_stats_compute(&t, &s) == 0) {
		struct gpr__buf b = {0};
		gpr__buf_puts(&b, "\ngpureclaim trace: summary\n");
		gpr_trace_report_text(&b, log->path, &t, &s, env.full ? 10 : 5,
				      !env.full);
		gpr__buf_printf(&b, "\nFull report: gpureclaim report %s\n",
				log->path);
		if (!b.oom)
			gpr__buf_write(&b, stderr);
		gpr__buf_free(&b);
		gpr_trace_stats_free(&s);
	}
	gpr_trace_free(&t);
}

/*
 * Summarises the log at `want` when a process wrote it, else the log of
 * CMD's own process, else the first; lists the others.
 */
static void summary(const char *want, pid_t child,
		    const struct gpr_cli_trace_names *tn)
{
	if (tn->n == 0) {
		fprintf(stderr,
			"gpureclaim trace: no trace was written (CMD did not "
			"use CUDA, or tracing failed: see above)\n");
		return;
	}
	size_t k = tn->n;
	for (size_t i = 0; i < tn->n && k == tn->n; i++)
		if (strcmp(tn->v[i].path, want) == 0)
			k = i;
	for (size_t i = 0; i < tn->n && k == tn->n; i++)
		if (tn->v[i].pid == (long)child)
			k = i;
	if (k == tn->n)
		k = 0;
	if (strcmp(tn->v[k].path, want) != 0)
		fprintf(stderr,
			"gpureclaim trace: %s was already there; the log is "
			"%s\n",
			want, tn->v[k].path);
	summarise(&tn->v[k]);
	for (size_t i = 0; i < tn->n; i++)
		if (i != k)
			fprintf(stderr,
				"gpureclaim trace: another process wrote %s\n",
				tn->v[i].path);
}

/*
 * The log's absolute path into out: -o, relative to the working directory,
 * or with no -o the default's directory into *dir (the child adds
 * "/gpureclaim-<pid>.trace"). Refused when longer than GPR_TRACE_MAX_PATH:
 * a path is never cut to another one. GPR_CLI_OK, or an exit code with a
 * message.
 */
#define DEFAULT_NAME_MAX sizeof("/gpureclaim-4294967295.trace")
static int log_path(char *out, size_t len, char **dir)
{
	*dir = NULL;
	out[0] = '\0';
	char *cwd = NULL;
	if (!env.output || env.output[0] != '/') {
		cwd = getcwd(NULL, 0);
		if (!cwd) {
			fprintf(stderr,
				"gpureclaim trace: cannot get the working "
				"directory: %m; give -o an absolute path\n");
			return GPR_CLI_ERROR;
		}
	}
	if (!env.output) {
		size_t n = strlen(cwd) + DEFAULT_NAME_MAX - 1;
		if (n > GPR_TRACE_MAX_PATH) {
			fprintf(
			    stderr,
			    "gpureclaim trace: the working directory's path "
			    "is too long for the log's default name (%zu "
			    "bytes with it, more than %d); give -o a "
			    "shorter path\n",
			    n, GPR_TRACE_MAX_PATH);
			free(cwd);
			return GPR_CLI_USAGE;
		}
		*dir = cwd;
		return GPR_CLI_OK;
	}
	int n = snprintf(out, len, "%s%s%s", cwd ? cwd : "", cwd ? "/" : "",
			 env.output);
	free(cwd);
	size_t want = n < 0 ? SIZE_MAX : (size_t)n;
	if (want > GPR_TRACE_MAX_PATH || want >= len) {
		fprintf(stderr,
			"gpureclaim trace: the log's path would be %zu bytes, "
			"more than %d; give -o a shorter path\n",
			want, GPR_TRACE_MAX_PATH);
		return GPR_CLI_USAGE;
	}
	return GPR_CLI_OK;
}

int gpr_cli_trace(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"full", no_argument, NULL, 'f'},
	    {"allow-untraced", no_argument, NULL, 'u'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	memset(&env, 0, sizeof(env));
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, "+o:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			env.output = optarg;
			break;
		case 'q':
			env.quiet = 1;
			break;
		case 'f':
			env.full = 1;
			break;
		case 'u':
			env.allow_untraced = 1;
			break;
		case 'h':
			usage(stdout);
			return GPR_CLI_OK;
		default:
			usage(stderr);
			return GPR_CLI_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "gpureclaim trace: no command given\n");
		usage(stderr);
		return GPR_CLI_USAGE;
	}
	char **cmd = argv + optind;
	if (check_switches() < 0)
		return GPR_CLI_USAGE;

	char inj[PATH_MAX], cupti[PATH_MAX];
	const char *from = "";
	int traced = 1;
	struct gpr__buf tried = {0};
	if (gpr_cli_find_tracer(inj, sizeof(inj), &tried) < 0) {
		fprintf(stderr,
			"gpureclaim trace: libgpureclaim_trace.so not found; "
			"looked at:\n%s"
			"gpureclaim trace: set GPURECLAIM_TRACE_LIBRARY to "
			"its path\n",
			gpr__buf_str(&tried));
		traced = 0;
	} else {
		gpr__buf_reset(&tried);
		if (gpr_cli_find_cupti(cmd, cupti, sizeof(cupti), &from,
				       &tried) < 0) {
			fprintf(stderr,
				"gpureclaim trace: no CUPTI library found; "
				"looked at:\n%s"
				"gpureclaim trace: install one (pip install "
				"nvidia-cuda-cupti) or set "
				"GPURECLAIM_CUPTI_LIBRARY\n",
				gpr__buf_str(&tried));
			traced = 0;
		}
	}
	gpr__buf_free(&tried);
	if (!traced && !env.allow_untraced) {
		fprintf(stderr, "gpureclaim trace: not running the command "
				"untraced (--allow-untraced would)\n");
		return GPR_CLI_ERROR;
	}
	if (traced && !env.quiet)
		fprintf(stderr, "gpureclaim trace: CUPTI %s (from %s)\n", cupti,
			from);
	if (!traced)
		fprintf(stderr, "gpureclaim trace: running the command "
				"untraced\n");

	/* The log's absolute path: CMD may change directory. */
	char out[GPR_TRACE_MAX_PATH + DEFAULT_NAME_MAX];
	char *dir = NULL;
	struct gpr_cli_trace_names names;
	memset(&names, 0, sizeof(names));
	if (traced) {
		int rc = log_path(out, sizeof(out), &dir);
		if (rc != GPR_CLI_OK)
			return rc;
		if (out[0] && prepare_output(out) < 0) {
			free(dir);
			return GPR_CLI_ERROR;
		}
		char err[512];
		if (gpr_cli_trace_names_open(&names, err, sizeof(err)) < 0) {
			fprintf(stderr, "gpureclaim trace: %s\n", err);
			free(dir);
			return GPR_CLI_ERROR;
		}
	}

	struct sigaction sa, old_int, old_term;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = forward;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);

	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "gpureclaim trace: fork: %m\n");
		gpr_cli_trace_names_free(&names);
		free(dir);
		return GPR_CLI_ERROR;
	}
	if (pid == 0) {
		sigaction(SIGINT, &old_int, NULL);
		sigaction(SIGTERM, &old_term, NULL);
		if (traced) {
			if (dir)
				snprintf(out, sizeof(out),
					 "%s/gpureclaim-%d.trace", dir,
					 (int)getpid());
			setenv("CUDA_INJECTION64_PATH", inj, 1);
			setenv("GPURECLAIM_CUPTI_LIBRARY", cupti, 1);
			setenv("GPURECLAIM_TRACE_OUTPUT", out, 1);
			setenv("GPURECLAIM_TRACE_NAMES_DIR", names.dir, 1);
		}
		execvp(cmd[0], cmd);
		int e = errno;
		fprintf(stderr, "gpureclaim trace: cannot run %s: %s\n", cmd[0],
			strerror(e));
		_exit(e == ENOENT ? 127 : 126);
	}
	child_pid = pid;
	if (dir)
		snprintf(out, sizeof(out), "%s/gpureclaim-%d.trace", dir,
			 (int)pid);
	free(dir);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			fprintf(stderr, "gpureclaim trace: waitpid: %m\n");
			gpr_cli_trace_names_collect(&names);
			gpr_cli_trace_names_free(&names);
			return GPR_CLI_ERROR;
		}
	}
	child_pid = 0;
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	int code = WIFEXITED(status)	 ? WEXITSTATUS(status)
		   : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
					 : 1;
	if (traced && gpr_cli_trace_names_collect(&names) < 0)
		fprintf(stderr, "gpureclaim trace: out of memory\n");
	if (traced && !env.quiet)
		summary(out, pid, &names);
	gpr_cli_trace_names_free(&names);
	return code;
}
