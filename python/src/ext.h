/*
 * The CPython extension gpureclaim._gpureclaim: what its files share.
 * Internal to the extension (gpr_py_ prefix). Built for the limited API
 * (abi3, Python 3.11+); every file includes this header first.
 *
 * The extension holds facts and what needs C; what a framework is, and
 * how to release or explain it, is Python (gpureclaim/frameworks/, one
 * module per framework, each registered through register() below, the
 * trampoline a user's own pool goes through too).
 *
 * Threads and the GIL: every gpr_* call is made with the GIL released. The
 * core calls the releasers back on the thread that called gpr_release, with
 * the GIL released; the trampoline takes it with PyGILState_Ensure.
 * Releases serialize on the core's release lock, waited for with the GIL
 * released, so a waiting thread never blocks the one inside a release.
 */
#ifndef GPR_PY_EXT_H
#define GPR_PY_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>
#include <stdint.h>

#include "gpureclaim.h"

struct gpr__suspender;

/* Module state: one per module object (PEP 489), no C globals. */
struct gpr_py_state {
	gpr_ctx *ctx;	      /* NULL if gpr_open failed (open_error says) */
	int open_error;	      /* GPR_E_* of a failed gpr_open */
	PyObject *error;      /* gpureclaim.Error */
	PyObject *failed;     /* ReleaseFailed: its message is a whole note */
	PyObject *gc_collect; /* gc.collect */
	/* _suspended(): the driver, loaded and initialised at the first
	 * record (src/suspend.h) */
	struct gpr__suspender *suspender;
	int suspender_failed;
};

/* ---------------- helpers (pyutil.c) ---------------- */

/* The module's state. */
struct gpr_py_state *gpr_py_state(PyObject *module);

/* An int (or an object with __index__) as an int64: 0, or -1 with an error
 * set (also for obj NULL without an error). The one conversion. */
int gpr_py_i64(PyObject *obj, int64_t *out);

/* The most GPUs a devices= argument may name. */
#define GPR_PY_MAX_DEVICES 1024

/*
 * A devices= argument of fn(): None (*n = -1) or an iterable of
 * non-negative ints, deduplicated into out[GPR_PY_MAX_DEVICES]. -1 with
 * TypeError/ValueError naming fn on bad input.
 */
int gpr_py_parse_devices(PyObject *obj, const char *fn, int *out, int *n);

/*
 * Writes the pending exception into buf as a note (clearing it): its
 * message alone for a ReleaseFailed (st->failed, may be NULL), else
 * "<ExcType>: <message>". buf may be NULL (just clears).
 */
void gpr_py_error_note(struct gpr_py_state *st, char *buf, size_t len);

/* Raises the Python exception for a GPR_E_* code (its kind in the
 * GPR_ERRORS table says which), with the handle's detail: "<what>: <the
 * code's message> (<detail>)", or without "<what>: " for what NULL;
 * returns NULL. */
PyObject *gpr_py_raise(struct gpr_py_state *st, int err, const char *what);

/* The handle, or NULL with the open's error raised (naming fn). */
gpr_ctx *gpr_py_ctx(struct gpr_py_state *st, const char *fn);

/* ---------------- tracing from inside (trace.c) ---------------- */

PyObject *gpr_py_trace_start(PyObject *module, PyObject *args);
PyObject *gpr_py_trace_stop(PyObject *module, PyObject *unused);
PyObject *gpr_py_trace_status(PyObject *module, PyObject *unused);
PyObject *gpr_py_trace_report(PyObject *module, PyObject *args);

/* ---------------- module functions ---------------- */

/* release.c: release(*, devices=None, collect='auto') -> report handle */
PyObject *gpr_py_release(PyObject *module, PyObject *args, PyObject *kw);
/* query.c: what the core knows of this process's GPUs */
PyObject *gpr_py_devices_in_use(PyObject *module, PyObject *unused);
PyObject *gpr_py_in_use(PyObject *module, PyObject *fn);
PyObject *gpr_py_process_memory(PyObject *module, PyObject *unused);
PyObject *gpr_py_process_figure(PyObject *module, PyObject *device);
PyObject *gpr_py_cuda_loaded(PyObject *module, PyObject *unused);
PyObject *gpr_py_primary_active(PyObject *module, PyObject *device);
PyObject *gpr_py_gpu_uuid(PyObject *module, PyObject *device);
PyObject *gpr_py_devices_arg(PyObject *module, PyObject *args);
/* pools.c: the driver's stream-ordered pools (gpr_pool_*) */
PyObject *gpr_py_pool_of(PyObject *module, PyObject *args);
PyObject *gpr_py_pool_bytes(PyObject *module, PyObject *pool);
PyObject *gpr_py_pool_trim(PyObject *module, PyObject *args);
/* gpus.c: gpus(*, host=False) -> list of dicts */
PyObject *gpr_py_gpus(PyObject *module, PyObject *args, PyObject *kw);
/* releaser.c: register(name, release, held=None, *, once, device,
 * figure) / unregister(name) / releaser_names() */
PyObject *gpr_py_register(PyObject *module, PyObject *args, PyObject *kw);
PyObject *gpr_py_unregister(PyObject *module, PyObject *args);
PyObject *gpr_py_releaser_names(PyObject *module, PyObject *unused);
/* view.c: a release's report as a handle (owns rep; NULL with an error
 * set, rep freed), its renderings, render(view, form), the formats */
PyObject *gpr_py_report_handle(gpr_report *rep);
PyObject *gpr_py_report_text(PyObject *module, PyObject *handle);
PyObject *gpr_py_report_json(PyObject *module, PyObject *handle);
PyObject *gpr_py_report_html(PyObject *module, PyObject *handle);
PyObject *gpr_py_render(PyObject *module, PyObject *args);
PyObject *gpr_py_format_bytes(PyObject *module, PyObject *arg);
PyObject *gpr_py_format_seconds(PyObject *module, PyObject *arg);
/* torch_wsmap.c: torch_wsmap(version) -> (rows, None) or (None, why) */
PyObject *gpr_py_torch_wsmap(PyObject *module, PyObject *version);
/* tensor_scan.c: heap_scan(objects, tensor_type, graph_type) */
PyObject *gpr_py_heap_scan(PyObject *module, PyObject *args);
/* referrers.c: the heap walk of explain(holders=True) */
PyObject *gpr_py_heap(PyObject *module, PyObject *args);
PyObject *gpr_py_climb(PyObject *module, PyObject *args);
PyObject *gpr_py_namespaces(PyObject *module, PyObject *args);
PyObject *gpr_py_instance_dict(PyObject *module, PyObject *obj);
PyObject *gpr_py_dict_items(PyObject *module, PyObject *d);
PyObject *gpr_py_of_types(PyObject *module, PyObject *args);
/* follow.c: a framework's graph outside the heap, through its descriptors */
PyObject *gpr_py_follow(PyObject *module, PyObject *args);
/* paths.c: the search up the holders' graph that names chains */
PyObject *gpr_py_paths(PyObject *module, PyObject *args);
/* trace_live.c: trace_live() -> None or [(device, kind, library, bytes,
 * count)] */
PyObject *gpr_py_trace_live(PyObject *module, PyObject *unused);
/* ctxprobe.c: _context_probe(uuid) -> int, in the probe process only */
PyObject *gpr_py_context_probe(PyObject *module, PyObject *uuid);
/* suspended.c: _suspended() -> the processes gpureclaim suspended */
PyObject *gpr_py_suspended(PyObject *module, PyObject *unused);
/* resume on demand from inside (wake.c) */
PyObject *gpr_py_wake_start(PyObject *module, PyObject *unused);
PyObject *gpr_py_wake_state(PyObject *module, PyObject *unused);
PyObject *gpr_py_wake_ask(PyObject *module, PyObject *arg);
/* agent_signal.c: _agent_signals(path, dev, ino) arms the removal of the
 * agent's socket on SIGTERM/SIGHUP at their default action;
 * _agent_signals() disarms it */
PyObject *gpr_py_agent_signals(PyObject *module, PyObject *args);

#endif /* GPR_PY_EXT_H */
