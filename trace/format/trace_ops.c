/* The operation table of trace_format.h, as data. */
#include "trace_format.h"

#include <string.h>

static const struct {
	const char *name;
	enum gpr_trace_kind kind;
} ops[] = {
#define GPR_X_OP(id, name, kind) {name, kind},
    GPR_TRACE_OPS(GPR_X_OP)
#undef GPR_X_OP
};

enum gpr_trace_kind gpr__trace_op_kind(const char *name)
{
	for (unsigned i = 0; i < GPR_TRACE_N_OPS; i++)
		if (strcmp(ops[i].name, name) == 0)
			return ops[i].kind;
	return GPR_K_OTHER;
}

const char *gpr__trace_op_name(unsigned op)
{
	return op < GPR_TRACE_N_OPS ? ops[op].name : "?";
}
