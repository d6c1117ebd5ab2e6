/*
 * A library planted where a path variable points (GPURECLAIM_CUPTI_LIBRARY,
 * GPURECLAIM_CUDA_LIBRARY): loading it runs its constructor, which leaves
 * the file $PLANTED_MARK with the effective uid it ran as. In a setuid
 * program it must never be loaded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void planted(void)
{
	const char *mark = getenv("PLANTED_MARK");
	FILE *f = mark ? fopen(mark, "w") : NULL;
	if (f) {
		fprintf(f, "euid=%d\n", (int)geteuid());
		fclose(f);
	}
}
