/*
 * The heap walk of explain(holders=True) (gpureclaim/_holders.py): who
 * refers to a set of arrays, and who refers to those, up to the roots.
 *
 * referrers(objects, targets, stops, skips, budget_s, max_objects) makes
 * one pass over objects (gc.get_objects() and the frames the caller
 * added), calling each object's tp_traverse, what gc.get_referents does:
 * no Python code runs (no __eq__, __hash__, property or __getattr__; a
 * pointer is the identity), so the walk cannot change what it walks.
 * From that pass's edges it climbs back from the targets, breadth first,
 * never past a stop (a root: a module's namespace, a frame of a thread;
 * every class is one too) and never through a skip (the caller's own
 * frames). The pass is what costs (5 to 10 ms per 100,000 objects on a
 * shared 2-core machine; bound by memory, so its lookups go in prefetched
 * batches): it holds the GIL, so it stops once budget_s seconds have gone
 * or max_objects were traversed, and says how far it got.
 *
 * Returns (graph, examined, total, stopped): graph maps id(node) of each
 * node reached (targets included, stops and skips not) to (ext, parents),
 * parents a tuple with one entry per reference (a dict holding it twice is
 * there twice), ext the references to the node from outside the objects
 * traversed (its refcount minus the edges found, minus the lists passed
 * here): 0 for every node of a group with no root means only garbage holds
 * it; more means C or C++ does. examined of total objects traversed;
 * stopped: None, "time" or "objects".
 *
 * Also instance_dict(obj) (PyObject_GenericGetDict: an instance's own
 * __dict__, never a property of that name, or None; a static type's
 * mappingproxy) and of_types(objects,
 * types) (the objects of those types or their subtypes, PyType_IsSubtype:
 * isinstance could ask a proxy's __class__).
 */
#include "ext.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

/*
 * The walk's arrays (tens of MiB for 500,000 objects): anonymous maps,
 * zeroed by the kernel, in 2 MiB pages where the kernel gives them on
 * request (transparent_hugepage "madvise"): a fault per 4 KiB page cost
 * as much as the lookups. The map's start and length are kept just
 * before the array.
 */
#define HUGE ((size_t)2 << 20)

static void *big(size_t count, size_t size)
{
	if (count > (SIZE_MAX - 2 * HUGE) / size)
		return NULL;
	size_t bytes = count * size, len = bytes + HUGE + 16;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	uintptr_t a = ((uintptr_t)p + 16 + HUGE - 1) & ~(uintptr_t)(HUGE - 1);
	if (bytes >= HUGE)
		(void)madvise((void *)a, bytes & ~(HUGE - 1), MADV_HUGEPAGE);
	((void **)a)[-2] = p;
	((size_t *)a)[-1] = len;
	return (void *)a;
}

static void big_free(void *a)
{
	if (a)
		munmap(((void **)a)[-2], ((size_t *)a)[-1]);
}

/*
 * The index: open addressing on the pointers, a node's number its slot
 * (the object is the key). A bitmap of the pointers (2 MiB per 500,000
 * objects) answers most "not an object of the walk" (an int, a str) from
 * the cache, before the table or the child's own memory is read.
 */
#define BATCH 64 /* references looked up together */
#define AHEAD 16 /* objects prefetched ahead in the index and the pass */

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))
#endif

struct walk {
	uintptr_t *keys; /* 0: empty */
	size_t mask;
	uint64_t *bits;
	size_t bmask;
	const uint8_t *marks; /* M_* by slot */
	/* the edges to each object, a list from head[its slot]: the edge
	 * e+1's parent[e], the edge before it next[e] (0: none) */
	uint32_t *head, *next, *parent;
	size_t n, cap;
	uint32_t from;
	int nomem;
	/* the references seen and not yet looked up, in the order seen:
	 * their bitmap words, then their slots, are prefetched a batch at a
	 * time, so the misses on the bitmap and the table overlap instead of
	 * costing one after the other */
	size_t np;
	uintptr_t pk[BATCH];
	uint32_t pf[BATCH];
	size_t pb[BATCH];
};

#define NONE UINT32_MAX

/* marks[] bits */
#define M_STOP 1
#define M_SKIP 2
#define M_SEEN 4

static uint64_t mix(uintptr_t k)
{
	return (uint64_t)k * 0x9E3779B97F4A7C15ull;
}

static size_t slot_of(const struct walk *w, uintptr_t k)
{
	size_t i = (size_t)(mix(k) >> 20) & w->mask;
	while (w->keys[i] && w->keys[i] != k)
		i = (i + 1) & w->mask;
	return i;
}

static size_t bit_of(const struct walk *w, uintptr_t k)
{
	return (size_t)(mix(k) >> 40 ^ mix(k) >> 8) & w->bmask;
}

/* the slot of k, or NONE */
static uint32_t lookup(const struct walk *w, uintptr_t k)
{
	size_t b = bit_of(w, k);
	if (!(w->bits[b >> 6] >> (b & 63) & 1))
		return NONE;
	size_t i = slot_of(w, k);
	return w->keys[i] ? (uint32_t)i : NONE;
}

static void set_bit(struct walk *w, uintptr_t k)
{
	size_t b = (size_t)(mix(k) >> 40 ^ mix(k) >> 8) & w->bmask;
	w->bits[b >> 6] |= 1ull << (b & 63);
}

/* one edge, from -> the object in slot j */
static int edge(struct walk *w, uint32_t j, uint32_t from)
{
	/* a root: the climb never goes up from one (a function's
	 * __globals__, an instance's class once the class was traversed) */
	if (w->marks[j] & M_STOP)
		return 0;
	if (w->n == w->cap) { /* rare: the first map holds 6 per object */
		size_t c = w->cap * 2;
		uint32_t *a = c < UINT32_MAX ? big(c, sizeof *a) : NULL;
		uint32_t *b = a ? big(c, sizeof *b) : NULL;
		if (!a || !b) {
			big_free(a);
			big_free(b);
			w->nomem = 1;
			return -1;
		}
		memcpy(a, w->next, w->n * sizeof *a);
		memcpy(b, w->parent, w->n * sizeof *b);
		big_free(w->next);
		big_free(w->parent);
		w->next = a;
		w->parent = b;
		w->cap = c;
	}
	w->parent[w->n] = from;
	w->next[w->n] = w->head[j];
	w->head[j] = (uint32_t)++w->n;
	return 0;
}

/* the edges of the references pending, in the order seen: those to no
 * object of the walk (an int, a str; a self-reference is one) dropped */
static int flush(struct walk *w)
{
	size_t m = 0;
	for (size_t q = 0; q < w->np; q++) {
		size_t b = w->pb[q];
		if (!(w->bits[b >> 6] >> (b & 63) & 1))
			continue;
		size_t i = (size_t)(mix(w->pk[q]) >> 20) & w->mask;
		PREFETCH(&w->keys[i]); /* and where the edge goes, mostly */
		PREFETCH(&w->marks[i]);
		PREFETCH(&w->head[i]);
		w->pk[m] = w->pk[q];
		w->pf[m] = w->pf[q];
		w->pb[m++] = i;
	}
	w->np = 0;
	for (size_t q = 0; q < m; q++) {
		size_t i = w->pb[q];
		uintptr_t k = w->pk[q];
		while (w->keys[i] && w->keys[i] != k)
			i = (i + 1) & w->mask;
		if (w->keys[i] && edge(w, (uint32_t)i, w->pf[q]))
			return -1;
	}
	return 0;
}

static int visit(PyObject *o, void *arg)
{
	struct walk *w = arg;
	uintptr_t k = (uintptr_t)o;
	size_t b = bit_of(w, k);
	PREFETCH(&w->bits[b >> 6]);
	w->pk[w->np] = k;
	w->pf[w->np] = w->from;
	w->pb[w->np] = b;
	return ++w->np == BATCH ? flush(w) : 0;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int mark(struct walk *w, uint8_t *marks, PyObject *list, int bit)
{
	Py_ssize_t n = PyList_Size(list);
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *o = PyList_GetItem(list, i);
		if (!o)
			return -1;
		uint32_t j = lookup(w, (uintptr_t)o);
		if (j != NONE)
			marks[j] |= (uint8_t)bit;
	}
	return 0;
}

/* the parents of the object in slot v into out[], in the order the pass
 * found them (its list runs backwards); their count */
static uint32_t parents_of(const struct walk *w, uint32_t v, uint32_t *out)
{
	uint32_t k = 0;
	for (uint32_t e = w->head[v]; e; e = w->next[e - 1])
		k++;
	uint32_t m = k;
	for (uint32_t e = w->head[v]; e; e = w->next[e - 1])
		out[--m] = w->parent[e - 1];
	return k;
}

static PyObject *build(const struct walk *w, uint32_t *occ,
		       const uint8_t *marks, uint32_t *tmp,
		       const uint32_t *queue, size_t nq)
{
	/* the references from outside, counted before any tuple below adds
	 * one: occ[] (an object's places in the lists past its first) is
	 * reused for them */
	for (size_t q = 0; q < nq; q++) {
		uint32_t v = queue[q];
		PyObject *o = (PyObject *)w->keys[v];
		uint32_t k = 0;
		for (uint32_t e = w->head[v]; e; e = w->next[e - 1])
			k++;
		occ[v] =
		    (uint32_t)((long)Py_REFCNT(o) - (long)k - 1 - (long)occ[v]);
	}
	PyObject *graph = PyDict_New();
	for (size_t q = 0; graph && q < nq; q++) {
		uint32_t v = queue[q];
		PyObject *o = (PyObject *)w->keys[v];
		long ext = (long)(int32_t)occ[v];
		uint32_t np = parents_of(w, v, tmp);
		Py_ssize_t keep = 0;
		for (uint32_t e = 0; e < np; e++)
			keep += !(marks[tmp[e]] & M_SKIP);
		PyObject *parents = PyTuple_New(keep);
		PyObject *key = PyLong_FromVoidPtr(o);
		PyObject *val = NULL;
		if (parents && key) {
			Py_ssize_t k = 0;
			for (uint32_t e = 0; e < np; e++) {
				if (marks[tmp[e]] & M_SKIP)
					continue;
				PyObject *p = (PyObject *)w->keys[tmp[e]];
				Py_INCREF(p);
				PyTuple_SetItem(parents, k++, p);
			}
			val = Py_BuildValue("(lO)", ext, parents);
		}
		if (!val || PyDict_SetItem(graph, key, val))
			Py_CLEAR(graph);
		Py_XDECREF(parents);
		Py_XDECREF(key);
		Py_XDECREF(val);
	}
	return graph;
}

PyObject *gpr_py_referrers(PyObject *module, PyObject *args)
{
	(void)module;
	PyObject *objs, *targets, *stops, *skips;
	double budget;
	Py_ssize_t most;
	if (!PyArg_ParseTuple(args, "O!O!O!O!dn:referrers", &PyList_Type, &objs,
			      &PyList_Type, &targets, &PyList_Type, &stops,
			      &PyList_Type, &skips, &budget, &most))
		return NULL;
	double deadline = now() + budget;
	Py_ssize_t n = PyList_Size(objs);
	if (n > (Py_ssize_t)(1u << 30))
		return PyErr_Format(PyExc_ValueError,
				    "referrers: more than 2**30 objects");
	struct walk w = {0};
	size_t cap = 16, bcap = 1 << 12;
	while (cap < (size_t)n * 2)
		cap <<= 1;
	while (bcap < (size_t)n * 32)
		bcap <<= 1;
	w.mask = cap - 1;
	w.bmask = bcap - 1;
	w.keys = big(cap, sizeof *w.keys);
	w.bits = big(bcap / 64, sizeof *w.bits);
	w.cap = (size_t)n * 6 + 1024;
	w.head = big(cap, sizeof *w.head);
	w.next = big(w.cap, sizeof *w.next);
	w.parent = big(w.cap, sizeof *w.parent);
	uint32_t *slot = big((size_t)n + 1, sizeof *slot);
	uint32_t *occ = big(cap, sizeof *occ);
	uint8_t *marks = big(cap, 1);
	uint32_t *tmp = NULL, *queue = NULL;
	PyObject *out = NULL, *graph = NULL;
	const char *stopped = NULL;
	PyTypeObject *last = NULL;
	traverseproc tr = NULL;
	Py_ssize_t i = 0, nt = PyList_Size(targets);
	size_t nq = 0;
	if (!w.keys || !w.bits || !w.head || !w.next || !w.parent || !slot ||
	    !occ || !marks) {
		PyErr_NoMemory();
		goto done;
	}
	/* the index; occ[] counts each object's places in the lists past
	 * its first (rare: its pages mostly stay untouched), slot[] is NONE
	 * for a second place (traversed once) */
	/* ring[]: the objects AHEAD on, read once, their misses started */
	PyObject *ring[AHEAD];
	for (Py_ssize_t k = 0; k < AHEAD && k < n; k++)
		ring[k] = PyList_GetItem(objs, k);
	for (Py_ssize_t k = 0; k < n; k++) {
		uintptr_t o = (uintptr_t)ring[k % AHEAD];
		if (k + AHEAD < n) {
			PyObject *a = PyList_GetItem(objs, k + AHEAD);
			size_t h = (size_t)(mix((uintptr_t)a) >> 20) & w.mask;
			PREFETCH(&w.keys[h]);
			PREFETCH(&w.bits[bit_of(&w, (uintptr_t)a) >> 6]);
			ring[k % AHEAD] = a;
		}
		size_t s = slot_of(&w, o);
		if (w.keys[s]) {
			slot[k] = NONE;
			occ[s]++;
		} else {
			slot[k] = (uint32_t)s;
			w.keys[s] = o;
			set_bit(&w, o);
		}
	}
	for (Py_ssize_t t = 0; t < nt; t++) {
		uint32_t j = lookup(&w, (uintptr_t)PyList_GetItem(targets, t));
		if (j != NONE)
			occ[j]++;
	}
	if (mark(&w, marks, stops, M_STOP) || mark(&w, marks, skips, M_SKIP))
		goto done;
	w.marks = marks;
	/* the pass */
	for (Py_ssize_t k = 0; k < AHEAD && k < n; k++)
		ring[k] = PyList_GetItem(objs, k);
	for (; i < n; i++) {
		if ((i & 1023) == 0 && i) {
			if (i >= most) {
				stopped = "objects";
				break;
			}
			if (now() > deadline) {
				stopped = "time";
				break;
			}
		}
		PyObject *o = ring[i % AHEAD];
		if (i + AHEAD < n) { /* its type and first fields, ahead */
			ring[i % AHEAD] = PyList_GetItem(objs, i + AHEAD);
			PREFETCH(ring[i % AHEAD]);
		}
		if (slot[i] == NONE)
			continue;
		if (PyType_Check(o)) { /* a class: a root, named by Python */
			/* the edges to it seen so far are kept, as before */
			if (flush(&w))
				goto nomem;
			marks[slot[i]] |= M_STOP;
		}
		if (Py_TYPE(o) != last) {
			last = Py_TYPE(o);
			tr = (traverseproc)PyType_GetSlot(last, Py_tp_traverse);
		}
		if (!tr)
			continue;
		w.from = slot[i];
		tr(o, visit, &w);
		if (w.nomem)
			goto nomem;
	}
	if (flush(&w)) {
	nomem:
		PyErr_NoMemory();
		goto done;
	}
	if (!stopped && i >= most && i < n)
		stopped = "objects";
	tmp = big(w.n + 1, sizeof *tmp); /* touched to the most parents */
	queue = big(cap, sizeof *queue);
	if (!tmp || !queue) {
		PyErr_NoMemory();
		goto done;
	}
	/* the climb */
	for (Py_ssize_t t = 0; t < nt; t++) {
		uint32_t j = lookup(&w, (uintptr_t)PyList_GetItem(targets, t));
		if (j == NONE || (marks[j] & (M_SEEN | M_SKIP)))
			continue;
		marks[j] |= M_SEEN;
		queue[nq++] = j;
	}
	for (size_t q = 0; q < nq; q++) {
		uint32_t np = parents_of(&w, queue[q], tmp);
		for (uint32_t e = 0; e < np; e++) {
			uint32_t p = tmp[e];
			if (marks[p] & (M_SEEN | M_SKIP | M_STOP))
				continue;
			marks[p] |= M_SEEN;
			queue[nq++] = p;
		}
	}
	/* the tuples and the dict below could start a collection, whose
	 * finalizers would run user code and change the refcounts read */
	int was = PyGC_Disable();
	graph = build(&w, occ, marks, tmp, queue, nq);
	if (was)
		PyGC_Enable();
	if (graph)
		out = Py_BuildValue("(Nnns)", graph, i, n, stopped);
done:
	big_free(w.keys);
	big_free(w.bits);
	big_free(w.head);
	big_free(w.next);
	big_free(w.parent);
	big_free(slot);
	big_free(occ);
	big_free(marks);
	big_free(tmp);
	big_free(queue);
	return out;
}

PyObject *gpr_py_instance_dict(PyObject *module, PyObject *obj)
{
	(void)module;
	/* A static type's dict: its read-only proxy. From 3.12 a builtin
	 * one keeps it outside the type object (tp_dict NULL), where
	 * PyObject_GenericGetDict would put a new, empty one. */
	if (PyType_Check(obj) &&
	    !(PyType_GetFlags((PyTypeObject *)obj) & Py_TPFLAGS_HEAPTYPE)) {
		PyObject *p = PyObject_GetAttrString(obj, "__dict__");
		if (!p)
			PyErr_Clear();
		return p ? p : Py_NewRef(Py_None);
	}
	PyObject *d = PyObject_GenericGetDict(obj, NULL);
	if (!d) {
		PyErr_Clear();
		Py_RETURN_NONE;
	}
	return d;
}

PyObject *gpr_py_of_types(PyObject *module, PyObject *args)
{
	(void)module;
	PyObject *objs, *types;
	if (!PyArg_ParseTuple(args, "O!O!:of_types", &PyList_Type, &objs,
			      &PyTuple_Type, &types))
		return NULL;
	Py_ssize_t nt = PyTuple_Size(types);
	for (Py_ssize_t k = 0; k < nt; k++)
		if (!PyType_Check(PyTuple_GetItem(types, k)))
			return PyErr_Format(PyExc_TypeError,
					    "of_types: types must be classes");
	PyObject *out = PyList_New(0);
	Py_ssize_t n = PyList_Size(objs);
	PyTypeObject *last = NULL; /* objects of one type come in runs */
	int hit = 0;
	for (Py_ssize_t i = 0; out && i < n; i++) {
		PyObject *o = PyList_GetItem(objs, i);
		if (i + AHEAD < n) /* its type, AHEAD on */
			PREFETCH(PyList_GetItem(objs, i + AHEAD));
		if (Py_TYPE(o) != last) {
			last = Py_TYPE(o);
			hit = 0;
			for (Py_ssize_t k = 0; k < nt && !hit; k++)
				hit = PyType_IsSubtype(
				    last,
				    (PyTypeObject *)PyTuple_GetItem(types, k));
		}
		if (hit && PyList_Append(out, o))
			Py_CLEAR(out);
	}
	return out;
}
