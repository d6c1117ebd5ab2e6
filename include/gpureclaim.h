/*
 * gpureclaim: give a GPU process its cached memory back and say what the
 * driver got.
 *
 * One public header. Every function returns 0 or a negative GPR_E_* code
 * unless its comment says otherwise. Handles are opaque. Memory the library
 * allocates for the caller is released with gpr_free() (strings, arrays) or
 * gpr_report_free() (reports).
 *
 * Threads: a gpr_ctx may be shared by threads. Releases on one handle
 * serialize; queries do not wait on a release in progress.
 * Fork: a handle opened in a parent and used in a forked child touches no
 * CUDA state; queries return GPR_E_FORKED and a release returns an empty
 * report that says so in its notes.
 */
#ifndef GPURECLAIM_H
#define GPURECLAIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(GPR_BUILDING_LIBRARY)
#define GPR_API __attribute__((visibility("default")))
#else
#define GPR_API
#endif

#define GPR_VERSION_MAJOR 0
#define GPR_VERSION_MINOR 1
#define GPR_VERSION_PATCH 0
#define GPR_VERSION_STRING "0.1.0"

/* The library's version as "MAJOR.MINOR.PATCH"; static storage. */
GPR_API const char *gpr_version(void);

/*
 * Error codes: 0 on success, a negative code from this table otherwise.
 * X(name, value, message)
 */
#define GPR_ERRORS(X)                                                          \
	X(GPR_OK, 0, "success")                                                \
	X(GPR_E_INVAL, -1, "invalid argument")                                 \
	X(GPR_E_NOMEM, -2, "out of memory")                                    \
	X(GPR_E_NO_DRIVER, -3, "NVIDIA driver not found")                      \
	X(GPR_E_NO_NVML, -4, "NVML (libnvidia-ml.so.1) not found")             \
	X(GPR_E_BAD_LIBRARY, -5,                                               \
	  "library is not the expected NVIDIA library (symbol missing)")       \
	X(GPR_E_DRIVER, -6, "CUDA driver call failed")                         \
	X(GPR_E_NVML, -7, "NVML call failed")                                  \
	X(GPR_E_NO_PER_PROCESS, -8,                                            \
	  "NVML has no per-process figures here (MIG or pid namespace)")       \
	X(GPR_E_FORKED, -9,                                                    \
	  "handle used in a forked child: the parent's CUDA state is off "     \
	  "limits")                                                            \
	X(GPR_E_RANGE, -10, "GPU index out of range")                          \
	X(GPR_E_EXISTS, -11, "a releaser of that name is already registered")  \
	X(GPR_E_NOT_FOUND, -12, "not found")                                   \
	X(GPR_E_NOT_LOADED, -13,                                               \
	  "the CUDA driver is not loaded in this process")                     \
	X(GPR_E_BUSY, -14, "operation not allowed from inside a release")      \
	X(GPR_E_RELEASER, -15, "a releaser failed")                            \
	X(GPR_E_IO, -16, "input/output error")                                 \
	X(GPR_E_FORMAT, -17, "malformed input")

enum gpr_error {
#define GPR_X_ENUM(name, value, msg) name = value,
	GPR_ERRORS(GPR_X_ENUM)
#undef GPR_X_ENUM
};

/* The message for a GPR_E_* code; static storage; never NULL. */
GPR_API const char *gpr_strerror(int err);

/* Frees strings and arrays the library returned. NULL is a no-op. */
GPR_API void gpr_free(void *p);

/* ------------------------------------------------------------------ */
/* Handle                                                              */
/* ------------------------------------------------------------------ */

typedef struct gpr_ctx gpr_ctx;

enum gpr_log_level {
	GPR_LOG_ERROR = 0,
	GPR_LOG_WARN = 1,
	GPR_LOG_INFO = 2,
	GPR_LOG_DEBUG = 3
};

/* Called from any thread; msg is valid for the call only, no newline. */
typedef void (*gpr_log_fn)(void *user, int level, const char *msg);

struct gpr_opts {
	size_t sz; /* sizeof(struct gpr_opts): fields may be added later */
	/* NULL: $GPURECLAIM_CUDA_LIBRARY, else "libcuda.so.1" */
	const char *cuda_library;
	/* NULL: $GPURECLAIM_NVML_LIBRARY, else "libnvidia-ml.so.1" */
	const char *nvml_library;
	gpr_log_fn log; /* NULL: no logging */
	void *log_user; /* passed to log */
	int log_level;	/* highest level passed to log */
};

/*
 * Opens a handle. opts may be NULL (defaults). Loads nothing yet: the CUDA
 * driver is looked up only among libraries already loaded (RTLD_NOLOAD) and
 * NVML is loaded on first use. Never calls cuInit, never opens a context.
 * *out is set on success; close it with gpr_close().
 */
GPR_API int gpr_open(const struct gpr_opts *opts, gpr_ctx **out);

/* Closes a handle; NULL is a no-op. Not while another thread uses it. */
GPR_API void gpr_close(gpr_ctx *ctx);

/*
 * The detail of the last error on this handle in the calling thread
 * (vendor code, library path, dlerror text). Never NULL; "" if none.
 * Valid until the next call on the handle from this thread.
 */
GPR_API const char *gpr_last_error(const gpr_ctx *ctx);

/* ------------------------------------------------------------------ */
/* Queries                                                             */
/* ------------------------------------------------------------------ */

/* 1 if libcuda is loaded in this process (checked without loading it). */
GPR_API int gpr_cuda_loaded(gpr_ctx *ctx);

/*
 * The CUDA ordinals of the GPUs on which this process holds a context:
 * primary contexts (cuDevicePrimaryCtxGetState) united with the GPUs whose
 * NVML process list holds our pid. Opens none, never calls cuInit. When the
 * driver is not loaded or not initialised, *n = 0 and 0 is returned.
 * Writes at most cap ordinals, sets *n to the number found (which may
 * exceed cap).
 */
GPR_API int gpr_devices_in_use(gpr_ctx *ctx, int *devices, int cap, int *n);

/*
 * *active = 1 if this process holds the primary context of CUDA ordinal
 * `device` (the one the CUDA runtime uses: cudaSetDevice then works there
 * without creating a context). ~1 us: asks the loaded driver only, never
 * NVML; opens nothing. *active = 0 when the driver is not loaded or not
 * initialised; GPR_E_RANGE for an ordinal the driver does not have.
 */
GPR_API int gpr_primary_context_active(gpr_ctx *ctx, int device, int *active);

/* One GPU as NVML sees it. Every string is NUL-terminated. */
struct gpr_gpu {
	int index;	  /* NVML index */
	int cuda_ordinal; /* CUDA ordinal in this process, -1 if unknown */
	char name[96];
	char uuid[96];
	char pci_bus_id[32];
	uint64_t total;	    /* bytes */
	uint64_t used;	    /* bytes, all processes */
	uint64_t free;	    /* bytes */
	uint64_t reserved;  /* bytes the driver reserves (v2 memory info) */
	int mig;	    /* 1 if MIG mode is on */
	int memory_info_v2; /* 1 if nvmlDeviceGetMemoryInfo_v2 answered */
};

/* The number of GPUs NVML sees. */
GPR_API int gpr_gpu_count(gpr_ctx *ctx, int *n);

/* NVML's view of GPU `index` (NVML index). */
GPR_API int gpr_gpu_info(gpr_ctx *ctx, int index, struct gpr_gpu *out);

/* A process holding memory on a GPU. */
struct gpr_process {
	uint32_t pid;	 /* host pid, as NVML reports it */
	uint64_t bytes;	 /* driver bytes; valid if bytes_known */
	int bytes_known; /* 0 on MIG and where NVML withholds the figure */
	int compute;	 /* in the compute list */
	int graphics;	 /* in the graphics list */
};

/*
 * The processes on GPU `index` (NVML index): compute and graphics lists
 * merged by pid. *procs is allocated (free with gpr_free), *n its length.
 */
GPR_API int gpr_gpu_processes(gpr_ctx *ctx, int index,
			      struct gpr_process **procs, size_t *n);

/*
 * The driver bytes this process holds on CUDA ordinal `device`, from NVML's
 * per-process list. GPR_E_NO_PER_PROCESS where NVML has no figure (MIG, our
 * pid absent from the list while we hold a context).
 */
GPR_API int gpr_process_bytes(gpr_ctx *ctx, int device, uint64_t *bytes);

/* NVML index of CUDA ordinal `device` (matched by UUID, then PCI bus id). */
GPR_API int gpr_nvml_index(gpr_ctx *ctx, int device, int *index);

/* ------------------------------------------------------------------ */
/* Releasers                                                           */
/* ------------------------------------------------------------------ */

/* The device value of the once-per-call step and of host-side pools. */
#define GPR_DEVICE_ONCE (-1)

struct gpr_held {
	uint64_t live;	 /* bytes in live allocations */
	uint64_t cached; /* bytes held but free for reuse */
	int known;	 /* 0: the releaser cannot tell */
};

/*
 * A caching allocator that takes part in releases. Every callback may be
 * NULL. Callbacks run with the handle's release lock held: they must not
 * call gpr_release, gpr_register or gpr_unregister on the same handle
 * (those return GPR_E_BUSY).
 * - held(device): what the allocator holds on CUDA ordinal `device`.
 * - release(device): return the cached blocks of `device` to the driver,
 *   making the device current in the framework and restoring it after.
 *   Called once per visited GPU, then once with GPR_DEVICE_ONCE.
 *   A message written to note (NUL-terminated, at most note_sz bytes)
 *   lands in the report's notes; a negative return marks a failure.
 * - destroy(data): called on unregister and on gpr_close.
 */
struct gpr_releaser {
	size_t sz;	  /* sizeof(struct gpr_releaser) */
	const char *name; /* copied */
	void *data;
	int (*held)(void *data, int device, struct gpr_held *out);
	int (*release)(void *data, int device, char *note, size_t note_sz);
	void (*destroy)(void *data);
};

/* Adds a releaser; GPR_E_EXISTS if the name is taken. */
GPR_API int gpr_register(gpr_ctx *ctx, const struct gpr_releaser *r);

/* Removes a releaser by name (calls its destroy); GPR_E_NOT_FOUND. */
GPR_API int gpr_unregister(gpr_ctx *ctx, const char *name);

/* ------------------------------------------------------------------ */
/* Release                                                             */
/* ------------------------------------------------------------------ */

enum gpr_collect {
	GPR_COLLECT_AUTO =
	    0, /* collect only if live bytes remain after a pass */
	GPR_COLLECT_ALWAYS = 1,
	GPR_COLLECT_NEVER = 2
};

struct gpr_release_opts {
	size_t sz;	    /* sizeof(struct gpr_release_opts) */
	const int *devices; /* CUDA ordinals to visit; NULL: all in use */
	int n_devices;
	int collect; /* enum gpr_collect */
	/*
	 * The garbage collector of the host language (Python's gc.collect).
	 * AUTO: called when a releaser still reports live bytes on a visited
	 * GPU after a first pass; then the releasers run again.
	 */
	int (*collect_fn)(void *user);
	void *collect_user;
};

typedef struct gpr_report gpr_report;

/*
 * Releases every registered releaser's cached blocks on the GPUs this
 * process has opened (or opts->devices among them) and measures what the
 * driver got back. opts may be NULL. *out is always set on success, also
 * when nothing was visited (a report of 0 bytes with notes). Concurrent
 * calls on one handle serialize.
 */
GPR_API int gpr_release(gpr_ctx *ctx, const struct gpr_release_opts *opts,
			gpr_report **out);

GPR_API void gpr_report_free(gpr_report *r);

/* Total bytes handed back (may be negative if the process allocated). */
GPR_API int64_t gpr_report_bytes(const gpr_report *r);
/* "driver" (NVML per-process figure), "allocators" (their counters),
 * "none" (a forked child: nothing measured). */
GPR_API const char *gpr_report_source(const gpr_report *r);
GPR_API double gpr_report_seconds(const gpr_report *r);
/* 1 if collect_fn ran; its time in seconds through *seconds (may be NULL). */
GPR_API int gpr_report_collected(const gpr_report *r, double *seconds);

struct gpr_report_gpu {
	int device;	  /* CUDA ordinal */
	int nvml_index;	  /* -1 if unmatched */
	int known;	  /* driver figures below are valid */
	int64_t released; /* before - after (driver) or allocator drop */
	uint64_t before;  /* driver bytes of this process before */
	uint64_t after;	  /* and after */
	uint64_t used;	  /* the GPU's used bytes after, all processes */
	uint64_t free;
	uint64_t total;
};
GPR_API size_t gpr_report_gpu_count(const gpr_report *r);
GPR_API int gpr_report_gpu(const gpr_report *r, size_t i,
			   struct gpr_report_gpu *out);

struct gpr_report_releaser {
	const char *name; /* valid while the report lives */
	int device;	  /* CUDA ordinal or GPR_DEVICE_ONCE */
	int known;
	struct gpr_held before;
	struct gpr_held after;
	int status; /* 0 or the negative return of release() */
};
GPR_API size_t gpr_report_releaser_count(const gpr_report *r);
GPR_API int gpr_report_releaser(const gpr_report *r, size_t i,
				struct gpr_report_releaser *out);

GPR_API size_t gpr_report_note_count(const gpr_report *r);
/* Note i, valid while the report lives; NULL if out of range. */
GPR_API const char *gpr_report_note(const gpr_report *r, size_t i);

/* The report as a text table / a JSON document; free with gpr_free. */
GPR_API char *gpr_report_text(const gpr_report *r);
GPR_API char *gpr_report_json(const gpr_report *r);

#ifdef __cplusplus
}
#endif
#endif /* GPURECLAIM_H */
