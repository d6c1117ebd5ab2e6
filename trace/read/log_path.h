/*
 * Where a new trace log goes: the rule that `gpureclaim trace -o FILE`
 * and a program's gpureclaim.trace(FILE) share.
 */
#ifndef GPR_TRACE_LOG_PATH_H
#define GPR_TRACE_LOG_PATH_H

#include <stddef.h>

/*
 * Clears the way for a log at path: an old trace log there (or an empty
 * file) is removed; nothing there is fine; any other file (or a symlink,
 * a directory) is left alone. 0, or -1 with a one-line reason in why.
 */
int gpr_trace_clear_path(const char *path, char *why, size_t len);

#endif /* GPR_TRACE_LOG_PATH_H */
