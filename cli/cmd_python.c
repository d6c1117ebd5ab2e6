/*
 * `gpureclaim explain`, `gpureclaim demo`, `gpureclaim run` and
 * `gpureclaim exporter` (Prometheus metrics), a Dask cluster's reports
 * (`ps --dask`, `release --dask`), the agent's `agent` command and the
 * help of the others (`release --pid`, `reclaim`, `ps --explain` are C:
 * cli/cmd_agent.c, cli/cmd_reclaim.c, cli/ps_explain.c) and `report` of an
 * out-of-memory post-mortem: the subcommands that live in the Python
 * package (they run a Python program, Torch and CuPy, or Dask). The
 * command hands them to `python3 -m gpureclaim`, so both spellings are one
 * program: the same help, output and exit status.
 */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../trace/inject/locate.h"
#include "locate.h"
#include "out/buf.h"

/*
 * Runs gpureclaim.__main__.main(argv) and says in one line, with no
 * traceback, when that Python cannot import the package. The current
 * folder, which -c puts first on the path, is taken off it first: root
 * running `gpureclaim agent start` in a user's folder must not import
 * that user's files (what -P does, in any Python).
 */
static const char boot[] =
    "import sys\n"
    "if sys.path and sys.path[0] == '':\n"
    " del sys.path[0]\n"
    "try:\n"
    " from gpureclaim.__main__ import main\n"
    "except ImportError as e:\n"
    " sys.exit('gpureclaim %s: the gpureclaim Python package cannot be "
    "imported by %s (%s); install it (pip install .) or set "
    "GPURECLAIM_PYTHON' % (sys.argv[1], sys.executable, e))\n"
    "sys.exit(main(sys.argv[1:]))\n";

/*
 * An installed command (`make install PREFIX=P`: P/bin/gpureclaim) hands
 * off to the package installed with it (P/lib/python3.X/site-packages),
 * which the user's Python does not look in: the folder that holds only a
 * link to that package (P/<libdir>/gpureclaim-python, cli/meson.build)
 * goes first on PYTHONPATH, so the command and the package are of one
 * installation and nothing else is shadowed. A build folder's command
 * (<build>/cli/gpureclaim) does the same with the build folder's package
 * (<build>/python); a command beside neither changes nothing.
 */
static int package_in(const char *self, const char *rel, char *dir, size_t len)
{
	char probe[PATH_MAX];
	if (snprintf(dir, len, "%s/%s", self, rel) >= (int)len ||
	    snprintf(probe, sizeof(probe), "%s/gpureclaim/__main__.py", dir) >=
		(int)sizeof(probe))
		return 0;
	return access(probe, R_OK) == 0;
}

static void package_beside_me(void)
{
	char self[PATH_MAX], dir[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return;
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (!slash)
		return;
	*slash = '\0';
	int found = 0;
#ifdef GPR_PYTHON_DIR
	found = package_in(self, GPR_PYTHON_DIR, dir, sizeof(dir));
#endif
#ifdef GPR_PYTHON_BUILDDIR
	if (!found)
		found = package_in(self, GPR_PYTHON_BUILDDIR, dir, sizeof(dir));
#endif
	if (!found)
		return;
	const char *old = getenv("PYTHONPATH");
	if (!old || !*old) {
		setenv("PYTHONPATH", dir, 1);
		return;
	}
	size_t len = strlen(dir) + strlen(old) + 2;
	char *both = malloc(len);
	if (!both)
		return;
	snprintf(both, len, "%s:%s", dir, old);
	setenv("PYTHONPATH", both, 1);
	free(both);
}

static int run_python(int argc, char **argv)
{
	char buf[PATH_MAX];
	const char *python = gpr_cli_python(buf, sizeof(buf));
	package_beside_me();
	char **args = calloc((size_t)argc + 4, sizeof(*args));
	if (!args) {
		fprintf(stderr, "gpureclaim %s: out of memory\n", argv[0]);
		return GPR_CLI_ERROR;
	}
	args[0] = (char *)python;
	args[1] = "-c";
	args[2] = (char *)boot;
	for (int i = 0; i < argc; i++)
		args[3 + i] = argv[i];
	fflush(NULL);
	execvp(python, args);
	int e = errno;
	free(args);
	fprintf(stderr,
		"gpureclaim %s: cannot run %s: %s (this subcommand needs "
		"Python with the gpureclaim package; set "
		"GPURECLAIM_PYTHON)\n",
		argv[0], python, strerror(e));
	return GPR_CLI_ERROR;
}

int gpr_cli_explain(int argc, char **argv)
{
	return run_python(argc, argv);
}

int gpr_cli_demo(int argc, char **argv)
{
	return run_python(argc, argv);
}

int gpr_cli_cluster(int argc, char **argv)
{
	return run_python(argc, argv);
}

int gpr_cli_agent(int argc, char **argv)
{
	return run_python(argc, argv);
}

/*
 * `run --resume-on-demand`: the interposer goes in front of CMD's driver
 * calls (docs/suspend.md, "Resume on demand"), dormant (it records
 * nothing) and in wake mode. Where the tracer is and how LD_PRELOAD is
 * ordered are the command's (locate.c, trace_preload.c), so the value is
 * made here and handed to run.py in GPURECLAIM_RUN_PRELOAD, which puts it
 * in CMD's environment only. 0, or -1 when the tracer cannot be found
 * (said on stderr).
 */
static int wake_preload(int argc, char **argv)
{
	int want = 0;
	for (int i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--") == 0)
			break;
		want |= strcmp(argv[i], "--resume-on-demand") == 0;
	}
	if (!want)
		return 0;
	char tracer[PATH_MAX], pre[8192];
	struct gpr__buf tried = {0};
	if (gpr_inj_locate(GPR_INJ_FROM_COMMAND, tracer, sizeof tracer,
			   &tried) < 0) {
		fprintf(stderr,
			"gpureclaim run: --resume-on-demand needs "
			"libgpureclaim_trace.so, not found; looked at:\n%s"
			"gpureclaim run: set GPURECLAIM_TRACE_LIBRARY to its "
			"path\n",
			gpr__buf_str(&tried));
		gpr__buf_free(&tried);
		return -1;
	}
	gpr__buf_free(&tried);
	if (gpr_cli_preload_value(tracer, getenv("LD_PRELOAD"), pre,
				  sizeof pre) != 0) {
		fprintf(stderr, "gpureclaim run: LD_PRELOAD is too long to "
				"put the interposer in front\n");
		return -1;
	}
	setenv("GPURECLAIM_RUN_PRELOAD", pre, 1);
	return 0;
}

int gpr_cli_run(int argc, char **argv)
{
	if (wake_preload(argc, argv) != 0)
		return GPR_CLI_ERROR;
	return run_python(argc, argv);
}

int gpr_cli_exporter(int argc, char **argv)
{
	return run_python(argc, argv);
}

int gpr_cli_oom_report(int argc, char **argv)
{
	return run_python(argc, argv);
}
