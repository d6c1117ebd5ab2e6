/*
 * Torch's cuBLAS and cuBLASLt workspaces, read from Torch's own maps: the
 * only exact source of which caching-allocator blocks are workspaces
 * (Python has no getter). libtorch_cuda.so exports
 *   at::cuda::WorkspaceMapWithMutex
 * &at::cuda::cublas_handle_stream_to_workspace();
 *   ... cublaslt_handle_stream_to_workspace();
 * each a std::map<std::tuple<void *, void *>, V> keyed by (cuBLAS handle,
 * stream) followed by a std::shared_mutex (ATen/cuda/CUDAContextLight.h),
 * V = at::DataPtr in torch 2.11, std::pair<at::DataPtr, size_t> in 2.13.
 *
 * The layout is libstdc++'s (the wheels are GCC builds), checked against
 * those two headers: map header node at +8 (root +16, leftmost +24), node
 * count +40, the mutex (a pthread_rwlock_t) at +48; a node's links are 32
 * bytes (parent +8, left +16, right +24), its key (a tuple, stored last
 * element first) holds the stream at +32 and the handle at +40, its
 * DataPtr the data pointer at +48 and the device (type, index: int8) at
 * +72, 2.13's size at +80.
 *
 * Safety: read only when libtorch_cuda.so is already loaded (RTLD_NOLOAD)
 * and exports both functions, only for a torch version whose layout was
 * checked (others are refused with a reason, never guessed), under the
 * map's read lock taken with pthread_rwlock_tryrdlock (a few tries, never
 * blocking: a writer holds it only around one insertion), walking at most
 * the node count. The caller (gpureclaim/frameworks/torch.py) validates
 * every entry against the allocator snapshot and discards the whole
 * reading on any mismatch.
 *
 * torch_wsmap(version) -> (rows, None), or (None, why) when the maps
 * cannot be read; version is torch.__version__ as a str (the caller reads
 * it: this file imports nothing). A row is (device, lt, ptr, handle,
 * stream, size): device the CUDA ordinal (-1: not a CUDA DataPtr), lt 1
 * for the cuBLASLt map, size as Torch stored it (2.13; 0 where it stores
 * none).
 */
#include "ext.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define MAX_NODES 4096
#define MAX_MAP 512 /* entries read */
#define LOCK_TRIES 5
#define KCUDA 1 /* c10::DeviceType::CUDA */

/* The torch versions whose header was read: 1 if V carries the size. */
static const struct {
	int major, minor, has_size;
} layouts[] = {{2, 11, 0}, {2, 13, 1}};

static const char *const symbols[2] = {
    "_ZN2at4cuda33cublas_handle_stream_to_workspaceEv",
    "_ZN2at4cuda35cublaslt_handle_stream_to_workspaceEv"};

typedef const char *map_fn(void);

/* One workspace in Torch's maps. */
struct ws {
	int device;
	int lt;
	uint64_t ptr, handle, stream, size;
};

#define AT(p, off, type) (*(type const *)((const char *)(p) + (off)))

/* libstdc++'s _Rb_tree_increment, each loop bounded. NULL if malformed. */
static const char *next_node(const char *x)
{
	const char *r = AT(x, 24, const char *);
	if (r) {
		for (int i = 0; r && i < MAX_NODES; i++) {
			x = r;
			r = AT(x, 16, const char *);
		}
		return r ? NULL : x;
	}
	const char *y = AT(x, 8, const char *);
	for (int i = 0; y && x == AT(y, 24, const char *); i++) {
		if (i == MAX_NODES)
			return NULL;
		x = y;
		y = AT(y, 8, const char *);
	}
	if (!y)
		return NULL;
	return AT(x, 24, const char *) != y ? y : x;
}

/* Walks one map under its read lock; appends to out. */
static int walk(const char *m, int lt, int has_size, struct ws *out, int cap,
		int *n, char *why, size_t len)
{
	pthread_rwlock_t *lock = (pthread_rwlock_t *)(m + 48);
	int tries = 0;
	while (pthread_rwlock_tryrdlock(lock) != 0) {
		if (++tries == LOCK_TRIES) {
			snprintf(why, len,
				 "Torch's workspace map stayed locked by a "
				 "writer");
			return -1;
		}
		nanosleep(&(struct timespec){0, 50000}, NULL);
	}
	int rc = 0;
	const char *header = m + 8;
	size_t count = AT(m, 40, size_t);
	const char *node = AT(m, 24, const char *);
	if (count > MAX_NODES) {
		snprintf(why, len, "Torch's workspace map holds %zu entries",
			 count);
		rc = -1;
	}
	for (size_t i = 0; rc == 0 && i < count; i++) {
		if (!node || node == header || *n == cap) {
			snprintf(why, len,
				 "Torch's workspace map did not read as its "
				 "count says");
			rc = -1;
			break;
		}
		struct ws *w = &out[(*n)++];
		w->lt = lt;
		w->stream = (uint64_t)(uintptr_t)AT(node, 32, void *);
		w->handle = (uint64_t)(uintptr_t)AT(node, 40, void *);
		w->ptr = (uint64_t)(uintptr_t)AT(node, 48, void *);
		w->device = AT(node, 72, signed char) == KCUDA
				? AT(node, 73, signed char)
				: -1;
		w->size = has_size ? (uint64_t)AT(node, 80, size_t) : 0;
		node = next_node(node);
	}
	if (rc == 0 && node != header) {
		snprintf(why, len,
			 "Torch's workspace map did not read as its count "
			 "says");
		rc = -1;
	}
	pthread_rwlock_unlock(lock);
	return rc;
}

/* Reads both maps into out[cap]: 0 with *n entries, or -1 with why. */
static int read_maps(const char *version, struct ws *out, int cap, int *n,
		     char *why, size_t len)
{
	*n = 0;
	int major = 0, minor = 0, has_size = -1;
	if (sscanf(version, "%d.%d", &major, &minor) != 2) {
		snprintf(why, len, "torch.__version__ unreadable");
		return -1;
	}
	for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
		if (layouts[i].major == major && layouts[i].minor == minor)
			has_size = layouts[i].has_size;
	if (has_size < 0) {
		snprintf(why, len,
			 "torch %s: its workspace map's layout was not checked "
			 "(2.11 and 2.13 were)",
			 version);
		return -1;
	}
	dlerror();
	void *lib = dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_NOLOAD);
	if (!lib) {
		snprintf(why, len, "libtorch_cuda.so is not loaded");
		return -1;
	}
	map_fn *fns[2] = {NULL, NULL};
	for (int i = 0; i < 2; i++)
		*(void **)&fns[i] = dlsym(lib, symbols[i]);
	int rc = -1;
	if (!fns[0] || !fns[1])
		snprintf(why, len,
			 "torch %s: libtorch_cuda.so does not export its "
			 "workspace maps",
			 version);
	else
		rc = walk(fns[0](), 0, has_size, out, cap, n, why, len) ||
			     walk(fns[1](), 1, has_size, out, cap, n, why, len)
			 ? -1
			 : 0;
	dlclose(lib);
	return rc;
}

PyObject *gpr_py_torch_wsmap(PyObject *module, PyObject *version)
{
	(void)module;
	const char *v = PyUnicode_Check(version)
			    ? PyUnicode_AsUTF8AndSize(version, NULL)
			    : NULL;
	if (!v)
		return PyErr_Format(PyExc_TypeError,
				    "torch_wsmap(version): a str");
	struct ws *ws = PyMem_Malloc(MAX_MAP * sizeof *ws);
	if (!ws)
		return PyErr_NoMemory();
	char why[240] = "";
	int n = 0;
	PyObject *out = NULL;
	if (read_maps(v, ws, MAX_MAP, &n, why, sizeof why)) {
		out = Py_BuildValue("(Os)", Py_None, why);
		goto done;
	}
	PyObject *rows = PyList_New(0);
	for (int i = 0; rows && i < n; i++) {
		PyObject *t = Py_BuildValue("(iiKKKK)", ws[i].device, ws[i].lt,
					    (unsigned long long)ws[i].ptr,
					    (unsigned long long)ws[i].handle,
					    (unsigned long long)ws[i].stream,
					    (unsigned long long)ws[i].size);
		if (!t || PyList_Append(rows, t))
			Py_CLEAR(rows);
		Py_XDECREF(t);
	}
	out = rows ? Py_BuildValue("(NO)", rows, Py_None) : NULL;
done:
	PyMem_Free(ws);
	return out;
}
