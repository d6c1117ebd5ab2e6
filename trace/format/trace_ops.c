/* The operation table of trace_ops.h, looked up by name and by id. */
#include "trace_ops.h"

#include <string.h>

static const char *const names[] = {
#define GPR_X_OP(op, name, kind, domain, cbid, cbid2, entries) name,
    GPR_TRACE_OPS(GPR_X_OP)
#undef GPR_X_OP
};

enum gpr_trace_kind gpr_trace_op_kind(const char *name)
{
	for (unsigned i = 0; i < GPR_TRACE_N_OPS; i++)
		if (strcmp(names[i], name) == 0)
			return gpr_trace_op_kind_of(i);
	return GPR_K_OTHER;
}

const char *gpr_trace_op_name(unsigned op)
{
	return op < GPR_TRACE_N_OPS ? names[op] : "?";
}
