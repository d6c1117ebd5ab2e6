/*
 * Structs that grow (the rule in gpureclaim.h): input structs copied from a
 * caller of any version, output structs copied to one, and the compile-time
 * check that each public struct ends without padding, so that a field added
 * later always changes its size.
 */
#include <string.h>

#include "sized.h"
#include "gpureclaim.h"

#define ENDS_FLUSH(type, last)                                                 \
	_Static_assert(sizeof(struct type) ==                                  \
			   offsetof(struct type, last) +                       \
			       sizeof(((struct type *)0)->last),               \
		       #type " ends with padding: a field added after " #last  \
			     " would not change its size")
ENDS_FLUSH(gpr_opts, log_user);
ENDS_FLUSH(gpr_releaser, figure);
ENDS_FLUSH(gpr_release_opts, collect_young_fn);
ENDS_FLUSH(gpr_gpu, memory_info_v2);
ENDS_FLUSH(gpr_report_gpu, name);
ENDS_FLUSH(gpr_report_releaser, after);

int gpr__opts_copy(void *dst, size_t dst_sz, const void *src, size_t src_sz)
{
	memset(dst, 0, dst_sz);
	if (!src)
		return 0;
	if (src_sz < sizeof(size_t))
		return GPR_E_INVAL;
	if (src_sz > dst_sz) {
		const unsigned char *tail = (const unsigned char *)src + dst_sz;
		for (size_t i = 0; i < src_sz - dst_sz; i++)
			if (tail[i])
				return GPR_E_INVAL;
	}
	memcpy(dst, src, src_sz < dst_sz ? src_sz : dst_sz);
	return 0;
}

int gpr__out_copy(void *dst, size_t *dst_sz, const void *src, size_t src_sz)
{
	if (!dst || !dst_sz || *dst_sz == 0)
		return GPR_E_INVAL;
	size_t n = *dst_sz < src_sz ? *dst_sz : src_sz;
	memcpy(dst, src, n);
	if (*dst_sz > n)
		memset((unsigned char *)dst + n, 0, *dst_sz - n);
	*dst_sz = n;
	return 0;
}
