/*
 * gpureclaim trace [-o FILE] [--backend B] [--] CMD ARGS...: runs CMD with
 * the tracer (libgpureclaim_trace.so) so that every driver-level
 * allocation and free of every CUDA process it starts is logged, then
 * prints a summary of the log. The tracer sees the calls one of two ways
 * (docs/trace.md, "Backends"): preloaded (LD_PRELOAD), it wraps the
 * driver's entry points (the interposer, the default); loaded by the
 * driver from CUDA_INJECTION64_PATH, it subscribes to CUPTI. CMD's exit
 * status is returned (128 + the signal when it was killed); its stdout
 * and stderr are left alone, our own lines on stderr start with
 * "gpureclaim trace:". The summary reads the logs the traced processes
 * say they wrote (trace_names.h).
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "out/buf.h"
#include "../trace/format/trace_switch.h"
#include "../trace/read/log_path.h"
#include "../trace/read/log_read.h"
#include "../trace/read/log_report.h"
#include "../trace/read/log_stats.h"
#include "locate.h"
#include "trace_names.h"

enum backend { B_AUTO, B_INTERPOSE, B_CUPTI };
static const char *const backend_names[] = {"auto", "interpose", "cupti"};

static struct env {
	const char *output; /* -o, --output FILE */
	int backend;	    /* --backend auto|interpose|cupti */
	int dormant;	    /* --dormant: loaded, recording nothing */
	int allow_untraced; /* --allow-untraced */
	int quiet;	    /* -q, --quiet: no summary */
	int full;	    /* --full: the whole report as summary */
} env;

static volatile sig_atomic_t child_pid;

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "USAGE: gpureclaim trace [-o FILE] [--backend "
	    "auto|interpose|cupti] "
	    "[--dormant]\n"
	    "                        [-q] [--full] [--allow-untraced] [--] CMD "
	    "[ARGS...]\n"
	    "\n"
	    "Run CMD and log every driver-level GPU allocation and free "
	    "(cuMemAlloc, cuMemFree,\n"
	    "VMM cuMemCreate/Map/Unmap/Release, async pools, pinned host "
	    "memory, contexts) with\n"
	    "its size, device, thread, latency, CPU-wait time and calling "
	    "library.\n"
	    "\n"
	    "OPTIONS:\n"
	    "    -o, --output FILE   the log (default "
	    "./gpureclaim-<pid>.trace); "
	    "other CUDA\n"
	    "                        processes CMD starts write FILE.<pid>\n"
	    "    --backend B         how the calls are seen: interpose (the "
	    "tracer is preloaded\n"
	    "                        and wraps the driver's entry points, "
	    "about "
	    "0.1 us a call),\n"
	    "                        cupti (CUPTI callbacks, about 1 us a "
	    "call; "
	    "one CUPTI user\n"
	    "                        per process), auto (the default: "
	    "interpose, "
	    "and CUPTI for\n"
	    "                        a process the preload cannot enter, e.g. "
	    "setuid)\n"
	    "    --dormant           preload the tracer but record nothing: "
	    "the program starts\n"
	    "                        its own sessions (gpureclaim.trace() in "
	    "Python)\n"
	    "    -q, --quiet         no summary at the end\n"
	    "    --full              the whole report as the summary\n"
	    "    --allow-untraced    run CMD even when the backend cannot be "
	    "set "
	    "up\n"
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
	    "    gpureclaim trace --backend cupti -o run.trace -- ./app\n"
	    "    gpureclaim trace --dormant -- jupyter lab\n"
	    "    gpureclaim report run.trace --svg mem.svg\n"
	    "\n"
	    "Exit status: CMD's (128 + signal if it was killed); 1 when "
	    "tracing cannot be set up,\n"
	    "127 when CMD cannot be run, 2 on bad usage.\n");
}

/* Whether cmd resolves (through PATH) to a set-user/group-ID program,
 * which the dynamic loader runs without LD_PRELOAD. */
static int setuid_program(const char *cmd)
{
	char p[PATH_MAX];
	struct stat st;
	if (strchr(cmd, '/'))
		return stat(cmd, &st) == 0 &&
		       (st.st_mode & (S_ISUID | S_ISGID));
	const char *path = getenv("PATH");
	for (const char *d = path ? path : ""; *d;) {
		size_t n = strcspn(d, ":");
		snprintf(p, sizeof(p), "%.*s/%s", (int)n, d, cmd);
		if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
			return (st.st_mode & (S_ISUID | S_ISGID)) != 0;
		d += n;
		d += *d == ':';
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
		    const struct gpr_cli_trace_names *tn, int backend)
{
	if (tn->n == 0) {
		fprintf(stderr,
			"gpureclaim trace: no trace was written (CMD did not "
			"use CUDA, or tracing failed: see above)%s\n",
			backend == B_INTERPOSE
			    ? "; a program the preload cannot enter (static, "
			      "setuid) needs --backend=cupti"
			    : "");
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

/*
 * Clears the way for the log: an old trace log of this user at path is
 * removed; anything else there (another file, a link, a FIFO, another
 * user's log) is left alone, an error (trace/read/log_path.h, the one
 * rule for files we replace). 0 or -1 with a message.
 */
static int prepare_output(const char *path)
{
	char why[PATH_MAX + 80];
	if (gpr_trace_clear_path(path, why, sizeof(why)) < 0) {
		fprintf(stderr, "gpureclaim trace: %s\n", why);
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
	static const struct {
		const char *name, *word;
	} sw[] = {
#define GPR_X_SWITCH(name, word) {name, word},
	    GPR_TRACE_SWITCHES(GPR_X_SWITCH)
#undef GPR_X_SWITCH
	};
	for (size_t i = 0; i < sizeof(sw) / sizeof(sw[0]); i++) {
		const char *v = getenv(sw[i].name);
		if (gpr_trace_switch_parse(v, sw[i].word) < 0) {
			fprintf(stderr,
				"gpureclaim trace: %s='%.64s' is not one of "
				"%s%s%s\n",
				sw[i].name, v, GPR_TRACE_SWITCH_WORDS,
				sw[i].word ? "/" : "",
				sw[i].word ? sw[i].word : "");
			return -1;
		}
	}
	return 0;
}

/*
 * The environment CMD gets (in the child, before exec): out is the log's
 * path, or "" with the default's directory in dir; names_dir where the
 * processes say which logs they wrote ("": dormant).
 */
static void child_env(int backend, const char *tracer, const char *cupti,
		      char *out, size_t out_len, const char *dir,
		      const char *names_dir)
{
	if (dir)
		snprintf(out, out_len, "%s/gpureclaim-%d.trace", dir,
			 (int)getpid());
	setenv("GPURECLAIM_TRACE_BACKEND", backend_names[backend], 1);
	if (!env.dormant)
		setenv("GPURECLAIM_TRACE_OUTPUT", out, 1);
	else
		setenv("GPURECLAIM_TRACE_DORMANT", "1", 1);
	if (names_dir[0])
		setenv("GPURECLAIM_TRACE_NAMES_DIR", names_dir, 1);
	if (backend != B_CUPTI) {
		char pre[8192];
		if (gpr_cli_preload_value(tracer, getenv("LD_PRELOAD"), pre,
					  sizeof(pre)) == 0)
			setenv("LD_PRELOAD", pre, 1);
	}
	/* the CUPTI backend, or the fallback of auto */
	if (cupti[0]) {
		setenv("CUDA_INJECTION64_PATH", tracer, 1);
		setenv("GPURECLAIM_CUPTI_LIBRARY", cupti, 1);
	}
}

/* Settles the backend and finds its pieces; the tracer's and CUPTI's
 * paths ("" when not used). 1 traced, 0 not, -1 refused. */
static int set_up(char *const *cmd, int *backend, char *tracer, char *cupti)
{
	const char *from = "";
	cupti[0] = '\0';
	struct gpr__buf tried = {0};
	if (gpr_cli_find_tracer(tracer, PATH_MAX, &tried) < 0) {
		fprintf(stderr,
			"gpureclaim trace: libgpureclaim_trace.so not found; "
			"looked at:\n%s"
			"gpureclaim trace: set GPURECLAIM_TRACE_LIBRARY to "
			"its path\n",
			gpr__buf_str(&tried));
		gpr__buf_free(&tried);
		return 0;
	}
	if (*backend != B_CUPTI && setuid_program(cmd[0])) {
		fprintf(stderr,
			"gpureclaim trace: %s is set-user/group-ID: the "
			"dynamic loader ignores LD_PRELOAD there%s\n",
			cmd[0],
			*backend == B_AUTO ? "; using CUPTI"
					   : "; nothing will "
					     "be recorded");
		if (*backend == B_AUTO)
			*backend = B_CUPTI;
	}
	if (*backend == B_INTERPOSE || env.dormant) {
		if (!env.quiet)
			fprintf(stderr, "gpureclaim trace: interposer %s%s\n",
				tracer, env.dormant ? " (dormant)" : "");
		gpr__buf_free(&tried);
		return 1;
	}
	gpr__buf_reset(&tried);
	int found =
	    gpr_cli_find_cupti(cmd, cupti, PATH_MAX, &from, &tried) == 0;
	if (!found)
		cupti[0] = '\0';
	if (*backend == B_AUTO) {
		if (!env.quiet)
			fprintf(stderr,
				"gpureclaim trace: interposer %s; %s%s\n",
				tracer,
				found ? "CUPTI fallback "
				      : "no CUPTI found for a fallback",
				found ? cupti : "");
		gpr__buf_free(&tried);
		return 1;
	}
	if (!found) {
		fprintf(stderr,
			"gpureclaim trace: no CUPTI library found; looked "
			"at:\n%s"
			"gpureclaim trace: install one (pip install "
			"nvidia-cuda-cupti) or set GPURECLAIM_CUPTI_LIBRARY\n",
			gpr__buf_str(&tried));
		gpr__buf_free(&tried);
		return 0;
	}
	gpr__buf_free(&tried);
	if (!env.quiet)
		fprintf(stderr, "gpureclaim trace: CUPTI %s (from %s)\n", cupti,
			from);
	return 1;
}

static int parse(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"backend", required_argument, NULL, 'b'},
	    {"dormant", no_argument, NULL, 'd'},
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
		case 'b':
			env.backend = -1;
			for (int i = 0; i < 3; i++)
				if (strcmp(optarg, backend_names[i]) == 0)
					env.backend = i;
			if (env.backend < 0) {
				fprintf(stderr,
					"gpureclaim trace: --backend takes "
					"auto, interpose or cupti\n");
				return GPR_CLI_USAGE;
			}
			break;
		case 'd':
			env.dormant = 1;
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
			return -1;
		default:
			usage(stderr);
			return GPR_CLI_USAGE;
		}
	}
	if (env.dormant && env.backend == B_CUPTI) {
		fprintf(stderr, "gpureclaim trace: --dormant preloads the "
				"interposer; it does not go with "
				"--backend=cupti\n");
		return GPR_CLI_USAGE;
	}
	if (optind >= argc) {
		fprintf(stderr, "gpureclaim trace: no command given "
				"(gpureclaim trace -- CMD [ARGS...])\n"
				"Run 'gpureclaim trace --help' for the "
				"options.\n");
		return GPR_CLI_USAGE;
	}
	return 0;
}

int gpr_cli_trace(int argc, char **argv)
{
	int rc = parse(argc, argv);
	if (rc)
		return rc < 0 ? GPR_CLI_OK : rc;
	char **cmd = argv + optind;
	if (check_switches() < 0)
		return GPR_CLI_USAGE;
	char tracer[PATH_MAX], cupti[PATH_MAX];
	int backend = env.backend;
	int traced = set_up(cmd, &backend, tracer, cupti);
	if (!traced && !env.allow_untraced) {
		fprintf(stderr, "gpureclaim trace: not running the command "
				"untraced (--allow-untraced would)\n");
		return GPR_CLI_ERROR;
	}
	if (!traced)
		fprintf(stderr, "gpureclaim trace: running the command "
				"untraced\n");

	/* The log's absolute path: CMD may change directory. */
	char out[GPR_TRACE_MAX_PATH + DEFAULT_NAME_MAX];
	out[0] = '\0';
	char *dir = NULL;
	struct gpr_cli_trace_names names;
	memset(&names, 0, sizeof(names));
	if (traced && !env.dormant) {
		rc = log_path(out, sizeof(out), &dir);
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
		if (traced)
			child_env(backend, tracer, cupti, out, sizeof(out), dir,
				  names.dir);
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
	int summed = traced && !env.dormant;
	if (summed && gpr_cli_trace_names_collect(&names) < 0)
		fprintf(stderr, "gpureclaim trace: out of memory\n");
	if (summed && !env.quiet)
		summary(out, pid, &names, backend);
	gpr_cli_trace_names_free(&names);
	return code;
}
