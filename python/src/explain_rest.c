/*
 * What the frameworks' parts leave of a GPU's driver figure, split as far
 * as evidence allows:
 * - traced (the tracer, libgpureclaim_trace.so, is in the process and
 *   exports gpureclaim_trace_live): its live table, per library, of what
 *   was allocated through the driver and not freed. Rows of a library
 *   whose framework already reports its bytes (torch's libc10_cuda, CuPy,
 *   RMM, JAX) are not counted again; every other library's GPU rows
 *   become an "unreported" part under its name (NCCL, cuDNN, cuBLAS...);
 *   host rows (pinned memory, VMM memory on the host) are not on the GPU.
 * - the context: measured once per process and GPU, when explain() is
 *   asked to, in a probe process that opens a bare context on the same
 *   GPU and reads its own NVML figure (0.3-0.6 s, ~500 MB for that time):
 *   a lower bound of this process's context.
 * - the rest: the driver's figure minus every part, never clamped.
 */
#include "ext.h"
#include "trace_live.h"
#include "../../trace/inject/locate.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROWS 4096
#define MAX_LIBS 32

/* Library name fragments: the name shown, and the framework whose own
 * figures already hold its allocations (NULL: none does). */
static const struct {
	const char *needle, *name, *owner;
} libraries[] = {
    {"c10_cuda", "torch", "torch"}, {"libtorch", "torch", "torch"},
    {"cupy", "CuPy", "cupy"},	    {"rmm", "RMM", "rmm"},
    {"jaxlib", "JAX", "jax"},	    {"xla", "JAX", "jax"},
    {"nccl", "NCCL", NULL},	    {"cudnn", "cuDNN", NULL},
    {"cublas", "cuBLAS", NULL},	    {"cufft", "cuFFT", NULL},
    {"nvinfer", "TensorRT", NULL},  {"cusparse", "cuSPARSE", NULL},
    {"cusolver", "cuSOLVER", NULL}, {"curand", "cuRAND", NULL},
    {"cutensor", "cuTENSOR", NULL}, {"nvshmem", "NVSHMEM", NULL},
};

struct lib_sum {
	const char *name;    /* shown */
	const char *library; /* the tracer's name (first row's) */
	const char *owner;
	int64_t bytes, count;
	unsigned kinds; /* bit per enum gpr_py_live_kind */
};

/* The tracer's live query, when the tracer is in this process
 * (trace/inject/locate.h). */
static gpureclaim_trace_live_fn *find_tracer(void)
{
	gpureclaim_trace_live_fn *fn = NULL;
	*(void **)&fn = gpr_inj_locate_loaded("gpureclaim_trace_live");
	return fn;
}

/* The framework's parts report bytes on this GPU. */
static int reported(struct gpr_py_xgpu *g, const char *owner)
{
	size_t n = strlen(owner);
	for (Py_ssize_t i = 0; i < PyList_Size(g->parts); i++) {
		PyObject *p = PyList_GetItem(g->parts, i);
		PyObject *src = PyDict_GetItemString(p, "source");
		PyObject *known = PyDict_GetItemString(p, "known");
		const char *s = src ? PyUnicode_AsUTF8AndSize(src, NULL) : NULL;
		if (s && known == Py_True && !strncmp(s, owner, n))
			return 1;
	}
	PyErr_Clear();
	return 0;
}

static void classify(const char *library, const char **name, const char **owner)
{
	*name = library;
	*owner = NULL;
	char low[256];
	size_t i = 0;
	for (; library[i] && i + 1 < sizeof low; i++)
		low[i] = (char)(library[i] >= 'A' && library[i] <= 'Z'
				    ? library[i] - 'A' + 'a'
				    : library[i]);
	low[i] = '\0';
	for (size_t k = 0; k < sizeof libraries / sizeof libraries[0]; k++)
		if (strstr(low, libraries[k].needle)) {
			*name = libraries[k].name;
			*owner = libraries[k].owner;
			return;
		}
}

static int add_unreported(struct gpr_py_xgpu *g, const struct lib_sum *l)
{
	static const char *const kind_names[4] = {"device", "host pinned",
						  "VMM physical", "async pool"};
	PyObject *kinds = PyList_New(0);
	for (int k = 0; kinds && k < 4; k++) {
		PyObject *s = (l->kinds >> k) & 1
				  ? PyUnicode_FromString(kind_names[k])
				  : NULL;
		if (s && PyList_Append(kinds, s))
			Py_CLEAR(kinds);
		Py_XDECREF(s);
	}
	PyObject *d = kinds ? Py_BuildValue("{s:s,s:L,s:O}", "library",
					    l->library, "allocations",
					    (long long)l->count, "kinds", kinds)
			    : NULL;
	Py_XDECREF(kinds);
	char how[400];
	snprintf(how, sizeof how,
		 "%lld allocation(s) that %s made through the driver and has "
		 "not freed, which no framework reports (the tracer's live "
		 "table; a lower bound if tracing started after them)",
		 (long long)l->count, l->library);
	int rc = d ? gpr_py_xadd(g, &(struct gpr_py_part){.kind = "unreported",
							  .source = l->name,
							  .bytes = l->bytes,
							  .known = 1,
							  .exact = 1,
							  .evidence = "trace",
							  .how = how,
							  .detail = d})
		   : -1;
	Py_XDECREF(d);
	return rc;
}

/* dict[key] += bytes (from 0); 0 or -1 with an error set. */
static int add_bytes(PyObject *dict, const char *key, uint64_t bytes)
{
	PyObject *prev = PyDict_GetItemString(dict, key);
	long long b = (prev ? PyLong_AsLongLong(prev) : 0) + (long long)bytes;
	PyObject *v = PyLong_FromLongLong(b);
	int rc = v ? PyDict_SetItemString(dict, key, v) : -1;
	Py_XDECREF(v);
	return rc;
}

/*
 * The unreported parts of g from the tracer; *traced = 1 when it answered.
 * *owned gets, per framework, the bytes its libraries hold per the trace
 * (a cross-check), *host the host memory per library (new dicts).
 */
static int trace_parts(struct gpr_py_xgpu *g, int *traced, PyObject *owned,
		       PyObject *host)
{
	*traced = 0;
	gpureclaim_trace_live_fn *fn = find_tracer();
	if (!fn)
		return 0;
	size_t cap = 256, n = 0;
	struct gpureclaim_trace_live *rows = NULL;
	for (;;) {
		PyMem_Free(rows);
		rows = PyMem_Calloc(cap, sizeof *rows);
		if (!rows) {
			PyErr_NoMemory();
			return -1;
		}
		rows[0].sz = sizeof *rows;
		if (fn(rows, cap, &n) != 0) {
			PyMem_Free(rows);
			return 0; /* loaded, not recording */
		}
		if (n <= cap || cap >= MAX_ROWS)
			break;
		cap = n < MAX_ROWS ? n : MAX_ROWS;
	}
	*traced = 1;
	struct lib_sum libs[MAX_LIBS];
	int nlibs = 0, rc = 0;
	for (size_t i = 0; i < n && i < cap && rc == 0; i++) {
		const struct gpureclaim_trace_live *r = &rows[i];
		const char *library = r->library ? r->library : "?";
		const char *name, *owner;
		classify(library, &name, &owner);
		int on_gpu = r->device == g->device &&
			     r->kind != GPR_PY_LIVE_HOST_PINNED;
		if (r->device < 0 || r->kind == GPR_PY_LIVE_HOST_PINNED) {
			rc = add_bytes(host, name, r->bytes);
			continue;
		}
		if (!on_gpu)
			continue;
		if (owner && reported(g, owner)) {
			rc = add_bytes(owned, owner, r->bytes);
			continue;
		}
		int k = 0;
		while (k < nlibs && strcmp(libs[k].name, name))
			k++;
		if (k == nlibs && nlibs == MAX_LIBS)
			k = MAX_LIBS - 1; /* the last one takes the rest */
		if (k == nlibs)
			libs[nlibs++] = (struct lib_sum){
			    .name = name, .library = library, .owner = owner};
		libs[k].bytes += (int64_t)r->bytes;
		libs[k].count += (int64_t)r->count;
		libs[k].kinds |= 1u << (r->kind & 3);
	}
	for (int k = 0; k < nlibs && rc == 0; k++)
		rc = add_unreported(g, &libs[k]);
	PyMem_Free(rows);
	return rc;
}

/* ---------------------------------------------------------- context */

static struct gpr_py_context *context_slot(struct gpr_py_state *st, int device,
					   const char *uuid)
{
	for (int i = 0; i < GPR_PY_SLOTS; i++)
		if (st->contexts[i].used && st->contexts[i].device == device &&
		    !strcmp(st->contexts[i].uuid, uuid))
			return &st->contexts[i];
	return NULL;
}

/* The probe process: this interpreter, the package's folder first on its
 * path, only the GPU of that UUID visible, never traced. */
static const char probe_code[] = "import sys\n"
				 "from gpureclaim import _gpureclaim as c\n"
				 "print(c._context_probe(sys.argv[1]))\n";

/* The probe's environment (new dict), or NULL with an error set. */
static PyObject *probe_env(const char *uuid)
{
	PyObject *os = PyImport_ImportModule("os");
	PyObject *environ = os ? gpr_py_attr(os, "environ") : NULL;
	PyObject *pkg = gpr_py_imported("gpureclaim");
	PyObject *file = pkg ? gpr_py_attr(pkg, "__file__") : NULL;
	PyObject *dirname = os ? gpr_py_attr(os, "path.dirname") : NULL;
	PyObject *d1 = file && dirname
			   ? PyObject_CallFunctionObjArgs(dirname, file, NULL)
			   : NULL;
	PyObject *root =
	    d1 ? PyObject_CallFunctionObjArgs(dirname, d1, NULL) : NULL;
	PyObject *env = environ && root ? PyDict_New() : NULL;
	PyObject *old = NULL, *pp = NULL, *vis = NULL;
	if (env && PyDict_Update(env, environ) == 0) {
		old = PyDict_GetItemString(env, "PYTHONPATH");
		pp = old ? PyUnicode_FromFormat("%U:%U", root, old)
			 : Py_NewRef(root);
		vis = PyUnicode_FromString(uuid);
	}
	if (!pp || !vis || PyDict_SetItemString(env, "PYTHONPATH", pp) ||
	    PyDict_SetItemString(env, "CUDA_VISIBLE_DEVICES", vis))
		Py_CLEAR(env);
	else if (PyDict_GetItemString(env, "CUDA_INJECTION64_PATH") &&
		 PyDict_DelItemString(env, "CUDA_INJECTION64_PATH"))
		Py_CLEAR(env);
	if (!env && !PyErr_Occurred())
		PyErr_SetString(PyExc_RuntimeError,
				"cannot find the gpureclaim package's folder");
	Py_XDECREF(vis);
	Py_XDECREF(pp);
	Py_XDECREF(root);
	Py_XDECREF(d1);
	Py_XDECREF(dirname);
	Py_XDECREF(file);
	Py_XDECREF(pkg);
	Py_XDECREF(environ);
	Py_XDECREF(os);
	return env;
}

/* The probe's figure, or -1 with why[len] saying why. */
static int64_t run_probe(const char *uuid, char *why, size_t len)
{
	PyObject *env = probe_env(uuid);
	PyObject *sp = env ? PyImport_ImportModule("subprocess") : NULL;
	PyObject *sys = sp ? PyImport_ImportModule("sys") : NULL;
	PyObject *exe = sys ? gpr_py_attr(sys, "executable") : NULL;
	PyObject *run = sp ? gpr_py_attr(sp, "run") : NULL;
	PyObject *args =
	    exe ? Py_BuildValue("([Osss])", exe, "-c", probe_code, uuid) : NULL;
	PyObject *kw = args ? Py_BuildValue("{s:O,s:O,s:O,s:i}", "env", env,
					    "capture_output", Py_True, "text",
					    Py_True, "timeout", 120)
			    : NULL;
	PyObject *out = run && kw ? PyObject_Call(run, args, kw) : NULL;
	PyObject *rc = out ? gpr_py_attr(out, "returncode") : NULL;
	PyObject *so = out ? gpr_py_attr(out, "stdout") : NULL;
	PyObject *se = out ? gpr_py_attr(out, "stderr") : NULL;
	const char *txt = so ? PyUnicode_AsUTF8AndSize(so, NULL) : NULL;
	const char *err = se ? PyUnicode_AsUTF8AndSize(se, NULL) : NULL;
	int64_t code = -1;
	long long bytes = -1;
	if (!out)
		gpr_py_error_note(why, len, "the probe process did not run");
	else if (rc && gpr_py_i64(rc, &code) == 0 && code == 0 && txt &&
		 sscanf(txt, "%lld", &bytes) == 1)
		why[0] = '\0';
	else {
		/* the last line of its stderr: the exception */
		size_t n = err ? strlen(err) : 0;
		while (n > 0 && err[n - 1] == '\n')
			n--;
		size_t start = n;
		while (start > 0 && err[start - 1] != '\n')
			start--;
		snprintf(why, len, "the probe process failed (exit %lld): %.*s",
			 (long long)code, (int)(n - start),
			 err ? err + start : "");
		bytes = -1;
	}
	PyErr_Clear();
	Py_XDECREF(rc);
	Py_XDECREF(so);
	Py_XDECREF(se);
	Py_XDECREF(out);
	Py_XDECREF(kw);
	Py_XDECREF(args);
	Py_XDECREF(run);
	Py_XDECREF(exe);
	Py_XDECREF(sys);
	Py_XDECREF(sp);
	Py_XDECREF(env);
	return bytes;
}

/* The bare context of g's GPU: measured now if asked and not yet. */
static int context_part(struct gpr_py_xcall *c, struct gpr_py_xgpu *g)
{
	struct gpr_py_state *st = c->st;
	int index = -1;
	struct gpr_gpu info;
	PyThreadState *ts = PyEval_SaveThread();
	int err = gpr_nvml_index(st->ctx, g->device, &index);
	if (!err)
		err = gpr_gpu_info(st->ctx, index, &info);
	PyEval_RestoreThread(ts);
	if (err)
		return 0; /* no NVML: no per-process figure to measure with */
	struct gpr_py_context *ctx = context_slot(st, g->device, info.uuid);
	if (!ctx && c->measure_context) {
		for (int i = 0; i < GPR_PY_SLOTS && !ctx; i++)
			if (!st->contexts[i].used)
				ctx = &st->contexts[i];
		if (!ctx)
			return gpr_py_xnote(g,
					    "GPU %d: too many GPUs to keep "
					    "their context sizes",
					    g->device);
		ctx->used = 1;
		ctx->device = g->device;
		snprintf(ctx->uuid, sizeof ctx->uuid, "%s", info.uuid);
		ctx->bytes = run_probe(info.uuid, ctx->why, sizeof ctx->why);
	}
	if (!ctx)
		return 0;
	if (ctx->bytes < 0)
		return gpr_py_xnote(g, "GPU %d: context not measured: %s",
				    g->device, ctx->why);
	char how[400];
	snprintf(how, sizeof how,
		 "a bare context of this driver on this GPU (%s), measured "
		 "once in a probe process that opened one and read its own "
		 "NVML figure: a lower bound of this process's context, to "
		 "which modules loaded since, library handles and larger "
		 "stack or heap limits add",
		 info.uuid);
	return gpr_py_xadd(g, &(struct gpr_py_part){.kind = "context",
						    .source = "CUDA driver",
						    .bytes = ctx->bytes,
						    .known = 1,
						    .exact = 0,
						    .evidence = "probe",
						    .hint = "process_exit",
						    .how = how});
}

int gpr_py_explain_rest(struct gpr_py_xcall *c, struct gpr_py_xgpu *g,
			int known, int64_t driver, PyObject **rest)
{
	*rest = NULL;
	int traced = 0;
	PyObject *owned = PyDict_New(), *host = PyDict_New();
	int rc = -1;
	if (!owned || !host || trace_parts(g, &traced, owned, host) ||
	    (known && context_part(c, g)))
		goto done;
	int64_t bytes = known ? driver - g->sum : 0;
	const char *source = traced ? "context, modules, driver-internal"
				    : "context, modules, unreported";
	const char *how =
	    !known ? "unknown: the driver has no per-process figure"
	    : traced
		? "the driver's figure minus every part above: the context, "
		  "loaded modules and what the driver allocates for itself "
		  "(the trace attributes every allocation made through the "
		  "driver API)"
		: "the driver's figure minus every part above: the context, "
		  "loaded modules and allocations no framework reports "
		  "(trace the process to split them by library)";
	PyObject *d = Py_BuildValue(
	    "{s:O,s:O,s:O}", "traced", traced ? Py_True : Py_False,
	    "framework_bytes_in_trace", owned, "host_bytes_in_trace", host);
	*rest =
	    d ? gpr_py_part_dict(&(struct gpr_py_part){.kind = "rest",
						       .source = source,
						       .bytes = bytes,
						       .known = known,
						       .exact = known,
						       .evidence = "residual",
						       .hint = "process_exit",
						       .how = how,
						       .detail = d})
	      : NULL;
	Py_XDECREF(d);
	rc = *rest ? 0 : -1;
done:
	Py_XDECREF(owned);
	Py_XDECREF(host);
	return rc;
}
