/*
 * What a process that used NVML pays as it ends: `gpureclaim ps` skips
 * nvmlShutdown, yet the closing of NVML's device files at exit may do the
 * same work in the kernel, inside the time a shell waits for the command.
 *
 *   build/bench/nvml_exit [ROUNDS]     (default 15, at least 3)
 *
 * Each round starts one child per way of ending, in a rotating order.
 * A child loads NVML, initialises it, takes every GPU's first handle (a
 * thread each, as `ps` does) and reads each GPU's compute list, tells the
 * parent the time (CLOCK_MONOTONIC) through a pipe, then ends:
 *   exit()      through libc: atexit handlers, library destructors
 *   _exit()     straight to the kernel (what `ps` does)
 *   shutdown    nvmlShutdown, then _exit()
 *   detach      forks a grandchild that keeps NVML's files open and
 *               _exits at once; the child _exits (the teardown then runs
 *               in the grandchild, outside the time the shell waits)
 *   clone       the same grandchild made by clone(CLONE_VM | CLONE_FILES):
 *               it shares the child's memory and descriptors instead of
 *               copying them (what `gpureclaim ps` does, cli/util_exit.c)
 *   no NVML     the same child without NVML at all (the floor)
 * "end" is from the child's last step to the parent's waitpid; for
 * detach and clone, "background" is from the child's reaping to the
 * grandchild's.
 * Skips (exit 0) without NVML.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "driver/nvml_abi.h"

#define MAX_GPUS 64
#define MAX_ROUNDS 200

enum how { EXIT_LIBC, EXIT_KERNEL, SHUTDOWN, DETACH, CLONE, NO_NVML, N_HOW };

static const char *how_name[N_HOW] = {
    "exit() (atexit handlers, destructors)",
    "_exit() (the kernel only)",
    "nvmlShutdown, then _exit()",
    "detach: a grandchild holds NVML, _exit()",
    "clone: the same, sharing memory and fds",
    "no NVML (the floor)",
};

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static nvmlReturn_t (*handle_fn)(unsigned, nvmlDevice_t *);

static _Alignas(64) char clone_stack[64 * 1024];

static int end_at_once(void *unused)
{
	(void)unused;
	_exit(0);
}

static void *attach(void *arg)
{
	nvmlDevice_t d;
	handle_fn((unsigned)(size_t)arg, &d);
	return NULL;
}

/* The child: NVML's work, the time on fd, then the ending `how`. */
static void child(enum how how, int fd)
{
	void *lib = NULL;
	nvmlReturn_t (*shut)(void) = NULL;
	if (how != NO_NVML) {
		lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
		if (!lib)
			_exit(3);
		nvmlReturn_t (*init)(void) =
		    (nvmlReturn_t(*)(void))dlsym(lib, "nvmlInit_v2");
		shut = (nvmlReturn_t(*)(void))dlsym(lib, "nvmlShutdown");
		nvmlReturn_t (*count)(unsigned *) =
		    (nvmlReturn_t(*)(unsigned *))dlsym(lib,
						       "nvmlDeviceGetCount_v2");
		handle_fn = (nvmlReturn_t(*)(unsigned, nvmlDevice_t *))dlsym(
		    lib, "nvmlDeviceGetHandleByIndex_v2");
		nvmlReturn_t (*procs)(nvmlDevice_t, unsigned *, void *) =
		    (nvmlReturn_t(*)(nvmlDevice_t, unsigned *, void *))dlsym(
			lib, "nvmlDeviceGetComputeRunningProcesses_v3");
		unsigned n = 0;
		if (!init || !shut || !count || !handle_fn || !procs ||
		    init() != NVML_SUCCESS || count(&n) != NVML_SUCCESS)
			_exit(4);
		if (n > MAX_GPUS)
			n = MAX_GPUS;
		pthread_t th[MAX_GPUS];
		for (unsigned i = 0; i < n; i++)
			pthread_create(&th[i], NULL, attach, (void *)(size_t)i);
		for (unsigned i = 0; i < n; i++)
			pthread_join(th[i], NULL);
		for (unsigned i = 0; i < n; i++) {
			nvmlDevice_t d;
			gpr_nvmlProcessInfo_cc_t rec[64];
			unsigned cnt = 64;
			handle_fn(i, &d);
			procs(d, &cnt, rec);
		}
	}
	double t = now_ms();
	if (write(fd, &t, sizeof t) != sizeof t)
		_exit(5);
	close(fd);
	if (how == SHUTDOWN)
		shut();
	if (how == DETACH && fork() == 0)
		_exit(0); /* the grandchild: its exit closes NVML's files */
	if (how == CLONE)
		clone(end_at_once, clone_stack + sizeof clone_stack,
		      CLONE_VM | CLONE_FILES | SIGCHLD, NULL);
	if (how == EXIT_LIBC)
		exit(0);
	_exit(0);
}

struct sample {
	double end, background;
	int ok;
};

static struct sample run(enum how how)
{
	struct sample s = {0};
	int p[2];
	if (pipe(p) != 0)
		return s;
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		child(how, p[1]);
	}
	close(p[1]);
	double last = 0;
	ssize_t got = pid > 0 ? read(p[0], &last, sizeof last) : -1;
	close(p[0]);
	int status = 0;
	if (pid > 0 && waitpid(pid, &status, 0) == pid) {
		double reaped = now_ms();
		s.end = reaped - last;
		s.ok = got == sizeof last && WIFEXITED(status) &&
		       WEXITSTATUS(status) == 0;
		if (how == DETACH || how == CLONE) {
			/* the grandchild, ours as the subreaper: one, and
			 * ending well */
			int n = 0;
			while (waitpid(-1, &status, 0) > 0) {
				s.background = now_ms() - reaped;
				s.ok = s.ok && WIFEXITED(status) &&
				       WEXITSTATUS(status) == 0;
				n++;
			}
			s.ok = s.ok && n == 1;
		}
	}
	return s;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 15;
	if (rounds < 3 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "nvml_exit: ROUNDS is 3 to %d\n", MAX_ROUNDS);
		return 2;
	}
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		printf("skipped: no NVML (%s)\n", dlerror());
		return 0;
	}
	dlclose(lib); /* the children load it themselves */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	static double end[N_HOW][MAX_ROUNDS], bg[N_HOW][MAX_ROUNDS];
	int bad = 0;
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < N_HOW; k++) {
			enum how h = (enum how)((k + r) % N_HOW);
			struct sample s = run(h);
			bad += !s.ok;
			end[h][r] = s.end;
			bg[h][r] = s.background;
		}
	}
	printf("nvml_exit: %d rounds; a child loads NVML, initialises it, "
	       "attaches every GPU\n(a thread each), reads each compute "
	       "list, then ends as below. \"end\": from its last\nstep to "
	       "the parent's waitpid, ms%s\n",
	       rounds, bad ? " (SOME CHILDREN FAILED)" : "");
	printf("%-44s %10s %10s\n", "how it ends", "end median", "end min");
	for (int h = 0; h < N_HOW; h++) {
		double mn = end[h][0];
		for (int r = 1; r < rounds; r++)
			mn = end[h][r] < mn ? end[h][r] : mn;
		printf("%-44s %7.3f ms %7.3f ms\n", how_name[h],
		       median(end[h], rounds), mn);
	}
	printf("%-44s %7.3f ms\n", "  detach: the grandchild's end, after",
	       median(bg[DETACH], rounds));
	printf("%-44s %7.3f ms\n", "  clone: the grandchild's end, after",
	       median(bg[CLONE], rounds));
	return bad ? 1 : 0;
}
