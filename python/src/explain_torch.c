/*
 * Torch's share of a GPU, from its caching allocator (only when torch is
 * imported and torch.cuda initialised). From memory_stats(device):
 *   reserved (reserved_bytes) = allocated + inactive_split + the rest,
 * where the rest is cached in segments with nothing live: what release()
 * returns; inactive_split_bytes is free space inside segments that still
 * hold a live block, which no empty_cache can return. memory_snapshot()
 * names those segments and the live blocks pinning them, and finds the
 * cuBLAS workspaces inside "allocated": Torch takes them from its own
 * allocator but exposes neither their address nor their size. They are
 * known for sure when the allocator recorded history (the blocks' frames
 * name cuBLAS), else inferred from size: a live block of exactly Torch's
 * cuBLAS workspace size (CUBLAS_WORKSPACE_CONFIG; 32 MiB on sm_90, else
 * 8.125 MiB), at most one per stream; and, only where a cuBLAS one was
 * found (Torch's cuBLASLt handle is its cuBLAS handle, which gets the
 * cuBLAS workspace first), a live block of exactly the cuBLASLt workspace
 * size (CUBLASLT_WORKSPACE_SIZE KiB, default 1 MiB, at most the cuBLAS
 * size), one per stream. The part's `how` says which.
 * Torch's cuFFT plans hold memory cuFFT takes from the driver itself: Torch
 * gives their number, not their bytes; they stay in the rest.
 */
#include "ext.h"

#include <ctype.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOP 5	   /* pinned segments named */
#define STREAMS 64 /* distinct streams tracked for workspaces */

struct pinned {
	long long segment, size, free, live, largest, largest_at;
	long nlive;
	long nws; /* of the live blocks, workspaces */
};

struct scan {
	int64_t ws_size;  /* cuBLAS workspace size to match, 0: none */
	int64_t lt_size;  /* cuBLASLt workspace size to match */
	int64_t ws, lt;	  /* workspace bytes: cuBLAS, cuBLASLt */
	int ws_n, lt_n;	  /* how many blocks */
	int by_frames;	  /* some workspace known from frames */
	long segments;	  /* segments holding live and free blocks */
	int64_t seg_free; /* free bytes inside them */
	struct pinned top[TOP];
	int ntop;
	long long streams[STREAMS]; /* streams with a size-matched workspace */
	int nstreams;
	long long lt_streams[STREAMS]; /* same for cuBLASLt candidates */
	int nlt;
};

/* Adds stream to the set; 0 if it was there already or the set is full. */
static int new_stream(long long *set, int *n, long long stream)
{
	for (int i = 0; i < *n; i++)
		if (set[i] == stream)
			return 0;
	if (*n == STREAMS)
		return 0;
	set[(*n)++] = stream;
	return 1;
}

static int contains_ci(const char *s, const char *needle)
{
	size_t n = strlen(needle);
	for (; *s; s++) {
		size_t i = 0;
		while (i < n && s[i] &&
		       tolower((unsigned char)s[i]) == needle[i])
			i++;
		if (i == n)
			return 1;
	}
	return 0;
}

/* 2: frames name cuBLASLt, 1: cuBLAS, 0: other code, -1: no frames. */
static int frames_say(PyObject *block)
{
	PyObject *frames = PyDict_GetItemString(block, "frames");
	if (!frames || !PyList_Check(frames) || PyList_Size(frames) == 0)
		return -1;
	Py_ssize_t n = PyList_Size(frames);
	for (Py_ssize_t i = 0; i < n && i < 32; i++) {
		PyObject *f = PyList_GetItem(frames, i);
		static const char *const keys[] = {"filename", "name"};
		for (int k = 0; f && PyDict_Check(f) && k < 2; k++) {
			PyObject *v = PyDict_GetItemString(f, keys[k]);
			const char *s = v && PyUnicode_Check(v)
					    ? PyUnicode_AsUTF8AndSize(v, NULL)
					    : NULL;
			if (!s) {
				PyErr_Clear();
				continue;
			}
			if (contains_ci(s, "blaslt"))
				return 2;
			if (contains_ci(s, "cublas") ||
			    contains_ci(s, "blasworkspace") ||
			    contains_ci(s, "getnewworkspace"))
				return 1;
		}
	}
	return 0;
}

static void keep_top(struct scan *s, const struct pinned *p)
{
	int i;
	if (s->ntop < TOP)
		i = s->ntop++;
	else if (p->free <= s->top[TOP - 1].free)
		return;
	else
		i = TOP - 1;
	s->top[i] = *p;
	for (; i > 0 && s->top[i].free > s->top[i - 1].free; i--) {
		struct pinned t = s->top[i];
		s->top[i] = s->top[i - 1];
		s->top[i - 1] = t;
	}
}

/* One live block: 1 if it is counted as a workspace. */
static int workspace_check(struct scan *s, PyObject *b, long long size,
			   long long stream)
{
	int said = frames_say(b);
	if (said == 2 || said == 1) {
		s->by_frames = 1;
		if (said == 2) {
			s->lt += size;
			s->lt_n++;
		} else {
			s->ws += size;
			s->ws_n++;
		}
		return 1;
	}
	if (said == 0)
		return 0;
	if (s->ws_size > 0 && size == s->ws_size &&
	    new_stream(s->streams, &s->nstreams, stream)) {
		s->ws += size;
		s->ws_n++;
		return 1;
	}
	if (s->lt_size > 0 && size == s->lt_size &&
	    new_stream(s->lt_streams, &s->nlt, stream)) {
		s->lt += size; /* kept only if a cuBLAS workspace is found */
		s->lt_n++;
		return 1;
	}
	return 0;
}

static int scan_segment(struct scan *s, PyObject *seg)
{
	PyObject *blocks = PyDict_GetItemString(seg, "blocks");
	if (!blocks || !PyList_Check(blocks))
		return 0;
	struct pinned p = {.segment = gpr_py_item_i64(seg, "address"),
			   .size = gpr_py_item_i64(seg, "total_size")};
	long long stream = gpr_py_item_i64(seg, "stream");
	Py_ssize_t n = PyList_Size(blocks);
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *b = PyList_GetItem(blocks, i);
		PyObject *state = b && PyDict_Check(b)
				      ? PyDict_GetItemString(b, "state")
				      : NULL;
		if (!state || !PyUnicode_Check(state))
			continue;
		long long size = gpr_py_item_i64(b, "size");
		if (size < 0)
			continue;
		if (PyUnicode_CompareWithASCIIString(state, "inactive") == 0) {
			p.free += size;
			continue;
		}
		p.live += size;
		p.nlive++;
		if (size > p.largest) {
			p.largest = size;
			p.largest_at = gpr_py_item_i64(b, "address");
		}
		if (PyUnicode_CompareWithASCIIString(state,
						     "active_allocated") == 0)
			p.nws += workspace_check(s, b, size, stream);
	}
	if (p.free > 0 && p.nlive > 0) {
		s->segments++;
		s->seg_free += p.free;
		keep_top(s, &p);
	}
	return 0;
}

static int scan_snapshot(struct gpr_py_xcall *c, PyObject *cuda, int device,
			 struct scan *s)
{
	if (!c->snapshot_tried) {
		c->snapshot_tried = 1;
		c->torch_snapshot = gpr_py_call(cuda, "memory_snapshot", NULL);
		if (!c->torch_snapshot)
			return -1;
	}
	PyObject *snap = c->torch_snapshot;
	if (!snap || !PyList_Check(snap))
		return 0;
	Py_ssize_t n = PyList_Size(snap);
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *seg = PyList_GetItem(snap, i);
		if (seg && PyDict_Check(seg) &&
		    gpr_py_item_i64(seg, "device") == device)
			scan_segment(s, seg);
	}
	return 0;
}

/* Torch's cuBLAS workspace size on `device` and where it comes from. */
static int64_t workspace_size(PyObject *cuda, int device, char *from,
			      size_t len)
{
	const char *cfg = getenv("CUBLAS_WORKSPACE_CONFIG");
	if (cfg && *cfg) {
		/* ":SIZE_KiB:COUNT" pairs, summed, as Torch parses them */
		regex_t re;
		regmatch_t m[3];
		int64_t total = 0;
		if (regcomp(&re, ":([0-9]+):([0-9]+)", REG_EXTENDED))
			return 0;
		for (const char *p = cfg; !regexec(&re, p, 3, m, 0);
		     p += m[0].rm_eo)
			total += strtoll(p + m[1].rm_so, NULL, 10) * 1024 *
				 strtoll(p + m[2].rm_so, NULL, 10);
		regfree(&re);
		if (total > 0) {
			snprintf(from, len, "CUBLAS_WORKSPACE_CONFIG=%s", cfg);
			return total;
		}
	}
	PyObject *cap =
	    gpr_py_call(cuda, "get_device_capability", "(i)", device);
	int64_t major = -1, minor = -1;
	if (cap && PyTuple_Check(cap) && PyTuple_Size(cap) == 2 &&
	    (gpr_py_i64(PyTuple_GetItem(cap, 0), &major) ||
	     gpr_py_i64(PyTuple_GetItem(cap, 1), &minor)))
		major = -1;
	Py_XDECREF(cap);
	PyErr_Clear();
	if (major < 0)
		return 0;
	snprintf(from, len, "Torch's default for sm_%lld%lld", (long long)major,
		 (long long)minor);
	return major == 9 && minor == 0 ? 32 << 20
					: 4096 * 1024 * 2 + 16 * 1024 * 8;
}

/* Torch's cuBLASLt workspace size: CUBLASLT_WORKSPACE_SIZE KiB (1 MiB by
 * default), no larger than the cuBLAS one. */
static int64_t lt_size(int64_t ws_size)
{
	const char *v = getenv("CUBLASLT_WORKSPACE_SIZE");
	int64_t kib = v && *v ? strtoll(v, NULL, 10) : 1024;
	int64_t n = (kib > 0 ? kib : 1024) * 1024;
	return ws_size > 0 && n > ws_size ? ws_size : n;
}

static PyObject *pinned_detail(const struct scan *s)
{
	PyObject *list = PyList_New(0);
	for (int i = 0; list && i < s->ntop; i++) {
		const struct pinned *p = &s->top[i];
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
	PyObject *out = Py_BuildValue("{s:l,s:L,s:O}", "segments", s->segments,
				      "free_in_segments",
				      (long long)s->seg_free, "pinned", list);
	Py_DECREF(list);
	return out;
}

static int workspaces(struct gpr_py_xgpu *g, const struct scan *s,
		      const char *from)
{
	char how[400];
	if (s->ws_n) {
		if (s->by_frames)
			snprintf(how, sizeof how,
				 "%d live Torch block(s) whose allocation "
				 "frames name cuBLAS (allocator history)",
				 s->ws_n);
		else
			snprintf(how, sizeof how,
				 "inferred: %d live Torch block(s) of exactly "
				 "%lld bytes, the cuBLAS workspace size (%s); "
				 "Torch does not expose its workspaces (record "
				 "allocator history for proof)",
				 s->ws_n, (long long)s->ws_size, from);
		if (gpr_py_xpart(g, "workspace", "cuBLAS", s->ws, 1, how, NULL))
			return -1;
	}
	if (s->lt_n) {
		if (s->by_frames)
			snprintf(how, sizeof how,
				 "%d live Torch block(s) whose allocation "
				 "frames name cuBLASLt (allocator history)",
				 s->lt_n);
		else
			snprintf(how, sizeof how,
				 "inferred: %d live Torch block(s) of exactly "
				 "%lld bytes, the cuBLASLt workspace size "
				 "(CUBLASLT_WORKSPACE_SIZE, 1 MiB by default), "
				 "next to a cuBLAS workspace",
				 s->lt_n, (long long)s->lt_size);
		if (gpr_py_xpart(g, "workspace", "cuBLASLt", s->lt, 1, how,
				 NULL))
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
	int rc = d ? gpr_py_xpart(g, "workspace", "cuFFT plans (torch)", 0, 0,
				  how, d)
		   : -1;
	Py_XDECREF(d);
	return rc;
}

int gpr_py_explain_torch(struct gpr_py_xcall *c, struct gpr_py_xgpu *g)
{
	PyObject *cuda = gpr_py_torch_cuda(NULL, 0);
	if (!cuda)
		return 0;
	int rc = -1;
	int64_t alloc = -1, reserved = -1, split = -1;
	PyObject *stats = gpr_py_call(cuda, "memory_stats", "(i)", g->device);
	if (stats) {
		alloc = gpr_py_item_i64(stats, "allocated_bytes.all.current");
		reserved = gpr_py_item_i64(stats, "reserved_bytes.all.current");
		split =
		    gpr_py_item_i64(stats, "inactive_split_bytes.all.current");
		Py_DECREF(stats);
	} else {
		PyErr_Clear();
	}
	/* An allocator with no stats yet (or an old Torch): the plain calls */
	if ((alloc < 0 && gpr_py_call_i64(cuda, "memory_allocated", &alloc,
					  "(i)", g->device)) ||
	    (reserved < 0 && gpr_py_call_i64(cuda, "memory_reserved", &reserved,
					     "(i)", g->device)))
		goto done;
	struct scan s = {0};
	char from[200] = "";
	if (alloc > 0 || split > 0) {
		s.ws_size = workspace_size(cuda, g->device, from, sizeof from);
		s.lt_size = lt_size(s.ws_size);
		if (scan_snapshot(c, cuda, g->device, &s))
			goto done;
		if (!s.by_frames && s.ws_n == 0)
			s.lt = s.lt_n = 0; /* no cuBLAS: no evidence for Lt */
	}
	if (split < 0)
		split = s.seg_free; /* no stats: the snapshot's figure */
	if (workspaces(g, &s, from) ||
	    gpr_py_xpart(g, "live", "torch", alloc - s.ws - s.lt, 1,
			 "torch.cuda.memory_stats: allocated_bytes.all.current"
			 " minus the cuBLAS workspaces",
			 NULL) ||
	    gpr_py_xpart(g, "releasable", "torch", reserved - alloc - split, 1,
			 "reserved_bytes - allocated_bytes - "
			 "inactive_split_bytes: segments with no live block",
			 NULL))
		goto done;
	PyObject *d = pinned_detail(&s);
	rc = d ? gpr_py_xpart(g, "fragmented", "torch", split, 1,
			      "inactive_split_bytes: free blocks inside "
			      "segments that still hold live blocks "
			      "(memory_snapshot)",
			      d)
	       : -1;
	Py_XDECREF(d);
	if (rc == 0)
		rc = plans(g);
done:
	Py_DECREF(cuda);
	return rc;
}
