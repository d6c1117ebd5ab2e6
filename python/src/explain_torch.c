/*
 * Torch's share of a GPU, from its caching allocator (only when torch is
 * imported and torch.cuda initialised). From memory_stats(device):
 *   reserved = allocated + inactive_split + the rest,
 * where the rest is cached in segments with nothing live (what release()
 * returns) and inactive_split is free space inside segments that still
 * hold a live block (no empty_cache can return it). memory_snapshot()
 * splits them further:
 * - private pools (a segment's segment_pool_id is not (0, 0)): CUDA graph
 *   pools and MemPools, which empty_cache() leaves alone while a graph or
 *   the MemPool holds them: their bytes, live and free, come out of the
 *   parts above into graph_pool parts, so that "releasable" is only what a
 *   release returns;
 * - cuBLAS/cuBLASLt workspaces among the live blocks, by evidence other
 *   than size (docs/explain.md, "How workspaces are found"): Torch's
 *   workspace maps (torch_wsmap.c), validated against the snapshot, else
 *   allocator history whose C++ frames name the workspace functions. A
 *   block of a workspace's size that nothing else identifies is checked
 *   against the tensors on the Python heap (tensor_scan.c): one a tensor
 *   points into is live; the others are "unattributed", with no advice.
 * Torch's cuFFT plans hold memory cuFFT takes from the driver itself: Torch
 * gives their number, not their bytes; they stay in the rest.
 */
#include "ext.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOP 5	     /* pinned segments named */
#define MAX_POOLS 64 /* private pools told apart */
#define MAX_MAP 512  /* workspace map entries read */
#define MAX_SHOWN 16 /* blocks listed in a part's detail */
#define ROUND 512ULL /* the allocator's rounding */

enum label { L_LIVE, L_WS, L_LT, L_UNATTR };

struct blk {
	uint64_t addr, size;
	int64_t requested, stream;
	int pool;   /* index into pools, -1: the default pools */
	int frames; /* frames_say() */
	int label;
	int cand; /* a workspace's size, owner otherwise unknown */
	uint64_t handle;
};

struct tpool {
	struct gpr_py_pool_id id;
	int64_t reserved, live, split;
	long segments, graphs;
};

struct pinned {
	long long segment, size, free, live, largest, largest_at;
	long nlive, nws;
};

struct torch_x {
	struct blk *b; /* active_allocated blocks, by address */
	size_t n, cap;
	struct tpool pools[MAX_POOLS];
	int npools;
	int64_t ws_size, lt_size;
	char from[200];
	const char *ws_evidence;
	char map_why[300]; /* why the map was not used, "" if it was */
	int64_t bytes[4];  /* per label */
	int count[4];
	int survived;
	long segments; /* default-pool segments holding live and free */
	int64_t seg_free;
	struct pinned top[TOP];
	int ntop;
};

/* ------------------------------------------------------------ sizes */

void gpr_py_torch_ws_sizes(PyObject *cuda, int device, int64_t *ws, int64_t *lt,
			   char *from, size_t len)
{
	*ws = *lt = 0;
	const char *cfg = getenv("CUBLAS_WORKSPACE_CONFIG");
	if (cfg && *cfg) {
		/* ":SIZE_KiB:COUNT" pairs, summed, as Torch parses them */
		regex_t re;
		regmatch_t m[3];
		if (regcomp(&re, ":([0-9]+):([0-9]+)", REG_EXTENDED) == 0) {
			for (const char *p = cfg; !regexec(&re, p, 3, m, 0);
			     p += m[0].rm_eo)
				*ws += strtoll(p + m[1].rm_so, NULL, 10) *
				       1024 * strtoll(p + m[2].rm_so, NULL, 10);
			regfree(&re);
		}
		if (*ws > 0)
			snprintf(from, len, "CUBLAS_WORKSPACE_CONFIG=%s", cfg);
	}
	if (*ws <= 0) {
		PyObject *cap =
		    gpr_py_call(cuda, "get_device_capability", "(i)", device);
		int64_t major = -1, minor = -1;
		if (!cap || !PyTuple_Check(cap) || PyTuple_Size(cap) != 2 ||
		    gpr_py_i64(PyTuple_GetItem(cap, 0), &major) ||
		    gpr_py_i64(PyTuple_GetItem(cap, 1), &minor))
			major = -1;
		Py_XDECREF(cap);
		PyErr_Clear();
		if (major < 0)
			return;
		snprintf(from, len, "Torch's default for sm_%lld%lld",
			 (long long)major, (long long)minor);
		*ws = major == 9 && minor == 0
			  ? 32 << 20
			  : 4096 * 1024 * 2 + 16 * 1024 * 8;
	}
	const char *v = getenv("CUBLASLT_WORKSPACE_SIZE");
	int64_t kib = v && *v ? strtoll(v, NULL, 10) : 1024;
	*lt = (kib > 0 ? kib : 1024) * 1024;
	if (*lt > *ws)
		*lt = *ws;
}

/* The block is what an allocation of `want` bytes gives. */
static int fits(int64_t size, int64_t requested, int64_t want)
{
	if (want <= 0)
		return 0;
	if (requested > 0)
		return requested == want;
	return (uint64_t)size == ((uint64_t)want + ROUND - 1) / ROUND * ROUND;
}

int gpr_py_torch_ws_sized(PyObject *block, int64_t ws, int64_t lt)
{
	int64_t size = gpr_py_item_i64(block, "size");
	int64_t req = gpr_py_item_i64(block, "requested_size");
	return fits(size, req, ws) || fits(size, req, lt);
}

/* ----------------------------------------------------------- frames */

static const char *frame_str(PyObject *f, const char *key)
{
	PyObject *v = PyDict_Check(f) ? PyDict_GetItemString(f, key) : NULL;
	const char *s =
	    v && PyUnicode_Check(v) ? PyUnicode_AsUTF8AndSize(v, NULL) : NULL;
	if (!s)
		PyErr_Clear();
	return s;
}

/* A Python frame: "x.py" or "<string>"; any other file is C++. */
static int python_frame(const char *file)
{
	size_t n = strlen(file);
	return file[0] == '<' || (n >= 3 && !strcmp(file + n - 3, ".py"));
}

/*
 * Allocator history: 2 a cuBLASLt workspace, 1 a cuBLAS one, 0 not a
 * workspace (C++ frames, none of the workspace functions), -1 no evidence
 * (no frames, or Python frames only: stacks="python" shows the user's
 * matmul line for a workspace too). Exact names, whichever way Torch
 * symbolizes (addr2line names the local functions; dladdr names the
 * nearest exported one, getCUDABlasLtWorkspaceSize, for all three), and
 * never a substring such as "cublas", which user file names contain.
 */
static int frames_say(PyObject *block)
{
	PyObject *frames = PyDict_GetItemString(block, "frames");
	if (!frames || !PyList_Check(frames) || PyList_Size(frames) == 0)
		return -1;
	int cxx = 0, blas = 0, lt = 0;
	Py_ssize_t n = PyList_Size(frames);
	for (Py_ssize_t i = 0; i < n && i < 64; i++) {
		PyObject *f = PyList_GetItem(frames, i);
		const char *file = f ? frame_str(f, "filename") : NULL;
		const char *name = f ? frame_str(f, "name") : NULL;
		if (!file || !name || python_frame(file))
			continue;
		cxx = 1;
		if (strstr(name, "getNewWorkspace") ||
		    strstr(name, "setWorkspaceForHandle") ||
		    strstr(name, "at::cuda::getCurrentCUDABlasHandle()"))
			blas = 1;
		if (strstr(name, "getNewCUDABlasLtWorkspace") ||
		    !strcmp(name, "at::cuda::getCUDABlasLtWorkspace()"))
			lt = 1;
	}
	return blas ? 1 : lt ? 2 : cxx ? 0 : -1;
}

/* --------------------------------------------------------- snapshot */

static int pool_index(struct torch_x *x, PyObject *seg)
{
	PyObject *id = PyDict_GetItemString(seg, "segment_pool_id");
	struct gpr_py_pool_id p = {0, 0};
	if (!id || !PyTuple_Check(id) || PyTuple_Size(id) != 2 ||
	    gpr_py_i64(PyTuple_GetItem(id, 0), &p.a) ||
	    gpr_py_i64(PyTuple_GetItem(id, 1), &p.b)) {
		PyErr_Clear();
		return -1;
	}
	if (p.a == 0 && p.b == 0)
		return -1;
	for (int i = 0; i < x->npools; i++)
		if (x->pools[i].id.a == p.a && x->pools[i].id.b == p.b)
			return i;
	if (x->npools == MAX_POOLS)
		return MAX_POOLS - 1; /* the last one takes the rest */
	x->pools[x->npools].id = p;
	return x->npools++;
}

static int add_block(struct torch_x *x, PyObject *b, int64_t size,
		     int64_t stream, int pool)
{
	if (x->n == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 256;
		struct blk *a = PyMem_Realloc(x->b, cap * sizeof *a);
		if (!a) {
			PyErr_NoMemory();
			return -1;
		}
		x->b = a;
		x->cap = cap;
	}
	x->b[x->n++] = (struct blk){
	    .addr = (uint64_t)gpr_py_item_i64(b, "address"),
	    .size = (uint64_t)size,
	    .requested = gpr_py_item_i64(b, "requested_size"),
	    .stream = stream,
	    .pool = pool,
	    .frames = frames_say(b),
	};
	return 0;
}

/* One segment: its live blocks, its pool's figures. */
static int collect(struct torch_x *x, PyObject *seg)
{
	PyObject *blocks = PyDict_GetItemString(seg, "blocks");
	if (!blocks || !PyList_Check(blocks))
		return 0;
	int pool = pool_index(x, seg);
	int64_t stream = gpr_py_item_i64(seg, "stream");
	int64_t live = 0, free = 0, active = 0;
	Py_ssize_t n = PyList_Size(blocks);
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *b = PyList_GetItem(blocks, i);
		PyObject *state =
		    PyDict_Check(b) ? PyDict_GetItemString(b, "state") : NULL;
		int64_t size = state ? gpr_py_item_i64(b, "size") : -1;
		if (!state || !PyUnicode_Check(state) || size < 0)
			continue;
		if (!PyUnicode_CompareWithASCIIString(state, "inactive")) {
			free += size;
			continue;
		}
		active++;
		if (PyUnicode_CompareWithASCIIString(state, "active_allocated"))
			continue; /* pending free: freed, not yet reusable */
		live += size;
		if (add_block(x, b, size, stream, pool))
			return -1;
	}
	if (pool >= 0) {
		struct tpool *p = &x->pools[pool];
		p->segments++;
		p->reserved += gpr_py_item_i64(seg, "total_size");
		p->live += live;
		p->split += active ? free : 0;
	}
	return 0;
}

static int cmp_blk(const void *a, const void *b)
{
	uint64_t x = ((const struct blk *)a)->addr;
	uint64_t y = ((const struct blk *)b)->addr;
	return x < y ? -1 : x > y;
}

static struct blk *find(struct torch_x *x, uint64_t addr)
{
	struct blk key = {.addr = addr};
	return x->n ? bsearch(&key, x->b, x->n, sizeof *x->b, cmp_blk) : NULL;
}

PyObject *gpr_py_torch_snapshot(PyObject *cuda)
{
	/* no traces: with history on they can be 100k entries */
	PyObject *fn = PyObject_GetAttrString(cuda, "memory_snapshot");
	PyObject *args = fn ? PyTuple_New(0) : NULL;
	PyObject *kw =
	    args ? Py_BuildValue("{s:O}", "include_traces", Py_False) : NULL;
	PyObject *snap = kw ? PyObject_Call(fn, args, kw) : NULL;
	Py_XDECREF(kw);
	Py_XDECREF(args);
	Py_XDECREF(fn);
	if (!snap && PyErr_ExceptionMatches(PyExc_TypeError)) {
		PyErr_Clear(); /* an older Torch */
		snap = gpr_py_call(cuda, "memory_snapshot", NULL);
	}
	return snap;
}

static PyObject *snapshot(struct gpr_py_xcall *c, PyObject *cuda)
{
	if (!c->snapshot_tried) {
		c->snapshot_tried = 1;
		c->torch_snapshot = gpr_py_torch_snapshot(cuda);
	}
	return c->torch_snapshot;
}

/* ------------------------------------------------------ the labels */

/* Labels the blocks Torch's workspace maps name; 0, or -1 (map_why). */
static int from_map(struct torch_x *x, int device)
{
	struct gpr_py_ws *ws = PyMem_Malloc(MAX_MAP * sizeof *ws);
	int n = 0, rc = -1;
	if (!ws)
		return -1;
	char why[240] = "";
	if (gpr_py_torch_wsmap(ws, MAX_MAP, &n, why, sizeof why)) {
		snprintf(x->map_why, sizeof x->map_why, "%s", why);
		goto done;
	}
	for (int i = 0; i < n; i++) {
		if (ws[i].device != device || !ws[i].ptr)
			continue;
		struct blk *b = find(x, ws[i].ptr);
		int64_t want = ws[i].size ? (int64_t)ws[i].size
			       : ws[i].lt ? x->lt_size
					  : x->ws_size;
		if (!b || !fits((int64_t)b->size, b->requested, want)) {
			snprintf(x->map_why, sizeof x->map_why,
				 "Torch's workspace map could not be read: "
				 "its entry at %#llx is no live block of "
				 "%lld bytes in the snapshot (discarded)",
				 (unsigned long long)ws[i].ptr,
				 (long long)want);
			for (size_t k = 0; k < x->n; k++)
				x->b[k].label = L_LIVE;
			goto done;
		}
		b->label = ws[i].lt ? L_LT : L_WS;
		b->handle = ws[i].handle;
	}
	rc = 0;
	x->ws_evidence = "workspace_map";
done:
	PyMem_Free(ws);
	return rc;
}

static const struct gpr_py_ws_release *released(struct gpr_py_state *st,
						int device)
{
	for (int i = 0; i < GPR_PY_SLOTS; i++)
		if (st->ws_release[i].used &&
		    st->ws_release[i].device == device)
			return &st->ws_release[i];
	return NULL;
}

static void label_blocks(struct gpr_py_xcall *c, struct torch_x *x, int device)
{
	if (from_map(x, device) == 0)
		return;
	int cands = 0;
	for (size_t i = 0; i < x->n; i++) {
		struct blk *b = &x->b[i];
		if (b->frames == 1 || b->frames == 2) {
			b->label = b->frames == 1 ? L_WS : L_LT;
			x->ws_evidence = "history";
		} else if (b->frames == -1 &&
			   (fits((int64_t)b->size, b->requested, x->ws_size) ||
			    fits((int64_t)b->size, b->requested, x->lt_size))) {
			b->cand = 1;
			cands++;
		}
	}
	if (!cands)
		return;
	if (gpr_py_scan_heap(&c->scan))
		PyErr_Clear(); /* out of memory: no scan, size alone */
	const struct gpr_py_ws_release *r = released(c->st, device);
	for (size_t i = 0; i < x->n; i++) {
		struct blk *b = &x->b[i];
		if (!b->cand)
			continue;
		if (c->scan.ok && gpr_py_scan_holds(&c->scan, b->addr, b->size))
			continue;
		b->label = L_UNATTR;
		for (int k = 0; r && k < r->n; k++)
			if (r->survivors[k].address == b->addr &&
			    r->survivors[k].size == b->size)
				x->survived++;
	}
}

static void tally(struct torch_x *x)
{
	for (size_t i = 0; i < x->n; i++) {
		x->bytes[x->b[i].label] += (int64_t)x->b[i].size;
		x->count[x->b[i].label]++;
	}
}

/* ---------------------------------------------------- fragmentation */

static void keep_top(struct torch_x *x, const struct pinned *p)
{
	int i;
	if (x->ntop < TOP)
		i = x->ntop++;
	else if (p->free <= x->top[TOP - 1].free)
		return;
	else
		i = TOP - 1;
	x->top[i] = *p;
	for (; i > 0 && x->top[i].free > x->top[i - 1].free; i--) {
		struct pinned t = x->top[i];
		x->top[i] = x->top[i - 1];
		x->top[i - 1] = t;
	}
}

/* A default-pool segment holding live and free blocks: which pin it. */
static void pinning(struct torch_x *x, PyObject *seg)
{
	PyObject *blocks = PyDict_GetItemString(seg, "blocks");
	if (!blocks || !PyList_Check(blocks) || pool_index(x, seg) >= 0)
		return;
	struct pinned p = {.segment = gpr_py_item_i64(seg, "address"),
			   .size = gpr_py_item_i64(seg, "total_size")};
	Py_ssize_t n = PyList_Size(blocks);
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *b = PyList_GetItem(blocks, i);
		PyObject *state =
		    PyDict_Check(b) ? PyDict_GetItemString(b, "state") : NULL;
		long long size = state ? gpr_py_item_i64(b, "size") : -1;
		if (!state || !PyUnicode_Check(state) || size < 0)
			continue;
		if (!PyUnicode_CompareWithASCIIString(state, "inactive")) {
			p.free += size;
			continue;
		}
		long long at = gpr_py_item_i64(b, "address");
		p.live += size;
		p.nlive++;
		if (size > p.largest) {
			p.largest = size;
			p.largest_at = at;
		}
		struct blk *k = find(x, (uint64_t)at);
		p.nws += k && (k->label == L_WS || k->label == L_LT);
	}
	if (p.free > 0 && p.nlive > 0) {
		x->segments++;
		x->seg_free += p.free;
		keep_top(x, &p);
	}
}

static PyObject *pinned_detail(const struct torch_x *x, int *only_ws)
{
	PyObject *list = PyList_New(0);
	*only_ws = x->ntop > 0 && x->segments == x->ntop;
	for (int i = 0; list && i < x->ntop; i++) {
		const struct pinned *p = &x->top[i];
		*only_ws &= p->nws == p->nlive;
		PyObject *d = Py_BuildValue(
		    "{s:L,s:L,s:L,s:l,s:l,s:L,s:L}", "segment", p->segment,
		    "segment_size", p->size, "free", p->free, "live_blocks",
		    p->nlive, "workspace_blocks", p->nws, "largest_live",
		    p->largest, "largest_live_address", p->largest_at);
		if (!d || PyList_Append(list, d))
			Py_CLEAR(list);
		Py_XDECREF(d);
	}
	if (!list)
		return NULL;
	PyObject *out = Py_BuildValue("{s:l,s:L,s:O}", "segments", x->segments,
				      "free_in_segments",
				      (long long)x->seg_free, "pinned", list);
	Py_DECREF(list);
	return out;
}

/* ------------------------------------------------------------ parts */

static PyObject *scan_detail(const struct gpr_py_scan *s)
{
	if (!s->done)
		return Py_NewRef(Py_None);
	if (!s->ok)
		return Py_BuildValue("{s:s}", "skipped", s->why);
	return Py_BuildValue("{s:l,s:l,s:l,s:L,s:d}", "objects", s->objects,
			     "tensors", s->tensors, "odd", s->odd, "frozen",
			     (long long)s->frozen, "ms", s->ms);
}

/* The blocks of one label, for a part's detail (new reference). */
static PyObject *blocks_of(const struct torch_x *x, int label)
{
	PyObject *list = PyList_New(0);
	int shown = 0;
	for (size_t i = 0; list && i < x->n && shown < MAX_SHOWN; i++) {
		const struct blk *b = &x->b[i];
		if (b->label != label)
			continue;
		shown++;
		PyObject *d = Py_BuildValue(
		    "{s:K,s:K,s:L,s:K}", "address", (unsigned long long)b->addr,
		    "size", (unsigned long long)b->size, "stream",
		    (long long)b->stream, "handle",
		    (unsigned long long)b->handle);
		if (!d || PyList_Append(list, d))
			Py_CLEAR(list);
		Py_XDECREF(d);
	}
	return list;
}

static int workspace_part(struct gpr_py_xgpu *g, const struct torch_x *x,
			  int label)
{
	if (!x->count[label])
		return 0;
	const char *name = label == L_WS ? "cuBLAS" : "cuBLASLt";
	int map = !strcmp(x->ws_evidence, "workspace_map");
	char how[300];
	snprintf(how, sizeof how,
		 map ? "%d live Torch block(s) in Torch's %s workspace map "
		       "(one per cuBLAS handle and stream), checked against "
		       "memory_snapshot()"
		     : "%d live Torch block(s) whose allocation frames "
		       "(allocator history) name Torch's %s workspace "
		       "functions",
		 x->count[label], name);
	PyObject *blocks = blocks_of(x, label);
	PyObject *d = blocks
			  ? Py_BuildValue("{s:O,s:s}", "blocks", blocks, "map",
					  label == L_WS ? "cublas" : "cublaslt")
			  : NULL;
	Py_XDECREF(blocks);
	int rc =
	    d ? gpr_py_xadd(
		    g, &(struct gpr_py_part){.kind = "workspace",
					     .source = name,
					     .bytes = x->bytes[label],
					     .known = 1,
					     .exact = 1,
					     .evidence = x->ws_evidence,
					     .advice = "release_workspaces",
					     .how = how,
					     .detail = d})
	      : -1;
	Py_XDECREF(d);
	return rc;
}

static int unattributed_part(struct gpr_py_xcall *c, struct gpr_py_xgpu *g,
			     const struct torch_x *x)
{
	if (!x->count[L_UNATTR])
		return 0;
	const struct gpr_py_scan *s = &c->scan;
	const struct gpr_py_ws_release *r = released(c->st, g->device);
	char how[1024], survived[160] = "", frozen[120] = "";
	if (s->ok && s->frozen > 0)
		snprintf(frozen, sizeof frozen,
			 " (gc.freeze() froze %lld objects, which the scan "
			 "cannot see)",
			 (long long)s->frozen);
	if (x->survived && r)
		snprintf(survived, sizeof survived,
			 "; %d of them survived release(workspaces=True): "
			 "not workspaces",
			 x->survived);
	snprintf(how, sizeof how,
		 "unattributed live block(s) of %lld / %lld bytes, the size "
		 "of a cuBLAS / cuBLASLt workspace (%s), %s%s: a workspace, an "
		 "autograd saved tensor or any tensor held in C++ (%s). To "
		 "know, record allocator history with stacks=\"all\"%s",
		 (long long)x->ws_size, (long long)x->lt_size, x->from,
		 s->ok ? "that no Python tensor points into"
		       : "not checked against the Python heap",
		 frozen,
		 x->map_why[0] ? x->map_why : "Torch's workspace map not read",
		 survived);
	PyObject *blocks = blocks_of(x, L_UNATTR);
	PyObject *scan = scan_detail(s);
	PyObject *at =
	    r && x->survived ? PyFloat_FromDouble(r->at) : Py_NewRef(Py_None);
	PyObject *d = blocks && scan && at
			  ? Py_BuildValue("{s:O,s:O,s:s,s:O}", "blocks", blocks,
					  "scan", scan, "map", x->map_why,
					  "survived_release_at", at)
			  : NULL;
	Py_XDECREF(blocks);
	Py_XDECREF(scan);
	Py_XDECREF(at);
	int rc = d ? gpr_py_xadd(g,
				 &(struct gpr_py_part){
				     .kind = "unattributed",
				     .source = "torch",
				     .bytes = x->bytes[L_UNATTR],
				     .known = 1,
				     .exact = 0,
				     .evidence = s->ok ? "tensor_scan" : "size",
				     .how = how,
				     .detail = d})
		   : -1;
	Py_XDECREF(d);
	return rc;
}

/* Live CUDA graphs found on the heap that hold pool p. */
static long graphs_of(const struct gpr_py_scan *s, const struct tpool *p)
{
	long n = 0;
	for (size_t i = 0; s->ok && i < s->ngraphs; i++)
		n += s->graphs[i].a == p->id.a && s->graphs[i].b == p->id.b;
	return n;
}

/*
 * The private pools, in three parts: pools of live CUDA graphs (deleting
 * or resetting them lets release() return the free bytes), graph pools
 * with no live graph found, MemPools and shared graph pool handles.
 */
static int graph_parts(struct gpr_py_xcall *c, struct gpr_py_xgpu *g,
		       struct torch_x *x)
{
	if (!x->npools)
		return 0;
	if (gpr_py_scan_heap(&c->scan))
		PyErr_Clear();
	static const char *const sources[3] = {
	    "torch CUDA graphs", "torch CUDA graphs, none live",
	    "torch MemPool or graph pool handle"};
	for (int kind = 0; kind < 3; kind++) {
		int64_t bytes = 0, live = 0;
		long graphs = 0, pools = 0;
		PyObject *list = PyList_New(0);
		for (int i = 0; list && i < x->npools; i++) {
			struct tpool *p = &x->pools[i];
			p->graphs = graphs_of(&c->scan, p);
			int k = p->graphs ? 0 : p->id.a ? 1 : 2;
			if (k != kind)
				continue;
			pools++;
			graphs += p->graphs;
			bytes += p->reserved;
			live += p->live;
			PyObject *d = Py_BuildValue(
			    "{s:(LL),s:s,s:l,s:L,s:L,s:L,s:l}", "id",
			    (long long)p->id.a, (long long)p->id.b, "made_by",
			    p->id.a ? "graph" : "mempool_or_handle", "segments",
			    p->segments, "reserved", (long long)p->reserved,
			    "live", (long long)p->live, "free",
			    (long long)(p->reserved - p->live), "graphs",
			    p->graphs);
			if (!d || PyList_Append(list, d))
				Py_CLEAR(list);
			Py_XDECREF(d);
		}
		if (!list)
			return -1;
		if (!pools) {
			Py_DECREF(list);
			continue;
		}
		char how[600];
		if (kind == 0)
			snprintf(how, sizeof how,
				 "%ld private pool(s) of %ld live CUDA "
				 "graph(s) (memory_snapshot: segment_pool_id; "
				 "graphs found on the Python heap): "
				 "empty_cache() cannot return a graph's pool "
				 "until the graph is deleted or reset; %lld "
				 "bytes of it are live (the graphs' output "
				 "tensors), the rest is what release() "
				 "returns after that",
				 pools, graphs, (long long)live);
		else if (kind == 1)
			snprintf(how, sizeof how,
				 "%ld private pool(s) made by CUDA graph "
				 "capture with no live graph found: held by "
				 "tensors allocated during capture, by graphs "
				 "made in C++ (not seen), or for the life of "
				 "the process by a failed capture "
				 "(pytorch#190348); %lld bytes live",
				 pools, (long long)live);
		else
			snprintf(how, sizeof how,
				 "%ld private pool(s) of a torch.cuda.MemPool "
				 "or a graph_pool_handle() with no live graph "
				 "found: returned when the MemPool and the "
				 "graphs sharing it are gone; %lld bytes live",
				 pools, (long long)live);
		PyObject *scan = scan_detail(&c->scan);
		PyObject *d = scan ? Py_BuildValue("{s:O,s:O}", "pools", list,
						   "scan", scan)
				   : NULL;
		Py_DECREF(list);
		Py_XDECREF(scan);
		int rc =
		    d ? gpr_py_xadd(
			    g,
			    &(struct gpr_py_part){
				.kind = "graph_pool",
				.source = sources[kind],
				.bytes = bytes,
				.known = 1,
				.exact = 1,
				.evidence = "snapshot",
				.advice = kind == 0 ? "delete_graphs" : NULL,
				.how = how,
				.detail = d})
		      : -1;
		Py_XDECREF(d);
		if (rc)
			return -1;
	}
	return 0;
}

/* Torch's cuFFT plans on the device: a count only. */
static int plans(struct gpr_py_xgpu *g)
{
	PyObject *bc = gpr_py_imported("torch.backends.cuda");
	PyObject *cache = bc ? gpr_py_attr(bc, "cufft_plan_cache") : NULL;
	Py_XDECREF(bc);
	if (!cache)
		return 0;
	PyObject *key = PyLong_FromLong(g->device);
	PyObject *one = key ? PyObject_GetItem(cache, key) : NULL;
	Py_XDECREF(key);
	Py_DECREF(cache);
	PyObject *size = one ? gpr_py_attr(one, "size") : NULL;
	Py_XDECREF(one);
	int64_t n = -1;
	if (size && gpr_py_i64(size, &n))
		n = -1;
	Py_XDECREF(size);
	PyErr_Clear();
	if (n <= 0)
		return 0;
	char how[300];
	snprintf(how, sizeof how,
		 "%lld plan(s) in torch.backends.cuda.cufft_plan_cache[%d]; "
		 "Torch does not report their memory (cuFFT takes it from the "
		 "driver): it is counted in the rest",
		 (long long)n, g->device);
	PyObject *d = Py_BuildValue("{s:L}", "plans", (long long)n);
	int rc =
	    d ? gpr_py_xadd(
		    g, &(struct gpr_py_part){.kind = "workspace",
					     .source = "cuFFT plans (torch)",
					     .known = 0,
					     .advice = "clear_torch_plans",
					     .how = how,
					     .detail = d})
	      : -1;
	Py_XDECREF(d);
	return rc;
}

/* Torch's counters: allocated, reserved, inactive_split (-1: absent). */
static int counters(PyObject *cuda, int device, int64_t *alloc,
		    int64_t *reserved, int64_t *split)
{
	*alloc = *reserved = *split = -1;
	PyObject *stats = gpr_py_call(cuda, "memory_stats", "(i)", device);
	if (stats) {
		*alloc = gpr_py_item_i64(stats, "allocated_bytes.all.current");
		*reserved =
		    gpr_py_item_i64(stats, "reserved_bytes.all.current");
		*split =
		    gpr_py_item_i64(stats, "inactive_split_bytes.all.current");
		Py_DECREF(stats);
	} else {
		PyErr_Clear();
	}
	/* An allocator with no stats yet (or an old Torch): the plain calls */
	if ((*alloc < 0 &&
	     gpr_py_call_i64(cuda, "memory_allocated", alloc, "(i)", device)) ||
	    (*reserved < 0 &&
	     gpr_py_call_i64(cuda, "memory_reserved", reserved, "(i)", device)))
		return -1;
	return 0;
}

static int read_snapshot(struct gpr_py_xcall *c, PyObject *cuda,
			 struct torch_x *x, int device)
{
	PyObject *snap = snapshot(c, cuda);
	if (!snap)
		return -1;
	if (!PyList_Check(snap))
		return 0;
	Py_ssize_t n = PyList_Size(snap);
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *seg = PyList_GetItem(snap, i);
		if (PyDict_Check(seg) &&
		    gpr_py_item_i64(seg, "device") == device && collect(x, seg))
			return -1;
	}
	qsort(x->b, x->n, sizeof *x->b, cmp_blk);
	label_blocks(c, x, device);
	tally(x);
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *seg = PyList_GetItem(snap, i);
		if (PyDict_Check(seg) &&
		    gpr_py_item_i64(seg, "device") == device)
			pinning(x, seg);
	}
	return 0;
}

static int torch_parts(struct gpr_py_xcall *c, struct gpr_py_xgpu *g,
		       PyObject *cuda, struct torch_x *x)
{
	int64_t alloc, reserved, split;
	if (counters(cuda, g->device, &alloc, &reserved, &split))
		return -1;
	if ((alloc > 0 || reserved > 0) && read_snapshot(c, cuda, x, g->device))
		return -1;
	if (split < 0)
		split = x->seg_free; /* no stats: the snapshot's figure */
	int64_t p_res = 0, p_live = 0, p_split = 0;
	for (int i = 0; i < x->npools; i++) {
		p_res += x->pools[i].reserved;
		p_live += x->pools[i].live;
		p_split += x->pools[i].split;
	}
	int only_ws = 0;
	PyObject *frag = pinned_detail(x, &only_ws);
	if (!frag)
		return -1;
	int64_t live = alloc - p_live - x->bytes[L_WS] - x->bytes[L_LT] -
		       x->bytes[L_UNATTR];
	int rc =
	    workspace_part(g, x, L_WS) || workspace_part(g, x, L_LT) ||
	    unattributed_part(c, g, x) ||
	    gpr_py_xadd(g,
			&(struct gpr_py_part){
			    .kind = "live",
			    .source = "torch",
			    .bytes = live,
			    .known = 1,
			    .exact = 1,
			    .advice = "free_arrays",
			    .how = "torch.cuda.memory_stats: "
				   "allocated_bytes.all.current minus the "
				   "parts of Torch listed apart"}) ||
	    gpr_py_xadd(g,
			&(struct gpr_py_part){
			    .kind = "releasable",
			    .source = "torch",
			    .bytes = reserved - alloc - split -
				     (p_res - p_live - p_split),
			    .known = 1,
			    .exact = 1,
			    .advice = "release",
			    .how = "reserved_bytes - allocated_bytes - "
				   "inactive_split_bytes, private pools "
				   "excepted: segments with no live block"}) ||
	    gpr_py_xadd(g,
			&(struct gpr_py_part){
			    .kind = "fragmented",
			    .source = "torch",
			    .bytes = split - p_split,
			    .known = 1,
			    .exact = 1,
			    .advice = only_ws ? "release_workspaces_pins"
					      : "free_pinning_blocks",
			    .hint = only_ws ? NULL : "expandable_segments",
			    .how = "inactive_split_bytes, private pools "
				   "excepted: free blocks inside segments "
				   "that still hold live blocks "
				   "(memory_snapshot)",
			    .detail = frag}) ||
	    graph_parts(c, g, x) || plans(g);
	Py_DECREF(frag);
	return rc ? -1 : 0;
}

int gpr_py_explain_torch(struct gpr_py_xcall *c, struct gpr_py_xgpu *g)
{
	PyObject *cuda = gpr_py_torch_cuda(NULL, 0);
	if (!cuda)
		return 0;
	struct torch_x *x = PyMem_Calloc(1, sizeof *x);
	int rc = -1;
	if (x) {
		x->ws_evidence = "size";
		gpr_py_torch_ws_sizes(cuda, g->device, &x->ws_size, &x->lt_size,
				      x->from, sizeof x->from);
		rc = torch_parts(c, g, cuda, x);
		PyMem_Free(x->b);
		PyMem_Free(x);
	} else {
		PyErr_NoMemory();
	}
	Py_DECREF(cuda);
	return rc;
}
