/*
 * The C library's dlsym, for the tracer's own look-ups (inject_dl.c): the
 * tracer defines dlsym itself (its interposer), and a call to that name
 * from inside the library could reach the hook.
 */
#ifndef GPR_TRACE_INJECT_DL_H
#define GPR_TRACE_INJECT_DL_H

/*
 * Not instrumented by any sanitizer: the interposer's dlsym and what it
 * calls run while a sanitizer runtime is still starting (ASan's and
 * UBSan's preloaded, TSan's inside the program: its start-up asks dlsym
 * for the functions it intercepts before its own state exists).
 */
#if defined(__has_attribute)
#if __has_attribute(disable_sanitizer_instrumentation)
#define GPR_INJ_UNINSTRUMENTED                                                 \
	__attribute__((disable_sanitizer_instrumentation))
#endif
#endif
#ifndef GPR_INJ_UNINSTRUMENTED
#define GPR_INJ_UNINSTRUMENTED                                                 \
	__attribute__((no_sanitize("address", "undefined", "thread")))
#endif

void *(*gpr_inj_libc_dlsym(void))(void *, const char *);
void *gpr_inj_real_dlsym(void *handle, const char *name);
/* The dlsym after this library in the global scope: another interposer's
 * (HAMi-core defines one), else the C library's. */
void *gpr_inj_next_dlsym(void *handle, const char *name);

#endif /* GPR_TRACE_INJECT_DL_H */
