/*
 * Structs that grow (sized.c): the caller's struct and ours may differ in
 * size; both directions are checked. Internal.
 */
#ifndef GPR_SIZED_H
#define GPR_SIZED_H

#include <stddef.h>

/*
 * Copies a caller's input struct of size `src_sz` into `dst` of our size:
 * a shorter struct leaves the later fields zero, a longer one is accepted
 * only if the fields we do not know are zero (libbpf's rule).
 */
int gpr__opts_copy(void *dst, size_t dst_sz, const void *src, size_t src_sz);

/*
 * Copies our output struct `src` (src_sz bytes) to the caller's `dst` of
 * *dst_sz bytes: the common part, the caller's unknown tail zeroed; *dst_sz
 * becomes the bytes filled. GPR_E_INVAL for a NULL or zero size.
 */
int gpr__out_copy(void *dst, size_t *dst_sz, const void *src, size_t src_sz);

#endif /* GPR_SIZED_H */
