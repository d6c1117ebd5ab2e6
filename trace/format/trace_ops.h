/*
 * The operations a trace log records, as two tables: the kinds (what an
 * operation does to memory) and the operations (name, kind, the CUPTI
 * callbacks that report them). The injection library's callbacks and
 * fill(), the log writer and the reader all ask these tables; nothing
 * names an operation by its number. Shared by the two trace products
 * (trace/inject/, trace/read/).
 */
#ifndef GPR_TRACE_OPS_H
#define GPR_TRACE_OPS_H

/*
 * X(kind, effect, memory):
 *   effect: when a record of this kind takes effect: EXIT for calls whose
 *           memory exists from their return on (the reader orders them by
 *           their exit), ENTRY for the others;
 *   memory: which memory the record starts or ends, keyed how:
 *           NEW_ADDR (bytes at addr), END_ADDR (what addr held),
 *           NEW_HANDLE / END_HANDLE (the same for the VMM handle in aux),
 *           NONE.
 */
#define GPR_TRACE_KINDS(X)                                                     \
	X(OTHER, ENTRY, NONE)                                                  \
	X(ALLOC, EXIT, NEW_ADDR)      /* device memory: addr, bytes */         \
	X(FREE, ENTRY, END_ADDR)      /* device memory: addr */                \
	X(CREATE, EXIT, NEW_HANDLE)   /* VMM memory: aux = handle, bytes */    \
	X(RELEASE, ENTRY, END_HANDLE) /* VMM: aux = handle */                  \
	X(MAP, EXIT, NONE)	      /* VMM: addr, bytes, aux = handle */     \
	X(UNMAP, ENTRY, NONE)	      /* VMM: addr, bytes */                   \
	X(RESERVE, EXIT, NONE)	      /* VA range: addr, bytes */              \
	X(VA_FREE, ENTRY, NONE)	      /* VA range: addr, bytes */              \
	X(HOST_ALLOC, EXIT, NEW_ADDR) /* pinned host memory: addr, bytes */    \
	X(HOST_FREE, ENTRY, END_ADDR) /* pinned host memory: addr */           \
	X(TRIM, ENTRY, NONE)	      /* pool trim: aux = pool, bytes kept */  \
	X(CTX_CREATE, ENTRY, NONE)    /* aux = context */                      \
	X(CTX_DESTROY, ENTRY, NONE)   /* aux = context */

enum gpr_trace_kind {
#define GPR_X_KIND(kind, effect, memory) GPR_K_##kind,
	GPR_TRACE_KINDS(GPR_X_KIND)
#undef GPR_X_KIND
};

enum gpr_trace_effect { GPR_EFFECT_ENTRY, GPR_EFFECT_EXIT };

enum gpr_trace_memory {
	GPR_MEMORY_NONE,
	GPR_MEMORY_NEW_ADDR,
	GPR_MEMORY_END_ADDR,
	GPR_MEMORY_NEW_HANDLE,
	GPR_MEMORY_END_HANDLE
};

/*
 * X(op, name, kind, domain, cbid, cbid2, entries), in op-id order: the
 * ids are the string ids of the names in every log (so the order is part
 * of the log format, version 1: append, never reorder).
 *   name:    the driver function (or the event) as the log spells it;
 *   kind:    a GPR_TRACE_KINDS row;
 *   domain, cbid, cbid2: the CUPTI callbacks reporting it (the CUPTI
 *            backend), as the names of trace/inject/cupti_abi.h without
 *            their prefixes (domain DRIVER_API:
 *            CUPTI_DRIVER_TRACE_CBID_<cbid>; RESOURCE:
 *            CUPTI_CBID_RESOURCE_<cbid>); cbid2 a second id (the
 *            per-thread-stream _ptsz variant, a _v2) or INVALID;
 *   entries: the driver entry points the interposer backend wraps to
 *            record it: a parenthesised list of 1 to 6 libcuda export
 *            names (each with its own ABI: the _ptsz variants and the
 *            older ABIs a look-up still answers, such as the CUDA
 *            runtime's cuDevicePrimaryCtxRelease at version 7000, are
 *            separate functions). Every operation has at least one, so
 *            the two backends record the same operations.
 * Only the injection library expands the CUPTI and entries columns
 * (GPR_TRACE_EACH walks an entries list).
 */
#define GPR_TRACE_OPS(X)                                                       \
	X(MEM_ALLOC, "cuMemAlloc_v2", ALLOC, DRIVER_API, cuMemAlloc_v2,        \
	  INVALID, (cuMemAlloc_v2))                                            \
	X(MEM_ALLOC_PITCH, "cuMemAllocPitch_v2", ALLOC, DRIVER_API,            \
	  cuMemAllocPitch_v2, INVALID, (cuMemAllocPitch_v2))                   \
	X(MEM_ALLOC_MANAGED, "cuMemAllocManaged", ALLOC, DRIVER_API,           \
	  cuMemAllocManaged, INVALID, (cuMemAllocManaged))                     \
	X(MEM_FREE, "cuMemFree_v2", FREE, DRIVER_API, cuMemFree_v2, INVALID,   \
	  (cuMemFree_v2))                                                      \
	X(MEM_ALLOC_ASYNC, "cuMemAllocAsync", ALLOC, DRIVER_API,               \
	  cuMemAllocAsync, cuMemAllocAsync_ptsz,                               \
	  (cuMemAllocAsync, cuMemAllocAsync_ptsz))                             \
	X(MEM_ALLOC_FROM_POOL_ASYNC, "cuMemAllocFromPoolAsync", ALLOC,         \
	  DRIVER_API, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz,   \
	  (cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz))             \
	X(MEM_FREE_ASYNC, "cuMemFreeAsync", FREE, DRIVER_API, cuMemFreeAsync,  \
	  cuMemFreeAsync_ptsz, (cuMemFreeAsync, cuMemFreeAsync_ptsz))          \
	X(MEM_POOL_TRIM_TO, "cuMemPoolTrimTo", TRIM, DRIVER_API,               \
	  cuMemPoolTrimTo, INVALID, (cuMemPoolTrimTo))                         \
	X(MEM_CREATE, "cuMemCreate", CREATE, DRIVER_API, cuMemCreate, INVALID, \
	  (cuMemCreate))                                                       \
	X(MEM_RELEASE, "cuMemRelease", RELEASE, DRIVER_API, cuMemRelease,      \
	  INVALID, (cuMemRelease))                                             \
	X(MEM_MAP, "cuMemMap", MAP, DRIVER_API, cuMemMap, INVALID, (cuMemMap)) \
	X(MEM_UNMAP, "cuMemUnmap", UNMAP, DRIVER_API, cuMemUnmap, INVALID,     \
	  (cuMemUnmap))                                                        \
	X(MEM_ADDRESS_RESERVE, "cuMemAddressReserve", RESERVE, DRIVER_API,     \
	  cuMemAddressReserve, INVALID, (cuMemAddressReserve))                 \
	X(MEM_ADDRESS_FREE, "cuMemAddressFree", VA_FREE, DRIVER_API,           \
	  cuMemAddressFree, INVALID, (cuMemAddressFree))                       \
	X(MEM_HOST_ALLOC, "cuMemHostAlloc", HOST_ALLOC, DRIVER_API,            \
	  cuMemHostAlloc, cuMemHostAlloc_v2, (cuMemHostAlloc))                 \
	X(MEM_ALLOC_HOST, "cuMemAllocHost_v2", HOST_ALLOC, DRIVER_API,         \
	  cuMemAllocHost_v2, INVALID, (cuMemAllocHost_v2))                     \
	X(MEM_FREE_HOST, "cuMemFreeHost", HOST_FREE, DRIVER_API,               \
	  cuMemFreeHost, INVALID, (cuMemFreeHost))                             \
	X(CTX_CREATED, "context_created", CTX_CREATE, RESOURCE,                \
	  CONTEXT_CREATED, INVALID,                                            \
	  (cuCtxCreate, cuCtxCreate_v2, cuCtxCreate_v3, cuCtxCreate_v4,        \
	   cuDevicePrimaryCtxRetain))                                          \
	X(CTX_DESTROY, "context_destroy", CTX_DESTROY, RESOURCE,               \
	  CONTEXT_DESTROY_STARTING, INVALID,                                   \
	  (cuCtxDestroy, cuCtxDestroy_v2, cuDevicePrimaryCtxRelease,           \
	   cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxReset,              \
	   cuDevicePrimaryCtxReset_v2))

/*
 * GPR_TRACE_EACH(M, op, entries) expands M(op, entry) for each name of an
 * entries list, as written in the table: (a) to (a, b, c, d, e, f).
 */
#define GPR_TRACE_EACH(M, op, list)                                            \
	GPR_TRACE_CALL(GPR_TRACE_CAT(GPR_TRACE_EACH_, GPR_TRACE_COUNT list),   \
		       (M, op, GPR_TRACE_UNPAREN list))
#define GPR_TRACE_CALL(f, args) f args
#define GPR_TRACE_UNPAREN(...) __VA_ARGS__
#define GPR_TRACE_COUNT(...) GPR_TRACE_COUNT_(__VA_ARGS__, 6, 5, 4, 3, 2, 1, 0)
#define GPR_TRACE_COUNT_(a, b, c, d, e, f, n, ...) n
#define GPR_TRACE_CAT(a, b) GPR_TRACE_CAT_(a, b)
#define GPR_TRACE_CAT_(a, b) a##b
#define GPR_TRACE_EACH_1(M, op, a) M(op, a)
#define GPR_TRACE_EACH_2(M, op, a, b) M(op, a) M(op, b)
#define GPR_TRACE_EACH_3(M, op, a, b, c) M(op, a) M(op, b) M(op, c)
#define GPR_TRACE_EACH_4(M, op, a, b, c, d)                                    \
	GPR_TRACE_EACH_3(M, op, a, b, c) M(op, d)
#define GPR_TRACE_EACH_5(M, op, a, b, c, d, e)                                 \
	GPR_TRACE_EACH_4(M, op, a, b, c, d) M(op, e)
#define GPR_TRACE_EACH_6(M, op, a, b, c, d, e, f)                              \
	GPR_TRACE_EACH_5(M, op, a, b, c, d, e) M(op, f)

enum gpr_trace_op {
#define GPR_X_OP(op, name, kind, domain, cbid, cbid2, entries) GPR_OP_##op,
	GPR_TRACE_OPS(GPR_X_OP)
#undef GPR_X_OP
	    GPR_TRACE_N_OPS
};

/* The kind of op id `op`; GPR_K_OTHER beyond the table. */
static inline enum gpr_trace_kind gpr_trace_op_kind_of(unsigned op)
{
	switch (op) {
#define GPR_X_OP(op, name, kind, domain, cbid, cbid2, entries)                 \
	case GPR_OP_##op:                                                      \
		return GPR_K_##kind;
		GPR_TRACE_OPS(GPR_X_OP)
#undef GPR_X_OP
	}
	return GPR_K_OTHER;
}

/* What the kinds table says of kind k. */
struct gpr_trace_kind_info {
	enum gpr_trace_effect effect;
	enum gpr_trace_memory memory;
};
static inline struct gpr_trace_kind_info
gpr_trace_kind_info(enum gpr_trace_kind k)
{
	switch (k) {
#define GPR_X_KIND(kind, effect, memory)                                       \
	case GPR_K_##kind:                                                     \
		return (struct gpr_trace_kind_info){GPR_EFFECT_##effect,       \
						    GPR_MEMORY_##memory};
		GPR_TRACE_KINDS(GPR_X_KIND)
#undef GPR_X_KIND
	}
	return (struct gpr_trace_kind_info){GPR_EFFECT_ENTRY, GPR_MEMORY_NONE};
}

/* The kind of the operation called `name`; GPR_K_OTHER if unknown. */
enum gpr_trace_kind gpr_trace_op_kind(const char *name);

/* The name of op id `op`; "?" beyond the table. */
const char *gpr_trace_op_name(unsigned op);

#endif /* GPR_TRACE_OPS_H */
