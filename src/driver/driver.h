/*
 * Driver layer: libcuda.so.1 and libnvidia-ml.so.1 through dlopen, with
 * the symbol tables, the vendor error text and the quirks (versioned
 * symbols, versioned structs, process-record stride) kept in one place.
 * Internal to the library (gpr__ prefix); the core (the .c files of src/)
 * uses only this header.
 *
 * Thread safety: gpr__cuda_* and gpr__nvml_* may be called from several
 * threads once the open call returned; the open calls are made under the
 * core's lock. Vendor error text goes into the caller's `err` buffer.
 */
#ifndef GPR_DRIVER_H
#define GPR_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_abi.h"
#include "nvml_abi.h"

#define GPR__ERRLEN 256

/* ---------------- CUDA driver ---------------- */

/*
 * X(field, symbol, required)
 * Newest ABI version first where the driver exports several: the loader
 * tries each symbol name in a row with the same field and keeps the first
 * that resolves. cuInit is deliberately absent: the core never
 * initialises CUDA; only a checkpoint controller does, through
 * gpr__cuda_init, which looks it up by itself. The checkpoint calls
 * (driver 570 and later) act on another process; they are optional, so
 * an older driver still loads, and gpr__ckpt_missing names the gap.
 */
#define GPR__CUDA_SYMBOLS(X)                                                   \
	X(get_error_string, "cuGetErrorString", 0)                             \
	X(get_error_name, "cuGetErrorName", 0)                                 \
	X(driver_get_version, "cuDriverGetVersion", 1)                         \
	X(device_get_count, "cuDeviceGetCount", 1)                             \
	X(device_get, "cuDeviceGet", 1)                                        \
	X(device_get_uuid, "cuDeviceGetUuid_v2", 0)                            \
	X(device_get_uuid, "cuDeviceGetUuid", 0)                               \
	X(device_get_pci_bus_id, "cuDeviceGetPCIBusId", 0)                     \
	X(primary_ctx_get_state, "cuDevicePrimaryCtxGetState", 1)              \
	X(primary_ctx_retain, "cuDevicePrimaryCtxRetain", 0)                   \
	X(primary_ctx_release, "cuDevicePrimaryCtxRelease_v2", 0)              \
	X(ctx_get_current, "cuCtxGetCurrent", 0)                               \
	X(ctx_set_current, "cuCtxSetCurrent", 0)                               \
	X(ctx_synchronize, "cuCtxSynchronize", 0)                              \
	X(pointer_get_attribute, "cuPointerGetAttribute", 0)                   \
	X(mem_pool_get_attribute, "cuMemPoolGetAttribute", 0)                  \
	X(mem_pool_trim_to, "cuMemPoolTrimTo", 0)                              \
	X(ckpt_get_state, "cuCheckpointProcessGetState", 0)                    \
	X(ckpt_lock, "cuCheckpointProcessLock", 0)                             \
	X(ckpt_checkpoint, "cuCheckpointProcessCheckpoint", 0)                 \
	X(ckpt_restore, "cuCheckpointProcessRestore", 0)                       \
	X(ckpt_unlock, "cuCheckpointProcessUnlock", 0)                         \
	X(ckpt_restore_tid, "cuCheckpointProcessGetRestoreThreadId", 0)

struct gpr__cuda_api {
	CUresult (*get_error_string)(CUresult, const char **);
	CUresult (*get_error_name)(CUresult, const char **);
	CUresult (*driver_get_version)(int *);
	CUresult (*device_get_count)(int *);
	CUresult (*device_get)(CUdevice *, int);
	CUresult (*device_get_uuid)(CUuuid *, CUdevice);
	CUresult (*device_get_pci_bus_id)(char *, int, CUdevice);
	CUresult (*primary_ctx_get_state)(CUdevice, unsigned int *, int *);
	/* memory pools: used only where the primary context
	 * is already active, so retaining it opens nothing */
	CUresult (*primary_ctx_retain)(CUcontext *, CUdevice);
	CUresult (*primary_ctx_release)(CUdevice);
	CUresult (*ctx_get_current)(CUcontext *);
	CUresult (*ctx_set_current)(CUcontext);
	CUresult (*ctx_synchronize)(void);
	CUresult (*pointer_get_attribute)(void *, int, CUdeviceptr);
	CUresult (*mem_pool_get_attribute)(CUmemoryPool, int, void *);
	CUresult (*mem_pool_trim_to)(CUmemoryPool, size_t);
	/* checkpoint: another process's pid first (driver 570+) */
	CUresult (*ckpt_get_state)(int, CUprocessState *);
	CUresult (*ckpt_lock)(int, CUcheckpointLockArgs *);
	CUresult (*ckpt_checkpoint)(int, CUcheckpointCheckpointArgs *);
	CUresult (*ckpt_restore)(int, CUcheckpointRestoreArgs *);
	CUresult (*ckpt_unlock)(int, CUcheckpointUnlockArgs *);
	CUresult (*ckpt_restore_tid)(int, int *);
};

struct gpr__cuda {
	void *lib;	/* dlopen handle (RTLD_NOLOAD), NULL if not loaded */
	char path[512]; /* the path or soname looked up */
	struct gpr__cuda_api api;
};

/*
 * The one rule for which library is loaded, of both vendors, for every
 * product (the core's handle, the command's `version`): `path` when set
 * and non-empty, else $GPURECLAIM_CUDA_LIBRARY / $GPURECLAIM_NVML_LIBRARY
 * when set and non-empty, else the soname ("libcuda.so.1",
 * "libnvidia-ml.so.1"). The open calls below apply it to their `path`.
 */
const char *gpr__cuda_library(const char *path);
const char *gpr__nvml_library(const char *path);

/*
 * Looks the driver up among the libraries already loaded in this process
 * (dlopen RTLD_NOLOAD of gpr__cuda_library(path)); never loads it, never
 * calls cuInit.
 * Returns 0 with c->lib set when loaded and every required symbol resolved;
 * GPR_E_NOT_LOADED (c->lib NULL) when it is not loaded; GPR_E_BAD_LIBRARY
 * when loaded but a required symbol is missing (err names it).
 */
int gpr__cuda_open(struct gpr__cuda *c, const char *path, char *err,
		   size_t errlen);

/*
 * As gpr__cuda_open, but loads the library when it is not loaded yet (for
 * a tool that asks the driver's version: never for the core, which must
 * not bring the driver into a process). Still no cuInit. GPR_E_NO_DRIVER
 * when it cannot be loaded (err says why).
 */
int gpr__cuda_load(struct gpr__cuda *c, const char *path, char *err,
		   size_t errlen);
void gpr__cuda_close(struct gpr__cuda *c);

/* cuDriverGetVersion (needs no cuInit): 13000 for CUDA 13.0. */
int gpr__cuda_driver_version(struct gpr__cuda *c, int *version, char *err,
			     size_t errlen);

/*
 * The number of CUDA devices. *n = 0 and 0 returned when the driver is
 * loaded but not initialised (CUDA_ERROR_NOT_INITIALIZED): nobody in this
 * process called cuInit, so no context exists.
 */
int gpr__cuda_device_count(struct gpr__cuda *c, int *n, char *err,
			   size_t errlen);

/* *active = 1 if the primary context of ordinal `ordinal` is active. */
int gpr__cuda_primary_active(struct gpr__cuda *c, int ordinal, int *active,
			     char *err, size_t errlen);

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as NVML prints UUIDs. */
int gpr__cuda_uuid(struct gpr__cuda *c, int ordinal, char *uuid, size_t len,
		   char *err, size_t errlen);

/* "0000:00:00.0"-style bus id. */
int gpr__cuda_pci_bus_id(struct gpr__cuda *c, int ordinal, char *bus,
			 size_t len, char *err, size_t errlen);

/*
 * Memory pools of the stream-ordered allocator. Where a call
 * needs a context, the primary context of `ordinal` is made current for
 * it (retained and released around it, the thread's previous context
 * restored); GPR_E_NOT_FOUND when that context is not active: nothing is
 * ever opened. GPR_E_BAD_LIBRARY when the driver lacks the calls.
 */
/* The pool the allocation at `ptr` came from; NULL for none. */
int gpr__cuda_pool_of(struct gpr__cuda *c, int ordinal, CUdeviceptr ptr,
		      CUmemoryPool *pool, char *err, size_t errlen);
/* The pool's reserve (RESERVED_MEM_CURRENT) and what is allocated from it
 * (USED_MEM_CURRENT); needs no context. */
int gpr__cuda_pool_bytes(struct gpr__cuda *c, CUmemoryPool pool,
			 uint64_t *reserved, uint64_t *used, char *err,
			 size_t errlen);
/* Synchronizes the context (frees in flight become free), then
 * cuMemPoolTrimTo(pool, keep). */
int gpr__cuda_pool_trim(struct gpr__cuda *c, int ordinal, CUmemoryPool pool,
			uint64_t keep, char *err, size_t errlen);

/* "CUDA_ERROR_X: text" for a CUresult, written into buf. */
void gpr__cuda_describe(struct gpr__cuda *c, CUresult r, char *buf, size_t len);

/* ---------------- checkpoint (checkpoint.c) ---------------- */

/*
 * For a checkpoint controller only, never for the core's own handle:
 * cuInit(0) in this process, looked up by name here (the symbol table
 * leaves it out on purpose). It opens no context: nothing shows in NVML.
 * `c` comes from gpr__cuda_load. 0, or GPR_E_DRIVER (err names the
 * CUresult; a host out of memory can make the real one fail).
 */
int gpr__cuda_init(struct gpr__cuda *c, char *err, size_t errlen);

/*
 * NULL when the driver has every call suspend and resume need (state,
 * lock, checkpoint, restore, unlock), else the first one it lacks.
 */
const char *gpr__ckpt_missing(const struct gpr__cuda *c);

/*
 * The checkpoint calls on process `pid`, each with zeroed arguments (the
 * behaviour of driver 570's cuda.h) but for what is named. Each returns
 * 0, or GPR_E_DRIVER with the driver's answer in *res and
 * "<call>: CUDA_ERROR_X (text)" in err; GPR_E_BAD_LIBRARY when the
 * driver lacks the call. *res is CUDA_SUCCESS on success.
 * - state: *state is a CUprocessState value (a newer driver may answer
 *   one this header does not name).
 * - lock: timeout_ms 0 waits as long as it takes.
 * - restore: pairs (n of them, NULL for none) restore onto other GPUs.
 */
int gpr__ckpt_state(struct gpr__cuda *c, int pid, int *state, CUresult *res,
		    char *err, size_t errlen);
int gpr__ckpt_lock(struct gpr__cuda *c, int pid, unsigned timeout_ms,
		   CUresult *res, char *err, size_t errlen);
int gpr__ckpt_checkpoint(struct gpr__cuda *c, int pid, CUresult *res, char *err,
			 size_t errlen);
int gpr__ckpt_restore(struct gpr__cuda *c, int pid,
		      const CUcheckpointGpuPair *pairs, unsigned n,
		      CUresult *res, char *err, size_t errlen);
int gpr__ckpt_unlock(struct gpr__cuda *c, int pid, CUresult *res, char *err,
		     size_t errlen);
/* The thread of `pid` that the driver restores with (CRIU keeps it
 * running while it freezes the rest). */
int gpr__ckpt_restore_tid(struct gpr__cuda *c, int pid, int *tid, CUresult *res,
			  char *err, size_t errlen);

/* ---------------- NVML ---------------- */

#define GPR__NVML_SYMBOLS(X)                                                   \
	X(init, "nvmlInit_v2", 1)                                              \
	X(shutdown, "nvmlShutdown", 1)                                         \
	X(error_string, "nvmlErrorString", 0)                                  \
	X(system_get_driver_version, "nvmlSystemGetDriverVersion", 0)          \
	X(device_get_count, "nvmlDeviceGetCount_v2", 1)                        \
	X(device_get_handle_by_index, "nvmlDeviceGetHandleByIndex_v2", 1)      \
	X(device_get_handle_by_uuid, "nvmlDeviceGetHandleByUUID", 0)           \
	X(device_get_handle_by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2", \
	  0)                                                                   \
	X(device_get_name, "nvmlDeviceGetName", 0)                             \
	X(device_get_uuid, "nvmlDeviceGetUUID", 0)                             \
	X(device_get_pci_info, "nvmlDeviceGetPciInfo_v3", 0)                   \
	X(device_get_memory_info_v2, "nvmlDeviceGetMemoryInfo_v2", 0)          \
	X(device_get_memory_info, "nvmlDeviceGetMemoryInfo", 1)                \
	X(device_get_mig_mode, "nvmlDeviceGetMigMode", 0)                      \
	X(device_get_compute_procs, "nvmlDeviceGetComputeRunningProcesses_v3", \
	  0)                                                                   \
	X(device_get_compute_procs, "nvmlDeviceGetComputeRunningProcesses_v2", \
	  0)                                                                   \
	X(device_get_compute_procs_v2,                                         \
	  "nvmlDeviceGetComputeRunningProcesses_v2", 0)                        \
	X(device_get_graphics_procs,                                           \
	  "nvmlDeviceGetGraphicsRunningProcesses_v3", 0)                       \
	X(device_get_graphics_procs,                                           \
	  "nvmlDeviceGetGraphicsRunningProcesses_v2", 0)                       \
	X(device_get_graphics_procs_v2,                                        \
	  "nvmlDeviceGetGraphicsRunningProcesses_v2", 0)                       \
	X(device_get_process_utilization, "nvmlDeviceGetProcessUtilization", 0)

struct gpr__nvml_api {
	nvmlReturn_t (*init)(void);
	nvmlReturn_t (*shutdown)(void);
	const char *(*error_string)(nvmlReturn_t);
	nvmlReturn_t (*system_get_driver_version)(char *, unsigned int);
	nvmlReturn_t (*device_get_count)(unsigned int *);
	nvmlReturn_t (*device_get_handle_by_index)(unsigned int,
						   nvmlDevice_t *);
	nvmlReturn_t (*device_get_handle_by_uuid)(const char *, nvmlDevice_t *);
	nvmlReturn_t (*device_get_handle_by_pci_bus_id)(const char *,
							nvmlDevice_t *);
	nvmlReturn_t (*device_get_name)(nvmlDevice_t, char *, unsigned int);
	nvmlReturn_t (*device_get_uuid)(nvmlDevice_t, char *, unsigned int);
	nvmlReturn_t (*device_get_pci_info)(nvmlDevice_t, gpr_nvmlPciInfo_t *);
	nvmlReturn_t (*device_get_memory_info_v2)(nvmlDevice_t,
						  gpr_nvmlMemory_v2_t *);
	nvmlReturn_t (*device_get_memory_info)(nvmlDevice_t,
					       gpr_nvmlMemory_v1_t *);
	nvmlReturn_t (*device_get_mig_mode)(nvmlDevice_t, unsigned int *,
					    unsigned int *);
	/* record type chosen at run time: see gpr__nvml_processes */
	nvmlReturn_t (*device_get_compute_procs)(nvmlDevice_t, unsigned int *,
						 void *);
	nvmlReturn_t (*device_get_graphics_procs)(nvmlDevice_t, unsigned int *,
						  void *);
	/*
	 * The _v2 symbols again: a _v3 that exists but answers
	 * NVML_ERROR_FUNCTION_NOT_FOUND is retried with these.
	 */
	nvmlReturn_t (*device_get_compute_procs_v2)(nvmlDevice_t,
						    unsigned int *, void *);
	nvmlReturn_t (*device_get_graphics_procs_v2)(nvmlDevice_t,
						     unsigned int *, void *);
	nvmlReturn_t (*device_get_process_utilization)(
	    nvmlDevice_t, gpr_nvmlProcessUtilizationSample_t *, unsigned int *,
	    unsigned long long);
};

/*
 * Told of each NVML step once it returned: the call ("nvmlInit_v2"; the
 * load is "dlopen <path>", NVML_ERROR_LIBRARY_NOT_FOUND when it fails),
 * the GPU index (-1: none), its wall time in ms and NVML's answer. May be
 * called from any thread that queries.
 */
typedef void (*gpr__nvml_step_fn)(void *user, const char *call, int index,
				  double ms, nvmlReturn_t r);

struct gpr__nvml {
	void *lib;
	int initialised; /* nvmlInit_v2 succeeded; shutdown on close */
	char path[512];
	int stride;		/* process record stride: 0 unknown, 24 or 32 */
	gpr__nvml_step_fn step; /* NULL: steps are not timed */
	void *step_user;
	struct gpr__nvml_api api;
};

/*
 * Loads and initialises NVML (gpr__nvml_library(path)). GPR_E_NO_NVML if
 * it cannot be loaded,
 * GPR_E_BAD_LIBRARY if a required symbol is missing, GPR_E_NVML if
 * nvmlInit_v2 fails (err holds NVML's text).
 */
int gpr__nvml_open(struct gpr__nvml *m, const char *path, char *err,
		   size_t errlen);

/* gpr__nvml_open, with `step` (may be NULL) told of every NVML step from
 * the load on, for as long as m stays open. */
int gpr__nvml_open_timed(struct gpr__nvml *m, const char *path,
			 gpr__nvml_step_fn step, void *user, char *err,
			 size_t errlen);
void gpr__nvml_close(struct gpr__nvml *m);

int gpr__nvml_count(struct gpr__nvml *m, int *n, char *err, size_t errlen);

/*
 * The driver's version ("580.65.06"), always NUL-terminated within len
 * (NVML may fill a buffer without its NUL). GPR_E_NOT_FOUND when NVML
 * lacks the call.
 */
int gpr__nvml_driver_version(struct gpr__nvml *m, char *out, size_t len,
			     char *err, size_t errlen);

struct gpr__nvml_gpu {
	char name[96];
	char uuid[96];
	char pci_bus_id[32];
	uint64_t total, used, free, reserved;
	int mig;
	int memory_info_v2;
};

int gpr__nvml_gpu_info(struct gpr__nvml *m, int index,
		       struct gpr__nvml_gpu *out, char *err, size_t errlen);

/* Memory figures only (total/used/free/reserved, v2 path first). */
int gpr__nvml_memory(struct gpr__nvml *m, int index, struct gpr__nvml_gpu *out,
		     char *err, size_t errlen);

/* NVML index of the GPU with this UUID, or of this PCI bus id. */
int gpr__nvml_index_by_uuid(struct gpr__nvml *m, const char *uuid, int *index,
			    char *err, size_t errlen);
int gpr__nvml_index_by_pci(struct gpr__nvml *m, const char *bus, int *index,
			   char *err, size_t errlen);

struct gpr__nvml_proc {
	uint32_t pid;
	uint64_t bytes; /* GPR_NVML_VALUE_NOT_AVAILABLE when hidden */
	int compute;
	int graphics;
};

/*
 * The processes on GPU `index`: compute and graphics lists (v3, else v2
 * symbols), each fetched with grow-and-retry on NVML_ERROR_INSUFFICIENT_SIZE,
 * decoded with the run-time record stride (24 or 32 bytes), merged by pid:
 * records of one list are summed (one per MIG instance), a pid in both
 * lists keeps the larger figure (the driver reports the same process
 * memory in each), and a hidden figure (NVML_VALUE_NOT_AVAILABLE) in any
 * record leaves the pid's bytes hidden. *out is malloc'ed (NULL when *n is
 * 0), *n its length.
 */
int gpr__nvml_processes(struct gpr__nvml *m, int index,
			struct gpr__nvml_proc **out, size_t *n, char *err,
			size_t errlen);

/* A process that did work on a GPU: the latest of its samples that
 * showed any (SM or memory utilization above 0). */
struct gpr__nvml_work {
	uint32_t pid;
	uint64_t time_us; /* the driver's stamp: CPU time, us since the epoch */
	unsigned sm, mem; /* that sample's utilization, percent */
};

/*
 * The processes that did work on GPU `index` in the samples the driver
 * keeps newer than since_us (0: all it keeps), one entry per pid, from
 * nvmlDeviceGetProcessUtilization (grow and retry on
 * NVML_ERROR_INSUFFICIENT_SIZE; NVML_ERROR_NOT_FOUND, no sample, is an
 * empty list). A process absent did no work in those samples. *out is
 * malloc'ed (NULL when *n is 0). GPR_E_NO_PER_PROCESS where NVML cannot
 * sample processes (no such call, NVML_ERROR_NOT_SUPPORTED: MIG, older
 * GPUs).
 */
int gpr__nvml_work(struct gpr__nvml *m, int index, uint64_t since_us,
		   struct gpr__nvml_work **out, size_t *n, char *err,
		   size_t errlen);

/* "NVML_ERROR_X (text)" for a return code, written into buf. */
void gpr__nvml_describe(struct gpr__nvml *m, nvmlReturn_t r, char *buf,
			size_t len);

#endif /* GPR_DRIVER_H */
