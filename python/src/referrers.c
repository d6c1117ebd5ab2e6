/*
 * The heap walk of explain(holders=True) (gpureclaim/_explain/_holders.py): who
 * refers to a set of arrays, and who refers to those, up to the roots.
 *
 * heap(objects, stops, skips, budget_s, max_objects, groups[, threads])
 * makes one pass over objects (gc.get_objects() and the frames the caller
 * added), calling each object's tp_traverse, what gc.get_referents does:
 * no Python code runs (no __eq__, __hash__, property or __getattr__; a
 * pointer is the identity), so the walk cannot change what it walks. On
 * the way it picks out the objects whose types are subtypes of one of
 * each group's classes (a framework's arrays: no second read of the heap
 * for them). The pass is what costs (bound by memory: its lookups go in
 * prefetched batches). It holds the GIL throughout, so it stops once
 * budget_s seconds have gone or max_objects were traversed, and says how
 * far it got. It returns (heap, those objects by group, examined, total,
 * stopped, (index ms, pass ms)): examined of total objects traversed,
 * stopped None, "time" or "objects".
 *
 * The pass runs in up to `threads` threads, each over its share of the
 * objects, while this one holds the GIL (nothing else runs Python, and
 * collections are off): the others traverse only objects whose
 * tp_traverse is CPython's own and only reads (dicts, lists, tuples,
 * functions, cells, instances of Python classes over those...: safe_of()),
 * and leave the rest (classes, frames, modules, every extension's type,
 * whose traverse may do more than read) to this thread once they are done.
 *
 * climb(heap, targets), once per heap, climbs from the targets the caller
 * chose, breadth first, never past a stop (a root: a module's namespace,
 * a frame of a thread; every class is one too) and never through a skip
 * (the caller's own frames), and returns (graph, (climb ms, build ms)).
 * The objects' list must stay alive between the two calls (it holds what
 * the heap points to). graph maps id(node) of each node reached (targets
 * included, stops and skips not) to (ext, parents), parents a tuple with
 * one entry per reference (a dict holding it twice is there twice), ext
 * the references to the node from outside the objects traversed (its
 * refcount minus the edges found, minus the lists passed here): 0 for
 * every node of a group with no root means only garbage holds it; more
 * means C or C++ does.
 *
 * namespaces(sys.modules, roots) adds to roots (keyed by id) each
 * module's namespace not in it yet, as (its name, the namespace): the
 * loop over thousands of modules cost milliseconds in Python.
 *
 * Also instance_dict(obj) (PyObject_GenericGetDict: an instance's own
 * __dict__, never a property of that name, or None; a static type's
 * mappingproxy) and of_types(objects, types, threads) (the objects of
 * those types or their subtypes, PyType_IsSubtype: isinstance could ask a
 * proxy's __class__; the objects' types read in threads).
 */
#include "ext.h"

#include <pthread.h>
#include <sched.h>
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
	if (size && count > (SIZE_MAX - 2 * HUGE) / size)
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

/* a growable array of uint32_t, private to one thread (malloc: no GIL) */
struct u32s {
	uint32_t *v;
	size_t n, cap;
};

static int u32s_push(struct u32s *a, uint32_t x)
{
	if (a->n == a->cap) {
		size_t c = a->cap ? a->cap * 2 : 4096;
		uint32_t *v = realloc(a->v, c * sizeof *v);
		if (!v)
			return -1;
		a->v = v;
		a->cap = c;
	}
	a->v[a->n++] = x;
	return 0;
}

/*
 * Up to `threads` threads run fn(arg + k * size) for k < n, this one the
 * first; a thread that cannot be started has its share run here after.
 */
#define MAX_THREADS 16

static void *run_part(void *a)
{
	void **x = a;
	((void (*)(void *))x[0])(x[1]);
	return NULL;
}

static void in_threads(void (*fn)(void *), char *arg, size_t size, int n)
{
	pthread_t th[MAX_THREADS];
	void *args[MAX_THREADS][2];
	int started[MAX_THREADS] = {0};
	for (int k = 1; k < n; k++) {
		args[k][0] = (void *)fn;
		args[k][1] = arg + (size_t)k * size;
		started[k] =
		    pthread_create(&th[k], NULL, run_part, args[k]) == 0;
	}
	fn(arg);
	for (int k = 1; k < n; k++)
		if (started[k])
			pthread_join(th[k], NULL);
		else
			fn(arg + (size_t)k * size);
}

/* the threads to use for n objects: one below 64k (a thread costs more
 * than it saves), else at most `asked` (below 1: the CPUs this process may
 * run on, at most 8) and one per 32k objects */
static int threads_for(Py_ssize_t asked, Py_ssize_t n)
{
	if (asked < 1) {
		cpu_set_t set;
		asked = sched_getaffinity(0, sizeof set, &set) == 0
			    ? CPU_COUNT(&set)
			    : 1;
		if (asked > 8)
			asked = 8;
	}
	Py_ssize_t t = asked > MAX_THREADS ? MAX_THREADS : asked;
	if (n < 65536)
		return 1;
	if (t > n / 32768)
		t = n / 32768;
	return (int)t;
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
	uint8_t *marks; /* M_* by slot; written only while one thread runs */
	/* the edges to each object, a list from head[its slot]: the edge
	 * e+1's parent[e], the edge before it next[e] (0: none) */
	uint32_t *head, *next, *parent;
	size_t n;
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

/*
 * The index of a share of the objects, built by several threads at once:
 * a slot is taken with a compare-and-swap. occ[] counts each object's
 * places in the lists past its first (rare: its pages mostly stay
 * untouched), slot[] is NONE for a second place (traversed once).
 */
struct index_part {
	struct walk *w;
	PyObject *objs;
	uintptr_t *items;
	uint32_t *slot, *occ;
	size_t lo, hi;
};

static void index_range(void *a)
{
	struct index_part *p = a;
	struct walk *w = p->w;
	for (size_t k = p->lo; k < p->hi; k++) /* a list's read: no GIL */
		p->items[k] = (uintptr_t)PyList_GetItem(p->objs, (Py_ssize_t)k);
	for (size_t k = p->lo; k < p->hi; k++) {
		uintptr_t o = p->items[k];
		if (k + AHEAD < p->hi) {
			uintptr_t x = p->items[k + AHEAD];
			PREFETCH(&w->keys[(size_t)(mix(x) >> 20) & w->mask]);
			PREFETCH(&w->bits[bit_of(w, x) >> 6]);
		}
		size_t i = (size_t)(mix(o) >> 20) & w->mask;
		for (;;) {
			uintptr_t cur =
			    __atomic_load_n(&w->keys[i], __ATOMIC_RELAXED);
			if (!cur && __atomic_compare_exchange_n(
					&w->keys[i], &cur, o, 0,
					__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
				p->slot[k] = (uint32_t)i;
				size_t b = bit_of(w, o);
				__atomic_fetch_or(&w->bits[b >> 6],
						  1ull << (b & 63),
						  __ATOMIC_RELAXED);
				break;
			}
			if (cur == o) {
				p->slot[k] = NONE;
				__atomic_fetch_add(&p->occ[i], 1,
						   __ATOMIC_RELAXED);
				break;
			}
			i = (i + 1) & w->mask;
		}
	}
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

/*
 * The traverses another thread may call: CPython's own, which only read
 * the object (dict_traverse, list_traverse, func_traverse...), found from
 * the types that have them; a Python class's (subtype_traverse) when
 * every base below it has one of those or none.
 */
#define MAX_SAFE 40

struct safe {
	traverseproc tr[MAX_SAFE];
	int n;
	traverseproc subtype; /* a Python class's traverse */
};

static void safe_add(struct safe *s, PyObject *type)
{
	if (!type || !PyType_Check(type) || s->n == MAX_SAFE)
		return;
	traverseproc t =
	    (traverseproc)PyType_GetSlot((PyTypeObject *)type, Py_tp_traverse);
	for (int k = 0; t && k < s->n; k++)
		if (s->tr[k] == t)
			return;
	if (t)
		s->tr[s->n++] = t;
}

/* the types, by module and name (a missing one is left out) */
static const char *const SAFE_TYPES[][2] = {
    {"builtins", "dict"},
    {"builtins", "list"},
    {"builtins", "tuple"},
    {"builtins", "type"},
    {"builtins", "set"},
    {"builtins", "frozenset"},
    {"builtins", "property"},
    {"builtins", "staticmethod"},
    {"builtins", "classmethod"},
    {"builtins", "BaseException"},
    {"types", "FunctionType"},
    {"types", "CellType"},
    {"types", "MethodType"},
    {"types", "BuiltinFunctionType"},
    {"types", "GetSetDescriptorType"},
    {"types", "MemberDescriptorType"},
    {"types", "MethodDescriptorType"},
    {"types", "WrapperDescriptorType"},
    {"types", "MethodWrapperType"},
    {"types", "ClassMethodDescriptorType"},
    {"types", "MappingProxyType"},
    {"types", "GenericAlias"},
    {"types", "UnionType"},
    {"types", "SimpleNamespace"},
    {"weakref", "ref"},
    {"collections", "OrderedDict"},
    {"collections", "defaultdict"},
    {"collections", "deque"},
    {"functools", "partial"},
};

/* -1 with an error set */
static int safe_init(struct safe *s)
{
	memset(s, 0, sizeof *s);
	for (size_t k = 0; k < sizeof SAFE_TYPES / sizeof *SAFE_TYPES; k++) {
		PyObject *m = PyImport_ImportModule(SAFE_TYPES[k][0]);
		PyObject *t =
		    m ? PyObject_GetAttrString(m, SAFE_TYPES[k][1]) : NULL;
		if (!t)
			PyErr_Clear();
		safe_add(s, t);
		Py_XDECREF(t);
		Py_XDECREF(m);
	}
	/* subtype_traverse, from a class written in Python that is always
	 * there (else one made here, left to the collector) */
	PyObject *m = PyImport_ImportModule("types");
	PyObject *cls =
	    m ? PyObject_GetAttrString(m, "DynamicClassAttribute") : NULL;
	Py_XDECREF(m);
	if (!cls || !PyType_Check(cls) ||
	    !(PyType_GetFlags((PyTypeObject *)cls) & Py_TPFLAGS_HEAPTYPE)) {
		PyErr_Clear();
		Py_XDECREF(cls);
		cls = PyObject_CallFunction((PyObject *)&PyType_Type, "s()N",
					    "_gpr_probe", PyDict_New());
		if (!cls)
			return -1;
	}
	s->subtype =
	    (traverseproc)PyType_GetSlot((PyTypeObject *)cls, Py_tp_traverse);
	Py_DECREF(cls);
	return 0;
}

static int safe_tr(const struct safe *s, traverseproc t)
{
	for (int k = 0; k < s->n; k++)
		if (s->tr[k] == t)
			return 1;
	return 0;
}

/* whether another thread may traverse an object of type t (reads the
 * type only: no GIL needed) */
static int safe_of(const struct safe *s, PyTypeObject *t)
{
	traverseproc tr = (traverseproc)PyType_GetSlot(t, Py_tp_traverse);
	for (int depth = 0; tr && tr == s->subtype && depth < 64; depth++) {
		t = (PyTypeObject *)PyType_GetSlot(t, Py_tp_base);
		if (!t)
			return 1;
		tr = (traverseproc)PyType_GetSlot(t, Py_tp_traverse);
	}
	return !tr || safe_tr(s, tr);
}

/*
 * One thread's share of the pass: the places lo..hi of the objects (or of
 * list[], places), the edges found (child slot, parent slot, in the order
 * seen), the places left to the GIL's thread. `all`: traverse every type
 * and mark each class a stop (only while no other thread runs).
 */
/*
 * The types a caller asks the pass to pick out, by group (a framework's
 * array classes): an object is in group g when its type is a subtype of
 * one of g's. Each thread keeps each type's answers in a small table.
 */
#define MAX_GROUPS 8
#define MAX_WANT 32

struct want {
	PyTypeObject *type[MAX_WANT];
	int group[MAX_WANT];
	int n, groups;
};

struct type_info {
	PyTypeObject *type;
	traverseproc tr;
	uint8_t safe, groups;
};

struct part {
	struct type_info seen[256];
	struct walk *w;
	const struct safe *safe;
	const uintptr_t *items;
	const uint32_t *slot;
	const uint32_t *list;
	size_t lo, hi;
	int all;
	double deadline;
	size_t most; /* places to step through at most */
	struct u32s child, from, defer, classes;
	const struct want *want;       /* the types asked for, or NULL */
	struct u32s typed[MAX_GROUPS]; /* their objects' places, by group */
	size_t stepped; /* places stepped through, not left to another */
	int timeout, nomem;
	/* the references seen and not yet looked up, in the order seen:
	 * their bitmap words, then their slots, are prefetched a batch at a
	 * time, so the misses on the bitmap and the table overlap instead of
	 * costing one after the other */
	uint32_t cur;
	size_t np;
	uintptr_t pk[BATCH];
	uint32_t pf[BATCH];
	size_t pb[BATCH];
};

/* the edges of the references pending, in the order seen: those to no
 * object of the walk (an int, a str; a self-reference is one) and to a
 * stop (a root: the climb never goes up from one) dropped */
static int flush(struct part *p)
{
	const struct walk *w = p->w;
	size_t m = 0;
	for (size_t q = 0; q < p->np; q++) {
		size_t b = p->pb[q];
		if (!(w->bits[b >> 6] >> (b & 63) & 1))
			continue;
		size_t i = (size_t)(mix(p->pk[q]) >> 20) & w->mask;
		PREFETCH(&w->keys[i]);
		PREFETCH(&w->marks[i]);
		p->pk[m] = p->pk[q];
		p->pf[m] = p->pf[q];
		p->pb[m++] = i;
	}
	p->np = 0;
	for (size_t q = 0; q < m; q++) {
		size_t i = p->pb[q];
		uintptr_t k = p->pk[q];
		while (w->keys[i] && w->keys[i] != k)
			i = (i + 1) & w->mask;
		if (!w->keys[i] || (w->marks[i] & M_STOP))
			continue;
		if (u32s_push(&p->child, (uint32_t)i) ||
		    u32s_push(&p->from, p->pf[q])) {
			p->nomem = 1;
			return -1;
		}
	}
	return 0;
}

static int visit(PyObject *o, void *arg)
{
	struct part *p = arg;
	uintptr_t k = (uintptr_t)o;
	size_t b = bit_of(p->w, k);
	PREFETCH(&p->w->bits[b >> 6]);
	p->pk[p->np] = k;
	p->pf[p->np] = p->cur;
	p->pb[p->np] = b;
	return ++p->np == BATCH ? flush(p) : 0;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const struct type_info *type_info(struct part *p, PyTypeObject *t)
{
	struct type_info *e = &p->seen[(size_t)(mix((uintptr_t)t) >> 56)];
	if (e->type != t) {
		e->type = t;
		e->tr = (traverseproc)PyType_GetSlot(t, Py_tp_traverse);
		e->safe = (uint8_t)safe_of(p->safe, t);
		e->groups = 0;
		for (int k = 0; p->want && k < p->want->n; k++)
			if (PyType_IsSubtype(t, p->want->type[k]))
				e->groups |= (uint8_t)(1u << p->want->group[k]);
	}
	return e;
}

static void pass(void *arg)
{
	struct part *p = arg;
	size_t q = p->lo;
	for (; q < p->hi; q++) {
		if (((q - p->lo) & 1023) == 0 && q > p->lo) {
			if (q - p->lo >= p->most)
				break;
			if (now() > p->deadline) {
				p->timeout = 1;
				break;
			}
		}
		size_t i = p->list ? p->list[q] : q;
		if (q + AHEAD < p->hi) /* its type and first fields, ahead */
			PREFETCH((void *)p->items[p->list ? p->list[q + AHEAD]
							  : q + AHEAD]);
		if (p->slot[i] == NONE) {
			p->stepped++;
			continue;
		}
		PyObject *o = (PyObject *)p->items[i];
		const struct type_info *ti = type_info(p, Py_TYPE(o));
		traverseproc tr = ti->tr;
		if (tr && !ti->safe && !p->all) {
			if (u32s_push(&p->defer, (uint32_t)i))
				goto nomem;
			continue;
		}
		p->stepped++;
		for (int g = 0; ti->groups >> g; g++)
			if ((ti->groups >> g & 1) &&
			    u32s_push(&p->typed[g], (uint32_t)i))
				goto nomem;
		if (!tr)
			continue;
		if (PyType_Check(o)) { /* a class: a root */
			if (!p->all) { /* marked once the threads are done */
				if (u32s_push(&p->classes, p->slot[i]))
					goto nomem;
			} else {
				/* the edges to it seen so far are kept */
				if (flush(p))
					break;
				p->w->marks[p->slot[i]] |= M_STOP;
			}
		}
		p->cur = p->slot[i];
		tr(o, visit, p);
		if (p->nomem)
			break;
	}
	if (!p->nomem)
		flush(p);
	return;
nomem:
	p->nomem = 1;
}

static int mark(struct walk *w, PyObject *list, int bit)
{
	Py_ssize_t n = PyList_Size(list);
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *o = PyList_GetItem(list, i);
		if (!o)
			return -1;
		uint32_t j = lookup(w, (uintptr_t)o);
		if (j != NONE)
			w->marks[j] |= (uint8_t)bit;
	}
	return 0;
}

/*
 * The parts' edges into the lists from head[], in the parts' order: each
 * thread links the edges to the slots lo..hi (reading every edge, writing
 * only its own slots' lists and the entries of those edges).
 */
struct link_part {
	struct walk *w;
	const struct part *parts;
	int np;
	size_t lo, hi;
};

static void link_range(void *a)
{
	const struct link_part *l = a;
	struct walk *w = l->w;
	size_t e = 0;
	for (int k = 0; k < l->np; k++) {
		const uint32_t *c = l->parts[k].child.v;
		const uint32_t *f = l->parts[k].from.v;
		size_t n = l->parts[k].child.n;
		for (size_t q = 0; q < n; q++, e++) {
			if (q + AHEAD < n && c[q + AHEAD] >= l->lo &&
			    c[q + AHEAD] < l->hi)
				PREFETCH(&w->head[c[q + AHEAD]]);
			if (c[q] < l->lo || c[q] >= l->hi)
				continue;
			w->parent[e] = f[q];
			w->next[e] = w->head[c[q]];
			w->head[c[q]] = (uint32_t)(e + 1);
		}
	}
}

static int link_edges(struct walk *w, struct part *parts, int np, int nt)
{
	size_t total = 0;
	for (int k = 0; k < np; k++)
		total += parts[k].child.n;
	if (total >= UINT32_MAX)
		return -1;
	w->next = big(total + 1, sizeof *w->next);
	w->parent = big(total + 1, sizeof *w->parent);
	if (!w->next || !w->parent)
		return -1;
	struct link_part lp[MAX_THREADS];
	size_t slots = w->mask + 1;
	for (int k = 0; k < nt; k++)
		lp[k] = (struct link_part){
		    w, parts, np, slots * (size_t)k / (size_t)nt,
		    slots * (size_t)(k + 1) / (size_t)nt};
	in_threads(link_range, (char *)lp, sizeof *lp, nt);
	w->n = total;
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

static PyObject *build(const struct walk *w, uint32_t *occ, uint32_t *tmp,
		       const uint32_t *queue, size_t nq)
{
	const uint8_t *marks = w->marks;
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

/*
 * The pass over the places 0..n of items[], in nt threads (1: this one
 * alone, stepping through `most` places at most): parts[0..nt] are the
 * threads', parts[nt] the places they left, traversed here after. The
 * places stepped through, in *stepped; "time" or "objects" when cut.
 */
static int run_pass(struct walk *w, const struct safe *safe,
		    const struct want *want, const uintptr_t *items,
		    const uint32_t *slot, size_t n, size_t most,
		    double deadline, int nt, struct part *parts,
		    size_t *stepped, const char **stopped)
{
	for (int k = 0; k <= nt; k++) {
		struct part *p = &parts[k];
		p->w = w;
		p->safe = safe;
		p->want = want;
		p->items = items;
		p->slot = slot;
		p->deadline = deadline;
		p->most = SIZE_MAX;
		p->all = nt == 1;
		p->lo = n * (size_t)k / (size_t)nt;
		p->hi = n * (size_t)(k + 1) / (size_t)nt;
	}
	if (nt == 1) {
		parts[0].most = most;
		pass(&parts[0]);
	} else {
		in_threads(pass, (char *)parts, sizeof *parts, nt);
		for (int k = 0; k < nt; k++)
			for (size_t q = 0; q < parts[k].classes.n; q++)
				w->marks[parts[k].classes.v[q]] |= M_STOP;
		/* what they left: every class, frame, module and extension's
		 * object, in the order of their places */
		struct part *d = &parts[nt];
		size_t nd = 0;
		for (int k = 0; k < nt; k++)
			nd += parts[k].defer.n;
		d->list = malloc((nd + 1) * sizeof *d->list);
		if (!d->list)
			return -1;
		size_t at = 0;
		for (int k = 0; k < nt; k++) {
			if (parts[k].defer.n)
				memcpy((uint32_t *)d->list + at,
				       parts[k].defer.v,
				       parts[k].defer.n * sizeof *d->list);
			at += parts[k].defer.n;
		}
		d->lo = 0;
		d->hi = nd;
		d->all = 1;
		int cut = 0;
		for (int k = 0; k < nt; k++)
			cut |= parts[k].timeout;
		if (!cut)
			pass(d);
	}
	size_t sum = 0;
	int timeout = 0, nomem = 0;
	for (int k = 0; k <= nt; k++) {
		sum += parts[k].stepped;
		timeout |= parts[k].timeout;
		nomem |= parts[k].nomem;
	}
	if (nomem)
		return -1;
	*stepped = sum;
	*stopped = timeout ? "time" : sum < n ? "objects" : NULL;
	return link_edges(w, parts, nt + 1, nt);
}

static void parts_free(struct part *parts, int n)
{
	for (int k = 0; k < n; k++) {
		free(parts[k].child.v);
		free(parts[k].from.v);
		free(parts[k].defer.v);
		free(parts[k].classes.v);
		free((void *)parts[k].list);
		for (int g = 0; g < MAX_GROUPS; g++)
			free(parts[k].typed[g].v);
	}
}

/*
 * A pass's result, between the pass and the climb (a capsule: Python
 * code runs between them, which changes no edge the objects' list holds
 * alive, and only adds references that the climb counts then).
 */
struct heap {
	struct walk w;
	uintptr_t *items;
	uint32_t *slot, *occ;
	Py_ssize_t n;
	size_t cap, stepped;
	const char *stopped;
	double ms_index, ms_pass;
	int climbed;
};

static void heap_clear(struct heap *h)
{
	big_free(h->w.keys);
	big_free(h->w.bits);
	big_free(h->w.head);
	big_free(h->w.next);
	big_free(h->w.parent);
	big_free(h->w.marks);
	big_free(h->items);
	big_free(h->slot);
	big_free(h->occ);
	memset(&h->w, 0, sizeof h->w);
	h->items = NULL;
	h->slot = h->occ = NULL;
}

/* qsort's order of places */
static int by_place(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/*
 * The index and the pass over objs; with want, *typed gets a list per
 * group of its objects (in the list's order). NULL with an error set.
 */
static struct heap *heap_new(PyObject *objs, PyObject *stops, PyObject *skips,
			     double budget, Py_ssize_t most, Py_ssize_t threads,
			     const struct want *want, PyObject **typed)
{
	double t0 = now();
	double deadline = t0 + budget;
	Py_ssize_t n = PyList_Size(objs);
	if (n > (Py_ssize_t)(1u << 30)) {
		PyErr_SetString(PyExc_ValueError,
				"referrers: more than 2**30 objects");
		return NULL;
	}
	struct safe safe;
	if (safe_init(&safe))
		return NULL;
	int nt = most < n ? 1 : threads_for(threads, n);
	/* on the heap: a thread running Python may have a small stack */
	struct part *parts = calloc(MAX_THREADS + 1, sizeof *parts);
	struct heap *h = calloc(1, sizeof *h);
	if (!parts || !h) {
		free(parts);
		free(h);
		PyErr_NoMemory();
		return NULL;
	}
	struct walk *w = &h->w;
	size_t cap = 16, bcap = 1 << 12;
	while (cap < (size_t)n * 2)
		cap <<= 1;
	while (bcap < (size_t)n * 32)
		bcap <<= 1;
	h->n = n;
	h->cap = cap;
	w->mask = cap - 1;
	w->bmask = bcap - 1;
	w->keys = big(cap, sizeof *w->keys);
	w->bits = big(bcap / 64, sizeof *w->bits);
	w->head = big(cap, sizeof *w->head);
	w->marks = big(cap, 1);
	h->items = big((size_t)n + 1, sizeof *h->items);
	h->slot = big((size_t)n + 1, sizeof *h->slot);
	h->occ = big(cap, sizeof *h->occ);
	int was = PyGC_Disable(); /* see the threads' comment above */
	int ok = 0;
	if (!w->keys || !w->bits || !w->head || !w->marks || !h->items ||
	    !h->slot || !h->occ) {
		PyErr_NoMemory();
		goto done;
	}
	/* the index, in threads */
	int ni = threads_for(threads, n);
	struct index_part ix[MAX_THREADS];
	for (int k = 0; k < ni; k++)
		ix[k] = (struct index_part){w,
					    objs,
					    h->items,
					    h->slot,
					    h->occ,
					    (size_t)n * (size_t)k / (size_t)ni,
					    (size_t)n * (size_t)(k + 1) /
						(size_t)ni};
	in_threads(index_range, (char *)ix, sizeof *ix, ni);
	if (mark(w, stops, M_STOP) || mark(w, skips, M_SKIP))
		goto done;
	double t1 = now();
	if (run_pass(w, &safe, want, h->items, h->slot, (size_t)n,
		     most < 0 ? 0 : (size_t)most, deadline, nt, parts,
		     &h->stepped, &h->stopped)) {
		PyErr_NoMemory();
		goto done;
	}
	h->ms_index = (t1 - t0) * 1e3;
	h->ms_pass = (now() - t1) * 1e3;
	ok = 1;
	/* each group's objects, from every part, in the list's order */
	for (int g = 0; want && g < want->groups && ok; g++) {
		struct u32s all = {0};
		for (int k = 0; k <= nt && ok; k++)
			for (size_t q = 0; q < parts[k].typed[g].n && ok; q++)
				ok = !u32s_push(&all, parts[k].typed[g].v[q]);
		if (all.n)
			qsort(all.v, all.n, sizeof *all.v, by_place);
		PyObject *lst = ok ? PyList_New((Py_ssize_t)all.n) : NULL;
		for (size_t q = 0; lst && q < all.n; q++) {
			PyObject *o = (PyObject *)h->items[all.v[q]];
			Py_INCREF(o);
			PyList_SetItem(lst, (Py_ssize_t)q, o);
		}
		free(all.v);
		if (!lst) {
			if (!PyErr_Occurred())
				PyErr_NoMemory();
			ok = 0;
			break;
		}
		PyTuple_SetItem(*typed, g, lst);
	}
done:
	if (was)
		PyGC_Enable();
	parts_free(parts, nt + 1);
	free(parts);
	if (!ok) {
		heap_clear(h);
		free(h);
		return NULL;
	}
	return h;
}

/* the climb from the targets, and its graph (see the top); NULL with an
 * error set */
static PyObject *heap_climb(struct heap *h, PyObject *targets, double *ms)
{
	struct walk *w = &h->w;
	double t0 = now();
	Py_ssize_t nt = PyList_Size(targets);
	for (Py_ssize_t q = 0; q < nt; q++) {
		uint32_t j = lookup(w, (uintptr_t)PyList_GetItem(targets, q));
		if (j != NONE)
			h->occ[j]++;
	}
	uint32_t *tmp = big(w->n + 1, sizeof *tmp); /* the most parents */
	uint32_t *queue = big(h->cap, sizeof *queue);
	PyObject *graph = NULL;
	if (!tmp || !queue) {
		PyErr_NoMemory();
		goto done;
	}
	size_t nq = 0;
	for (Py_ssize_t q = 0; q < nt; q++) {
		uint32_t j = lookup(w, (uintptr_t)PyList_GetItem(targets, q));
		if (j == NONE || (w->marks[j] & (M_SEEN | M_SKIP)))
			continue;
		w->marks[j] |= M_SEEN;
		queue[nq++] = j;
	}
	for (size_t q = 0; q < nq; q++) {
		uint32_t np = parents_of(w, queue[q], tmp);
		for (uint32_t e = 0; e < np; e++) {
			uint32_t p = tmp[e];
			if (w->marks[p] & (M_SEEN | M_SKIP | M_STOP))
				continue;
			w->marks[p] |= M_SEEN;
			queue[nq++] = p;
		}
	}
	double t1 = now();
	/* the tuples and the dict below could start a collection, whose
	 * finalizers would run user code and change the refcounts read:
	 * collections stay off until they are made */
	int was = PyGC_Disable();
	graph = build(w, h->occ, tmp, queue, nq);
	if (was)
		PyGC_Enable();
	ms[0] = (t1 - t0) * 1e3;
	ms[1] = (now() - t1) * 1e3;
done:
	big_free(tmp);
	big_free(queue);
	return graph;
}

#define HEAP_CAPSULE "gpureclaim._heap"

static void heap_capsule_free(PyObject *cap)
{
	struct heap *h = PyCapsule_GetPointer(cap, HEAP_CAPSULE);
	if (h) {
		heap_clear(h);
		free(h);
	}
}

PyObject *gpr_py_heap(PyObject *module, PyObject *args)
{
	(void)module;
	PyObject *objs, *stops, *skips, *groups;
	double budget;
	Py_ssize_t most, threads = 0;
	if (!PyArg_ParseTuple(args, "O!O!O!dnO!|n:heap", &PyList_Type, &objs,
			      &PyList_Type, &stops, &PyList_Type, &skips,
			      &budget, &most, &PyTuple_Type, &groups, &threads))
		return NULL;
	struct want want = {0};
	want.groups = (int)PyTuple_Size(groups);
	if (want.groups > MAX_GROUPS)
		return PyErr_Format(PyExc_ValueError,
				    "heap: at most %d groups of types",
				    MAX_GROUPS);
	for (int g = 0; g < want.groups; g++) {
		PyObject *ts = PyTuple_GetItem(groups, g);
		Py_ssize_t nts = PyTuple_Check(ts) ? PyTuple_Size(ts) : -1;
		for (Py_ssize_t k = 0; k < nts; k++) {
			PyObject *t = PyTuple_GetItem(ts, k);
			if (!PyType_Check(t) || want.n == MAX_WANT)
				nts = -1;
			else {
				want.type[want.n] = (PyTypeObject *)t;
				want.group[want.n++] = g;
			}
		}
		if (nts < 0)
			return PyErr_Format(
			    PyExc_TypeError,
			    "heap: groups must be tuples of classes (%d in all "
			    "at most)",
			    MAX_WANT);
	}
	PyObject *typed = PyTuple_New(want.groups);
	if (!typed)
		return NULL;
	struct heap *h =
	    heap_new(objs, stops, skips, budget, most, threads, &want, &typed);
	if (!h) {
		Py_DECREF(typed);
		return NULL;
	}
	PyObject *cap = PyCapsule_New(h, HEAP_CAPSULE, heap_capsule_free);
	if (!cap) {
		heap_clear(h);
		free(h);
		Py_DECREF(typed);
		return NULL;
	}
	return Py_BuildValue("(NNnns(dd))", cap, typed, (Py_ssize_t)h->stepped,
			     h->n, h->stopped, h->ms_index, h->ms_pass);
}

PyObject *gpr_py_climb(PyObject *module, PyObject *args)
{
	(void)module;
	PyObject *cap, *targets;
	if (!PyArg_ParseTuple(args, "OO!:climb", &cap, &PyList_Type, &targets))
		return NULL;
	struct heap *h = PyCapsule_GetPointer(cap, HEAP_CAPSULE);
	if (!h)
		return NULL;
	if (h->climbed)
		return PyErr_Format(PyExc_ValueError,
				    "climb: this heap was climbed already");
	h->climbed = 1;
	double ms[2];
	PyObject *graph = heap_climb(h, targets, ms);
	heap_clear(h); /* its memory back now, not when the capsule goes */
	return graph ? Py_BuildValue("(N(dd))", graph, ms[0], ms[1]) : NULL;
}

PyObject *gpr_py_namespaces(PyObject *module, PyObject *args)
{
	(void)module;
	PyObject *mods, *roots;
	if (!PyArg_ParseTuple(args, "O!O!:namespaces", &PyDict_Type, &mods,
			      &PyDict_Type, &roots))
		return NULL;
	/* no Python code runs in this loop (a module's dict is its md_dict,
	 * the keys of roots are ints), so sys.modules cannot change under
	 * it */
	Py_ssize_t pos = 0;
	PyObject *name, *mod;
	while (PyDict_Next(mods, &pos, &name, &mod)) {
		if (!PyModule_Check(mod))
			continue;
		PyObject *d = PyModule_GetDict(mod);
		if (!d) {
			PyErr_Clear();
			continue;
		}
		PyObject *key = PyLong_FromVoidPtr(d);
		int has = key ? PyDict_Contains(roots, key) : -1;
		PyObject *pair = has == 0 ? PyTuple_Pack(2, name, d) : NULL;
		if (has == 0 && (!pair || PyDict_SetItem(roots, key, pair)))
			has = -1;
		Py_XDECREF(pair);
		Py_XDECREF(key);
		if (has < 0)
			return NULL;
	}
	Py_RETURN_NONE;
}

/*
 * A dict's entries as a list of (key, value) pairs, read in one go under
 * the GIL (issue 34): the naming of the chains (gpureclaim/_holders.py)
 * iterated dicts in Python, where another thread adding to one made the
 * walk fail ("dictionary changed size during iteration"), and looked keys
 * up, which hashes them (a key's own __hash__ and __eq__: user code).
 * PyDict_Next reads the table, hashing nothing, and works on a subclass's
 * table too, whatever its methods. Each pair's objects are held before
 * anything is allocated.
 */
PyObject *gpr_py_dict_items(PyObject *module, PyObject *d)
{
	(void)module;
	if (!PyDict_Check(d)) {
		PyErr_SetString(PyExc_TypeError, "_dict_items: a dict");
		return NULL;
	}
	PyObject *out = PyList_New(0), *k, *v;
	Py_ssize_t pos = 0;
	while (out && PyDict_Next(d, &pos, &k, &v)) {
		Py_INCREF(k);
		Py_INCREF(v);
		PyObject *pair = PyTuple_New(2);
		if (!pair) {
			Py_DECREF(k);
			Py_DECREF(v);
			Py_CLEAR(out);
			break;
		}
		PyTuple_SetItem(pair, 0, k); /* stolen */
		PyTuple_SetItem(pair, 1, v);
		if (PyList_Append(out, pair))
			Py_CLEAR(out);
		Py_DECREF(pair);
	}
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

struct types_part {
	PyObject *objs;
	uintptr_t *items;
	PyTypeObject **types;
	size_t lo, hi;
};

/* the objects and their types (reading a list and an object's first
 * fields needs no GIL) */
static void read_types(void *a)
{
	struct types_part *p = a;
	for (size_t q = p->lo; q < p->hi; q++)
		p->items[q] = (uintptr_t)PyList_GetItem(p->objs, (Py_ssize_t)q);
	for (size_t q = p->lo; q < p->hi; q++) {
		if (q + AHEAD < p->hi)
			PREFETCH((void *)p->items[q + AHEAD]);
		p->types[q] = Py_TYPE((PyObject *)p->items[q]);
	}
}

PyObject *gpr_py_of_types(PyObject *module, PyObject *args)
{
	(void)module;
	PyObject *objs, *types;
	Py_ssize_t threads = 0;
	if (!PyArg_ParseTuple(args, "O!O!|n:of_types", &PyList_Type, &objs,
			      &PyTuple_Type, &types, &threads))
		return NULL;
	Py_ssize_t nt = PyTuple_Size(types);
	for (Py_ssize_t k = 0; k < nt; k++)
		if (!PyType_Check(PyTuple_GetItem(types, k)))
			return PyErr_Format(PyExc_TypeError,
					    "of_types: types must be classes");
	Py_ssize_t n = PyList_Size(objs);
	uintptr_t *items = big((size_t)n + 1, sizeof *items);
	PyTypeObject **of = big((size_t)n + 1, sizeof *of);
	PyObject *out = items && of ? PyList_New(0) : PyErr_NoMemory();
	if (out) {
		int th = threads_for(threads, n);
		struct types_part parts[MAX_THREADS];
		for (int k = 0; k < th; k++)
			parts[k] = (struct types_part){
			    objs, items, of, (size_t)n * (size_t)k / (size_t)th,
			    (size_t)n * (size_t)(k + 1) / (size_t)th};
		in_threads(read_types, (char *)parts, sizeof *parts, th);
	}
	/* each type's answer, kept in a small table by its address (types
	 * come interleaved: asking PyType_IsSubtype for each object cost
	 * more than reading them) */
	struct {
		PyTypeObject *type;
		int hit;
	} seen[512] = {{0}};
	for (Py_ssize_t i = 0; out && i < n; i++) {
		size_t h = (size_t)(mix((uintptr_t)of[i]) >> 55);
		if (seen[h].type != of[i]) {
			int hit = 0;
			for (Py_ssize_t k = 0; k < nt && !hit; k++)
				hit = PyType_IsSubtype(
				    of[i],
				    (PyTypeObject *)PyTuple_GetItem(types, k));
			seen[h].type = of[i];
			seen[h].hit = hit;
		}
		if (seen[h].hit && PyList_Append(out, (PyObject *)items[i]))
			Py_CLEAR(out);
	}
	big_free(items);
	big_free(of);
	return out;
}
