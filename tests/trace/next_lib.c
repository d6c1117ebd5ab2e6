/*
 * Preloaded before the tracer by tests/trace/test_preload.c: the program
 * asks dlsym(RTLD_NEXT, "gpr_test_next"), which only this library
 * defines. The tracer's dlsym hook must pass RTLD_NEXT on as a tail call,
 * so the C library still sees the program as the caller and finds it.
 */
__attribute__((visibility("default"))) int gpr_test_next(void)
{
	return 1;
}
