/*
 * gpureclaim trace [-o FILE] [--] CMD ARGS...: runs CMD with the CUPTI
 * injection library (libgpureclaim_trace.so) so that every driver-level
 * allocation and free of every CUDA process it starts is logged, then
 * prints a summary of the log. CMD's exit status is returned (128 + the
 * signal when it was killed); its stdout and stderr are left alone, our
 * own lines on stderr start with "gpureclaim trace:".
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "out/buf.h"
#include "../trace/read/log_read.h"
#include "../trace/read/log_report.h"
#include "../trace/read/log_stats.h"
#include "locate.h"

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
 * Clears the way for the log: an old trace log at path is removed, any
 * other file is left alone (an error). 0 or -1 with a message.
 */
static int prepare_output(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return 0;
	if (S_ISREG(st.st_mode)) {
		char magic[8] = {0};
		int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, magic, sizeof(magic)) : -1;
		if (fd >= 0)
			close(fd);
		if ((n == 0 || (n == 8 && memcmp(magic, "GPRTRACE", 8) == 0)) &&
		    unlink(path) == 0)
			return 0;
	}
	fprintf(stderr,
		"gpureclaim trace: %s exists and is not a trace log; not "
		"overwriting it\n",
		path);
	return -1;
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

static void summary(const char *path)
{
	struct gpr_trace t;
	char err[256];
	if (access(path, F_OK) != 0) {
		fprintf(stderr,
			"gpureclaim trace: no trace was written to %s (CMD "
			"did not use CUDA, or tracing failed: see above)\n",
			path);
		return;
	}
	if (gpr_trace_load(path, &t, err, sizeof(err)) < 0) {
		fprintf(stderr, "gpureclaim trace: %s: %s\n", path, err);
		return;
	}
	struct gpr_trace_stats s;
	if (gpr_trace_stats_compute(&t, &s) == 0) {
		struct gpr__buf b = {0};
		gpr__buf_puts(&b, "\ngpureclaim trace: summary\n");
		gpr_trace_report_text(&b, path, &t, &s, env.full ? 10 : 5,
				      !env.full);
		gpr__buf_printf(&b, "\nFull report: gpureclaim report %s\n",
				path);
		if (!b.oom)
			gpr__buf_write(&b, stderr);
		gpr__buf_free(&b);
		gpr_trace_stats_free(&s);
	}
	gpr_trace_free(&t);
	char pat[PATH_MAX + 8];
	snprintf(pat, sizeof(pat), "%s.*", path);
	glob_t g;
	if (glob(pat, 0, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc; i++)
			fprintf(stderr,
				"gpureclaim trace: another process wrote %s\n",
				g.gl_pathv[i]);
		globfree(&g);
	}
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
	char out[PATH_MAX];
	out[0] = '\0';
	if (env.output) {
		if (env.output[0] == '/')
			snprintf(out, sizeof(out), "%s", env.output);
		else {
			char cwd[PATH_MAX];
			if (!getcwd(cwd, sizeof(cwd))) {
				fprintf(stderr, "gpureclaim trace: getcwd: "
						"%m\n");
				return GPR_CLI_ERROR;
			}
			snprintf(out, sizeof(out), "%.2000s/%.2000s", cwd,
				 env.output);
		}
		if (traced && prepare_output(out) < 0)
			return GPR_CLI_ERROR;
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
		return GPR_CLI_ERROR;
	}
	if (pid == 0) {
		sigaction(SIGINT, &old_int, NULL);
		sigaction(SIGTERM, &old_term, NULL);
		if (traced) {
			char def[PATH_MAX];
			if (!out[0]) {
				char cwd[PATH_MAX];
				if (!getcwd(cwd, sizeof(cwd)))
					snprintf(cwd, sizeof(cwd), ".");
				snprintf(def, sizeof(def),
					 "%.3000s/gpureclaim-%d.trace", cwd,
					 (int)getpid());
			}
			setenv("CUDA_INJECTION64_PATH", inj, 1);
			setenv("GPURECLAIM_CUPTI_LIBRARY", cupti, 1);
			setenv("GPURECLAIM_TRACE_OUTPUT", out[0] ? out : def,
			       1);
		}
		execvp(cmd[0], cmd);
		int e = errno;
		fprintf(stderr, "gpureclaim trace: cannot run %s: %s\n", cmd[0],
			strerror(e));
		_exit(e == ENOENT ? 127 : 126);
	}
	child_pid = pid;
	if (!out[0]) {
		char cwd[PATH_MAX];
		snprintf(out, sizeof(out), "%.3000s/gpureclaim-%d.trace",
			 getcwd(cwd, sizeof(cwd)) ? cwd : ".", (int)pid);
	}
	int status = 0;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			fprintf(stderr, "gpureclaim trace: waitpid: %m\n");
			return GPR_CLI_ERROR;
		}
	}
	child_pid = 0;
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	int code = WIFEXITED(status)	 ? WEXITSTATUS(status)
		   : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
					 : 1;
	if (traced && !env.quiet)
		summary(out);
	return code;
}
