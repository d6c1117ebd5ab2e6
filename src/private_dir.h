/*
 * The agent's rules for a private folder (docs/agent.md), one copy for
 * the agent's C client (cli/agent_client.c) and the records of suspended
 * processes (suspend_record.c); python/gpureclaim/agent/ has them in
 * Python. Internal, inline: a stat each.
 */
#ifndef GPR_PRIVATE_DIR_H
#define GPR_PRIVATE_DIR_H

#include <sys/stat.h>

/* A real directory (not a link) of uid, mode 0700. */
static inline int gpr__private_dir(const char *d, long uid)
{
	struct stat st;
	return lstat(d, &st) == 0 && S_ISDIR(st.st_mode) &&
	       (long)st.st_uid == uid && (st.st_mode & 07777) == 0700;
}

/* XDG_RUNTIME_DIR as the agent takes it: absolute, a directory of uid
 * with mode 0700 (reached through a link is fine). */
static inline int gpr__xdg_ok(const char *d, long uid)
{
	struct stat st;
	return d && d[0] == '/' && stat(d, &st) == 0 && S_ISDIR(st.st_mode) &&
	       (long)st.st_uid == uid && (st.st_mode & 07777) == 0700;
}

#endif /* GPR_PRIVATE_DIR_H */
