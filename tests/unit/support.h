/*
 * Shared by the C unit tests: each test runs in a fresh process (the
 * simulated driver reads GPURECLAIM_SIM once, when it is loaded), and
 * helpers drive the simulated driver the way a framework would.
 */
#ifndef GPR_TEST_SUPPORT_H
#define GPR_TEST_SUPPORT_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

/*
 * main() of a test program: with no argument, runs every test in its own
 * process (fork + exec of this program with the test's name) and prints a
 * cmocka-style summary; with a name, runs that test alone in-process.
 */
int gpr_test_main(int argc, char **argv, const char *group,
		  const struct CMUnitTest *tests, size_t n);

/*
 * Points this process at the simulated driver ($GPR_SIM_DIR): sets
 * GPURECLAIM_SIM to `config` plus a state name unique to this process, and
 * GPURECLAIM_CUDA_LIBRARY / GPURECLAIM_NVML_LIBRARY to the sim's files.
 * Call before anything loads a vendor library.
 */
void sim_setup(const char *config);

/* Path of a file of the sim ("libcuda.so.1", "libnvidia-ml.so.1"). */
const char *sim_path(const char *file);

/* Loads the sim's libcuda as a framework would (dlopen + cuInit). */
void *sim_cuda_load(void);

/* Retains GPU `dev`'s primary context and makes it current; returns CUresult.
 */
int sim_cuda_open_device(void *lib, int dev);

/* cuMemAlloc_v2 / cuMemFree_v2 on the current context; return CUresult. */
int sim_cuda_alloc(void *lib, size_t bytes, unsigned long long *ptr);
int sim_cuda_free(void *lib, unsigned long long ptr);

/*
 * A forked child that calls cuInit (a child starts with nothing), makes
 * GPU 0's primary context current and allocates `bytes` (none for 0),
 * then waits until *keep, the pipe's end, is closed: sim_target_end
 * closes it and reaps the child. Fails the test when the child cannot.
 */
int sim_target(void *lib, unsigned long long bytes, int *keep);
void sim_target_end(int pid, int keep);

/* Resolves a symbol of a loaded library or fails the test. */
void *sim_sym(void *lib, const char *name);

/*
 * Switches LC_NUMERIC to a locale whose decimal point is a comma (as a
 * host program in de_DE would); 0 when none can be had.
 */
int comma_locale(void);

#endif
