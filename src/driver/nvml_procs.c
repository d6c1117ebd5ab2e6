/*
 * Process lists of one GPU. Three driver quirks meet here (docs/abi.md):
 * the list can grow between the count and the copy (grow and retry on
 * NVML_ERROR_INSUFFICIENT_SIZE); the record is 24 bytes on current drivers
 * but 32 on some R535 ones, with nothing in the API to say which (detected
 * from the bytes the call wrote, then cached in m->stride); and a process
 * using CUDA and graphics appears in both lists.
 */
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "gpureclaim.h"
#include "loader.h"
#include "nvml_int.h"

#define STRIDE_V2 ((int)sizeof(gpr_nvmlProcessInfo_v2_t)) /* 24 */
#define STRIDE_CC ((int)sizeof(gpr_nvmlProcessInfo_cc_t)) /* 32 */
#define SENTINEL 0xA5
#define FIRST_GUESS 16u /* records: covers nearly every real GPU */
#define MAX_ROUNDS 8
#define MAX_RECORDS 65536u   /* beyond this the count is garbage */
#define PID_LIMIT (1u << 22) /* the kernel's PID_MAX_LIMIT */
/* the sim's foreign-pid fault adds 1000000 to host pids */
#define FOREIGN_PID_LIMIT (PID_LIMIT + 1000000u)

_Static_assert(sizeof(gpr_nvmlProcessInfo_v2_t) == 24, "v2 record");
_Static_assert(sizeof(gpr_nvmlProcessInfo_cc_t) == 32, "cc record");

typedef nvmlReturn_t (*procs_fn)(nvmlDevice_t, unsigned int *, void *);

struct record {
	uint32_t pid;
	uint64_t bytes;
	uint32_t gi, ci;
};

/* Both layouts begin with the v2 record, so only the stride differs. */
static struct record decode(const unsigned char *buf, int stride,
			    unsigned int i)
{
	gpr_nvmlProcessInfo_v2_t p;
	memcpy(&p, buf + (size_t)i * (size_t)stride, sizeof p);
	struct record r = {p.pid, p.usedGpuMemory, p.gpuInstanceId,
			   p.computeInstanceId};
	return r;
}

static int plausible(const unsigned char *buf, unsigned int n, int stride)
{
	for (unsigned int i = 0; i < n; i++) {
		struct record r = decode(buf, stride, i);
		if (r.pid == 0 || r.pid >= FOREIGN_PID_LIMIT)
			return 0;
		if (r.gi != 0xFFFFFFFFu && r.gi >= 64)
			return 0;
		if (r.ci != 0xFFFFFFFFu && r.ci >= 64)
			return 0;
		if (r.bytes != GPR_NVML_VALUE_NOT_AVAILABLE &&
		    r.bytes >= (1ULL << 48))
			return 0;
	}
	return 1;
}

/*
 * A 24-byte writer leaves bytes [24n, 32n) of the pre-filled buffer
 * untouched; a 32-byte writer overwrites them with record data.
 */
static int sentinel_stride(const unsigned char *buf, unsigned int n)
{
	for (size_t i = (size_t)STRIDE_V2 * n; i < (size_t)STRIDE_CC * n; i++)
		if (buf[i] != SENTINEL)
			return STRIDE_CC;
	return STRIDE_V2;
}

/*
 * The stride of n >= 1 records in buf. One record decodes the same with
 * either stride, so only n >= 2 decides, and only a decision that both the
 * sentinel and the plausibility check support (or plausibility alone when
 * exactly one stride passes) is cached.
 */
static int stride_of(struct gpr__nvml *m, const unsigned char *buf,
		     unsigned int n)
{
	int cached = __atomic_load_n(&m->stride, __ATOMIC_RELAXED);
	if (cached && plausible(buf, n, cached))
		return cached;
	int guess = sentinel_stride(buf, n);
	if (n < 2)
		return guess;
	int other = guess == STRIDE_V2 ? STRIDE_CC : STRIDE_V2;
	int decided = 0;
	if (plausible(buf, n, guess))
		decided = guess;
	else if (plausible(buf, n, other))
		decided = other;
	if (!decided)
		return guess;
	__atomic_store_n(&m->stride, decided, __ATOMIC_RELAXED);
	return decided;
}

/* One list into malloc'ed *recs (*n records, decoded), or an error. */
static int fetch(struct gpr__nvml *m, nvmlDevice_t dev, int index,
		 const char *what, procs_fn fn, procs_fn fallback,
		 struct record **recs, unsigned int *n, char *err,
		 size_t errlen)
{
	*recs = NULL;
	*n = 0;
	unsigned int cap = FIRST_GUESS, count = 0;
	unsigned char *buf = NULL;
	int rounds = 0;
	nvmlReturn_t r = NVML_ERROR_UNKNOWN;
	for (; rounds < MAX_ROUNDS; rounds++) {
		size_t size = (size_t)cap * STRIDE_CC;
		unsigned char *grown = realloc(buf, size);
		if (!grown) {
			free(buf);
			gpr__errf(err, errlen, "out of memory");
			return GPR_E_NOMEM;
		}
		buf = grown;
		memset(buf, SENTINEL, size);
		count = cap;
		double t0 = gpr__nvml_step_start(m);
		r = fn(dev, &count, buf);
		gpr__nvml_step_end(m, what, index, t0, r);
		if (r == NVML_SUCCESS)
			break;
		if (r == NVML_ERROR_FUNCTION_NOT_FOUND && fallback &&
		    fallback != fn) {
			/* a _v3 the driver lists but does not implement */
			fn = fallback;
			continue;
		}
		if (r != NVML_ERROR_INSUFFICIENT_SIZE) {
			free(buf);
			return gpr__nvml_fail(m, what, index, r, err, errlen);
		}
		/* the list grew between NVML's count and its copy */
		unsigned int want = count + count / 4 + 8;
		if (count > MAX_RECORDS || want > MAX_RECORDS) {
			free(buf);
			gpr__errf(err, errlen,
				  "%s on GPU %d: implausible count %u", what,
				  index, count);
			return GPR_E_NVML;
		}
		cap = want > cap ? want : cap * 2;
	}
	if (r != NVML_SUCCESS) {
		free(buf);
		gpr__errf(err, errlen,
			  "%s on GPU %d: still NVML_ERROR_INSUFFICIENT_SIZE "
			  "after %d rounds (last count %u)",
			  what, index, MAX_ROUNDS, count);
		return GPR_E_NVML;
	}
	if (count > cap) {
		free(buf);
		gpr__errf(err, errlen,
			  "%s on GPU %d: %u records reported in room for %u",
			  what, index, count, cap);
		return GPR_E_NVML;
	}
	if (count == 0) {
		free(buf);
		return 0;
	}
	int stride = stride_of(m, buf, count);
	struct record *out = calloc(count, sizeof *out);
	if (!out) {
		free(buf);
		gpr__errf(err, errlen, "out of memory");
		return GPR_E_NOMEM;
	}
	for (unsigned int i = 0; i < count; i++)
		out[i] = decode(buf, stride, i);
	free(buf);
	*recs = out;
	*n = count;
	return 0;
}

static uint64_t add(uint64_t a, uint64_t b)
{
	if (a == GPR_NVML_VALUE_NOT_AVAILABLE ||
	    b == GPR_NVML_VALUE_NOT_AVAILABLE)
		return GPR_NVML_VALUE_NOT_AVAILABLE;
	return a + b;
}

static struct gpr__nvml_proc *find(struct gpr__nvml_proc *p, size_t n,
				   uint32_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (p[i].pid == pid)
			return &p[i];
	return NULL;
}

/*
 * Adds one list's records to out (room for all records of both lists).
 * Within a list a pid's records are summed (one per MIG instance); across
 * lists the larger figure is kept: the driver reports the same process
 * memory in each list it appears in.
 */
static void merge(struct gpr__nvml_proc *out, size_t *n,
		  const struct record *recs, unsigned int nrecs, int graphics)
{
	size_t first = *n; /* pids added by this list start here */
	for (unsigned int i = 0; i < nrecs; i++) {
		struct gpr__nvml_proc *p =
		    find(out + first, *n - first, recs[i].pid);
		if (p) {
			p->bytes = add(p->bytes, recs[i].bytes);
			continue;
		}
		p = &out[(*n)++];
		memset(p, 0, sizeof *p);
		p->pid = recs[i].pid;
		p->bytes = recs[i].bytes;
	}
	for (size_t i = first; i < *n; i++) {
		struct gpr__nvml_proc *q = find(out, first, out[i].pid);
		if (!q) {
			out[i].compute = !graphics;
			out[i].graphics = graphics;
			continue;
		}
		/* seen in the other list: fold into that entry */
		if (q->bytes == GPR_NVML_VALUE_NOT_AVAILABLE ||
		    out[i].bytes == GPR_NVML_VALUE_NOT_AVAILABLE)
			q->bytes = GPR_NVML_VALUE_NOT_AVAILABLE;
		else if (out[i].bytes > q->bytes)
			q->bytes = out[i].bytes;
		q->graphics |= graphics;
		q->compute |= !graphics;
		out[i].pid = 0; /* removed below */
	}
	size_t w = first;
	for (size_t i = first; i < *n; i++)
		if (out[i].pid)
			out[w++] = out[i];
	*n = w;
}

int gpr__nvml_processes(struct gpr__nvml *m, int index,
			struct gpr__nvml_proc **out, size_t *n, char *err,
			size_t errlen)
{
	*out = NULL;
	*n = 0;
	nvmlDevice_t dev;
	int e = gpr__nvml_handle(m, index, &dev, err, errlen);
	if (e)
		return e;
	if (!m->api.device_get_compute_procs) {
		gpr__errf(err, errlen,
			  "%s exports no nvmlDeviceGetComputeRunningProcesses "
			  "(_v3 or _v2)",
			  m->path);
		return GPR_E_NVML;
	}
	struct record *c = NULL, *g = NULL;
	unsigned int nc = 0, ng = 0;
	e = fetch(m, dev, index, "nvmlDeviceGetComputeRunningProcesses",
		  m->api.device_get_compute_procs,
		  m->api.device_get_compute_procs_v2, &c, &nc, err, errlen);
	if (!e && m->api.device_get_graphics_procs)
		e = fetch(
		    m, dev, index, "nvmlDeviceGetGraphicsRunningProcesses",
		    m->api.device_get_graphics_procs,
		    m->api.device_get_graphics_procs_v2, &g, &ng, err, errlen);
	if (e) {
		free(c);
		return e;
	}
	struct gpr__nvml_proc *p = NULL;
	size_t np = 0;
	if (nc + ng) {
		p = calloc((size_t)nc + ng, sizeof *p);
		if (!p) {
			free(c);
			free(g);
			gpr__errf(err, errlen, "out of memory");
			return GPR_E_NOMEM;
		}
		merge(p, &np, c, nc, 0);
		merge(p, &np, g, ng, 1);
	}
	free(c);
	free(g);
	if (np == 0) {
		free(p);
		p = NULL;
	}
	*out = p;
	*n = np;
	return 0;
}
