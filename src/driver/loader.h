/*
 * Generic dlopen/dlsym helpers of the driver layer, shared by cuda.c,
 * nvml.c and nvml_procs.c only. A symbol table row names a pointer field
 * of an api struct by its offset; several rows may fill the same field
 * (newest ABI version first), and the first symbol that resolves wins.
 */
#ifndef GPR_DRIVER_LOADER_H
#define GPR_DRIVER_LOADER_H

#include <stddef.h>

struct gpr__dl_sym {
	size_t offset;	  /* of the function pointer in the api struct */
	const char *name; /* exported symbol */
	int required;
};

/*
 * Builds a gpr__dl_sym table from a GPR__*_SYMBOLS X-macro for the api
 * struct `type`, and checks at compile time that each field holds a
 * pointer (the loader stores dlsym's void * there).
 */
#define GPR__DL_ROW(type, field, sym, req) {offsetof(type, field), sym, req},
#define GPR__DL_CHECK(type, field)                                             \
	_Static_assert(sizeof(((type *)0)->field) == sizeof(void *),           \
		       #field " must be a function pointer");

/*
 * Writes printf-style text into err (NULL or errlen 0: nothing), always
 * NUL-terminated, truncated to fit.
 */
void gpr__errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * dlopen(path, flags) with dlerror() reset first. On failure returns NULL
 * and copies dlerror's text into err (the pointer dlerror returns dies at
 * the next dl call, so it is never kept).
 */
void *gpr__dl_open(const char *path, int flags, char *err, size_t errlen);

/*
 * Resolves every row of `syms` in `lib` into `api` (zeroed first). A field
 * is set by the first of its rows whose symbol resolves. Returns 0, or
 * GPR_E_BAD_LIBRARY when a required field stays unset, with err reading
 * "<path> is not <what>: <symbol> missing" (the field's newest name).
 */
int gpr__dl_resolve(void *lib, const char *path, const char *what,
		    const struct gpr__dl_sym *syms, size_t n, void *api,
		    size_t api_size, char *err, size_t errlen);

/*
 * The library to use: `path` when set and non-empty, else the environment
 * variable `env` when set and non-empty, else `fallback`. An empty string
 * never reaches dlopen: dlopen("") would return the main program, whose
 * global scope may hold anything.
 */
const char *gpr__dl_choose(const char *path, const char *env,
			   const char *fallback);

#endif /* GPR_DRIVER_LOADER_H */
