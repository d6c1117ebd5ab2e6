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
#define GPR_VERSION_MINOR 2
#define GPR_VERSION_PATCH 0
/* "0.2.0": made from the three numbers above, the one place the version
 * lives (meson.build reads them too). */
#define GPR_VERSION_STRING                                                     \
	GPR_STRINGIFY_(GPR_VERSION_MAJOR)                                      \
	"." GPR_STRINGIFY_(GPR_VERSION_MINOR) "." GPR_STRINGIFY_(              \
	    GPR_VERSION_PATCH)
#define GPR_STRINGIFY_(x) GPR_STRINGIFY2_(x)
#define GPR_STRINGIFY2_(x) #x

/* The library's version as "MAJOR.MINOR.PATCH"; static storage. */
GPR_API const char *gpr_version(void);
/* The major and minor version of the library loaded at run time (a program
 * built against an older header may compare them with its own
 * GPR_VERSION_MAJOR / GPR_VERSION_MINOR). Since 0.2. */
GPR_API int gpr_version_major(void);
GPR_API int gpr_version_minor(void);

/*
 * Error codes: 0 on success, a negative code from this table otherwise.
 * X(name, value, kind, message)
 * The values lie below -10000, apart from every negated errno (Linux:
 * -1..-4095), so a caller that also handles -errno values can tell the two
 * apart. `kind` says how to treat the error: ARG (a bad argument),
 * LOOKUP (no such thing), MEMORY (out of memory), RUNTIME (the rest); the
 * Python package raises ValueError, KeyError, MemoryError and
 * gpureclaim.Error for them.
 */
#define GPR_ERRORS(X)                                                          \
	X(GPR_OK, 0, NONE, "success")                                          \
	X(GPR_E_INVAL, -10001, ARG, "invalid argument")                        \
	X(GPR_E_NOMEM, -10002, MEMORY, "out of memory")                        \
	X(GPR_E_NO_DRIVER, -10003, RUNTIME, "NVIDIA driver not found")         \
	X(GPR_E_NO_NVML, -10004, RUNTIME,                                      \
	  "NVML (libnvidia-ml.so.1) not found")                                \
	X(GPR_E_BAD_LIBRARY, -10005, RUNTIME,                                  \
	  "library is not the expected NVIDIA library (symbol missing)")       \
	X(GPR_E_DRIVER, -10006, RUNTIME, "CUDA driver call failed")            \
	X(GPR_E_NVML, -10007, RUNTIME, "NVML call failed")                     \
	X(GPR_E_NO_PER_PROCESS, -10008, RUNTIME,                               \
	  "NVML has no per-process figures here (MIG or pid namespace)")       \
	X(GPR_E_FORKED, -10009, RUNTIME,                                       \
	  "handle used in a forked child: the parent's CUDA state is off "     \
	  "limits")                                                            \
	X(GPR_E_RANGE, -10010, ARG, "GPU index out of range")                  \
	X(GPR_E_EXISTS, -10011, ARG,                                           \
	  "a releaser of that name is already registered")                     \
	X(GPR_E_NOT_FOUND, -10012, LOOKUP, "not found")                        \
	X(GPR_E_NOT_LOADED, -10013, RUNTIME,                                   \
	  "the CUDA driver is not loaded in this process")                     \
	X(GPR_E_BUSY, -10014, RUNTIME,                                         \
	  "operation not allowed from inside a release")                       \
	X(GPR_E_RELEASER, -10015, RUNTIME, "a releaser failed")                \
	X(GPR_E_IO, -10016, RUNTIME, "input/output error")                     \
	X(GPR_E_FORMAT, -10017, RUNTIME, "malformed input")                    \
	X(GPR_E_PERM, -10018, RUNTIME,                                         \
	  "not permitted: the process belongs to another user")                \
	X(GPR_E_NO_ROOM, -10019, RUNTIME,                                      \
	  "host memory cannot hold the process's GPU memory")                  \
	X(GPR_E_STATE, -10020, RUNTIME,                                        \
	  "the process is not in the state this needs")                        \
	X(GPR_E_UNSUPPORTED, -10021, RUNTIME,                                  \
	  "the driver cannot do this for this process")

enum gpr_error {
#define GPR_X_ENUM(name, value, kind, msg) name = value,
	GPR_ERRORS(GPR_X_ENUM)
#undef GPR_X_ENUM
};

/* The message for a GPR_E_* code; static storage; never NULL ("unknown
 * error" for a code not in the table). */
GPR_API const char *gpr_strerror(int err);

/* The name of a GPR_E_* code ("GPR_E_INVAL", "GPR_OK"); static storage;
 * NULL for a code not in the table. Since 0.2. */
GPR_API const char *gpr_errname(int err);

/* Frees strings and arrays the library returned. NULL is a no-op. */
GPR_API void gpr_free(void *p);

/*
 * Structs that grow. A public struct may gain fields at its end in a later
 * version, never anywhere else; each ends without padding, so every field
 * added changes its size, and the library learns from the size which
 * fields the caller was compiled with.
 * - Structs the caller fills (gpr_opts, gpr_releaser, gpr_release_opts)
 *   start with `size_t sz` = sizeof(struct ...). A shorter struct (an
 *   older caller) leaves the later fields at their defaults; a longer one
 *   (a newer caller) is accepted when the fields this library does not know
 *   are zero, else GPR_E_INVAL. sz below sizeof(size_t) is GPR_E_INVAL.
 *   GPR_OPTS declares one with sz set and the other fields zero or as
 *   given: GPR_OPTS(gpr_release_opts, o, .collect = GPR_COLLECT_NEVER);
 * - Structs the library fills (gpr_gpu, gpr_report_gpu,
 *   gpr_report_releaser) are passed with a size in and out: the *_sz call
 *   takes the caller's sizeof in *sz, fills the fields both sides know,
 *   zeroes the caller's fields it does not know, and sets *sz to the bytes
 *   it filled. The call without _sz, inline in this header, passes the
 *   size of the struct the caller is compiled with.
 */
#define GPR_OPTS(TYPE, NAME, ...)                                              \
	struct TYPE NAME = {.sz = sizeof(struct TYPE), __VA_ARGS__}

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
	size_t sz;     /* sizeof(struct gpr_opts) */
	int log_level; /* highest level passed to log */
	/* NULL: $GPURECLAIM_CUDA_LIBRARY, else "libcuda.so.1" */
	const char *cuda_library;
	/* NULL: $GPURECLAIM_NVML_LIBRARY, else "libnvidia-ml.so.1" */
	const char *nvml_library;
	gpr_log_fn log; /* NULL: no logging */
	void *log_user; /* passed to log */
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

/* NVML's view of GPU `index` (NVML index); *sz in and out (structs that
 * grow, above). */
GPR_API int gpr_gpu_info_sz(gpr_ctx *ctx, int index, struct gpr_gpu *out,
			    size_t *sz);
static inline int gpr_gpu_info(gpr_ctx *ctx, int index, struct gpr_gpu *out)
{
	size_t sz = sizeof(*out);
	return gpr_gpu_info_sz(ctx, index, out, &sz);
}

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
/* Memory pools                                                        */
/* ------------------------------------------------------------------ */

/*
 * CUDA memory pools of the stream-ordered allocator (cuMemPoolCreate,
 * cudaMallocAsync) that this process's allocators keep, for a releaser of
 * an allocator that owns a pool its framework does not expose (RMM's
 * CudaAsyncMemoryResource). A pool is the driver's CUmemoryPool handle as
 * an integer, valid while its owner keeps the pool. Where a call needs a
 * context it uses the primary context of `device`, only if this process
 * holds it active (GPR_E_NOT_FOUND otherwise: nothing is opened), and
 * restores the thread's current context. GPR_E_NOT_LOADED when libcuda
 * is not loaded, GPR_E_BAD_LIBRARY when it lacks the pool calls,
 * GPR_E_DRIVER when a driver call fails (gpr_last_error says which).
 * Since 0.2.
 */

/* *pool: the pool the live allocation at `address` on CUDA ordinal
 * `device` came from, 0 when it came from none. */
GPR_API int gpr_pool_of(gpr_ctx *ctx, int device, uint64_t address,
			uint64_t *pool);

/* The pool's reserve (bytes it holds from the driver, what NVML counts)
 * and the bytes allocated from it, frees in flight included. */
GPR_API int gpr_pool_bytes(gpr_ctx *ctx, uint64_t pool, uint64_t *reserved,
			   uint64_t *used);

/*
 * Returns the pool's free memory to the driver, keeping at least `keep`
 * bytes reserved: synchronizes the context of `device` first (it waits
 * for the GPU's queued work, so that frees in flight become free), then
 * cuMemPoolTrimTo. The reserve left may exceed the bytes in use by the
 * driver's granularity.
 */
GPR_API int gpr_pool_trim(gpr_ctx *ctx, int device, uint64_t pool,
			  uint64_t keep);

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
 * A GPU that CUDA and NVML do not see (Metal on Apple silicon), reached
 * through releasers that name it in gpr_releaser.device_name: what their
 * figure() callback says.
 */
enum gpr_figure {
	GPR_FIGURE_UNUSED = 0,	/* the framework is not in use here */
	GPR_FIGURE_UNKNOWN = 1, /* in use; no figure (why says) */
	GPR_FIGURE_KNOWN = 2	/* *bytes is the driver's figure */
};

/*
 * A caching allocator that takes part in releases. Every callback may be
 * NULL. Callbacks run on the thread that called gpr_release, with the
 * handle's release lock held: they must not call gpr_release,
 * gpr_register or gpr_unregister on the same handle (those return
 * GPR_E_BUSY).
 * - held(device): what the allocator holds on CUDA ordinal `device`.
 * - release(device): return the cached blocks of `device` to the driver,
 *   making the device current in the framework and restoring it after.
 *   Called once per visited GPU, then once with GPR_DEVICE_ONCE.
 *   A message written to note (NUL-terminated, at most note_sz bytes)
 *   lands in the report's notes; a negative return marks a failure.
 * - destroy(data): called on unregister and on gpr_close.
 * - device_name (since 0.2): NULL for an allocator of CUDA GPUs. An
 *   allocator of a GPU that CUDA and NVML do not see (Metal on Apple
 *   silicon) names that GPU here ("mps"). Its held() and release() are
 *   called with GPR_DEVICE_ONCE only, also when no CUDA driver is loaded,
 *   in the releases where its figure() does not answer GPR_FIGURE_UNUSED;
 *   the GPU is then a row of the report (device GPR_DEVICE_NAMED, name).
 * - figure(data, bytes, why, why_sz) (since 0.2; named GPUs only): the
 *   driver's figure of this process on that GPU, what a release there is
 *   measured with, as NVML's per-process figure is on a CUDA GPU. Read
 *   before anything in a release runs (a garbage collection can give
 *   buffers back to the driver at once, as Metal's are) and after it.
 *   Returns an enum gpr_figure value, or a negative code (why says). Of
 *   the releasers of one GPU, the first registered that answers
 *   GPR_FIGURE_KNOWN gives the figure; where none does, the allocators'
 *   counters stand in, as on a CUDA GPU without NVML. NULL: in use in
 *   every release, no figure.
 */
struct gpr_releaser {
	size_t sz;	  /* sizeof(struct gpr_releaser) */
	const char *name; /* copied */
	void *data;
	int (*held)(void *data, int device, struct gpr_held *out);
	int (*release)(void *data, int device, char *note, size_t note_sz);
	void (*destroy)(void *data);
	const char *device_name; /* copied; NULL: CUDA GPUs */
	int (*figure)(void *data, uint64_t *bytes, char *why, size_t why_sz);
};

/* Adds a releaser; GPR_E_EXISTS if the name is taken. */
GPR_API int gpr_register(gpr_ctx *ctx, const struct gpr_releaser *r);

/* Removes a releaser by name (calls its destroy); GPR_E_NOT_FOUND. */
GPR_API int gpr_unregister(gpr_ctx *ctx, const char *name);

/*
 * The registered releasers, in registration order: *n is their number;
 * *name (free with gpr_free) is releaser i's name, GPR_E_RANGE when i >= *n.
 * Neither waits on a release in progress, and both work from inside a
 * releaser callback; a register or unregister by another thread between
 * two calls shifts the indices. Since 0.2.
 */
GPR_API int gpr_releaser_count(gpr_ctx *ctx, size_t *n);
GPR_API int gpr_releaser_name(gpr_ctx *ctx, size_t i, char **name);

/* ------------------------------------------------------------------ */
/* Release                                                             */
/* ------------------------------------------------------------------ */

enum gpr_collect {
	GPR_COLLECT_AUTO = 0, /* collect only while live bytes are reported */
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
	 * ALWAYS: called before the releasers run. AUTO: called before they
	 * run when a releaser reports live bytes on a visited GPU (a release
	 * returns cached blocks only: the live ones may be garbage in a
	 * reference cycle that a collection frees).
	 */
	int (*collect_fn)(void *user);
	void *collect_user;
	/*
	 * Since 0.2, optional: a cheaper, partial collection (Python's
	 * gc.collect(1): the young generations). AUTO tries it first and
	 * calls collect_fn only if live bytes remain after it.
	 */
	int (*collect_young_fn)(void *user);
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
/* "driver" (the driver's per-process figure on every visited GPU: NVML's,
 * or a named GPU's figure()), "allocators" (their counters), "none" (a
 * forked child: nothing measured). */
GPR_API const char *gpr_report_source(const gpr_report *r);
GPR_API double gpr_report_seconds(const gpr_report *r);
/* 1 if a collection ran (collect_fn or collect_young_fn); their time in
 * seconds through *seconds (may be NULL). */
GPR_API int gpr_report_collected(const gpr_report *r, double *seconds);

/* The device of a report row for a GPU that CUDA does not see (its name
 * says which: gpr_releaser.device_name). */
#define GPR_DEVICE_NAMED (-2)

struct gpr_report_gpu {
	int device;	  /* CUDA ordinal, or GPR_DEVICE_NAMED */
	int nvml_index;	  /* -1 if unmatched */
	int known;	  /* driver figures below are valid */
	int64_t released; /* before - after (driver) or allocator drop */
	uint64_t before;  /* driver bytes of this process before */
	uint64_t after;	  /* and after */
	uint64_t used;	  /* the GPU's used bytes after, all processes */
	uint64_t free;	  /* (used, free, total: 0 where unknown) */
	uint64_t total;
	/* NULL for a CUDA GPU; a named GPU's name ("mps"), valid while the
	 * report lives. Since 0.2. */
	const char *name;
};
GPR_API size_t gpr_report_gpu_count(const gpr_report *r);
/* GPU row i; *sz in and out (structs that grow, above). */
GPR_API int gpr_report_gpu_sz(const gpr_report *r, size_t i,
			      struct gpr_report_gpu *out, size_t *sz);
static inline int gpr_report_gpu(const gpr_report *r, size_t i,
				 struct gpr_report_gpu *out)
{
	size_t sz = sizeof(*out);
	return gpr_report_gpu_sz(r, i, out, &sz);
}

struct gpr_report_releaser {
	const char *name; /* valid while the report lives */
	int device;	  /* CUDA ordinal or GPR_DEVICE_ONCE */
	int known;
	int status; /* 0 or the negative return of release() */
	struct gpr_held before;
	struct gpr_held after;
};
GPR_API size_t gpr_report_releaser_count(const gpr_report *r);
/* Releaser row i; *sz in and out (structs that grow, above). */
GPR_API int gpr_report_releaser_sz(const gpr_report *r, size_t i,
				   struct gpr_report_releaser *out, size_t *sz);
static inline int gpr_report_releaser(const gpr_report *r, size_t i,
				      struct gpr_report_releaser *out)
{
	size_t sz = sizeof(*out);
	return gpr_report_releaser_sz(r, i, out, &sz);
}

GPR_API size_t gpr_report_note_count(const gpr_report *r);
/* Note i, valid while the report lives; NULL if out of range. */
GPR_API const char *gpr_report_note(const gpr_report *r, size_t i);

/* The report as a text table / a JSON document; free with gpr_free. */
GPR_API char *gpr_report_text(const gpr_report *r);
GPR_API char *gpr_report_json(const gpr_report *r);
/*
 * The report as an HTML view: a <div> with its own style and no script or
 * outside asset (a notebook's _repr_html_; wrap it in a document to make a
 * page), bars of each GPU's memory after the release, the tables of the
 * text form, the notes. Free with gpr_free; NULL when out of memory.
 * Since 0.2.
 */
GPR_API char *gpr_report_html(const gpr_report *r);

#ifdef __cplusplus
}
#endif
#endif /* GPURECLAIM_H */
