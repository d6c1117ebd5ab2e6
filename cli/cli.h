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
#include <sys/types.h>

#define GPR_CLI_OK 0
#define GPR_CLI_ERROR 1
#define GPR_CLI_USAGE 2

/* Subcommands (cli/cmd_<name>.c). */
int gpr_cli_ps(int argc, char **argv);
int gpr_cli_version(int argc, char **argv);
int gpr_cli_trace(int argc, char **argv);
int gpr_cli_report(int argc, char **argv);
/* Handed to `python3 -m gpureclaim` (cli/cmd_python.c). */
int gpr_cli_explain(int argc, char **argv);
int gpr_cli_demo(int argc, char **argv);

/*
 * Output is built with the output toolkit (src/out/: buf.h, json.h,
 * text.h, fmt.h), whole, and written only on success.
 */

/* ---------------- arguments, terminal (cli/util_parse.c) ---------------- */

/*
 * Parses a whole string as a number of seconds: finite, > 0 and at most
 * one day. 0 and *out set on success, -1 otherwise.
 */
int gpr_cli_parse_seconds(const char *s, double *out);

/*
 * Parses a comma-separated list of non-negative integers (GPU indexes)
 * and adds each to list[*n] (capacity cap), skipping duplicates.
 * 0 on success, -1 on a malformed item or when the list is full.
 */
int gpr_cli_parse_index_list(const char *s, int *list, int *n, int cap);

/* Width of the terminal on fd; 0 when fd is not a terminal. */
int gpr_cli_term_width(int fd);

/* ---------------- processes (cli/util_proc.c) ---------------- */

/*
 * The user name owning process pid (owner of /proc/PID, name through
 * getpwuid_r, the numeric uid when it has no name). 0 on success, -1 when
 * the process is not visible (no such pid, another pid namespace).
 */
int gpr_cli_proc_user(pid_t pid, char *out, size_t len);

/*
 * The command line of pid: /proc/PID/cmdline with its NUL separators
 * shown as spaces; when that is empty (kernel thread, zombie) the name
 * from /proc/PID/comm in brackets, "[name]". Truncated to len - 1 bytes.
 * 0 on success, -1 when the process is not visible.
 */
int gpr_cli_proc_cmdline(pid_t pid, char *out, size_t len);

#endif /* GPR_CLI_H */
