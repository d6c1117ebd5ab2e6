/*
 * The NVML types this project uses, declared by hand so the build needs no
 * CUDA SDK. Mirrors nvml.h of driver R580 (NVML API version 12); each
 * struct names the nvml.h type it mirrors. docs/abi.md explains the
 * versioned structs and the process record stride.
 */
#ifndef GPR_NVML_ABI_H
#define GPR_NVML_ABI_H

#include <stdint.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_UNINITIALIZED = 1,
	NVML_ERROR_INVALID_ARGUMENT = 2,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_NO_PERMISSION = 4,
	NVML_ERROR_ALREADY_INITIALIZED = 5,
	NVML_ERROR_NOT_FOUND = 6,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_INSUFFICIENT_POWER = 8,
	NVML_ERROR_DRIVER_NOT_LOADED = 9,
	NVML_ERROR_TIMEOUT = 10,
	NVML_ERROR_IRQ_ISSUE = 11,
	NVML_ERROR_LIBRARY_NOT_FOUND = 12,
	NVML_ERROR_FUNCTION_NOT_FOUND = 13,
	NVML_ERROR_CORRUPTED_INFOROM = 14,
	NVML_ERROR_GPU_IS_LOST = 15,
	NVML_ERROR_RESET_REQUIRED = 16,
	NVML_ERROR_OPERATING_SYSTEM = 17,
	NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
	NVML_ERROR_IN_USE = 19,
	NVML_ERROR_MEMORY = 20,
	NVML_ERROR_NO_DATA = 21,
	NVML_ERROR_VGPU_ECC_NOT_ENABLED = 22,
	NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
	NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
	NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
	NVML_ERROR_DEPRECATED = 26,
	NVML_ERROR_NOT_READY = 27,
	NVML_ERROR_GPU_NOT_FOUND = 28,
	NVML_ERROR_INVALID_STATE = 29,
	NVML_ERROR_UNKNOWN = 999
};

/* nvml.h: the flags of nvmlInitWithFlags (bench/nvml_cost tries them) */
#define GPR_NVML_INIT_FLAG_NO_GPUS 1u
#define GPR_NVML_INIT_FLAG_NO_ATTACH 2u

/* nvml.h: NVML_VALUE_NOT_AVAILABLE, the usedGpuMemory of a hidden figure */
#define GPR_NVML_VALUE_NOT_AVAILABLE (~0ULL)

#define GPR_NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define GPR_NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define GPR_NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define GPR_NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16

/* nvml.h: nvmlMemory_t (for nvmlDeviceGetMemoryInfo, v1) */
typedef struct {
	unsigned long long total;
	unsigned long long free;
	unsigned long long used;
} gpr_nvmlMemory_v1_t;

/* nvml.h: nvmlMemory_v2_t (for nvmlDeviceGetMemoryInfo_v2) */
typedef struct {
	unsigned int
	    version; /* GPR_NVML_STRUCT_VERSION(gpr_nvmlMemory_v2_t, 2) */
	unsigned long long total;
	unsigned long long reserved;
	unsigned long long free;
	unsigned long long used;
} gpr_nvmlMemory_v2_t;

/* nvml.h: NVML_STRUCT_VERSION(data, ver) = sizeof(data##_v##ver##_t) | ver <<
 * 24 */
#define GPR_NVML_STRUCT_VERSION(type, ver)                                     \
	((unsigned int)(sizeof(type) | ((unsigned int)(ver) << 24U)))

/*
 * nvml.h: nvmlProcessInfo_v2_t / nvmlProcessInfo_t of R510+ (the record of
 * nvmlDeviceGet{Compute,Graphics}RunningProcesses_v2 and _v3): 24 bytes.
 * Some R535 drivers wrote 32-byte records (a trailing
 * usedGpuCcProtectedMemory); the stride is chosen at run time.
 */
typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
} gpr_nvmlProcessInfo_v2_t;

/* The 32-byte record some R535 drivers wrote. */
typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
	unsigned long long usedGpuCcProtectedMemory;
} gpr_nvmlProcessInfo_cc_t;

/* nvml.h: nvmlPciInfo_t (nvmlDeviceGetPciInfo_v3) */
typedef struct {
	char busIdLegacy[GPR_NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
	unsigned int domain;
	unsigned int bus;
	unsigned int device;
	unsigned int pciDeviceId;
	unsigned int pciSubSystemId;
	char busId[GPR_NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} gpr_nvmlPciInfo_t;

/*
 * nvml.h: nvmlProcessUtilizationSample_t (nvmlDeviceGetProcessUtilization):
 * a process's utilization over the driver's last sample period, stamped
 * with the CPU time in microseconds; 32 bytes.
 */
typedef struct {
	unsigned int pid;
	unsigned long long timeStamp;
	unsigned int smUtil;
	unsigned int memUtil;
	unsigned int encUtil;
	unsigned int decUtil;
} gpr_nvmlProcessUtilizationSample_t;

#endif /* GPR_NVML_ABI_H */
