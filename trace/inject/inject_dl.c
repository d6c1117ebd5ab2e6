/* The C library's dlsym, for the tracer's own look-ups (dl.h). */
#include "dl.h"

#include <dlfcn.h>
#include <stddef.h>

static void *(*libc_dlsym)(void *, const char *);

/* Not instrumented (dl.h): the interposer's hook asks for it while a
 * sanitizer runtime is still starting. */
GPR_INJ_UNINSTRUMENTED void *(*gpr_inj_libc_dlsym(void))(void *, const char *)
{
	if (!libc_dlsym) {
		void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
		if (!p)
			p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
		*(void **)&libc_dlsym = p;
	}
	return libc_dlsym;
}

void *gpr_inj_real_dlsym(void *handle, const char *name)
{
	void *(*fn)(void *, const char *) = gpr_inj_libc_dlsym();
	return fn ? fn(handle, name) : NULL;
}

/*
 * Another preloaded library may hook dlsym to hand out its own driver
 * functions (HAMi-core enforces a container's memory limit that way). It
 * comes after the tracer in LD_PRELOAD or /etc/ld.so.preload; asking
 * it, rather than the C library, keeps its hooks in the chain: the tracer
 * then wraps what it answers (inject_preload.c, "chained").
 */
GPR_INJ_UNINSTRUMENTED void *gpr_inj_next_dlsym(void *handle, const char *name)
{
	static void *(*_Atomic next)(void *, const char *);
	void *(*fn)(void *, const char *) = next;
	if (!fn) {
		*(void **)&fn = gpr_inj_real_dlsym(RTLD_NEXT, "dlsym");
		if (!fn)
			fn = gpr_inj_libc_dlsym();
		next = fn;
	}
	return fn ? fn(handle, name) : NULL;
}
