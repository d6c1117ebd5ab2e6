/*
 * dlopen/dlsym for the driver layer: one copy of the dlerror() dance and
 * of the "first resolvable symbol wins" rule used by the CUDA and NVML
 * tables (see loader.h).
 */
#include "loader.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpureclaim.h"

void gpr__errf(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || errlen == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	int r = vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	if (r < 0)
		err[0] = '\0';
}

void *gpr__dl_open(const char *path, int flags, char *err, size_t errlen)
{
	dlerror();
	void *lib = dlopen(path, flags);
	if (!lib) {
		const char *why = dlerror();
		/* glibc starts with "<path>: ", which callers name already */
		size_t n = strlen(path);
		if (why && strncmp(why, path, n) == 0 && why[n] == ':' &&
		    why[n + 1] == ' ')
			why += n + 2;
		gpr__errf(err, errlen, "%s", why ? why : "dlopen failed");
	}
	return lib;
}

static void *field_get(const void *api, size_t off)
{
	void *p;
	memcpy(&p, (const char *)api + off, sizeof p);
	return p;
}

static void field_set(void *api, size_t off, void *p)
{
	memcpy((char *)api + off, &p, sizeof p);
}

int gpr__dl_resolve(void *lib, const char *path, const char *what,
		    const struct gpr__dl_sym *syms, size_t n, void *api,
		    size_t api_size, char *err, size_t errlen)
{
	memset(api, 0, api_size);
	for (size_t i = 0; i < n; i++) {
		if (field_get(api, syms[i].offset))
			continue;
		dlerror();
		void *p = dlsym(lib, syms[i].name);
		if (p)
			field_set(api, syms[i].offset, p);
	}
	for (size_t i = 0; i < n; i++) {
		if (!syms[i].required || field_get(api, syms[i].offset))
			continue;
		/* name the field's first (newest) row */
		const char *name = syms[i].name;
		for (size_t j = 0; j < i; j++) {
			if (syms[j].offset == syms[i].offset) {
				name = syms[j].name;
				break;
			}
		}
		gpr__errf(err, errlen, "%s is not %s: %s missing", path, what,
			  name);
		return GPR_E_BAD_LIBRARY;
	}
	return 0;
}

const char *gpr__dl_choose(const char *path, const char *env,
			   const char *fallback)
{
	if (path && *path)
		return path;
	const char *e = getenv(env);
	if (e && *e)
		return e;
	return fallback;
}
