/*
 * Who a process is, from /proc: the GPU process list gives only pids.
 * A pid may belong to another pid namespace or have exited between the
 * NVML query and these reads: callers show it as unknown.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "procfs.h"

int gpr_cli_proc_user(pid_t pid, char *out, size_t len)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (stat(path, &st) != 0)
		return -1;

	struct passwd pw, *res = NULL;
	long sz = sysconf(_SC_GETPW_R_SIZE_MAX);
	size_t bufsz = sz > 0 ? (size_t)sz : 4096;
	for (;;) {
		char *buf = malloc(bufsz);
		if (!buf)
			break;
		int rc = getpwuid_r(st.st_uid, &pw, buf, bufsz, &res);
		if (rc == ERANGE && bufsz < (1u << 20)) {
			free(buf);
			bufsz *= 2;
			continue;
		}
		if (rc == 0 && res) {
			snprintf(out, len, "%s", res->pw_name);
			free(buf);
			return 0;
		}
		free(buf);
		break;
	}
	snprintf(out, len, "%u", (unsigned)st.st_uid);
	return 0;
}

int gpr_cli_proc_cmdline(pid_t pid, char *out, size_t len)
{
	char path[64];
	if (len == 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	ssize_t n = gpr__read_small(path, out, len);
	if (n < 0)
		return -1;
	/* arguments are NUL-separated, the last one NUL-terminated */
	while (n > 0 && out[n - 1] == '\0')
		n--;
	/* the separators become spaces; a newline inside an argument stays,
	 * for the text's terminal-safe rule ('?') and JSON's escape (\n) to
	 * show, as docs/ps.md says */
	for (ssize_t i = 0; i < n; i++)
		if (out[i] == '\0')
			out[i] = ' ';
	out[n] = '\0';
	if (n > 0)
		return 0;

	char comm[64];
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	n = gpr__read_small(path, comm, sizeof(comm));
	if (n < 0)
		return -1;
	while (n > 0 && comm[n - 1] == '\n')
		comm[--n] = '\0';
	snprintf(out, len, "[%s]", comm);
	return 0;
}

static int host_ns = 1;

static void test_pid_namespace(void)
{
	struct stat st;
	/* PROC_PID_INIT_INO (include/linux/proc_ns.h), fixed since Linux
	 * 3.8; a kernel without the file cannot tell: host */
	host_ns =
	    stat("/proc/self/ns/pid", &st) != 0 || st.st_ino == 0xEFFFFFFCu;
}

/* 1 unless /proc/self/ns/pid shows a pid namespace other than the host's;
 * `ps` asks from a thread per GPU. */
static int host_pid_namespace(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, test_pid_namespace);
	return host_ns;
}

void gpr_cli_proc_warm(void)
{
	char user[64];
	(void)host_pid_namespace();
	(void)gpr_cli_proc_user(getpid(), user, sizeof user);
}

enum gpr_cli_pid_state gpr_cli_proc_state(uint32_t pid)
{
	unsigned long long start;
	return gpr_cli_proc_state_at(pid, &start);
}

/* Field 22 of a /proc/PID/stat line, the process's start time in clock
 * ticks after boot, read after the comm's last ')'; 0 if unreadable. */
static unsigned long long start_time(const char *close)
{
	const char *p = close + 2; /* the state, field 3 */
	for (int field = 3; field < 22 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	return p ? strtoull(p, NULL, 10) : 0;
}

enum gpr_cli_pid_state gpr_cli_proc_state_at(uint32_t pid,
					     unsigned long long *start)
{
	*start = 0;
	/* 0 would signal our process group and a value above INT_MAX a
	 * negative pid, a group: neither names a process */
	if (pid == 0 || pid > INT_MAX)
		return GPR_CLI_PID_OUTSIDE;
	if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
		return host_pid_namespace() ? GPR_CLI_PID_EXITED
					    : GPR_CLI_PID_OUTSIDE;
	char path[64], stat_line[512];
	snprintf(path, sizeof(path), "/proc/%u/stat", (unsigned)pid);
	ssize_t n = gpr__read_small(path, stat_line, sizeof(stat_line));
	/* "pid (comm) S ...": comm may hold ')' itself, the state follows
	 * the last one */
	const char *close = n > 0 ? strrchr(stat_line, ')') : NULL;
	if (close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X'))
		return GPR_CLI_PID_EXITED;
	if (close && close[1] == ' ')
		*start = start_time(close);
	return GPR_CLI_PID_ALIVE;
}
