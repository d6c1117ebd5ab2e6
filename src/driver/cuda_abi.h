/*
 * The few CUDA driver API types this project uses, declared by hand so the
 * build needs no CUDA SDK. Mirrors cuda.h of CUDA 12.x/13.0 (the values
 * below are unchanged since CUDA 11). Shared by the driver layer, the
 * simulated driver (sim/) and the trace library.
 */
#ifndef GPR_CUDA_ABI_H
#define GPR_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUdeviceptr; /* CUdeviceptr_v2 */
typedef struct CUstream_st *CUstream;
typedef struct CUmemPoolHandle_st *CUmemoryPool;

/* cuda.h: struct CUuuid_st { char bytes[16]; } */
typedef struct {
	unsigned char bytes[16];
} CUuuid;

enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_DEINITIALIZED = 4,
	CUDA_ERROR_NO_DEVICE = 100,
	CUDA_ERROR_INVALID_DEVICE = 101,
	CUDA_ERROR_DEVICE_NOT_LICENSED = 102,
	CUDA_ERROR_INVALID_CONTEXT = 201,
	CUDA_ERROR_INVALID_HANDLE = 400,
	CUDA_ERROR_NOT_FOUND = 500,
	CUDA_ERROR_OPERATING_SYSTEM = 304,
	CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
	CUDA_ERROR_NOT_SUPPORTED = 801,
	CUDA_ERROR_UNKNOWN = 999
};

/* cuda.h: CUpointer_attribute (the one we ask for). */
enum { CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE = 17 };

/* cuda.h: CUmemPool_attribute (values 1-3 are the reuse flags, ints). */
enum {
	CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,	  /* cuuint64_t */
	CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5, /* cuuint64_t */
	CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6,	  /* cuuint64_t */
	CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,	  /* cuuint64_t */
	CU_MEMPOOL_ATTR_USED_MEM_HIGH = 8	  /* cuuint64_t */
};

#endif /* GPR_CUDA_ABI_H */
