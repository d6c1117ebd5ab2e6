/*
 * Finding the command's companions (locate.h): CUPTI where users have it,
 * and the Python interpreter for the Python-side subcommands (the tracer:
 * trace/inject/locate.h, the one rule the extension follows too).
 */
#include "locate.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__aarch64__)
#define CUDA_TARGET "sbsa-linux"
#define MULTIARCH "aarch64-linux-gnu"
#else
#define CUDA_TARGET "x86_64-linux"
#define MULTIARCH "x86_64-linux-gnu"
#endif

static int is_file(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* One place looked at: a line "  <what>" of the error message. */
static void note(struct gpr__buf *tried, const char *what)
{
	gpr__buf_printf(tried, "  %s\n", what);
}

/* Directory of this executable, into dir (no trailing slash). */
static int self_dir(char *dir, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", dir, len - 1);
	if (n <= 0)
		return -1;
	dir[n] = '\0';
	char *slash = strrchr(dir, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	return 0;
}

/* The last file matching pattern (the highest version sorts last). */
static int glob_last(const char *pattern, char *out, size_t len)
{
	glob_t g;
	int found = 0;
	if (glob(pattern, 0, NULL, &g) == 0) {
		for (size_t i = g.gl_pathc; i-- > 0 && !found;)
			if (is_file(g.gl_pathv[i]) &&
			    strlen(g.gl_pathv[i]) < len) {
				snprintf(out, len, "%s", g.gl_pathv[i]);
				found = 1;
			}
		globfree(&g);
	}
	return found ? 0 : -1;
}

/* Looks for pattern, noting it in tried; the absolute path in out. */
static int try_glob(const char *pattern, char *out, size_t len,
		    struct gpr__buf *tried)
{
	char found[PATH_MAX], real[PATH_MAX];
	note(tried, pattern);
	if (glob_last(pattern, found, sizeof(found)) < 0 ||
	    !realpath(found, real) || strlen(real) >= len)
		return -1;
	snprintf(out, len, "%s", real);
	return 0;
}

/*
 * The Python whose site-packages may hold CUPTI: the one CMD runs, else
 * the one beside this command (a virtual environment), else python3.
 */
static const char *probe_python(char *const *cmd, char *buf, size_t len)
{
	const char *base = strrchr(cmd[0], '/');
	base = base ? base + 1 : cmd[0];
	if (strncmp(base, "python", 6) == 0)
		return cmd[0];
	return gpr_cli_python(buf, len);
}

/*
 * Asks a Python interpreter where CUPTI lies in its environment (not with
 * -S: a virtual environment's site-packages are set up by site). It
 * imports nothing of its own but glob, and prints
 * "TRY <where>" for each place it looks, then "<FROM> <path>" for the
 * first CUPTI: W the nvidia-cuda-cupti wheel (CUDA 13: nvidia/cu13/lib,
 * CUDA 12: nvidia/cuda_cupti/lib), T beside Torch's libraries, E the
 * environment's own lib (conda).
 */
static const char probe_code[] =
    "import glob,os,site,sys\n"
    "d=[]\n"
    "for s in list(site.getsitepackages())+[site.getusersitepackages()]"
    "+[p for p in sys.path if p.endswith(('site-packages',"
    "'dist-packages'))]:\n"
    " if s and os.path.isdir(s) and s not in d: d.append(s)\n"
    "w=[('W',os.path.join(s,x)) for x in ('nvidia/cu13/lib',"
    "'nvidia/cuda_cupti/lib') for s in d]\n"
    "w+=[('T',os.path.join(s,'torch','lib')) for s in d]\n"
    "w+=[('E',os.path.join(sys.prefix,'lib'))]\n"
    "for k,p in w:\n"
    " print('TRY',p)\n"
    " f=sorted(glob.glob(os.path.join(p,'libcupti*.so*')))\n"
    " f=[x for x in f if os.path.isfile(x)]\n"
    " if f: print(k,os.path.realpath(f[-1])); break\n";

static int python_cupti(const char *python, char *out, size_t len,
			const char **from, struct gpr__buf *tried)
{
	int fds[2];
	if (pipe(fds) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR);
		dup2(fds[1], 1);
		if (devnull >= 0) {
			dup2(devnull, 0);
			dup2(devnull, 2);
		}
		close(fds[0]);
		execlp(python, python, "-c", probe_code, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	struct gpr__buf got = {0};
	char chunk[4096];
	ssize_t k;
	while ((k = read(fds[0], chunk, sizeof(chunk))) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			break;
		gpr__buf_putn(&got, chunk, (size_t)k);
	}
	close(fds[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (got.oom || !got.len) {
		gpr__buf_printf(
		    tried, "  the site-packages of %s (it did not answer)\n",
		    python);
		gpr__buf_free(&got);
		return -1;
	}
	int found = -1;
	char *save = NULL;
	for (char *line = strtok_r(got.data, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "TRY ", 4) == 0) {
			note(tried, line + 4);
			continue;
		}
		if (line[0] && line[1] == ' ' && is_file(line + 2) &&
		    strlen(line + 2) < len) {
			snprintf(out, len, "%s", line + 2);
			*from = line[0] == 'W'	 ? "the nvidia-cuda-cupti wheel"
				: line[0] == 'T' ? "Torch's libraries"
						 : "the Python environment";
			found = 0;
		}
	}
	gpr__buf_free(&got);
	return found;
}

/* A CUDA toolkit at root: its CUPTI folders. */
static int toolkit_cupti(const char *root, char *out, size_t len,
			 struct gpr__buf *tried)
{
	const char *sub[] = {"extras/CUPTI/lib64",
			     "targets/" CUDA_TARGET "/lib", "lib64"};
	for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
		char pat[PATH_MAX + 64];
		snprintf(pat, sizeof(pat), "%s/%s/libcupti.so*", root, sub[i]);
		if (try_glob(pat, out, len, tried) == 0)
			return 0;
	}
	return -1;
}

int gpr_cli_find_cupti(char *const *cmd, char *out, size_t len,
		       const char **from, struct gpr__buf *tried)
{
	const char *env_lib = getenv("GPURECLAIM_CUPTI_LIBRARY");
	*from = "GPURECLAIM_CUPTI_LIBRARY";
	if (env_lib && *env_lib) {
		gpr__buf_printf(tried, "  $GPURECLAIM_CUPTI_LIBRARY (%s)\n",
				env_lib);
		snprintf(out, len, "%s", env_lib);
		return is_file(out) ? 0 : -1;
	}
	note(tried, "$GPURECLAIM_CUPTI_LIBRARY (not set)");

	char pybuf[PATH_MAX];
	const char *python = probe_python(cmd, pybuf, sizeof(pybuf));
	if (python_cupti(python, out, len, from, tried) == 0)
		return 0;

	/* The toolkit the user named, else the usual places. */
	*from = "the CUDA toolkit";
	const char *homes[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH")};
	int named = 0;
	for (size_t i = 0; i < sizeof(homes) / sizeof(homes[0]); i++) {
		if (!homes[i] || !*homes[i])
			continue;
		named = 1;
		if (toolkit_cupti(homes[i], out, len, tried) == 0)
			return 0;
	}
	if (!named) {
		if (toolkit_cupti("/usr/local/cuda", out, len, tried) == 0)
			return 0;
		glob_t g;
		int ok = -1;
		if (glob("/usr/local/cuda-*", GLOB_ONLYDIR, NULL, &g) == 0) {
			for (size_t i = g.gl_pathc; i-- > 0 && ok < 0;)
				ok = toolkit_cupti(g.gl_pathv[i], out, len,
						   tried);
			globfree(&g);
		}
		if (ok == 0)
			return 0;
	}

	*from = "LD_LIBRARY_PATH";
	const char *ld = getenv("LD_LIBRARY_PATH");
	if (ld && *ld) {
		char *copy = strdup(ld);
		char *save = NULL;
		int ok = -1;
		for (char *d = copy ? strtok_r(copy, ":", &save) : NULL;
		     d && ok < 0; d = strtok_r(NULL, ":", &save)) {
			char pat[PATH_MAX + 32];
			snprintf(pat, sizeof(pat), "%s/libcupti.so*", d);
			ok = try_glob(pat, out, len, tried);
		}
		free(copy);
		if (ok == 0)
			return 0;
	}
	*from = "the system library folder";
	return try_glob("/usr/lib/" MULTIARCH "/libcupti.so*", out, len, tried);
}

const char *gpr_cli_python(char *buf, size_t len)
{
	const char *env = getenv("GPURECLAIM_PYTHON");
	if (env && *env)
		return env;
	char dir[PATH_MAX];
	if (self_dir(dir, sizeof(dir)) == 0) {
		snprintf(buf, len, "%.*s/python3", (int)(len - 9), dir);
		if (access(buf, X_OK) == 0)
			return buf;
	}
	return "python3";
}
