/*
 * The gpureclaim command-line tool: the subcommand contract and the helpers
 * the subcommands share.
 *
 * Contract: each subcommand is `int gpr_cli_<name>(int argc, char **argv)`,
 * called by cli/main.c with argv[0] set to the subcommand's name (so
 * getopt_long works as in a main()). It returns the process exit code:
 * GPR_CLI_OK, GPR_CLI_ERROR (runtime error, a message on stderr) or
 * GPR_CLI_USAGE (bad usage, a message on stderr, nothing on stdout).
 * Messages start with "gpureclaim: " or "gpureclaim <name>: ".
 */
#ifndef GPR_CLI_H
#define GPR_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#define GPR_CLI_OK 0
#define GPR_CLI_ERROR 1
#define GPR_CLI_USAGE 2

/* Subcommands (cli/cmd_<name>.c). */
int gpr_cli_ps(int argc, char **argv);
int gpr_cli_top(int argc, char **argv);
int gpr_cli_version(int argc, char **argv);
int gpr_cli_trace(int argc, char **argv);
int gpr_cli_report(int argc, char **argv);
/* A whole process's GPU memory to host memory and back
 * (cli/cmd_suspend.c; docs/suspend.md). */
int gpr_cli_suspend(int argc, char **argv);
int gpr_cli_resume(int argc, char **argv);
/* Handed to `python3 -m gpureclaim` (cli/cmd_python.c). */
int gpr_cli_explain(int argc, char **argv);
int gpr_cli_demo(int argc, char **argv);
int gpr_cli_run(int argc, char **argv);
int gpr_cli_exporter(int argc, char **argv);
/* `report` of an out-of-memory post-mortem (gpureclaim/oom/_postmortem.py). */
int gpr_cli_oom_report(int argc, char **argv);
/* A Dask cluster's reports: `ps --dask`, `explain --dask`, `release
 * --dask` (python/gpureclaim/cluster/_cli.py, docs/cluster.md). */
int gpr_cli_cluster(int argc, char **argv);
/* The agent's commands, handed to Python (docs/agent.md): `reclaim`,
 * `agent start|list`; `release` (--pid or --dask), `explain --pid` and
 * `ps --explain` go the same way. */
int gpr_cli_reclaim(int argc, char **argv);
int gpr_cli_agent(int argc, char **argv);
/* `release --pid N`, `explain --pid N`: the agent's client in C
 * (cli/cmd_agent.c); argv[0] names which. gpr_cli_has_pid: whether argv
 * (a command and its arguments) gives --pid before any `--`. */
int gpr_cli_agent_ask(int argc, char **argv);
int gpr_cli_has_pid(int argc, char **argv);
/*
 * The help of the subcommands the Python package runs (cli/help_python.c),
 * so that no --help needs Python: argv, a command and its arguments, asking
 * for it (-h or --help where that command reads its options) is answered
 * on stdout (GPR_CLI_OK); -1 when argv asks no such help.
 */
int gpr_cli_python_help(int argc, char **argv);

/*
 * Output is built with the output toolkit (src/out/: buf.h, json.h,
 * text.h, fmt.h), whole, and written only on success.
 */

/* ---------------- arguments (cli/util_parse.c) ---------------- */

/*
 * Parses a whole string as a number of seconds: decimal digits with an
 * optional fraction ("0.5", "2", "10.25"; no blank, sign, hex or
 * exponent), from 0.1 to 86400 (one day). 0 and *out set on success, -1
 * otherwise.
 */
int gpr_cli_parse_seconds(const char *s, double *out);
/* The number at the start of s, digits with at most one '.' and digits
 * after it (no sign, no exponent), into *v: its length, or -1. */
int gpr_cli_number_prefix(const char *s, double *v);
/* "2h", "30m", "90s", "1.5d", "600" (seconds) -> seconds, at most a
 * year; -1 otherwise. */
double gpr_cli_parse_duration(const char *s);

/*
 * Parses a comma-separated list of non-negative integers (GPU indexes)
 * and adds each to list[*n] (capacity cap), skipping duplicates.
 * 0 on success, -1 on a malformed item or when the list is full.
 */
int gpr_cli_parse_index_list(const char *s, int *list, int *n, int cap);

/*
 * The two lines of a getopt_long error of subcommand cmd (c is ':', a
 * value missing, or '?', an unknown option; the option string started
 * with ':'): "gpureclaim CMD: option '--x' needs a value" or "unknown
 * option '-x'", then where the options are. GPR_CLI_USAGE.
 */
int gpr_cli_option_error(const char *cmd, int c, char **argv);

/* "gpureclaim CMD: " and fmt with arg (one %s) on stderr, then where the
 * options are ("Run 'gpureclaim CMD --help' ..."): GPR_CLI_USAGE. */
int gpr_cli_usage_error(const char *cmd, const char *fmt, const char *arg);

/*
 * Options several subcommands take, each read with one message for its
 * mistakes (the two lines above): GPR_CLI_OK, or GPR_CLI_USAGE said.
 * seconds: opt's value by gpr_cli_parse_seconds; gpus: -i/--gpu's list
 * by gpr_cli_parse_index_list; color: --color[=WHEN] or --color WHEN
 * (optarg, or the next word when it is a WHEN; none: "always").
 */
int gpr_cli_opt_seconds(const char *cmd, const char *opt, const char *arg,
			double *out);
int gpr_cli_opt_gpus(const char *cmd, const char *arg, int *list, int *n,
		     int cap);
int gpr_cli_opt_color(const char *cmd, int argc, char **argv,
		      const char **color);

/* ---------------- the terminal (cli/util_term.c) ---------------- */

/* Columns and rows of the terminal on fd; both 0 when fd is not one. */
void gpr_cli_term_size(int fd, int *width, int *height);

/*
 * Whether output to fd is coloured, for --color=MODE: "always", "never",
 * or "auto" (NULL too): fd is a terminal, NO_COLOR is unset or empty
 * (no-color.org) and TERM is not "dumb". 1 or 0; -1 for an unknown MODE.
 */
int gpr_cli_color(const char *mode, int fd);

/* Columns code point cp takes on a terminal: 2 for the wide East Asian
 * ranges and emoji, else 1. */
int gpr_cli_term_columns(uint32_t cp);

/* A duration for people, rounded to its two largest units: "2 h 13 min",
 * "41 s"; _short for a column: "2h13m", "41s", "3m02s". */
char *gpr_cli_fmt_duration(double seconds, char *out, size_t len);
char *gpr_cli_fmt_duration_short(double seconds, char *out, size_t len);

/* ---------------- the NVIDIA libraries (cli/util_driver.c) ---------------- */

/* What a library says of the driver, or why it cannot. */
struct gpr_cli_probe {
	const char *library; /* the path or soname tried */
	int available;
	char version[96]; /* NVML: "580.65.06"; CUDA: "13.0" */
	int number;	  /* NVML: GPU count; CUDA: cuDriverGetVersion */
	char error[512];  /* why not available */
	int keep; /* in: leave the library loaded (a command about to end:
		   * its exit unloads it, gpr_cli_end) */
};

/*
 * NVML, through the core's driver layer (its rule: $GPURECLAIM_NVML_LIBRARY
 * or libnvidia-ml.so.1): initialised, the driver's version and the GPU
 * count read, shut down and unloaded, or, with p->keep, left loaded and
 * initialised for the exit to end. For `version`; `ps` asks its handle
 * (src/driver_info.h), whose NVML is already up.
 */
void gpr_cli_probe_nvml(struct gpr_cli_probe *p);

/*
 * libcuda, through the core's driver layer ($GPURECLAIM_CUDA_LIBRARY or
 * libcuda.so.1, loaded if it is not): cuDriverGetVersion, which needs no
 * cuInit and opens no context; unloaded unless p->keep.
 */
void gpr_cli_probe_cuda(struct gpr_cli_probe *p);

/*
 * After "NVIDIA driver not found": when this is a build folder's command
 * (<build>/cli/gpureclaim) beside the simulated driver (<build>/sim) and
 * the user named no NVML library, one line on stderr saying how to run
 * ps on that driver, which `make demo` uses without a GPU.
 */
void gpr_cli_sim_hint(void);

/* ---------------- ending a command (cli/util_exit.c) ---------------- */

/* How a one-shot command ends once its output is written. */
enum gpr_cli_end {
	GPR_CLI_END_DETACH = 0, /* _exit at once; a detached child, sharing
				 * this process's memory and descriptors,
				 * ends last and so releases NVML's */
	GPR_CLI_END_WAIT,	/* _exit; the release is waited for */
	GPR_CLI_END_FORK,	/* as DETACH, the child made by fork() */
	GPR_CLI_END_LIBC,	/* return, for main's exit() */
};

/*
 * Ends a command whose output is written, with exit status `code`:
 * flushes stdout and stderr and _exits. DETACH (and FORK) first close
 * stdin, stdout, stderr and every other descriptor that is not a
 * character device, so a reader of the output sees EOF at once, and leave
 * the kernel's release of NVML's files and mappings (~4.5 ms on an H200)
 * to a child that only _exits (cli/util_exit.c says why it is safe).
 * Returns `code`, for main to return, only with LIBC and in builds with
 * AddressSanitizer (exit() runs the leak check).
 */
int gpr_cli_end(int code, enum gpr_cli_end how);

/* ---------------- files written for the user (cli/util_file.c) --------- */

/* An output being written: to a temporary file beside `path` until commit. */
struct gpr_cli_out {
	const char *path; /* as the user named it */
	char *tmp;	  /* the temporary file, NULL once committed */
	FILE *f;	  /* write the contents here */
};

/*
 * Whether subcommand `cmd` may replace what lies at `path` with a file of
 * its own: 0 when nothing is there or it may, -1 with a message on stderr
 * otherwise. Refused: the file `input` (device and inode; NULL: none), a
 * directory or any other non-regular file, a symbolic link (with force:
 * the link itself may be replaced, never followed), and without force a
 * file that is not ours to replace: another user's, or one that neither is
 * empty nor begins with `signature` (the message calls ours `what`, e.g.
 * "an export of gpureclaim"). force: 1 given, 0 not given (the message
 * says what --force would do), -1 the command has no --force.
 */
int gpr_cli_out_check(const char *cmd, const char *path, const char *signature,
		      const char *what, int force, const struct stat *input);

/*
 * Opens the output `path` of subcommand `cmd`, refused as
 * gpr_cli_out_check says (our files: exports beginning with `signature`).
 * 0 with o->f open, or -1 with a message on stderr.
 */
int gpr_cli_out_open(struct gpr_cli_out *o, const char *cmd, const char *path,
		     const char *signature, int force,
		     const struct stat *input);

/*
 * Opens the output `path` without that check (the caller checks the path
 * it will have before the commit: RMM's logs get their names once the
 * trace is read). 0 with o->f open, or -1 with a message on stderr.
 */
int gpr_cli_out_create(struct gpr_cli_out *o, const char *cmd,
		       const char *path);

/* Closes o and renames it over its path; 0, or -1 with a message. */
int gpr_cli_out_commit(struct gpr_cli_out *o, const char *cmd);

/* Closes o and removes the temporary file; the path is left untouched. */
void gpr_cli_out_abort(struct gpr_cli_out *o);

/* 1 if the two paths name the same file (or would, once created). */
int gpr_cli_out_same(const char *a, const char *b);

/* ---------------- processes (cli/util_proc.c) ---------------- */

/* What this machine can tell of a pid that NVML lists. */
enum gpr_cli_pid_state {
	GPR_CLI_PID_ALIVE =
	    0,		     /* a process of this pid namespace, not a zombie */
	GPR_CLI_PID_EXITED,  /* exited: a zombie, or gone (seen from the
			      * host's pid namespace) while the driver still
			      * counts its memory */
	GPR_CLI_PID_OUTSIDE, /* no such pid in this pid namespace, which is
			      * not the host's: a host pid seen from a
			      * container (it may have exited too) */
};

/*
 * The state of pid: kill(pid, 0) says whether the pid exists here (EPERM
 * counts as existing, so /proc mounted with hidepid does not hide it);
 * /proc/PID/stat whether it is a zombie; /proc/self/ns/pid whether this
 * is the host's (initial) pid namespace, whose inode is fixed
 * (PROC_PID_INIT_INO, 0xEFFFFFFC).
 */
enum gpr_cli_pid_state gpr_cli_proc_state(uint32_t pid);
/* The same, and for a process alive here its start time (clock ticks
 * after boot, /proc/PID/stat field 22: with the pid, it names one
 * process, never a later one given the same pid); 0 when unknown. */
enum gpr_cli_pid_state gpr_cli_proc_state_at(uint32_t pid,
					     unsigned long long *start);

/*
 * Does once what the first look-ups of gpr_cli_proc_state and
 * gpr_cli_proc_user would: the pid namespace test, and a getpwuid_r of
 * our own uid, which loads the NSS configuration and modules.
 */
void gpr_cli_proc_warm(void);

/*
 * The user name owning process pid (owner of /proc/PID, name through
 * getpwuid_r, the numeric uid when it has no name). 0 on success, -1 when
 * the process is not visible (no such pid, another pid namespace).
 */
int gpr_cli_proc_user(pid_t pid, char *out, size_t len);

/*
 * The command line of pid: /proc/PID/cmdline with its NUL separators
 * shown as spaces (any other byte, a newline included, kept as it is); when
 * that is empty (kernel thread, zombie) the name from /proc/PID/comm in
 * brackets, "[name]". Truncated to len - 1 bytes. 0 on success, -1 when the
 * process is not visible.
 */
int gpr_cli_proc_cmdline(pid_t pid, char *out, size_t len);

/* ---------------- progress (cli/util_progress.c) ---------------- */

/*
 * A progress line on stderr about `what` (a file name), shown after a
 * second of work while stderr is a terminal: the phase, and how far the
 * trace reader's replay has come. stop clears it. Not nested.
 */
void gpr_cli_progress_start(const char *what);
void gpr_cli_progress_phase(const char *phase);
void gpr_cli_progress_stop(void);

/* ---------------- the tracer's preload (cli/trace_preload.c) --------- */

/*
 * The LD_PRELOAD that puts tracer first in front of old (NULL: none),
 * after the sanitizer runtimes old names (they must stay first), without
 * a second copy of the tracer. 0, or -1 when it does not fit in len.
 */
int gpr_cli_preload_value(const char *tracer, const char *old, char *out,
			  size_t len);

#endif /* GPR_CLI_H */
