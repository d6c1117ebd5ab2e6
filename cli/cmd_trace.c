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
 *
 * Signals: CMD runs in a process group of its own, given the terminal
 * when we have it, so that what reaches us never reached CMD as well: a
 * terminal's Ctrl-C goes to CMD's group alone, and what is sent to us,
 * alone or to our group (SIGINT, SIGTERM, SIGHUP, SIGQUIT), is passed on
 * to CMD's group once. Then we wait for CMD, summarise, remove the private
 * names directory and exit as CMD did. When CMD stops (Ctrl-Z), we stop
 * too, as a shell expects of its job, and continue it when continued.
 * SIGKILL cannot be passed on: when we die, CMD gets SIGKILL from the
 * kernel (PR_SET_PDEATHSIG), as it would have in our group.
 */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "out/buf.h"
#include "out/text.h"
#include "../trace/format/trace_switch.h"
#include "../trace/inject/locate.h"
#include "../trace/inject/settings.h"
#include "../trace/read/log_path.h"
#include "../trace/format/log_read.h"
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
	int verbose;	    /* -v, --verbose: which tracer and CUPTI */
	int full;	    /* --full: the whole report as summary */
} env;

static volatile sig_atomic_t child_pid;
static volatile sig_atomic_t child_alone; /* CMD has its own group */

/* The signals passed on to CMD (their default action ends a process). */
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define N_FORWARDED (sizeof(forwarded) / sizeof(forwarded[0]))

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "USAGE: gpureclaim trace [-o FILE] [--backend "
	    "auto|interpose|cupti] "
	    "[--dormant]\n"
	    "                        [-q] [-v] [--full] [--allow-untraced] "
	    "[--] "
	    "CMD [ARGS...]\n"
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
	    "    -v, --verbose       say which tracer and which CUPTI are "
	    "used\n"
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

/*
 * One message on stderr, each of its lines shown by the terminal rule
 * (out/text.h: controls and bidi formatting as '?'): paths and names in
 * it (the user's, a process's) cannot drive the terminal.
 */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	struct gpr__buf raw = {0}, b = {0};
	va_list ap;
	va_start(ap, fmt);
	char small[512];
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(small)) {
		gpr__buf_puts(&raw, small);
	} else {
		char *big = malloc((size_t)n + 1);
		va_start(ap, fmt);
		if (big)
			vsnprintf(big, (size_t)n + 1, fmt, ap);
		va_end(ap);
		gpr__buf_puts(&raw, big ? big : small);
		free(big);
	}
	char *line = raw.data;
	while (line && *line) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		gpr__text_put(&b, line, 0, 0);
		if (nl)
			gpr__buf_puts(&b, "\n");
		line = nl ? nl + 1 : NULL;
	}
	if (!b.oom)
		gpr__buf_write(&b, stderr);
	gpr__buf_free(&raw);
	gpr__buf_free(&b);
}

/*
 * s as one word a shell reads back as s, to paste: as it is when it
 * holds only characters no shell treats specially; else in single
 * quotes; else, when it holds a byte the terminal rule would not show
 * (a control, an escape sequence, bidi formatting, invalid UTF-8), in
 * bash's $'...' with those bytes as \xHH, so none reaches the terminal.
 */
static void put_word(struct gpr__buf *b, const char *s)
{
	int plain = *s != '\0', hidden = 0;
	for (const char *p = s; *p;) {
		uint32_t cp;
		size_t n = gpr__utf8_len(p, &cp);
		if (n == 0 || gpr__text_unsafe(cp)) {
			hidden = 1;
			n = n ? n : 1;
		} else if (!(cp < 128 && (isalnum((unsigned char)cp) ||
					  strchr("/._-+=:@%,", (int)cp)))) {
			plain = 0;
		}
		p += n;
	}
	if (plain && !hidden) {
		gpr__buf_puts(b, s);
		return;
	}
	if (!hidden) {
		gpr__buf_puts(b, "'");
		for (const char *p = s; *p; p++)
			if (*p == '\'')
				gpr__buf_puts(b, "'\\''");
			else
				gpr__buf_putn(b, p, 1);
		gpr__buf_puts(b, "'");
		return;
	}
	gpr__buf_puts(b, "$'");
	for (const char *p = s; *p;) {
		uint32_t cp;
		size_t n = gpr__utf8_len(p, &cp);
		if (n == 0 || gpr__text_unsafe(cp)) {
			for (size_t i = 0; i < (n ? n : 1); i++)
				gpr__buf_printf(b, "\\x%02x",
						(unsigned char)p[i]);
			p += n ? n : 1;
			continue;
		}
		if (*p == '\'' || *p == '\\')
			gpr__buf_puts(b, "\\");
		gpr__buf_putn(b, p, n);
		p += n;
	}
	gpr__buf_puts(b, "'");
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
	int saved = errno;
	pid_t pid = (pid_t)child_pid;
	if (pid <= 0) {
		/* before the fork or after the wait: nobody to pass it to */
	} else if (child_alone) {
		/* nothing sent to us reached CMD's group: pass it on, once */
		if (kill(-pid, sig) < 0)
			kill(pid, sig); /* CMD left its group (setsid) */
	} else if (si->si_code <= 0) {
		/* CMD shares our group (setpgid failed): a terminal's signal
		 * reached it already; one sent to us alone is passed on */
		kill(pid, sig);
	}
	errno = saved;
}

/* The controlling terminal, when there is one (else -1). */
static int open_tty(void)
{
	return open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
}

/* Gives the terminal to process group `to` when group `from` holds it. */
static void give_tty(int tty, pid_t from, pid_t to)
{
	if (tty < 0 || tcgetpgrp(tty) != from)
		return;
	/* a background group's tcsetpgrp raises SIGTTOU: not for us */
	sigset_t ttou, prev;
	sigemptyset(&ttou);
	sigaddset(&ttou, SIGTTOU);
	sigprocmask(SIG_BLOCK, &ttou, &prev);
	tcsetpgrp(tty, to);
	sigprocmask(SIG_SETMASK, &prev, NULL);
}

/* Takes the terminal back from CMD's group, when that group holds it. */
static void take_tty(int tty, pid_t child)
{
	if (tty < 0 || tcgetpgrp(tty) != child)
		return;
	sigset_t ttou, prev;
	sigemptyset(&ttou);
	sigaddset(&ttou, SIGTTOU);
	sigprocmask(SIG_BLOCK, &ttou, &prev);
	tcsetpgrp(tty, getpgrp());
	sigprocmask(SIG_SETMASK, &prev, NULL);
}

/*
 * Waits for CMD to end; while it is stopped (Ctrl-Z, a background read of
 * the terminal), we are stopped too, and continued, we continue it, with
 * the terminal when ours is the foreground group. 0 and its status, or
 * -1 (errno).
 */
static int wait_child(pid_t pid, int tty, int *status)
{
	for (;;) {
		if (waitpid(pid, status, WUNTRACED) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (!WIFSTOPPED(*status))
			return 0;
		take_tty(tty, pid);
		kill(getpid(), SIGSTOP); /* our shell sees the job stop */
		/* continued: in the foreground again? */
		give_tty(tty, getpgrp(), pid);
		if (kill(-pid, SIGCONT) < 0)
			kill(pid, SIGCONT);
	}
}

/* The summary of one log on stderr. */
static void summarise(const struct gpr_cli_trace_log *log)
{
	struct gpr_trace t;
	char err[256];
	if (gpr_trace_load(log->path, &t, err, sizeof(err)) < 0) {
		say("gpureclaim trace: %s: %s\n", log->path, err);
		return;
	}
	if (t.hdr.pid != (uint32_t)log->pid) {
		say("gpureclaim trace: %s is not the log of process %ld "
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
		/* the command as it was run: by its path, or from PATH */
		const char *self = program_invocation_name;
		gpr__buf_puts(&b, "\nFull report: ");
		put_word(&b, self && strchr(self, '/') ? self : "gpureclaim");
		gpr__buf_puts(&b, " report ");
		put_word(&b, log->path);
		gpr__buf_puts(&b, "\n");
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
		say("gpureclaim trace: no trace was written (CMD did not "
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
		say("gpureclaim trace: %s was already there; the log is "
		    "%s\n",
		    want, tn->v[k].path);
	summarise(&tn->v[k]);
	for (size_t i = 0; i < tn->n; i++)
		if (i != k)
			say("gpureclaim trace: another process wrote %s\n",
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
			say("gpureclaim trace: cannot get the working "
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
		say("gpureclaim trace: the log's path would be %zu bytes, "
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
		say("gpureclaim trace: %s\n", why);
		return -1;
	}
	return 0;
}

/*
 * The injection library's on/off switches and its settings that take a
 * word: a bad value is refused here, before CMD runs (the library itself
 * could only warn and go on).
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
			say("gpureclaim trace: %s='%.64s' is not one of "
			    "%s%s%s\n",
			    sw[i].name, v, GPR_TRACE_SWITCH_WORDS,
			    sw[i].word ? "/" : "",
			    sw[i].word ? sw[i].word : "");
			return -1;
		}
	}
	static const struct {
		const char *name, *words;
	} set[] = {
#define GPR_X_SETTING(name, words) {name, words},
	    GPR_TRACE_SETTINGS(GPR_X_SETTING)
#undef GPR_X_SETTING
	};
	for (size_t i = 0; i < sizeof(set) / sizeof(set[0]); i++) {
		const char *v = getenv(set[i].name);
		if (gpr_trace_setting_parse(set[i].words, v) == -2) {
			char words[96];
			gpr_trace_setting_list(set[i].words, words,
					       sizeof(words));
			say("gpureclaim trace: %s='%.64s' is not %s%s (unset: "
			    "the default)\n",
			    set[i].name, v,
			    strchr(set[i].words, '/') ? "one of " : "", words);
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
	if (gpr_inj_locate(GPR_INJ_FROM_COMMAND, tracer, PATH_MAX, &tried) <
	    0) {
		const char *over = getenv("GPURECLAIM_TRACE_LIBRARY");
		if (over && *over) { /* one place, one line: why not it */
			char line[PATH_MAX + 128];
			snprintf(line, sizeof(line), "%s",
				 gpr__buf_str(&tried) +
				     strspn(gpr__buf_str(&tried), " "));
			line[strcspn(line, "\n")] = '\0';
			char *why = strrchr(line, ':'); /* "NAME=PATH: why" */
			if (why)
				*why++ = '\0';
			say("gpureclaim trace: %s is not the tracer (%s); set "
			    "it "
			    "to the path of libgpureclaim_trace.so, or unset "
			    "it\n",
			    line, why ? why + strspn(why, " ") : "?");
			gpr__buf_free(&tried);
			return 0;
		}
		say("gpureclaim trace: libgpureclaim_trace.so not found; "
		    "looked at:\n%s"
		    "gpureclaim trace: set GPURECLAIM_TRACE_LIBRARY to "
		    "its path\n",
		    gpr__buf_str(&tried));
		gpr__buf_free(&tried);
		return 0;
	}
	if (*backend != B_CUPTI && setuid_program(cmd[0])) {
		say("gpureclaim trace: %s is set-user/group-ID: the "
		    "dynamic loader ignores LD_PRELOAD there%s\n",
		    cmd[0],
		    *backend == B_AUTO ? "; using CUPTI"
				       : "; nothing will "
					 "be recorded");
		if (*backend == B_AUTO)
			*backend = B_CUPTI;
	}
	if (*backend == B_INTERPOSE || env.dormant) {
		if (env.verbose)
			say("gpureclaim trace: interposer %s%s\n", tracer,
			    env.dormant ? " (dormant)" : "");
		gpr__buf_free(&tried);
		return 1;
	}
	gpr__buf_reset(&tried);
	int found =
	    gpr_cli_find_cupti(cmd, cupti, PATH_MAX, &from, &tried) == 0;
	if (!found)
		cupti[0] = '\0';
	if (*backend == B_AUTO) {
		if (env.verbose)
			say("gpureclaim trace: interposer %s; %s%s\n", tracer,
			    found ? "CUPTI fallback "
				  : "no CUPTI found for a fallback",
			    found ? cupti : "");
		gpr__buf_free(&tried);
		return 1;
	}
	if (!found) {
		say("gpureclaim trace: no CUPTI library found; looked "
		    "at:\n%s"
		    "gpureclaim trace: install one (pip install "
		    "nvidia-cuda-cupti) or set GPURECLAIM_CUPTI_LIBRARY\n",
		    gpr__buf_str(&tried));
		gpr__buf_free(&tried);
		return 0;
	}
	gpr__buf_free(&tried);
	if (env.verbose)
		say("gpureclaim trace: CUPTI %s (from %s)\n", cupti, from);
	return 1;
}

static int parse(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"backend", required_argument, NULL, 'b'},
	    {"dormant", no_argument, NULL, 'd'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"full", no_argument, NULL, 'f'},
	    {"allow-untraced", no_argument, NULL, 'u'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	memset(&env, 0, sizeof(env));
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, "+o:qvh", opts, NULL)) != -1) {
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
				say("gpureclaim trace: --backend takes "
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
		case 'v':
			env.verbose = 1;
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
		say("gpureclaim trace: --dormant preloads the "
		    "interposer; it does not go with "
		    "--backend=cupti\n");
		return GPR_CLI_USAGE;
	}
	if (optind >= argc) {
		say("gpureclaim trace: no command given "
		    "(gpureclaim trace -- CMD [ARGS...])\n"
		    "Run 'gpureclaim trace --help' for the options.\n");
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
		say("gpureclaim trace: not running the command "
		    "untraced (--allow-untraced would)\n");
		return GPR_CLI_ERROR;
	}
	if (!traced)
		say("gpureclaim trace: running the command "
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
			say("gpureclaim trace: %s\n", err);
			free(dir);
			return GPR_CLI_ERROR;
		}
	}

	struct sigaction sa, old[N_FORWARDED];
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = forward;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < N_FORWARDED; i++)
		sigaddset(&sa.sa_mask, forwarded[i]);
	for (size_t i = 0; i < N_FORWARDED; i++)
		sigaction(forwarded[i], &sa, &old[i]);
	int tty = open_tty();

	fflush(NULL);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		say("gpureclaim trace: fork: %m\n");
		for (size_t i = 0; i < N_FORWARDED; i++)
			sigaction(forwarded[i], &old[i], NULL);
		if (tty >= 0)
			close(tty);
		gpr_cli_trace_names_free(&names);
		free(dir);
		return GPR_CLI_ERROR;
	}
	if (pid == 0) {
		/* a group of its own, with the terminal if we have it; our
		 * death (SIGKILL: not passed on) is its own */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(128 + SIGKILL);
		pid_t ours = getpgrp();
		if (setpgid(0, 0) == 0) /* before it runs: no race with us */
			give_tty(tty, ours, getpid());
		for (size_t i = 0; i < N_FORWARDED; i++)
			sigaction(forwarded[i], &old[i], NULL);
		if (traced)
			child_env(backend, tracer, cupti, out, sizeof(out), dir,
				  names.dir);
		execvp(cmd[0], cmd);
		int e = errno;
		say("gpureclaim trace: cannot run %s: %s\n", cmd[0],
		    strerror(e));
		_exit(e == ENOENT ? 127 : 126);
	}
	/* as the child does, so that neither waits for the other */
	child_alone = setpgid(pid, pid) == 0 || getpgid(pid) == pid;
	if (child_alone)
		give_tty(tty, getpgrp(), pid);
	child_pid = pid;
	if (dir)
		snprintf(out, sizeof(out), "%s/gpureclaim-%d.trace", dir,
			 (int)pid);
	free(dir);
	int status = 0;
	int waited = wait_child(pid, tty, &status);
	int wait_errno = errno;
	child_pid = 0;
	take_tty(tty, pid);
	if (tty >= 0)
		close(tty);
	for (size_t i = 0; i < N_FORWARDED; i++)
		sigaction(forwarded[i], &old[i], NULL);
	if (waited < 0) {
		say("gpureclaim trace: waitpid: %s\n", strerror(wait_errno));
		gpr_cli_trace_names_collect(&names);
		gpr_cli_trace_names_free(&names);
		return GPR_CLI_ERROR;
	}
	int code = WIFEXITED(status)	 ? WEXITSTATUS(status)
		   : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
					 : 1;
	int summed = traced && !env.dormant;
	if (summed && gpr_cli_trace_names_collect(&names) < 0)
		say("gpureclaim trace: out of memory\n");
	if (summed && !env.quiet)
		summary(out, pid, &names, backend);
	gpr_cli_trace_names_free(&names);
	return code;
}
