/*
 * Where `gpureclaim trace` finds its pieces: the tracer library beside the
 * command (or in ../lib), and CUPTI (for the CUPTI backend and the
 * interposer's fallback) in the usual places; and how it puts the tracer
 * in front of a program's LD_PRELOAD.
 */
#include "cli.h"

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

static int is_file(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
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

int gpr_cli_find_tracer(char *out, size_t len)
{
	const char *over = getenv("GPURECLAIM_TRACE_LIBRARY");
	if (over && *over) {
		if (!realpath(over, out) || !is_file(out))
			return -1;
		return 0;
	}
	char dir[PATH_MAX];
	if (self_dir(dir, sizeof(dir)) < 0)
		return -1;
	const char *rel[] = {"", "/../lib", "/../lib64"};
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		char p[PATH_MAX + 64];
		snprintf(p, sizeof(p), "%s%s/libgpureclaim_trace.so", dir,
			 rel[i]);
		if (is_file(p) && realpath(p, out) && strlen(out) < len)
			return 0;
	}
	return -1;
}

/* First file matching pattern (the highest version sorts last). */
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

/*
 * Asks a Python interpreter for the CUPTI of the nvidia-cuda-cupti wheel
 * in its site-packages (CUDA 13: nvidia/cu13/lib, CUDA 12:
 * nvidia/cuda_cupti/lib). Nothing is imported but site and glob.
 */
static int wheel_cupti(const char *python, char *out, size_t len)
{
	static const char code[] =
	    "import glob,os,site,sys\n"
	    "d=list(site.getsitepackages())+[site.getusersitepackages()]"
	    "+sys.path\n"
	    "for s in d:\n"
	    " for sub in ('nvidia/cu13/lib','nvidia/cuda_cupti/lib'):\n"
	    "  for f in sorted(glob.glob(os.path.join(s,sub,"
	    "'libcupti.so*')),reverse=True):\n"
	    "   print(os.path.realpath(f)); sys.exit(0)\n";
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
		execlp(python, python, "-S", "-c", code, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	size_t got = 0;
	ssize_t k;
	while (got < len - 1 &&
	       (k = read(fds[0], out + got, len - 1 - got)) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			break;
		got += (size_t)k;
	}
	close(fds[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	out[got] = '\0';
	char *nl = strchr(out, '\n');
	if (nl)
		*nl = '\0';
	return got > 0 && is_file(out) ? 0 : -1;
}

/*
 * Finds libcupti: $GPURECLAIM_CUPTI_LIBRARY, the wheel of the Python that
 * CMD runs (or python3), $CUDA_HOME / $CUDA_PATH, /usr/local/cuda*,
 * $LD_LIBRARY_PATH, the distribution's library directory. `from` says
 * where it was found.
 */
int gpr_cli_find_cupti(char *const *cmd, char *out, size_t len,
		       const char **from)
{
	const char *env_lib = getenv("GPURECLAIM_CUPTI_LIBRARY");
	if (env_lib && *env_lib) {
		*from = "GPURECLAIM_CUPTI_LIBRARY";
		snprintf(out, len, "%s", env_lib);
		return is_file(out) ? 0 : -1;
	}
	const char *base = strrchr(cmd[0], '/');
	base = base ? base + 1 : cmd[0];
	const char *python =
	    strncmp(base, "python", 6) == 0 ? cmd[0] : "python3";
	*from = "the nvidia-cuda-cupti wheel";
	if (wheel_cupti(python, out, len) == 0)
		return 0;
	char pat[PATH_MAX];
	const char *homes[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"),
			       "/usr/local/cuda"};
	*from = "the CUDA toolkit";
	for (size_t i = 0; i < sizeof(homes) / sizeof(homes[0]); i++) {
		if (!homes[i] || !*homes[i])
			continue;
		snprintf(pat, sizeof(pat), "%s/extras/CUPTI/lib64/libcupti.so*",
			 homes[i]);
		if (glob_last(pat, out, len) == 0)
			return 0;
		snprintf(pat, sizeof(pat),
			 "%s/targets/x86_64-linux/lib/libcupti.so*", homes[i]);
		if (glob_last(pat, out, len) == 0)
			return 0;
	}
	if (glob_last("/usr/local/cuda-*/extras/CUPTI/lib64/libcupti.so*", out,
		      len) == 0)
		return 0;
	*from = "LD_LIBRARY_PATH";
	const char *ld = getenv("LD_LIBRARY_PATH");
	if (ld) {
		char *copy = strdup(ld);
		char *save = NULL;
		int ok = -1;
		for (char *d = copy ? strtok_r(copy, ":", &save) : NULL;
		     d && ok < 0; d = strtok_r(NULL, ":", &save)) {
			snprintf(pat, sizeof(pat), "%s/libcupti.so*", d);
			ok = glob_last(pat, out, len);
		}
		free(copy);
		if (ok == 0)
			return 0;
	}
	*from = "the system library directory";
	return glob_last("/usr/lib/x86_64-linux-gnu/libcupti.so*", out, len);
}

/*
 * Whether an LD_PRELOAD entry is a sanitizer's runtime, which must stay
 * first: ASan refuses to run when another object comes before it.
 */
static int sanitizer(const char *entry, size_t len)
{
	static const char *const names[] = {"libasan.so", "libtsan.so",
					    "libubsan.so", "libhwasan.so",
					    "libclang_rt."};
	const char *b = entry;
	for (size_t i = 0; i < len; i++)
		if (entry[i] == '/')
			b = entry + i + 1;
	size_t bl = len - (size_t)(b - entry);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		size_t n = strlen(names[i]);
		if (bl >= n && strncmp(b, names[i], n) == 0)
			return 1;
	}
	return 0;
}

int gpr_cli_preload_value(const char *tracer, const char *old, char *out,
			  size_t len)
{
	size_t at = 0;
	out[0] = '\0';
	/* the sanitizer runtimes of the old value, then the tracer, then
	 * the rest (entries separated by ':' or spaces, as ld.so reads) */
	for (int pass = 0; pass < 3; pass++) {
		if (pass == 1) {
			int k = snprintf(out + at, len - at, "%s%s",
					 at ? ":" : "", tracer);
			if (k < 0 || (size_t)k >= len - at)
				return -1;
			at += (size_t)k;
			continue;
		}
		for (const char *p = old ? old : ""; *p;) {
			size_t n = strcspn(p, ": ");
			if (n && (pass == 0) == sanitizer(p, n) &&
			    !(strlen(tracer) == n &&
			      strncmp(p, tracer, n) == 0)) {
				int k = snprintf(out + at, len - at, "%s%.*s",
						 at ? ":" : "", (int)n, p);
				if (k < 0 || (size_t)k >= len - at)
					return -1;
				at += (size_t)k;
			}
			p += n;
			p += strspn(p, ": ");
		}
	}
	return 0;
}
