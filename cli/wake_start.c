/*
 * How `gpureclaim suspend` starts the watcher of a process it suspended
 * (docs/suspend.md, "Resume on demand"; the watcher: cli/wake_watch.c):
 * `gpureclaim resume --pid N --on-demand --background` spawned from this
 * program's own file, its first word (whether it watches, or why not)
 * read from its output, its pid from the record it wrote.
 */
#include "suspend_run.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define START_WAIT_S 60.0

extern char **environ;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int gpr_cli_wake_start(int pid, double interval,
		       struct gpr_cli_suspend_result *res)
{
	res->on_demand = -1;
	res->on_demand_poll = interval > 0 ? interval : GPR_CLI_POLL_S;
	char self[PATH_MAX], pids[24], polls[32];
	ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
	if (k <= 0) {
		snprintf(res->on_demand_line, sizeof res->on_demand_line,
			 "gpureclaim's own program cannot be found "
			 "(/proc/self/exe)");
		return -1;
	}
	self[k] = '\0';
	snprintf(pids, sizeof pids, "%d", pid);
	snprintf(polls, sizeof polls, "%g",
		 interval > 0 ? interval : GPR_CLI_POLL_S);
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0)
		return -1;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
	char *argv[] = {"gpureclaim", "resume",	      "--pid",
			pids,	      "--on-demand",  "--poll",
			polls,	      "--background", NULL};
	pid_t child = -1;
	int e = posix_spawn(&child, self, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	char buf[1024];
	size_t n = 0;
	double end = now() + START_WAIT_S;
	while (e == 0 && n < sizeof buf - 1) {
		struct pollfd p = {fds[0], POLLIN, 0};
		int left = (int)((end - now()) * 1000);
		if (left <= 0 || poll(&p, 1, left) <= 0)
			break;
		ssize_t r = read(fds[0], buf + n, sizeof buf - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fds[0]);
	buf[n] = '\0';
	int status = -1;
	if (e == 0 && waitpid(child, &status, 0) < 0)
		status = -1;
	char *nl = strchr(buf, '\n');
	if (nl)
		*nl = '\0';
	const char *line = buf;
	if (strncmp(line, "gpureclaim resume: ", 19) == 0)
		line += 19;
	if (e != 0)
		snprintf(res->on_demand_line, sizeof res->on_demand_line,
			 "the watcher could not be started: %s", strerror(e));
	else
		snprintf(res->on_demand_line, sizeof res->on_demand_line,
			 "%.*s", (int)sizeof res->on_demand_line - 1,
			 n ? line : "the watcher said nothing");
	if (e == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		char dir[4096], err[256];
		struct gpr__record rec;
		res->on_demand = 1;
		if (gpr__record_dir(dir, sizeof dir, 0, err, sizeof err) == 0 &&
		    gpr__record_read(dir, pid, &rec) == 0)
			res->watcher = rec.watcher;
		return 0;
	}
	return -1;
}
