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

/* Module state: one per module object (PEP 489), no C globals. */
struct gpr_py_state {
	gpr_ctx *ctx;	      /* NULL if gpr_open failed (open_error says) */
	int open_error;	      /* GPR_E_* of a failed gpr_open */
	PyObject *error;      /* gpureclaim.Error */
	PyObject *gc_collect; /* gc.collect */
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

/* 1 if obj is True, 0 if False or None; else -1 with an error set. */
int gpr_py_truth(PyObject *obj);

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

/* The JAX device of CUDA ordinal `device` in one backend (new reference),
 * or NULL, no error set. */
PyObject *gpr_py_jax_device(PyObject *backend, int device);

/* ---------------- explain (explain*.c; the parts: explain_part.c) ------ */

/*
 * One GPU being explained. Each framework's explainer appends parts to
 * `parts` through gpr_py_xpart (which keeps `sum`) and notes through
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
};

/*
 * Appends {kind, source, bytes, known, how[, detail]}: kind is one of
 * live, releasable, fragmented, workspace, pool; `how` says how the bytes
 * were measured or inferred; detail (borrowed, may be NULL) is extra data.
 * An unknown figure (known 0) adds nothing to the sum. 0 or -1 (error).
 */
int gpr_py_xpart(struct gpr_py_xgpu *g, const char *kind, const char *source,
		 int64_t bytes, int known, const char *how, PyObject *detail);

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
