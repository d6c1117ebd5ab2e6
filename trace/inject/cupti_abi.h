/*
 * The few CUPTI declarations the injection library uses, written by hand so
 * the build needs no CUDA SDK (CUPTI is dlopen'ed). Each block names the
 * CUPTI header of CUDA 13.0 it mirrors; the values are unchanged since the
 * CUDA 12.x headers they were checked against (CUPTI's enums only grow).
 */
#ifndef GPR_CUPTI_ABI_H
#define GPR_CUPTI_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_abi.h"

/* cupti_result.h: CUptiResult (subset). */
typedef int CUptiResult;
enum {
	CUPTI_SUCCESS = 0,
	CUPTI_ERROR_NOT_INITIALIZED = 15,
	CUPTI_ERROR_INSUFFICIENT_PRIVILEGES = 35,
	CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 39,
	CUPTI_ERROR_UNKNOWN = 999
};

/* cupti_callbacks.h: CUpti_ApiCallbackSite. */
enum { CUPTI_API_ENTER = 0, CUPTI_API_EXIT = 1 };

/* cupti_callbacks.h: CUpti_CallbackDomain (subset). */
typedef int CUpti_CallbackDomain;
enum {
	CUPTI_CB_DOMAIN_DRIVER_API = 1,
	CUPTI_CB_DOMAIN_RUNTIME_API = 2,
	CUPTI_CB_DOMAIN_RESOURCE = 3
};

/* cupti_callbacks.h: CUpti_CallbackIdResource (subset). */
enum {
	CUPTI_CBID_RESOURCE_INVALID = 0,
	CUPTI_CBID_RESOURCE_CONTEXT_CREATED = 1,
	CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING = 2
};

typedef uint32_t CUpti_CallbackId;
typedef struct CUpti_Subscriber_st *CUpti_SubscriberHandle;
typedef void (*CUpti_CallbackFunc)(void *userdata, CUpti_CallbackDomain domain,
				   CUpti_CallbackId cbid, const void *cbdata);

/* cupti_callbacks.h: CUpti_CallbackData (driver and runtime domains). */
typedef struct {
	int callbackSite; /* CUpti_ApiCallbackSite */
	const char *functionName;
	const void *functionParams;
	void *functionReturnValue; /* CUresult * in the driver domain */
	const char *symbolName;
	CUcontext context;
	uint32_t contextUid;
	uint64_t *correlationData; /* shared by one call's enter and exit */
	uint32_t correlationId;
} CUpti_CallbackData;

/* cupti_callbacks.h: CUpti_ResourceData. */
typedef struct {
	CUcontext context;
	union {
		void *stream; /* CUstream */
	} resourceHandle;
	void *resourceDescriptor;
} CUpti_ResourceData;

/*
 * cupti_callbacks.h: CUpti_SubscriberParams of cuptiSubscribe_v2 (newer
 * CUPTI only, found with dlsym). structSize tells CUPTI which of the
 * fields are present; we pass the first four.
 */
typedef struct {
	size_t structSize;
	const char *subscriberName;
	char *oldSubscriberName; /* set on MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED */
	size_t oldSubscriberSize;
} CUpti_SubscriberParams;
#define GPR_CUPTI_OLD_SUBSCRIBER_LEN 128

/*
 * cupti_driver_cbid.h: CUpti_driver_api_trace_cbid, the ids this library
 * enables (checked against the header; the _ptsz ids are the per-thread
 * default stream variants of the same calls).
 */
enum {
	CUPTI_DRIVER_TRACE_CBID_INVALID = 0,
	CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost = 38,
	CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc = 39,
	CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2 = 243,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2 = 244,
	CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2 = 245,
	CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc_v2 = 271,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2 = 294,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged = 371,
	CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve = 547,
	CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree = 548,
	CUPTI_DRIVER_TRACE_CBID_cuMemCreate = 549,
	CUPTI_DRIVER_TRACE_CBID_cuMemRelease = 550,
	CUPTI_DRIVER_TRACE_CBID_cuMemMap = 551,
	CUPTI_DRIVER_TRACE_CBID_cuMemUnmap = 552,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync = 598,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz = 599,
	CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync = 600,
	CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz = 601,
	CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo = 602,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync = 611,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz = 612
};

/*
 * generated_cuda_meta.h: the parameter structs CUPTI passes as
 * functionParams, one member per argument of the cuda.h prototype.
 */
typedef unsigned long long CUmemGenericAllocationHandle;

typedef struct {
	CUdeviceptr *dptr;
	size_t bytesize;
} cuMemAlloc_v2_params;

typedef struct {
	CUdeviceptr *dptr;
	size_t *pPitch;
	size_t WidthInBytes;
	size_t Height;
	unsigned int ElementSizeBytes;
} cuMemAllocPitch_v2_params;

typedef struct {
	CUdeviceptr *dptr;
	size_t bytesize;
	unsigned int flags;
} cuMemAllocManaged_params;

typedef struct {
	CUdeviceptr dptr;
} cuMemFree_v2_params;

typedef struct {
	void **pp;
	size_t bytesize;
	unsigned int Flags;
} cuMemHostAlloc_params; /* also cuMemAllocHost_v2 (no Flags) */

typedef struct {
	void *p;
} cuMemFreeHost_params;

typedef struct {
	CUdeviceptr *dptr;
	size_t bytesize;
	void *hStream;
} cuMemAllocAsync_params;

typedef struct {
	CUdeviceptr *dptr;
	size_t bytesize;
	void *pool;
	void *hStream;
} cuMemAllocFromPoolAsync_params;

typedef struct {
	CUdeviceptr dptr;
	void *hStream;
} cuMemFreeAsync_params;

typedef struct {
	void *pool;
	size_t minBytesToKeep;
} cuMemPoolTrimTo_params;

/* cuda.h: CUmemLocation and the head of CUmemAllocationProp. */
typedef struct {
	int type; /* CU_MEM_LOCATION_TYPE_DEVICE = 1 */
	int id;
} CUmemLocation;
#define GPR_CU_MEM_LOCATION_TYPE_DEVICE 1
/* HOST 2, HOST_NUMA 3, HOST_NUMA_CURRENT 4: memory on the host */
#define GPR_CU_MEM_LOCATION_TYPE_HOST 2

typedef struct {
	int type;
	int requestedHandleTypes;
	CUmemLocation location;
	/* more fields follow; only the above are read */
} CUmemAllocationProp_head;

typedef struct {
	CUmemGenericAllocationHandle *handle;
	size_t size;
	const CUmemAllocationProp_head *prop;
	unsigned long long flags;
} cuMemCreate_params;

typedef struct {
	CUmemGenericAllocationHandle handle;
} cuMemRelease_params;

typedef struct {
	CUdeviceptr ptr;
	size_t size;
	size_t offset;
	CUmemGenericAllocationHandle handle;
	unsigned long long flags;
} cuMemMap_params;

typedef struct {
	CUdeviceptr ptr;
	size_t size;
} cuMemUnmap_params;

typedef struct {
	CUdeviceptr *ptr;
	size_t size;
	size_t alignment;
	CUdeviceptr addr;
	unsigned long long flags;
} cuMemAddressReserve_params;

typedef struct {
	CUdeviceptr ptr;
	size_t size;
} cuMemAddressFree_params;

#endif /* GPR_CUPTI_ABI_H */
