/*
 * One recorded call, whichever front end saw it: at entry the caller, the
 * size a free gives back and the waiting-time reading; at exit one record
 * into the calling thread's ring. The call's arguments arrive as CUPTI
 * lays them out (cupti_abi.h: one member per argument of the cuda.h
 * prototype), which is also how the interposer's wrappers pass theirs,
 * so fill() reads both alike.
 *
 * The hot path allocates nothing and takes no lock; it reads the shared
 * state, the thread's own state, the size maps and, for the device of an
 * allocation, the driver's current context (a few nanoseconds; a free
 * takes its allocation's device from the size map instead).
 */
#include "recorder.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../format/trace_ops.h"
#include "cupti_abi.h"
#include "callers.h"
#include "clock.h"
#include "dl.h"
#include "sizes.h"
#include "wait.h"
#include "writer.h"

/*
 * The driver's functions the record asks, from the libcuda loaded now;
 * both NULL until one is found. Stored as a pair of atomics: the
 * interposer finds them again when the driver is loaded anew.
 */
typedef CUresult (*ctx_get_current_fn)(CUcontext *);
typedef CUresult (*ctx_get_device_fn)(CUdevice *);
static struct {
	_Atomic(ctx_get_current_fn) ctx_get_current;
	_Atomic(ctx_get_device_fn) ctx_get_device;
	_Atomic unsigned misses; /* recorded calls without them */
} drv;

void gpr_inj_rec_driver(const void *in)
{
	const char *lib = NULL;
	Dl_info di;
	if (in && dladdr(in, &di) && di.dli_fname)
		lib = di.dli_fname;
	const char *cuda = secure_getenv("GPURECLAIM_CUDA_LIBRARY");
	if (!lib)
		lib = cuda && *cuda ? cuda : "libcuda.so.1";
	/* a reference for the look-up only: the program's dlclose unloads */
	void *cu = dlopen(lib, RTLD_NOLOAD | RTLD_LAZY);
	if (!cu)
		return;
	ctx_get_current_fn cur;
	ctx_get_device_fn dev;
	*(void **)&cur = gpr_inj_real_dlsym(cu, "cuCtxGetCurrent");
	*(void **)&dev = gpr_inj_real_dlsym(cu, "cuCtxGetDevice");
	dlclose(cu);
	if (!dev)
		return;
	gpr_inj_callsite_exclude((const void *)dev);
	atomic_store(&drv.ctx_get_current, cur);
	atomic_store(&drv.ctx_get_device, dev);
}

/* The device of ctx (NULL: the thread's current context), cached per
 * thread for its last four contexts. */
static int device_of(struct gpr_inj_tt *tt, CUcontext ctx)
{
	ctx_get_device_fn get_device =
	    atomic_load_explicit(&drv.ctx_get_device, memory_order_acquire);
	if (__builtin_expect(!get_device, 0)) {
		/* a session begun before the driver was loaded (CUPTI: its
		 * callbacks come from inside it): look again, now and then */
		if ((atomic_fetch_add(&drv.misses, 1) & 1023) == 0)
			gpr_inj_rec_driver(NULL);
		get_device = atomic_load(&drv.ctx_get_device);
		if (!get_device)
			return GPR_TRACE_NO_DEVICE;
	}
	if (!ctx) {
		ctx_get_current_fn cur = atomic_load_explicit(
		    &drv.ctx_get_current, memory_order_relaxed);
		if (!cur || cur(&ctx) != CUDA_SUCCESS || !ctx)
			return GPR_TRACE_NO_DEVICE;
	}
	for (int i = 0; i < 4; i++)
		if (tt->ctx_key[i] == (void *)ctx)
			return tt->ctx_dev[i];
	CUdevice d;
	if (get_device(&d) != CUDA_SUCCESS)
		return GPR_TRACE_NO_DEVICE;
	unsigned i = tt->ctx_next++ & 3;
	tt->ctx_key[i] = ctx;
	tt->ctx_dev[i] = d;
	return d;
}

/* The size map a kind's memory is kept in (trace_ops.h: NEW/END_ADDR are
 * keyed by the record's addr, NEW/END_HANDLE by its aux). */
static int map_of(enum gpr_trace_memory m)
{
	return m == GPR_MEMORY_NEW_HANDLE || m == GPR_MEMORY_END_HANDLE
		   ? GPR_MAP_HANDLE
		   : GPR_MAP_ADDR;
}

/* The address or handle whose memory a call of an END_* kind ends. */
static uint64_t ended_key(int op, const void *p)
{
	switch (op) {
	case GPR_OP_MEM_FREE:
		return ((const cuMemFree_v2_params *)p)->dptr;
	case GPR_OP_MEM_FREE_ASYNC:
		return ((const cuMemFreeAsync_params *)p)->dptr;
	case GPR_OP_MEM_FREE_HOST:
		return (uintptr_t)((const cuMemFreeHost_params *)p)->p;
	case GPR_OP_MEM_RELEASE:
		return ((const cuMemRelease_params *)p)->handle;
	}
	return 0;
}

/*
 * What the live query (gpureclaim_trace_live) calls memory a call makes:
 * 0 device, 1 host pinned, 2 VMM physical, 3 stream-ordered (a pool).
 */
static int live_kind(int op, enum gpr_trace_kind k)
{
	if (k == GPR_K_HOST_ALLOC)
		return 1;
	if (k == GPR_K_CREATE)
		return 2;
	return op == GPR_OP_MEM_ALLOC_ASYNC ||
		       op == GPR_OP_MEM_ALLOC_FROM_POOL_ASYNC
		   ? 3
		   : 0;
}

void gpr_inj_rec_selftime(struct gpr_inj_tt *tt, uint64_t ticks)
{
	uint64_t ns = gpr_inj_ticks_ns_fast(ticks);
	gpr_inj_st_add(&tt->st.calls, 1);
	gpr_inj_st_add(&tt->st.ns, ns);
	uint64_t b = ns / 4;
	_Atomic uint32_t *h =
	    &tt->st.hist[b < GPR_SELF_BINS ? b : GPR_SELF_BINS];
	atomic_store_explicit(h,
			      atomic_load_explicit(h, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

void gpr_inj_rec_enter(struct gpr_inj_tt *tt, struct gpr_inj_inflight *f,
		       int op, const void *params)
{
	/* the parts cost clock reads of their own: only when asked */
	int parts = gpr_inj_state.selftime == GPR_INJ_SELFTIME_PARTS;
	uint64_t t = parts ? gpr_inj_stamp() : 0;
	int how = gpr_inj_callsite(tt, &f->ip);
	if (parts)
		gpr_inj_st_add(&tt->st.walk_ns, gpr_inj_stamp() - t);
	if (gpr_inj_state.selftime)
		gpr_inj_st_add(how == GPR_WALK_FAST ? &tt->st.fast
						    : &tt->st.full,
			       how != GPR_WALK_NONE);
	/*
	 * A free's size leaves the map before the driver frees, so another
	 * thread that gets the same address back cannot lose its entry.
	 */
	enum gpr_trace_memory m =
	    gpr_trace_kind_info(gpr_trace_op_kind_of((unsigned)op)).memory;
	f->size = 0;
	f->meta = 0;
	if (m == GPR_MEMORY_END_ADDR || m == GPR_MEMORY_END_HANDLE)
		f->size = gpr_inj_map_take(map_of(m), ended_key(op, params),
					   &f->meta);
	f->size_found = f->size != 0;
	if (parts)
		t = gpr_inj_stamp();
	gpr_inj_wait_enter(tt, &f->wait);
	f->t0 = gpr_inj_stamp();
	if (parts)
		gpr_inj_st_add(&tt->st.wait_ns, f->t0 - t);
}

/* Fills the operation's own fields and keeps the size maps. */
static void fill(int op, const void *p, int ok, struct gpr_trace_rec *r,
		 const struct gpr_inj_inflight *f)
{
	switch (op) {
	case GPR_OP_MEM_ALLOC: {
		const cuMemAlloc_v2_params *a = p;
		r->bytes = a->bytesize;
		if (ok && a->dptr)
			r->addr = *a->dptr;
		break;
	}
	case GPR_OP_MEM_ALLOC_PITCH: {
		const cuMemAllocPitch_v2_params *a = p;
		r->bytes = a->WidthInBytes * a->Height;
		if (ok && a->pPitch)
			r->bytes = *a->pPitch * a->Height;
		if (ok && a->dptr)
			r->addr = *a->dptr;
		break;
	}
	case GPR_OP_MEM_ALLOC_MANAGED: {
		const cuMemAllocManaged_params *a = p;
		r->bytes = a->bytesize;
		if (ok && a->dptr)
			r->addr = *a->dptr;
		break;
	}
	case GPR_OP_MEM_ALLOC_ASYNC: {
		const cuMemAllocAsync_params *a = p;
		r->bytes = a->bytesize;
		r->aux = (uintptr_t)a->hStream;
		if (ok && a->dptr)
			r->addr = *a->dptr;
		break;
	}
	case GPR_OP_MEM_ALLOC_FROM_POOL_ASYNC: {
		const cuMemAllocFromPoolAsync_params *a = p;
		r->bytes = a->bytesize;
		r->aux = (uintptr_t)a->pool;
		if (ok && a->dptr)
			r->addr = *a->dptr;
		break;
	}
	case GPR_OP_MEM_HOST_ALLOC:
	case GPR_OP_MEM_ALLOC_HOST: {
		const cuMemHostAlloc_params *a = p;
		r->bytes = a->bytesize;
		if (ok && a->pp)
			r->addr = (uintptr_t)*a->pp;
		break;
	}
	case GPR_OP_MEM_FREE:
		r->addr = ((const cuMemFree_v2_params *)p)->dptr;
		break;
	case GPR_OP_MEM_FREE_ASYNC:
		r->addr = ((const cuMemFreeAsync_params *)p)->dptr;
		r->aux = (uintptr_t)((const cuMemFreeAsync_params *)p)->hStream;
		break;
	case GPR_OP_MEM_FREE_HOST:
		r->addr = (uintptr_t)((const cuMemFreeHost_params *)p)->p;
		break;
	case GPR_OP_MEM_RELEASE:
		r->aux = ((const cuMemRelease_params *)p)->handle;
		break;
	case GPR_OP_MEM_POOL_TRIM_TO: {
		const cuMemPoolTrimTo_params *a = p;
		r->aux = (uintptr_t)a->pool;
		r->bytes = a->minBytesToKeep;
		break;
	}
	case GPR_OP_MEM_CREATE: {
		const cuMemCreate_params *a = p;
		r->bytes = a->size;
		if (ok && a->handle)
			r->aux = *a->handle;
		if (a->prop &&
		    a->prop->location.type == GPR_CU_MEM_LOCATION_TYPE_DEVICE)
			r->device = (int16_t)a->prop->location.id;
		else if (a->prop && a->prop->location.type >=
					GPR_CU_MEM_LOCATION_TYPE_HOST) {
			/* host memory through VMM (NCCL): no device's */
			r->device = GPR_TRACE_NO_DEVICE;
			r->flags |= GPR_TRACE_R_HOST;
		}
		break;
	}
	case GPR_OP_MEM_MAP: {
		const cuMemMap_params *a = p;
		r->addr = a->ptr;
		r->bytes = a->size;
		r->aux = a->handle;
		break;
	}
	case GPR_OP_MEM_UNMAP:
		r->addr = ((const cuMemUnmap_params *)p)->ptr;
		r->bytes = ((const cuMemUnmap_params *)p)->size;
		break;
	case GPR_OP_MEM_ADDRESS_RESERVE: {
		const cuMemAddressReserve_params *a = p;
		r->bytes = a->size;
		if (ok && a->ptr)
			r->addr = *a->ptr;
		break;
	}
	case GPR_OP_MEM_ADDRESS_FREE:
		r->addr = ((const cuMemAddressFree_params *)p)->ptr;
		r->bytes = ((const cuMemAddressFree_params *)p)->size;
		break;
	}
	enum gpr_trace_kind k = gpr_trace_op_kind_of((unsigned)op);
	enum gpr_trace_memory m = gpr_trace_kind_info(k).memory;
	uint64_t key = map_of(m) == GPR_MAP_HANDLE ? r->aux : r->addr;
	switch (m) {
	case GPR_MEMORY_END_ADDR:
	case GPR_MEMORY_END_HANDLE:
		/* the size the allocation recorded */
		r->bytes = f->size;
		r->flags |= f->size_found ? GPR_TRACE_R_SIZE_MAP
					  : GPR_TRACE_R_SIZE_NONE;
		if (!ok && f->size_found) /* still allocated */
			gpr_inj_map_put(map_of(m), key, f->size, f->ip,
					f->meta);
		break;
	case GPR_MEMORY_NEW_ADDR:
	case GPR_MEMORY_NEW_HANDLE: {
		if (!ok)
			break;
		int host =
		    k == GPR_K_HOST_ALLOC || (r->flags & GPR_TRACE_R_HOST) != 0;
		gpr_inj_map_put(
		    map_of(m), key, r->bytes, f->ip,
		    GPR_INJ_META(host ? -1 : r->device, live_kind(op, k)));
		break;
	}
	case GPR_MEMORY_NONE:
		break;
	}
}

void gpr_inj_rec_exit(struct gpr_inj_tt *tt, struct gpr_inj_inflight *f, int op,
		      const void *params, CUresult res, CUcontext ctx)
{
	uint64_t t1 = gpr_inj_stamp();
	uint64_t wait = 0;
	int waited = gpr_inj_wait_exit(tt, &f->wait, &wait);
	if (gpr_inj_state.selftime == GPR_INJ_SELFTIME_PARTS)
		gpr_inj_st_add(&tt->st.wait_ns, gpr_inj_stamp() - t1);
	struct gpr_inj_slot *slot = gpr_inj_tt_slot(tt);
	struct gpr_inj_slot lost; /* a full ring: the maps are still kept */
	struct gpr_inj_slot *s = slot ? slot : &lost;
	struct gpr_trace_rec *r = &s->r;
	memset(r, 0, sizeof(*r));
	s->ip = f->ip;
	f->t1 = t1;
	r->t_ns = f->t0;
	r->dur_ns = t1 - f->t0;
	if (waited) {
		r->wait_ns = wait;
		r->flags |= GPR_TRACE_R_WAIT;
	}
	r->tid = tt->tid;
	r->op = (uint32_t)op;
	r->lib = r->site = GPR_TRACE_NO_STRING;
	r->result = res;
	/* a free's device is its allocation's */
	r->device = (int16_t)(f->size_found ? GPR_INJ_META_DEVICE(f->meta)
					    : device_of(tt, ctx));
	fill(op, params, res == CUDA_SUCCESS, r, f);
	if (!slot) {
		gpr_inj_writer_wake();
		return;
	}
	if (gpr_inj_tt_push(tt))
		gpr_inj_writer_wake();
}

void gpr_inj_rec_event(struct gpr_inj_tt *tt, int op, CUcontext ctx, int device)
{
	uintptr_t ip;
	gpr_inj_callsite(tt, &ip);
	struct gpr_inj_slot *s = gpr_inj_tt_slot(tt);
	if (!s)
		return;
	struct gpr_trace_rec *r = &s->r;
	memset(r, 0, sizeof(*r));
	s->ip = ip;
	r->t_ns = gpr_inj_stamp();
	r->tid = tt->tid;
	r->op = (uint32_t)op;
	r->aux = (uintptr_t)ctx;
	r->lib = r->site = GPR_TRACE_NO_STRING;
	r->device = (int16_t)device;
	if (gpr_inj_tt_push(tt))
		gpr_inj_writer_wake();
}
