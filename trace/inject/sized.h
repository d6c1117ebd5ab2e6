/*
 * Reading the structs of include/gpureclaim_trace.h that grow (their
 * `size_t sz` first), the way the core reads its own (src/sized.c) and
 * libbpf its opts (OPTS_VALID, OPTS_HAS, OPTS_GET): every field read
 * through GPR_INJ_HAS or GPR_INJ_GET, so a caller compiled with an older,
 * shorter struct gets the defaults of the fields it lacks, and a newer
 * caller's struct is accepted when what this tracer does not know of it
 * is zero.
 */
#ifndef GPR_TRACE_INJECT_SIZED_H
#define GPR_TRACE_INJECT_SIZED_H

#include <stddef.h>

/* The end of field in struct type. */
#define GPR_INJ_END(type, field)                                               \
	(offsetof(type, field) + sizeof(((type *)0)->field))
/* 1 when the struct at o (its sz set by its caller) holds field. */
#define GPR_INJ_HAS(o, field) ((o)->sz >= GPR_INJ_END(__typeof__(*(o)), field))
/* o's field, or fallback when o is too short to hold it. */
#define GPR_INJ_GET(o, field, fallback)                                        \
	(GPR_INJ_HAS(o, field) ? (o)->field : (fallback))
/*
 * 1 when the struct at o, of sz bytes as its caller says, can be read
 * as a struct of `known` bytes: sz holds at least the sz field, and any
 * byte past `known` (a newer caller's fields) is zero.
 */
static inline int gpr_inj_sized_valid(const void *o, size_t sz, size_t known)
{
	if (!o || sz < sizeof(size_t))
		return 0;
	for (size_t i = known; i < sz; i++)
		if (((const unsigned char *)o)[i])
			return 0;
	return 1;
}

#endif /* GPR_TRACE_INJECT_SIZED_H */
