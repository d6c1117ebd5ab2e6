/* Finding the tracer (locate.h). */
#include "locate.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TRACER "libgpureclaim_trace.so"
#define EXPORT_NAME "gpureclaim_trace_start"

#if defined(__x86_64__)
#define MACHINE EM_X86_64
#elif defined(__aarch64__)
#define MACHINE EM_AARCH64
#else
#define MACHINE EM_NONE
#endif

/* Reads exactly n bytes at off. */
static int read_at(int fd, void *buf, size_t n, uint64_t off)
{
	return pread(fd, buf, n, (off_t)off) == (ssize_t)n ? 0 : -1;
}

/*
 * Whether fd is the tracer: a 64-bit little-endian ELF shared object for
 * this machine whose dynamic symbols define EXPORT_NAME. NULL when it is,
 * else why not. Nothing is loaded; every offset is checked against the
 * file's size.
 */
static const char *not_tracer(int fd)
{
	struct stat st;
	Elf64_Ehdr eh;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		return "not a regular file";
	uint64_t size = (uint64_t)st.st_size;
	if (read_at(fd, &eh, sizeof(eh), 0) < 0 ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
		return "not an ELF shared library";
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_type != ET_DYN ||
	    eh.e_machine != MACHINE)
		return "not a shared library of this machine";
	if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 ||
	    eh.e_shoff > size ||
	    (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) > size - eh.e_shoff)
		return "a damaged shared library";
	for (unsigned i = 0; i < eh.e_shnum; i++) {
		Elf64_Shdr sym, str;
		if (read_at(fd, &sym, sizeof(sym),
			    eh.e_shoff + (uint64_t)i * sizeof(sym)) < 0)
			break;
		if (sym.sh_type != SHT_DYNSYM || sym.sh_link >= eh.e_shnum ||
		    sym.sh_entsize != sizeof(Elf64_Sym))
			continue;
		if (read_at(fd, &str, sizeof(str),
			    eh.e_shoff + (uint64_t)sym.sh_link * sizeof(str)) <
			0 ||
		    sym.sh_offset > size ||
		    sym.sh_size > size - sym.sh_offset ||
		    str.sh_offset > size || str.sh_size > size - str.sh_offset)
			break;
		char name[sizeof(EXPORT_NAME)];
		for (uint64_t k = 0; k < sym.sh_size / sizeof(Elf64_Sym); k++) {
			Elf64_Sym s;
			if (read_at(fd, &s, sizeof(s),
				    sym.sh_offset + k * sizeof(s)) < 0)
				break;
			if (s.st_shndx == SHN_UNDEF ||
			    s.st_name >= str.sh_size ||
			    str.sh_size - s.st_name < sizeof(name) ||
			    read_at(fd, name, sizeof(name),
				    str.sh_offset + s.st_name) < 0)
				continue;
			if (memcmp(name, EXPORT_NAME, sizeof(name)) == 0)
				return NULL;
		}
		break;
	}
	return "a shared library that does not export " EXPORT_NAME;
}

/* path, when it is the tracer, as an absolute path in out: 0 or -1, with
 * why not on the line of tried that names it. */
static int take(const char *path, const char *shown, char *out, size_t len,
		struct gpr__buf *tried)
{
	char real[PATH_MAX];
	const char *why = NULL;
	int fd = -1;
	if (!realpath(path, real))
		why = "not found";
	else if (strlen(real) >= len)
		why = "its path is too long";
	else if ((fd = open(real, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
		why = "cannot be read";
	else
		why = not_tracer(fd);
	if (fd >= 0)
		close(fd);
	gpr__buf_printf(tried, "  %s%s%s\n", shown, why ? ": " : "",
			why ? why : "");
	if (why)
		return -1;
	snprintf(out, len, "%s", real);
	return 0;
}

/* The last match of pattern that is the tracer (the highest version
 * sorts last); the pattern noted in tried once when nothing matches. */
static int take_glob(const char *pattern, char *out, size_t len,
		     struct gpr__buf *tried)
{
	glob_t g;
	int found = -1;
	if (glob(pattern, 0, NULL, &g) != 0) {
		gpr__buf_printf(tried, "  %s\n", pattern);
		return -1;
	}
	for (size_t i = g.gl_pathc; i-- > 0 && found < 0;)
		found = take(g.gl_pathv[i], g.gl_pathv[i], out, len, tried);
	globfree(&g);
	return found;
}

/* The folder of the caller: the program's, or the object's holding this
 * file's code (the extension). 0 or -1. */
static int home(enum gpr_inj_from from, char *dir, size_t len)
{
	if (from == GPR_INJ_FROM_COMMAND) {
		ssize_t n = readlink("/proc/self/exe", dir, len - 1);
		if (n <= 0)
			return -1;
		dir[n] = '\0';
	} else {
		Dl_info di;
		if (!dladdr((const void *)home, &di) || !di.dli_fname ||
		    !realpath(di.dli_fname, dir))
			return -1;
	}
	char *slash = strrchr(dir, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	return 0;
}

int gpr_inj_locate(enum gpr_inj_from from, char *out, size_t len,
		   struct gpr__buf *tried)
{
	const char *over = secure_getenv("GPURECLAIM_TRACE_LIBRARY");
	if (over && *over) {
		char shown[PATH_MAX + 64];
		snprintf(shown, sizeof(shown), "GPURECLAIM_TRACE_LIBRARY=%s",
			 over);
		return take(over, shown, out, len, tried);
	}
	gpr__buf_puts(tried, "  GPURECLAIM_TRACE_LIBRARY (not set)\n");
	char dir[PATH_MAX];
	if (home(from, dir, sizeof(dir)) < 0) {
		gpr__buf_puts(tried,
			      from == GPR_INJ_FROM_COMMAND
				  ? "  (this command's folder is unknown)\n"
				  : "  (this module's folder is unknown)\n");
		return -1;
	}
	/* beside; a C install; a build folder; a wheel install; --target */
	static const char *const command[] = {
	    "",
#ifdef GPR_TRACER_LIBDIR
	    "/" GPR_TRACER_LIBDIR,
#endif
#ifdef GPR_TRACER_BUILDDIR
	    "/" GPR_TRACER_BUILDDIR,
#endif
	    "/../lib*/python3*/site-packages/gpureclaim",
	    "/../lib*/python3*/dist-packages/gpureclaim",
	    "/../gpureclaim",
	};
	static const char *const module[] = {""};
	const char *const *rel =
	    from == GPR_INJ_FROM_COMMAND ? command : module;
	size_t n = from == GPR_INJ_FROM_COMMAND
		       ? sizeof(command) / sizeof(command[0])
		       : sizeof(module) / sizeof(module[0]);
	for (size_t i = 0; i < n; i++) {
		char pat[PATH_MAX + 128];
		snprintf(pat, sizeof(pat), "%s%s/" TRACER, dir, rel[i]);
		if (take_glob(pat, out, len, tried) == 0)
			return 0;
	}
	return -1;
}

void *gpr_inj_locate_loaded(const char *name)
{
	void *fn = dlsym(RTLD_DEFAULT, name);
	if (fn)
		return fn;
	/* the driver loads $CUDA_INJECTION64_PATH with local symbols */
	const char *path = secure_getenv("CUDA_INJECTION64_PATH");
	void *lib = path && *path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
	if (lib) {
		fn = dlsym(lib, name);
		dlclose(lib); /* still loaded: the driver holds it */
	}
	return fn;
}
