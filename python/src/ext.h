/*
 * The CPython extension gpureclaim._gpureclaim: what its files share.
 * Internal to the extension (gpr_py_ prefix). Built for the limited API
 * (abi3, Python 3.11+); every file includes this header first.
 *
 * Threads and the GIL: every gpr_* call is made with the GIL released. The
 * core calls the releasers back on the thread that called gpr_release, with
 * the GIL released; each callback takes it with PyGILState_Ensure. Releases
 * of one module serialize on `lock`, taken with the GIL released so that a
 * waiting thread never blocks the one inside a release.
 */
#ifndef GPR_PY_EXT_H
#define GPR_PY_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "gpureclaim.h"

/* The options of the release in progress, read by the releasers. */
struct gpr_py_call {
	int workspaces; /* also free cuBLAS workspaces (Torch) */
};

/* Module state: one per module object (PEP 489), no C globals. */
struct gpr_py_state {
	gpr_ctx *ctx;	      /* NULL if gpr_open failed (open_error says) */
	int open_error;	      /* GPR_E_* of a failed gpr_open */
	PyObject *error;      /* gpureclaim.Error */
	PyObject *gc_collect; /* gc.collect */
	PyObject *users;      /* {name: (release, held, live)}, for listing */
	pthread_mutex_t lock; /* one release at a time */
	int busy;	      /* a release holds lock (read with the GIL) */
	pthread_t owner;      /* the thread that holds it, if busy */
	struct gpr_py_call call; /* valid while lock is held */
};

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

/* obj.name(*args) converted to an int64; 0 or -1 with an error set. */
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

int gpr_py_call_i64(PyObject *obj, const char *name, int64_t *out,
		    const char *fmt, ...);

/*
 * Writes "<prefix>: <ExcType>: <message>" of the pending exception into
 * buf (clearing the exception); prefix may be "" (then no "<prefix>: "),
 * buf may be NULL (just clears). The core puts the releaser's name and
 * the GPU in front of a note.
 */
void gpr_py_error_note(char *buf, size_t len, const char *prefix);

/* Raises the Python exception for a GPR_E_* code, with the handle's
 * detail; returns NULL. */
PyObject *gpr_py_raise(struct gpr_py_state *st, int err, const char *what);

/* 1 if obj is True, 0 if False or None; else -1 with an error set. */
int gpr_py_truth(PyObject *obj);

/* ---------------- releasers ---------------- */

/*
 * One framework. `status` says whether the framework is active in this
 * process and, either way, why (into why[len]); it never imports or
 * initialises anything. `c` is the core's vtable (data: the state).
 */
struct gpr_py_framework {
	const char *name;
	int (*status)(struct gpr_py_state *st, char *why, size_t len);
	struct gpr_releaser c; /* name, held, release filled; data by init */
};

extern const struct gpr_py_framework gpr_py_rel_torch;
extern const struct gpr_py_framework gpr_py_rel_cupy;
extern const struct gpr_py_framework gpr_py_rel_numba;
extern const struct gpr_py_framework gpr_py_rel_jax;

/* Registers the CUDA frameworks above with the core (at module exec). */
int gpr_py_register_builtin(struct gpr_py_state *st);

/* ---------------- Metal (rel_mps.c, rel_mlx.c, metal.c) ---------------- */

/*
 * An allocator on Apple silicon. The core's accounting reads NVML, which
 * Metal lacks, so the extension runs these itself (metal.c) and reads
 * Metal's per-process figure around them.
 */
struct gpr_py_metal {
	const char *name;
	int (*status)(char *why, size_t len);
	/* Metal's per-process total, if this framework can read it. */
	int (*driver_bytes)(int64_t *out); /* 1 read, 0 cannot, -1 error */
	int (*held)(struct gpr_held *out); /* 0 or -1 with an error set */
	int (*release)(void);		   /* 0 or -1 with an error set */
};

extern const struct gpr_py_metal gpr_py_rel_mps;
extern const struct gpr_py_metal gpr_py_rel_mlx;

/*
 * The result of the Metal pass, merged into the report by release.c.
 * Everything filled by metal.c; rows and notes are Python lists.
 */
struct gpr_py_metal_result {
	int present; /* a Metal framework is active */
	int known;   /* before and after read */
	int64_t before, after;
	/* whose figure: torch.mps (Metal's per-process total), else MLX */
	const struct gpr_py_metal *figure;
	int collected;
	double collect_seconds;
};

/* Reads Metal's figure before the release (GIL held); 0 or -1 (error). */
int gpr_py_metal_begin(struct gpr_py_metal_result *m);

/*
 * Empties the Metal caches, collects garbage when `collect` asks for it
 * (AUTO: live bytes remain and `collected` is 0: the CUDA pass did not
 * collect already), and reads the figure again. Appends releaser rows to
 * `rows` and notes to `notes`. GIL held. 0 or -1 with an error set.
 */
int gpr_py_metal_end(struct gpr_py_state *st, struct gpr_py_metal_result *m,
		     int collect, int collected, PyObject *rows,
		     PyObject *notes);

/* ---------------- user releasers (rel_user.c) ---------------- */

/* register(name, release, held=None, live=None) / unregister(name) */
PyObject *gpr_py_register(PyObject *module, PyObject *args, PyObject *kw);
PyObject *gpr_py_unregister(PyObject *module, PyObject *args);

/* ---------------- module functions (release.c, query.c) ---------------- */

struct gpr_py_state *gpr_py_state(PyObject *module);
PyObject *gpr_py_release(PyObject *module, PyObject *args, PyObject *kw);
PyObject *gpr_py_devices_in_use(PyObject *module, PyObject *unused);
PyObject *gpr_py_process_memory(PyObject *module, PyObject *unused);
PyObject *gpr_py_releasers(PyObject *module, PyObject *unused);
/* gpus(*, host=False) -> list of dicts (gpus.c) */
PyObject *gpr_py_gpus(PyObject *module, PyObject *args, PyObject *kw);
PyObject *gpr_py_after_fork_child(PyObject *module, PyObject *unused);

/* ---------------- explain (explain*.c) ---------------- */

/*
 * One GPU being explained. Each framework's explainer appends parts to
 * `parts` through gpr_py_xpart (which keeps `sum`) and notes through
 * gpr_py_xnote; explain.c then sets the rest against the driver's figure.
 */
struct gpr_py_xgpu {
	int device;
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

/* dict[key] as an int64 (-1 and no error if absent or not an int). */
int64_t gpr_py_xint(PyObject *dict, const char *key);

/*
 * The explainers: each adds its framework's parts for GPU g->device, if
 * the framework is imported and started; never imports or initialises
 * anything. 0, or -1 with an error set (explain.c turns it into a note).
 */
int gpr_py_explain_torch(struct gpr_py_xcall *c, struct gpr_py_xgpu *g);
int gpr_py_explain_cupy(struct gpr_py_xcall *c, struct gpr_py_xgpu *g);
int gpr_py_explain_jax(struct gpr_py_xcall *c, struct gpr_py_xgpu *g);

/* explain(devices=None) -> dict (explain.c). */
PyObject *gpr_py_explain(PyObject *module, PyObject *args, PyObject *kw);

/* The gc.collect callback of gpr_release_opts (collect_user: the state). */
int gpr_py_collect(void *user);

#endif /* GPR_PY_EXT_H */
