/*
 * Where a file of ours may go: the one rule for replacing what lies at a
 * path, shared by the trace log (`gpureclaim trace -o FILE`, a program's
 * gpureclaim.trace(FILE)) and the exports of `gpureclaim report`.
 */
#ifndef GPR_TRACE_LOG_PATH_H
#define GPR_TRACE_LOG_PATH_H

#include <stddef.h>
#include <sys/stat.h>

/*
 * Whether what lies at path (lstat'ed into lst) may be replaced by a file
 * of ours: 0 if so, otherwise 1 with the reason in why, a phrase that
 * follows the path in a message. Refused: the file `input` (device and
 * inode; NULL: none), a directory or any other non-regular file, a
 * symbolic link (with force: the link itself may be replaced, never
 * followed), and without force a file that is not ours to replace:
 * another user's, or one that neither is empty nor begins with
 * `signature` (the phrase calls ours `what`, e.g. "a trace log"). force:
 * 1 given, 0 not given (the phrase says what --force would do), -1 the
 * command has no --force.
 */
int gpr_trace_path_refused(char *why, size_t len, const char *path,
			   const struct stat *lst, const char *signature,
			   const char *what, int force,
			   const struct stat *input);

/*
 * Clears the way for a new trace log at path, by that rule with no
 * --force: nothing there is fine, an old trace log of this user (or an
 * empty file) is removed, anything else is left alone. 0, or -1 with a
 * one-line reason in why ("PATH exists and is not a trace log", ...).
 */
int gpr_trace_clear_path(const char *path, char *why, size_t len);

/*
 * path as a word a person can paste into a shell, into out (returns out;
 * 4 * strlen(path) + 4 bytes always suffice): as it is when it holds only
 * [A-Za-z0-9_./+,:=@%^-] (and is not empty), else in single quotes (a
 * quote inside as '\''); a path holding what a terminal must not be sent
 * (controls, bidirectional formatting, bytes that are not UTF-8: the rule
 * of src/out/text.h) as $'...' with those bytes as \xNN, so a message
 * naming it never drives the terminal and still names the file. The one
 * way every message of `gpureclaim report` and `trace` names a path.
 */
char *gpr_trace_path_quoted(char *out, size_t len, const char *path);

/* Room for any path gpr_trace_path_quoted is given (PATH_MAX long). */
#define GPR_TRACE_QUOTED_MAX (4 * 4096 + 8)

#endif /* GPR_TRACE_LOG_PATH_H */
