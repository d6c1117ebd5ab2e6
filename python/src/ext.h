/*
 * The CPython extension gpureclaim._gpureclaim: what its files share.
 * Internal to the extension (gpr_py_ prefix). Built for the limited API
 * (abi3, Python 3.11+); every file includes this header first.
 *
 * Threads and the GIL: every gpr_* call is made with the GIL released. The
 * core calls the releasers back on the thread that called gpr_release, with
 * the GIL released; each callback takes it with PyGILState_Ensure. Releases
 * serialize on the core's release lock, waited for with the GIL released,
 * so a waiting thread never blocks the one inside a release.
 */
#ifndef GPR_PY_EXT_H
#define GPR_PY_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>
#include <stdint.h>

#include "gpureclaim.h"

#define GPR_PY_SLOTS 16	    /* GPUs remembered per kind of record */
#define GPR_PY_SURVIVORS 16 /* blocks remembered per GPU */

/* What release(workspaces=True) did on one GPU (rel_torch.c), read by
 * explain() so that advice once followed is not given again. */
struct gpr_py_ws_release {
	int used;
	int device;
	double at;     /* time.time() */
	int64_t freed; /* Torch's allocated bytes, before - after the clear */
	int n;	       /* blocks of a workspace's size that survived it */
	struct {
		uint64_t address, size;
	} survivors[GPR_PY_SURVIVORS];
};

/* An RMM CUDA async pool found by release() (rel_rmm.c): its handle,
 * which Python does not expose, and the reserve its last trim left. */
struct gpr_py_rmm_pool {
	int used;
	int device;
	uintptr_t owner; /* the resource object it belongs to: a pool found
			    for a resource since replaced is not read */
	uint64_t pool;
	uint64_t trimmed_to;
};

/* A bare context's size measured by the probe (explain_rest.c). */
struct gpr_py_context {
	int used;
	int device;
	char uuid[96];
	int64_t bytes; /* -1: the probe failed */
	char why[160];
};

/* Module state: one per module object (PEP 489), no C globals. */
struct gpr_py_state {
	gpr_ctx *ctx;	      /* NULL if gpr_open failed (open_error says) */
	int open_error;	      /* GPR_E_* of a failed gpr_open */
	PyObject *error;      /* gpureclaim.Error */
	PyObject *gc_collect; /* gc.collect */
	struct gpr_py_ws_release ws_release[GPR_PY_SLOTS];
	struct gpr_py_rmm_pool rmm_pools[GPR_PY_SLOTS];
	struct gpr_py_context contexts[GPR_PY_SLOTS];
};

/* The options of the release running on this thread (release.c), read by
 * the releasers it calls back; zeros outside a release. */
struct gpr_py_call {
	int workspaces; /* also free cuBLAS workspaces (Torch) */
};
const struct gpr_py_call *gpr_py_call_options(void);

/* ---------------- helpers (pyutil.c) ---------------- */

/*
 * The module of that name if the user's program imported it (sys.modules
 * only, never an import): a new reference, or NULL with no error set.
 */
PyObject *gpr_py_imported(const char *name);

/* obj.a.b.c for a dotted path; new reference or NULL with no error set. */
PyObject *gpr_py_attr(PyObject *obj, const char *dotted);

/* Calls obj.name(*args) with C-built args (Py_BuildValue format, may be
 * NULL); new reference or NULL with an error set. */
PyObject *gpr_py_call(PyObject *obj, const char *name, const char *fmt, ...);

/* An int (or an object with __index__) as an int64: 0, or -1 with an error
 * set (also for obj NULL without an error). The one conversion. */
int gpr_py_i64(PyObject *obj, int64_t *out);

/* obj.name(*args) converted to an int64; 0 or -1 with an error set. */
int gpr_py_call_i64(PyObject *obj, const char *name, int64_t *out,
		    const char *fmt, ...);

/* dict[key] as an int64 (-1 and no error if dict is not a dict, the key
 * is absent or its value not an int). */
int64_t gpr_py_item_i64(PyObject *dict, const char *key);

/*
 * 1 if this process holds the primary context of CUDA ordinal `device`, so
 * that the CUDA runtime can make it current without creating a context;
 * 0 otherwise or on error. Called with the GIL held; releases it around
 * the driver call.
 */
int gpr_py_primary_active(struct gpr_py_state *st, int device);

/* The most GPUs a devices= argument may name. */
#define GPR_PY_MAX_DEVICES 1024

/*
 * A devices= argument of fn(): None (*n = -1) or an iterable of
 * non-negative ints, deduplicated into out[GPR_PY_MAX_DEVICES]. -1 with
 * TypeError/ValueError naming fn on bad input.
 */
int gpr_py_parse_devices(PyObject *obj, const char *fn, int *out, int *n);

/*
 * Writes "<prefix>: <ExcType>: <message>" of the pending exception into
 * buf (clearing the exception); prefix may be "" (then no "<prefix>: "),
 * buf may be NULL (just clears). The core puts the releaser's name and
 * the GPU in front of a note.
 */
void gpr_py_error_note(char *buf, size_t len, const char *prefix);

/* Raises the Python exception for a GPR_E_* code (its kind in the
 * GPR_ERRORS table says which), with the handle's detail; returns NULL. */
PyObject *gpr_py_raise(struct gpr_py_state *st, int err, const char *what);

/*
 * A framework's current device, switched through its getDevice() and
 * setDevice(i) (CuPy's cupy.cuda.runtime, RMM's rmm._cuda.gpu): makes
 * `device` current, *prev the device it replaced. Returns 1 when `device`
 * is current; 0 (no error set) when the thread's current device has no
 * context: setDevice could not restore it without opening one there
 * (~500 MiB), so the caller leaves this GPU alone; -1 with an error set.
 */
int gpr_py_enter_device(struct gpr_py_state *st, PyObject *obj, int device,
			int64_t *prev);

/*
 * Puts back the device gpr_py_enter_device replaced (nothing when `device`
 * was already current) after work whose result is rc, keeping the
 * exception that work left (if any); returns rc, or -1 when only the
 * restore failed (its error set).
 */
int gpr_py_leave_device(PyObject *obj, int device, int64_t prev, int rc);

/* 1 if obj is True, 0 if False or None; else -1 with an error set. */
int gpr_py_truth(PyObject *obj);

/* ---------------- tracing from inside (trace.c) ---------------- */

PyObject *gpr_py_trace_start(PyObject *module, PyObject *args);
PyObject *gpr_py_trace_stop(PyObject *module, PyObject *unused);
PyObject *gpr_py_trace_status(PyObject *module, PyObject *unused);
PyObject *gpr_py_trace_report(PyObject *module, PyObject *args);

/* ---------------- probes (probe.c) ---------------- */

/*
 * Whether a framework is active in this process, for its releaser and its
 * explainer alike: its handle (a new reference) when it is, else NULL;
 * either way why[len] says why (why may be NULL). A probe never imports or
 * initialises anything and leaves no error set.
 */
PyObject *gpr_py_torch_cuda(char *why, size_t len); /* torch.cuda */
PyObject *gpr_py_torch_mps(char *why, size_t len);  /* torch.mps */
PyObject *gpr_py_cupy(char *why, size_t len);	    /* cupy */
PyObject *gpr_py_numba(char *why, size_t len);	    /* Numba's driver */
PyObject *gpr_py_jax(char *why, size_t len);	    /* the started backends */
PyObject *gpr_py_mlx(char *why, size_t len);	    /* mlx.core */
PyObject *gpr_py_rmm(char *why, size_t len);	    /* rmm.mr */

/* The JAX device of CUDA ordinal `device` in one backend (new reference),
 * or NULL, no error set. */
PyObject *gpr_py_jax_device(PyObject *backend, int device);

/* ---------------- Torch's internals (torch_wsmap.c, tensor_scan.c) ------ */

/* One workspace in Torch's maps. */
struct gpr_py_ws {
	int device; /* CUDA ordinal; -1: not a CUDA DataPtr */
	int lt;	    /* from the cuBLASLt map */
	uint64_t ptr, handle, stream;
	uint64_t size; /* as Torch stored it (2.13), 0 where it stores none */
};

/*
 * Reads Torch's cuBLAS and cuBLASLt workspace maps (every device) into
 * out[cap]: 0 with *n entries, or -1 with why[len] saying why they cannot
 * be read (torch version not checked, library or symbols missing, a
 * writer holding the lock, a malformed map). No Python error is left set.
 */
int gpr_py_torch_wsmap(struct gpr_py_ws *out, int cap, int *n, char *why,
		       size_t len);

/*
 * What the Python heap holds of Torch, found by one pass over
 * gc.get_objects() (objects of gc.freeze() are not in it): the data
 * pointers of every tensor (PyType_IsSubtype on torch._C.TensorBase, never
 * isinstance, which could run user code) and the private pool of every
 * CUDA graph with a completed capture.
 */
struct gpr_py_pool_id {
	int64_t a, b;
};
struct gpr_py_scan {
	int done;	/* tried */
	int ok;		/* ran: the figures below hold */
	uint64_t *ptrs; /* sorted */
	size_t nptrs;
	struct gpr_py_pool_id *graphs; /* one per graph */
	size_t ngraphs;
	long objects, tensors, odd; /* odd: data_ptr() raised */
	int64_t frozen;		    /* gc.get_freeze_count() */
	double ms;
	char why[200]; /* why it did not run */
};
/* Runs the scan once per explain() call (c->scan); 0, or -1 with an error
 * set only for a failure that must end explain (out of memory). */
int gpr_py_scan_heap(struct gpr_py_scan *s);
/* 1 if a scanned tensor's data pointer lies in [address, address+size). */
int gpr_py_scan_holds(const struct gpr_py_scan *s, uint64_t address,
		      uint64_t size);
void gpr_py_scan_free(struct gpr_py_scan *s);

/*
 * Torch's cuBLAS and cuBLASLt workspace sizes on `device`, as Torch
 * computes them (CUBLAS_WORKSPACE_CONFIG, else 32 MiB on sm_90, else
 * 8.125 MiB; CUBLASLT_WORKSPACE_SIZE KiB, 1 MiB by default, at most the
 * cuBLAS size); from[len] says where the first came from. 0 sizes when
 * unknown. (explain_torch.c)
 */
void gpr_py_torch_ws_sizes(PyObject *cuda, int device, int64_t *ws, int64_t *lt,
			   char *from, size_t len);

/* torch.cuda.memory_snapshot() without traces (new reference, or NULL
 * with an error set). */
PyObject *gpr_py_torch_snapshot(PyObject *cuda);

/* 1 if a snapshot block (a dict) has exactly one of those sizes. */
int gpr_py_torch_ws_sized(PyObject *block, int64_t ws, int64_t lt);

/* ---------------- explain (explain*.c; the parts: explain_part.c) ------ */

/*
 * One GPU being explained. Each framework's explainer appends parts to
 * `parts` through gpr_py_xadd (which keeps `sum`) and notes through
 * gpr_py_xnote; explain.c then sets the rest against the driver's figure.
 */
struct gpr_py_xgpu {
	int device;	 /* CUDA ordinal; GPR_DEVICE_NAMED: Metal */
	PyObject *parts; /* list of part dicts */
	PyObject *notes; /* the call's notes, shared by every GPU */
	int64_t sum;	 /* of the parts' bytes */
};

/* State of one explain() call shared by the explainers (GIL held). */
struct gpr_py_xcall {
	struct gpr_py_state *st;
	PyObject *torch_snapshot; /* torch.cuda.memory_snapshot(), lazily */
	int snapshot_tried;
	struct gpr_py_scan scan; /* the heap scan (tensor_scan.c), lazily */
	int measure_context;	 /* explain(measure_context=True) */
};

/*
 * One part of a GPU's figure (docs/explain.md, "The parts"):
 * - kind: live, releasable, fragmented, workspace, unattributed,
 *   graph_pool, pool, unreported, context;
 * - known 0: the bytes are not reported (they stay in the rest);
 * - exact 1: bytes and attribution are measured (a counter, the snapshot,
 *   Torch's workspace map, a driver pool, a trace), 0: inferred;
 * - evidence: what says so: counter, snapshot, workspace_map, history,
 *   tensor_scan, size, driver_pool, trace, probe;
 * - advice: a key of the advice table (__init__.py), NULL for none; only
 *   advice that, followed, makes the part go; hint: a key of the hint
 *   table, for the next start (not checkable in this process);
 * - how: how the bytes were measured or inferred; detail (borrowed, may
 *   be NULL): extra data.
 */
struct gpr_py_part {
	const char *kind, *source;
	int64_t bytes;
	int known, exact;
	const char *evidence, *advice, *hint, *how;
	PyObject *detail;
};

/* The part as a dict (new reference), or NULL with an error set. */
PyObject *gpr_py_part_dict(const struct gpr_py_part *p);

/* Appends the part as a dict; a known one adds to g->sum. 0 or -1. */
int gpr_py_xadd(struct gpr_py_xgpu *g, const struct gpr_py_part *p);

/*
 * After the frameworks' parts (explain_rest.c): the driver allocations of
 * libraries no framework reports, from the tracer's live table when this
 * process is traced ("unreported" parts); a bare context's size, measured
 * once per process and GPU by a probe process when c->measure_context
 * asks (a "context" part); then *rest, the part the driver's figure
 * (`known`: NVML has one, `driver`) leaves over. 0 or -1.
 */
int gpr_py_explain_rest(struct gpr_py_xcall *c, struct gpr_py_xgpu *g,
			int known, int64_t driver, PyObject **rest);

/* _context_probe(uuid) -> int: run in the probe process only
 * (ctxprobe.c): initialises CUDA, opens the primary context of the GPU of
 * that UUID, returns this process's driver figure there. */
PyObject *gpr_py_context_probe(PyObject *module, PyObject *uuid);

/* Appends a note (printf format); 0 or -1 with an error set. */
int gpr_py_xnote(struct gpr_py_xgpu *g, const char *fmt, ...);

/* An explainer: adds its framework's parts for g (a CUDA GPU, or the
 * Metal entry), if the framework is active; never imports or initialises
 * anything. 0, or -1 with an error set (explain.c turns it into a note). */
typedef int (*gpr_py_explainer)(struct gpr_py_xcall *c, struct gpr_py_xgpu *g);

int gpr_py_explain_torch(struct gpr_py_xcall *c, struct gpr_py_xgpu *g);
int gpr_py_explain_cupy(struct gpr_py_xcall *c, struct gpr_py_xgpu *g);
int gpr_py_explain_jax(struct gpr_py_xcall *c, struct gpr_py_xgpu *g);
int gpr_py_explain_mps(struct gpr_py_xcall *c, struct gpr_py_xgpu *g);
int gpr_py_explain_mlx(struct gpr_py_xcall *c, struct gpr_py_xgpu *g);
int gpr_py_explain_rmm(struct gpr_py_xcall *c, struct gpr_py_xgpu *g);

/* ---------------- RMM (rmm.c, explain_rmm.c, rel_rmm.c) ---------------- */

/*
 * The resource RMM's Python layer set for one GPU, walked down its
 * upstream_mr links: the adaptors that count (statistics, tracking), the
 * first PoolMemoryResource, and the leaf. Found through
 * rmm.mr.get_log_filenames(), never get_per_device_resource() of a GPU
 * without one (that inserts a default resource).
 */
struct gpr_py_rmm_chain {
	PyObject *top, *leaf, *pool, *stats, *tracking; /* new refs or NULL */
	int async;	 /* the leaf is a CudaAsyncMemoryResource */
	PyObject *names; /* list of the resources' class names */
};
/* 1 with *c filled (gpr_py_rmm_chain_free releases it), 0 when the GPU has
 * no resource set, -1 on error; on 0 and -1 *c holds nothing. */
int gpr_py_rmm_chain(PyObject *mr, int device, struct gpr_py_rmm_chain *c);
void gpr_py_rmm_chain_free(struct gpr_py_rmm_chain *c);
/* The live bytes the counting adaptors give; 0 with *live, or -1 (none). */
int gpr_py_rmm_live(const struct gpr_py_rmm_chain *c, int64_t *live);
/* The async pool release() found for resource `leaf` on `device`, or
 * NULL. */
struct gpr_py_rmm_pool *gpr_py_rmm_pool(struct gpr_py_state *st, int device,
					PyObject *leaf);

extern const struct gpr_releaser gpr_py_rmm_releaser;

/* ---------------- the frameworks (frameworks.c, rel_*.c) ---------------- */

/* The releasers (rel_*.c, mps.c, mlx.c): the core's vtables; data, where
 * not set here, is the module state, set at registration. Metal's name
 * their GPU "mps" (gpr_releaser.device_name). */
extern const struct gpr_releaser gpr_py_torch_releaser;
extern const struct gpr_releaser gpr_py_cupy_releaser;
extern const struct gpr_releaser gpr_py_numba_releaser;
extern const struct gpr_releaser gpr_py_jax_releaser;
extern const struct gpr_releaser gpr_py_mps_releaser;
extern const struct gpr_releaser gpr_py_mlx_releaser;

/* The name of the GPU the Metal releasers share. */
#define GPR_PY_METAL_DEVICE "mps"

/*
 * A framework on that GPU (rel_metal.c): its probe, its counters (live and
 * cached bytes; 0, or -1 with an error set) and its empty call (a new
 * reference, or NULL with an error set). Its releaser's data; the shared
 * held() and release() below drive it at the once step.
 */
struct gpr_py_metal_fw {
	PyObject *(*probe)(char *why, size_t len);
	int (*counters)(PyObject *handle, int64_t *live, int64_t *cached);
	PyObject *(*empty)(PyObject *handle);
};
int gpr_py_metal_held(void *fw, int device, struct gpr_held *out);
int gpr_py_metal_release(void *fw, int device, char *note, size_t note_sz);

/*
 * One framework: its kind ("cuda" or "metal"), its probe, its releaser
 * (whose name is the framework's, as releasers() lists it) and its
 * explainer (NULL: nothing to explain). The one list of frameworks.
 */
struct gpr_py_framework {
	const char *kind;
	PyObject *(*probe)(char *why, size_t len);
	const struct gpr_releaser *releaser;
	gpr_py_explainer explain;
};
extern const struct gpr_py_framework gpr_py_frameworks[];
extern const size_t gpr_py_n_frameworks;

/* The framework of that releaser name, or NULL (a user's releaser). */
const struct gpr_py_framework *gpr_py_framework(const char *name);

/* 1 if the framework is active here (its probe answers); why filled. */
int gpr_py_active(const struct gpr_py_framework *f, char *why, size_t len);

/* Registers every framework's releaser with the core (at module exec). */
int gpr_py_register_builtin(struct gpr_py_state *st);

/* ---------------- module functions ---------------- */

/* The module's state (pyutil.c). */
struct gpr_py_state *gpr_py_state(PyObject *module);
/* release.c */
PyObject *gpr_py_release(PyObject *module, PyObject *args, PyObject *kw);
/* query.c */
PyObject *gpr_py_devices_in_use(PyObject *module, PyObject *unused);
PyObject *gpr_py_process_memory(PyObject *module, PyObject *unused);
PyObject *gpr_py_releasers(PyObject *module, PyObject *unused);
/* gpus.c: gpus(*, host=False) -> list of dicts */
PyObject *gpr_py_gpus(PyObject *module, PyObject *args, PyObject *kw);
/* rel_user.c: register(name, release, held=None, live=None) / unregister */
PyObject *gpr_py_register(PyObject *module, PyObject *args, PyObject *kw);
PyObject *gpr_py_unregister(PyObject *module, PyObject *args);
/* view.c: a release's report as a handle (owns rep; NULL with an error
 * set, rep freed), its renderings, render(view, form), the formats */
PyObject *gpr_py_report_handle(gpr_report *rep);
PyObject *gpr_py_report_text(PyObject *module, PyObject *handle);
PyObject *gpr_py_report_json(PyObject *module, PyObject *handle);
PyObject *gpr_py_report_html(PyObject *module, PyObject *handle);
PyObject *gpr_py_render(PyObject *module, PyObject *args);
PyObject *gpr_py_format_bytes(PyObject *module, PyObject *arg);
PyObject *gpr_py_format_seconds(PyObject *module, PyObject *arg);
/* explain.c: explain(devices=None) -> dict */
PyObject *gpr_py_explain(PyObject *module, PyObject *args, PyObject *kw);

#endif /* GPR_PY_EXT_H */
