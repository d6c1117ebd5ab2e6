/* Error messages from the GPR_ERRORS table, the version, gpr_free. */
#include <stdlib.h>

#include "gpureclaim.h"

const char *gpr_version(void)
{
	return GPR_VERSION_STRING;
}

const char *gpr_strerror(int err)
{
	switch (err) {
#define GPR_X_CASE(name, value, msg)                                           \
	case value:                                                            \
		return msg;
		GPR_ERRORS(GPR_X_CASE)
#undef GPR_X_CASE
	}
	return "unknown error";
}

void gpr_free(void *p)
{
	free(p);
}
