/*
 * Where the command's companions are: CUPTI and the Python that runs
 * `explain` and `demo` (the injection library: trace/inject/locate.h).
 * Each search lists, in `tried`, every place it looked, one "  <place>\n"
 * line each, for the error message.
 */
#ifndef GPR_CLI_LOCATE_H
#define GPR_CLI_LOCATE_H

#include <stddef.h>

#include "out/buf.h"

/*
 * libcupti, into out: $GPURECLAIM_CUPTI_LIBRARY; the nvidia-cuda-cupti
 * wheel (nvidia/cu13/lib, then nvidia/cuda_cupti/lib) in the site-packages
 * of the Python that cmd runs (or of this command's environment, or
 * python3); the one beside Torch's libraries (torch/lib); that Python
 * environment's lib; the CUDA toolkit ($CUDA_HOME or $CUDA_PATH when set,
 * else /usr/local/cuda and /usr/local/cuda-*: extras/CUPTI/lib64,
 * targets/<arch>/lib); $LD_LIBRARY_PATH; the system library folder.
 * *from names the place it was found. 0 or -1.
 */
int gpr_cli_find_cupti(char *const *cmd, char *out, size_t len,
		       const char **from, struct gpr__buf *tried);

/*
 * The Python interpreter for `explain` and `demo`: $GPURECLAIM_PYTHON,
 * else python3 beside this executable (a virtual environment's bin), else
 * "python3" (found on PATH by execvp).
 */
const char *gpr_cli_python(char *buf, size_t len);

#endif /* GPR_CLI_LOCATE_H */
