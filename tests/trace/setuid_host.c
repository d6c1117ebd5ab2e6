/*
 * A stand-in for a setuid program that uses CUDA: tests/trace/test_setuid.sh
 * makes a copy of it setuid root and runs it as another user. It prints
 * its real and effective uid and whether the kernel marked it for secure
 * execution (AT_SECURE), then loads the injection library as libcuda
 * would and initialises it.
 *
 * Usage: setuid_host INJECTION_LIB
 */
#include <dlfcn.h>
#include <stdio.h>
#include <sys/auxv.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	printf("ruid=%d euid=%d secure=%lu\n", (int)getuid(), (int)geteuid(),
	       getauxval(AT_SECURE));
	fflush(stdout);
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
		return 3;
	}
	int (*init)(void) = (int (*)(void))dlsym(h, "InitializeInjection");
	if (!init || init() != 1)
		return 4;
	return 0;
}
