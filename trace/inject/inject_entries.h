/*
 * The driver entry points the interposer wraps, one macro per name of the
 * entries column of trace_ops.h (GPR_INJ_ENTRY_<name>): its C prototype
 * as cuda.h declares it (CUDA 13.0), the arguments to pass on, and how to
 * record it. A name of the table without its macro here fails to compile;
 * a macro here that the table does not name defines nothing.
 *
 * Memory entry points (GPR_INJ_MEM): the call's arguments laid out as
 * CUPTI's <name>_params (cupti_abi.h), which inject_record.c reads.
 * Context entry points (GPR_INJ_CTX): a context event when a context is
 * really created or destroyed, as CUPTI's resource callbacks report them:
 *   CREATE   after a successful call, the context in *pctx on `dev`;
 *   RETAIN   the same, only when the primary context was inactive before;
 *   DESTROY  before the call, the context `ctx`;
 *   RELEASE  after a successful call that left the primary context of
 *            `dev` inactive;
 *   RESET    after a successful reset of an active primary context.
 * Included by inject_preload.c only, which defines the two macros.
 */
#ifndef GPR_TRACE_INJECT_ENTRIES_H
#define GPR_TRACE_INJECT_ENTRIES_H

#include "cupti_abi.h"

/* GPR_INJ_MEM(name, op, params type, (prototype), (call args), (params)) */

#define GPR_INJ_ENTRY_cuMemAlloc_v2(op)                                        \
	GPR_INJ_MEM(cuMemAlloc_v2, op, cuMemAlloc_v2_params,                   \
		    (CUdeviceptr * dptr, size_t bytesize), (dptr, bytesize),   \
		    (dptr, bytesize))
#define GPR_INJ_ENTRY_cuMemAllocPitch_v2(op)                                   \
	GPR_INJ_MEM(cuMemAllocPitch_v2, op, cuMemAllocPitch_v2_params,         \
		    (CUdeviceptr * dptr, size_t * pPitch, size_t WidthInBytes, \
		     size_t Height, unsigned int ElementSizeBytes),            \
		    (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes),    \
		    (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes))
#define GPR_INJ_ENTRY_cuMemAllocManaged(op)                                    \
	GPR_INJ_MEM(cuMemAllocManaged, op, cuMemAllocManaged_params,           \
		    (CUdeviceptr * dptr, size_t bytesize, unsigned int flags), \
		    (dptr, bytesize, flags), (dptr, bytesize, flags))
#define GPR_INJ_ENTRY_cuMemFree_v2(op)                                         \
	GPR_INJ_MEM(cuMemFree_v2, op, cuMemFree_v2_params, (CUdeviceptr dptr), \
		    (dptr), (dptr))
#define GPR_INJ_ALLOC_ASYNC(name, op)                                          \
	GPR_INJ_MEM(name, op, cuMemAllocAsync_params,                          \
		    (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),   \
		    (dptr, bytesize, hStream), (dptr, bytesize, hStream))
#define GPR_INJ_ENTRY_cuMemAllocAsync(op)                                      \
	GPR_INJ_ALLOC_ASYNC(cuMemAllocAsync, op)
#define GPR_INJ_ENTRY_cuMemAllocAsync_ptsz(op)                                 \
	GPR_INJ_ALLOC_ASYNC(cuMemAllocAsync_ptsz, op)
#define GPR_INJ_FROM_POOL(name, op)                                            \
	GPR_INJ_MEM(name, op, cuMemAllocFromPoolAsync_params,                  \
		    (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool,   \
		     CUstream hStream),                                        \
		    (dptr, bytesize, pool, hStream),                           \
		    (dptr, bytesize, pool, hStream))
#define GPR_INJ_ENTRY_cuMemAllocFromPoolAsync(op)                              \
	GPR_INJ_FROM_POOL(cuMemAllocFromPoolAsync, op)
#define GPR_INJ_ENTRY_cuMemAllocFromPoolAsync_ptsz(op)                         \
	GPR_INJ_FROM_POOL(cuMemAllocFromPoolAsync_ptsz, op)
#define GPR_INJ_FREE_ASYNC(name, op)                                           \
	GPR_INJ_MEM(name, op, cuMemFreeAsync_params,                           \
		    (CUdeviceptr dptr, CUstream hStream), (dptr, hStream),     \
		    (dptr, hStream))
#define GPR_INJ_ENTRY_cuMemFreeAsync(op) GPR_INJ_FREE_ASYNC(cuMemFreeAsync, op)
#define GPR_INJ_ENTRY_cuMemFreeAsync_ptsz(op)                                  \
	GPR_INJ_FREE_ASYNC(cuMemFreeAsync_ptsz, op)
#define GPR_INJ_ENTRY_cuMemPoolTrimTo(op)                                      \
	GPR_INJ_MEM(cuMemPoolTrimTo, op, cuMemPoolTrimTo_params,               \
		    (CUmemoryPool pool, size_t minBytesToKeep),                \
		    (pool, minBytesToKeep), (pool, minBytesToKeep))
#define GPR_INJ_ENTRY_cuMemCreate(op)                                          \
	GPR_INJ_MEM(cuMemCreate, op, cuMemCreate_params,                       \
		    (CUmemGenericAllocationHandle * handle, size_t size,       \
		     const CUmemAllocationProp_head *prop,                     \
		     unsigned long long flags),                                \
		    (handle, size, prop, flags), (handle, size, prop, flags))
#define GPR_INJ_ENTRY_cuMemRelease(op)                                         \
	GPR_INJ_MEM(cuMemRelease, op, cuMemRelease_params,                     \
		    (CUmemGenericAllocationHandle handle), (handle), (handle))
#define GPR_INJ_ENTRY_cuMemMap(op)                                             \
	GPR_INJ_MEM(cuMemMap, op, cuMemMap_params,                             \
		    (CUdeviceptr ptr, size_t size, size_t offset,              \
		     CUmemGenericAllocationHandle handle,                      \
		     unsigned long long flags),                                \
		    (ptr, size, offset, handle, flags),                        \
		    (ptr, size, offset, handle, flags))
#define GPR_INJ_ENTRY_cuMemUnmap(op)                                           \
	GPR_INJ_MEM(cuMemUnmap, op, cuMemUnmap_params,                         \
		    (CUdeviceptr ptr, size_t size), (ptr, size), (ptr, size))
#define GPR_INJ_ENTRY_cuMemAddressReserve(op)                                  \
	GPR_INJ_MEM(cuMemAddressReserve, op, cuMemAddressReserve_params,       \
		    (CUdeviceptr * ptr, size_t size, size_t alignment,         \
		     CUdeviceptr addr, unsigned long long flags),              \
		    (ptr, size, alignment, addr, flags),                       \
		    (ptr, size, alignment, addr, flags))
#define GPR_INJ_ENTRY_cuMemAddressFree(op)                                     \
	GPR_INJ_MEM(cuMemAddressFree, op, cuMemAddressFree_params,             \
		    (CUdeviceptr ptr, size_t size), (ptr, size), (ptr, size))
#define GPR_INJ_ENTRY_cuMemHostAlloc(op)                                       \
	GPR_INJ_MEM(cuMemHostAlloc, op, cuMemHostAlloc_params,                 \
		    (void **pp, size_t bytesize, unsigned int Flags),          \
		    (pp, bytesize, Flags), (pp, bytesize, Flags))
#define GPR_INJ_ENTRY_cuMemAllocHost_v2(op)                                    \
	GPR_INJ_MEM(cuMemAllocHost_v2, op, cuMemHostAlloc_params,              \
		    (void **pp, size_t bytesize), (pp, bytesize),              \
		    (pp, bytesize, 0))
#define GPR_INJ_ENTRY_cuMemFreeHost(op)                                        \
	GPR_INJ_MEM(cuMemFreeHost, op, cuMemFreeHost_params, (void *p), (p),   \
		    (p))

/*
 * GPR_INJ_CTX(name, op, how, (prototype), (call args), pctx, ctx, dev)
 *
 * The unsuffixed names are the older ABIs of the same calls, as cuda.h
 * declares them for __CUDA_API_VERSION_INTERNAL (same prototypes): the
 * CUDA runtime asks cuGetProcAddress for cuDevicePrimaryCtxRelease and
 * cuDevicePrimaryCtxReset at version 7000 and gets those exports.
 */

#define GPR_INJ_CTX_CREATE2(name, op)                                          \
	GPR_INJ_CTX(name, op, CREATE,                                          \
		    (CUcontext * pctx, unsigned int flags, CUdevice dev),      \
		    (pctx, flags, dev), pctx, NULL, dev)
#define GPR_INJ_ENTRY_cuCtxCreate(op) GPR_INJ_CTX_CREATE2(cuCtxCreate, op)
#define GPR_INJ_ENTRY_cuCtxCreate_v2(op) GPR_INJ_CTX_CREATE2(cuCtxCreate_v2, op)
#define GPR_INJ_ENTRY_cuCtxCreate_v3(op)                                       \
	GPR_INJ_CTX(cuCtxCreate_v3, op, CREATE,                                \
		    (CUcontext * pctx, void *paramsArray, int numParams,       \
		     unsigned int flags, CUdevice dev),                        \
		    (pctx, paramsArray, numParams, flags, dev), pctx, NULL,    \
		    dev)
#define GPR_INJ_ENTRY_cuCtxCreate_v4(op)                                       \
	GPR_INJ_CTX(cuCtxCreate_v4, op, CREATE,                                \
		    (CUcontext * pctx, void *ctxCreateParams,                  \
		     unsigned int flags, CUdevice dev),                        \
		    (pctx, ctxCreateParams, flags, dev), pctx, NULL, dev)
#define GPR_INJ_ENTRY_cuDevicePrimaryCtxRetain(op)                             \
	GPR_INJ_CTX(cuDevicePrimaryCtxRetain, op, RETAIN,                      \
		    (CUcontext * pctx, CUdevice dev), (pctx, dev), pctx, NULL, \
		    dev)
#define GPR_INJ_CTX_DESTROY(name, op)                                          \
	GPR_INJ_CTX(name, op, DESTROY, (CUcontext ctx), (ctx), NULL, ctx,      \
		    GPR_TRACE_NO_DEVICE)
#define GPR_INJ_ENTRY_cuCtxDestroy(op) GPR_INJ_CTX_DESTROY(cuCtxDestroy, op)
#define GPR_INJ_ENTRY_cuCtxDestroy_v2(op)                                      \
	GPR_INJ_CTX_DESTROY(cuCtxDestroy_v2, op)
#define GPR_INJ_CTX_DEVICE(name, op, how)                                      \
	GPR_INJ_CTX(name, op, how, (CUdevice dev), (dev), NULL, NULL, dev)
#define GPR_INJ_ENTRY_cuDevicePrimaryCtxRelease(op)                            \
	GPR_INJ_CTX_DEVICE(cuDevicePrimaryCtxRelease, op, RELEASE)
#define GPR_INJ_ENTRY_cuDevicePrimaryCtxRelease_v2(op)                         \
	GPR_INJ_CTX_DEVICE(cuDevicePrimaryCtxRelease_v2, op, RELEASE)
#define GPR_INJ_ENTRY_cuDevicePrimaryCtxReset(op)                              \
	GPR_INJ_CTX_DEVICE(cuDevicePrimaryCtxReset, op, RESET)
#define GPR_INJ_ENTRY_cuDevicePrimaryCtxReset_v2(op)                           \
	GPR_INJ_CTX_DEVICE(cuDevicePrimaryCtxReset_v2, op, RESET)

#endif /* GPR_TRACE_INJECT_ENTRIES_H */
