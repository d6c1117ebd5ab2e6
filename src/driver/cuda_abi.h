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
	CUDA_ERROR_ILLEGAL_STATE = 401,
	CUDA_ERROR_NOT_FOUND = 500,
	CUDA_ERROR_OPERATING_SYSTEM = 304,
	CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
	CUDA_ERROR_NOT_PERMITTED = 800,
	CUDA_ERROR_NOT_SUPPORTED = 801,
	CUDA_ERROR_TIMEOUT = 909,
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

/*
 * The checkpoint API (driver 570 and later: CUDA 12.8's cuda.h first
 * declared it). Each call takes another process's pid and is meant for a
 * controller process, which must have called cuInit. Every argument
 * struct is 64 bytes whose reserved fields must be zero; a newer cuda.h
 * gives some of them a meaning without changing the size, so a zeroed
 * struct asks for the behaviour of the header below on every driver.
 */
typedef unsigned long long cuuint64_t;

/* cuda.h (12.8 to 13.4): enum CUprocessState_enum */
typedef enum {
	CU_PROCESS_STATE_RUNNING = 0, /* its CUDA calls run */
	CU_PROCESS_STATE_LOCKED = 1,  /* its CUDA calls wait */
	CU_PROCESS_STATE_CHECKPOINTED =
	    2,			    /* its GPU memory is in host memory */
	CU_PROCESS_STATE_FAILED = 3 /* a checkpoint or restore failed */
} CUprocessState;

/* cuda.h (12.8 to 13.4): struct CUcheckpointLockArgs_st */
typedef struct {
	unsigned int timeoutMs; /* 0: wait as long as it takes */
	unsigned int reserved0;
	cuuint64_t reserved1[7];
} CUcheckpointLockArgs;

/* cuda.h (12.8 to 13.0): struct CUcheckpointCheckpointArgs_st. CUDA
 * 13.4 turns its first 8 bytes into customStorageInfo_out (NULL: the
 * memory goes to host memory, as here). */
typedef struct {
	cuuint64_t reserved[8];
} CUcheckpointCheckpointArgs;

/* cuda.h (13.0 to 13.4): struct CUcheckpointGpuPair_st, for restoring a
 * process onto other GPUs (same chip, enough memory; every checkpointed
 * GPU named). */
typedef struct {
	CUuuid oldUuid;
	CUuuid newUuid;
} CUcheckpointGpuPair;

/* cuda.h (13.0): struct CUcheckpointRestoreArgs_st. In 12.8 all 64 bytes
 * were reserved; CUDA 13.4 turns bytes 16-23 into customStorageInfo_out
 * (NULL: from host memory, as here). */
typedef struct {
	CUcheckpointGpuPair *gpuPairs; /* NULL: the GPUs it was on */
	unsigned int gpuPairsCount;
	char reserved[52 - sizeof(CUcheckpointGpuPair *)];
	cuuint64_t reserved1;
} CUcheckpointRestoreArgs;

/* cuda.h (12.8 to 13.4): struct CUcheckpointUnlockArgs_st */
typedef struct {
	cuuint64_t reserved[8];
} CUcheckpointUnlockArgs;

_Static_assert(sizeof(CUcheckpointLockArgs) == 64, "lock args: 64 bytes");
_Static_assert(sizeof(CUcheckpointCheckpointArgs) == 64,
	       "checkpoint args: 64 bytes");
_Static_assert(sizeof(CUcheckpointRestoreArgs) == 64, "restore args: 64 bytes");
_Static_assert(sizeof(CUcheckpointUnlockArgs) == 64, "unlock args: 64 bytes");
_Static_assert(sizeof(CUcheckpointGpuPair) == 32, "GPU pair: 32 bytes");
_Static_assert(offsetof(CUcheckpointRestoreArgs, gpuPairsCount) == 8,
	       "restore args: gpuPairsCount at 8");
_Static_assert(offsetof(CUcheckpointRestoreArgs, reserved1) == 56,
	       "restore args: reserved1 at 56");

#endif /* GPR_CUDA_ABI_H */
