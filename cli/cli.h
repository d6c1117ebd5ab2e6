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

#include <stdarg.h>
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

/* ---------------- output buffer (cli/util_buf.c) ---------------- */

/*
 * A growable NUL-terminated string. Output is built whole in one of these
 * and written only on success, so a failure never leaves half a document
 * on stdout. Zero-initialise (`struct cli_buf b = {0};`); release with
 * cli_buf_free(). After an allocation failure the buffer stays failed
 * (b->oom = 1): later appends do nothing, check oom once at the end.
 */
struct cli_buf {
	char *data; /* NULL until something was appended */
	size_t len;
	size_t cap;
	int oom;
};

void cli_buf_free(struct cli_buf *b);
void cli_buf_reset(struct cli_buf *b); /* len = 0, keeps the memory */
void cli_buf_append(struct cli_buf *b, const char *s, size_t n);
void cli_buf_puts(struct cli_buf *b, const char *s);
void cli_buf_printf(struct cli_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void cli_buf_vprintf(struct cli_buf *b, const char *fmt, va_list ap);
/* The contents ("" when empty); valid until the next append. */
const char *cli_buf_str(const struct cli_buf *b);
/*
 * Writes the whole buffer to fd 1 and flushes; -1 on a write error
 * (EPIPE included), 0 otherwise.
 */
int cli_buf_write_stdout(const struct cli_buf *b);

/* ---------------- JSON (cli/util_json.c) ---------------- */

/*
 * Appends s as a JSON string literal (quotes included): ", \ and control
 * characters (C0, DEL and the C1 range U+0080..U+009F) escaped, bytes that
 * are not valid UTF-8 replaced by U+FFFD so the document always parses and
 * never carries a raw terminal control. NULL appends `null`.
 */
void cli_json_str(struct cli_buf *b, const char *s);
/* `"key":` followed by the string value (or null). */
void cli_json_kv_str(struct cli_buf *b, const char *key, const char *s);
void cli_json_kv_u64(struct cli_buf *b, const char *key, uint64_t v);
void cli_json_kv_int(struct cli_buf *b, const char *key, long long v);
void cli_json_kv_bool(struct cli_buf *b, const char *key, int v);
/* `"key":` alone, for an object or array value that follows. */
void cli_json_key(struct cli_buf *b, const char *key);

/*
 * Length in bytes (1-4) of the valid UTF-8 sequence at s, its code point
 * in *cp (if cp is not NULL); 0 if the bytes at s are not one (a stray
 * continuation byte, an overlong form, a surrogate, beyond U+10FFFF, a
 * sequence cut short). s must be NUL-terminated; at the NUL it returns 1.
 */
size_t cli_utf8_len(const char *s, uint32_t *cp);

/* ---------------- terminal-safe text (cli/util_text.c) ---------------- */

/*
 * Appends s as a terminal may show it: valid UTF-8 is kept except the
 * controls (C0, DEL, C1 such as U+009B, which opens an escape sequence like
 * ESC [); those and every byte that is not part of valid UTF-8 (a raw 0x9b
 * included, CSI to a terminal in 8-bit mode) appear as '?'. At most `max`
 * characters (max <= 0: all), never cutting inside one; with `pad`, spaces
 * up to `max`. Each character counts as one column.
 */
void cli_buf_put_text(struct cli_buf *b, const char *s, int max, int pad);
/* How many characters cli_buf_put_text shows for all of s. */
int cli_text_len(const char *s);

/* ---------------- formatting (cli/util_fmt.c) ---------------- */

/*
 * Bytes in binary units with one decimal ("512 B", "1.5 KiB",
 * "80.0 GiB"), written into out (at least 16 bytes); returns out.
 */
char *cli_fmt_bytes(uint64_t bytes, char *out, size_t len);

/*
 * Parses a whole string as a number of seconds: finite, > 0 and at most
 * one day. 0 and *out set on success, -1 otherwise.
 */
int cli_parse_seconds(const char *s, double *out);

/*
 * Parses a comma-separated list of non-negative integers (GPU indexes)
 * and adds each to list[*n] (capacity cap), skipping duplicates.
 * 0 on success, -1 on a malformed item or when the list is full.
 */
int cli_parse_index_list(const char *s, int *list, int *n, int cap);

/* Width of the terminal on fd; 0 when fd is not a terminal. */
int cli_term_width(int fd);

/* ---------------- processes (cli/util_proc.c) ---------------- */

/*
 * The user name owning process pid (owner of /proc/PID, name through
 * getpwuid_r, the numeric uid when it has no name). 0 on success, -1 when
 * the process is not visible (no such pid, another pid namespace).
 */
int cli_proc_user(pid_t pid, char *out, size_t len);

/*
 * The command line of pid: /proc/PID/cmdline with its NUL separators
 * shown as spaces; when that is empty (kernel thread, zombie) the name
 * from /proc/PID/comm in brackets, "[name]". Truncated to len - 1 bytes.
 * 0 on success, -1 when the process is not visible.
 */
int cli_proc_cmdline(pid_t pid, char *out, size_t len);

#endif /* GPR_CLI_H */
