/*
 * The GPR_ERRORS table read three ways (message, name, and a check that no
 * code collides with a negated errno), the version, gpr_free.
 */
#include <stdlib.h>

#include "gpureclaim.h"

/* Linux's errno values are 1..4095 (MAX_ERRNO): a caller that also sees
 * -errno values must be able to tell ours apart. */
#define GPR_X_APART(name, value, kind, msg)                                    \
	_Static_assert((value) == 0 || (value) < -4095,                        \
		       #name " collides with a negated errno");
GPR_ERRORS(GPR_X_APART)
#undef GPR_X_APART

const char *gpr_version(void)
{
	return GPR_VERSION_STRING;
}

int gpr_version_major(void)
{
	return GPR_VERSION_MAJOR;
}

int gpr_version_minor(void)
{
	return GPR_VERSION_MINOR;
}

const char *gpr_strerror(int err)
{
	switch (err) {
#define GPR_X_CASE(name, value, kind, msg)                                     \
	case value:                                                            \
		return msg;
		GPR_ERRORS(GPR_X_CASE)
#undef GPR_X_CASE
	}
	return "unknown error";
}

const char *gpr_errname(int err)
{
	switch (err) {
#define GPR_X_CASE(name, value, kind, msg)                                     \
	case value:                                                            \
		return #name;
		GPR_ERRORS(GPR_X_CASE)
#undef GPR_X_CASE
	}
	return NULL;
}

void gpr_free(void *p)
{
	free(p);
}
