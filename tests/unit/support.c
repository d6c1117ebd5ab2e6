#include "support.h"

#include <dlfcn.h>
#include <errno.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GPR_TEST_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(GPR_TEST_TSAN)
#define GPR_TEST_TSAN 1
#endif
#ifdef GPR_TEST_TSAN
/*
 * The simulated driver starts a thread at cuInit (its checkpoint thread,
 * docs/sim.md), so a test that calls cuInit and then forks a child that
 * calls cuInit too starts a thread after a multi-threaded fork, which
 * ThreadSanitizer refuses by default. The children here run a few calls
 * and exit: let them.
 */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
	return "die_after_fork=0";
}
#endif

int gpr_test_main(int argc, char **argv, const char *group,
		  const struct CMUnitTest *tests, size_t n)
{
	if (argc > 1) {
		for (size_t i = 0; i < n; i++) {
			if (strcmp(tests[i].name, argv[1]) == 0)
				return _cmocka_run_group_tests(group, &tests[i],
							       1, NULL, NULL);
		}
		fprintf(stderr, "%s: no test named %s\n", argv[0], argv[1]);
		return 2;
	}
	size_t failed = 0;
	for (size_t i = 0; i < n; i++) {
		fflush(NULL);
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			char *args[] = {argv[0], (char *)tests[i].name, NULL};
			execv("/proc/self/exe", args);
			perror("execv");
			_exit(127);
		}
		int status = 0;
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			failed++;
			fprintf(stderr, "[  FAILED  ] %s (%s %d)\n",
				tests[i].name,
				WIFSIGNALED(status) ? "signal" : "exit",
				WIFSIGNALED(status) ? WTERMSIG(status)
						    : WEXITSTATUS(status));
		}
	}
	printf("[==========] %s: %zu test(s) run, each in its own process.\n",
	       group, n);
	printf("[  PASSED  ] %zu test(s).\n", n - failed);
	if (failed)
		printf("[  FAILED  ] %zu test(s).\n", failed);
	return failed ? 1 : 0;
}

const char *sim_path(const char *file)
{
	static __thread char buf[4096];
	const char *dir = getenv("GPR_SIM_DIR");
	if (!dir || !*dir)
		dir = "build/sim";
	snprintf(buf, sizeof buf, "%s/%s", dir, file);
	return buf;
}

void sim_setup(const char *config)
{
	char cfg[2048];
	snprintf(cfg, sizeof cfg, "%s%sstate=unit-%ld", config ? config : "",
		 config && *config ? ";" : "", (long)getpid());
	setenv("GPURECLAIM_SIM", cfg, 1);
	setenv("GPURECLAIM_CUDA_LIBRARY", sim_path("libcuda.so.1"), 1);
	setenv("GPURECLAIM_NVML_LIBRARY", sim_path("libnvidia-ml.so.1"), 1);
}

void *sim_sym(void *lib, const char *name)
{
	void *p = dlsym(lib, name);
	if (!p)
		fail_msg("symbol %s missing from the sim", name);
	return p;
}

void *sim_cuda_load(void)
{
	void *lib = dlopen(sim_path("libcuda.so.1"), RTLD_NOW | RTLD_GLOBAL);
	if (!lib)
		fail_msg("cannot load the sim's libcuda: %s", dlerror());
	int (*init)(unsigned) = (int (*)(unsigned))sim_sym(lib, "cuInit");
	assert_int_equal(init(0), 0);
	return lib;
}

int sim_cuda_open_device(void *lib, int dev)
{
	int (*get)(int *, int) =
	    (int (*)(int *, int))sim_sym(lib, "cuDeviceGet");
	int (*retain)(void **, int) =
	    (int (*)(void **, int))sim_sym(lib, "cuDevicePrimaryCtxRetain");
	int (*set)(void *) = (int (*)(void *))sim_sym(lib, "cuCtxSetCurrent");
	int d = -1;
	int r = get(&d, dev);
	if (r)
		return r;
	void *ctx = NULL;
	r = retain(&ctx, d);
	if (r)
		return r;
	return set(ctx);
}

int sim_cuda_alloc(void *lib, size_t bytes, unsigned long long *ptr)
{
	int (*alloc)(unsigned long long *, size_t) =
	    (int (*)(unsigned long long *, size_t))sim_sym(lib,
							   "cuMemAlloc_v2");
	return alloc(ptr, bytes);
}

int sim_cuda_free(void *lib, unsigned long long ptr)
{
	int (*fr)(unsigned long long) =
	    (int (*)(unsigned long long))sim_sym(lib, "cuMemFree_v2");
	return fr(ptr);
}

/*
 * Switches LC_NUMERIC to a locale whose decimal point is a comma: an
 * installed one, else de_DE compiled by localedef into a temporary folder.
 * 0 when neither is possible.
 */
int comma_locale(void)
{
	static const char *const names[] = {"de_DE.UTF-8", "de_DE.utf8",
					    "fr_FR.UTF-8", "de_DE"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (setlocale(LC_NUMERIC, names[i]) &&
		    localeconv()->decimal_point[0] == ',')
			return 1;
	char dir[] = "/tmp/gpr-locale-XXXXXX";
	if (!mkdtemp(dir))
		return 0;
	char cmd[256];
	snprintf(cmd, sizeof cmd,
		 "localedef -i de_DE -f UTF-8 %s/de_DE.UTF-8 >/dev/null 2>&1",
		 dir);
	int rc = system(cmd);
	setenv("LOCPATH", dir, 1);
	int ok = rc == 0 && setlocale(LC_NUMERIC, "de_DE.UTF-8") &&
		 localeconv()->decimal_point[0] == ',';
	unsetenv("LOCPATH");
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		ok = 0;
	return ok;
}

int sim_target(void *lib, unsigned long long bytes, int *keep)
{
	int up[2], hold[2];
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(hold), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(up[0]);
		close(hold[1]);
		unsigned long long p;
		int ok = ((int (*)(unsigned))sim_sym(lib, "cuInit"))(0) == 0 &&
			 sim_cuda_open_device(lib, 0) == 0 &&
			 (!bytes || sim_cuda_alloc(lib, bytes, &p) == 0);
		char c = ok ? 'y' : 'n', x;
		if (write(up[1], &c, 1) != 1 || read(hold[0], &x, 1) < 0)
			_exit(3);
		_exit(ok ? 0 : 2);
	}
	close(up[1]);
	close(hold[0]);
	char c = 0;
	assert_int_equal(read(up[0], &c, 1), 1);
	assert_int_equal(c, 'y');
	close(up[0]);
	*keep = hold[1];
	return (int)pid;
}

void sim_target_end(int pid, int keep)
{
	close(keep);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
}
