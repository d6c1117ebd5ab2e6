/*
 * libgpureclaim_trace.so: a CUPTI injection library. Lifecycle:
 *
 *   CUDA_INJECTION64_PATH names this file; libcuda loads it during cuInit
 *   and calls InitializeInjection() (once, guarded by pthread_once). We
 *   dlopen libcupti ($GPURECLAIM_CUPTI_LIBRARY, else the usual names),
 *   subscribe, create the log ($GPURECLAIM_TRACE_OUTPUT, else
 *   ./gpureclaim-<pid>.trace), start the writer thread and enable the
 *   driver-API callbacks of the memory calls plus context creation and
 *   destruction. From then on each call is timed between its enter and
 *   exit callbacks and one record goes into the calling thread's ring.
 *   The writer flushes at exit and on SIGINT/SIGTERM (inject_writer.c).
 *
 * Only the driver layer is recorded: the runtime (cudaMalloc) calls the
 * driver (cuMemAlloc_v2), so recording both would count each allocation
 * twice; the runtime's own frames are skipped when looking for the caller.
 *
 * Any failure prints one "gpureclaim-trace: ..." line and leaves the
 * program running untraced; this library never exits or aborts.
 *
 * A setuid or setgid program (secure execution, AT_SECURE) is never
 * traced: its environment belongs to the user who started it, and the
 * paths in it would make this library load code and create files with
 * the program's privileges. Paths are also read with secure_getenv.
 */
#include "inject.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "cupti_abi.h"
#include "gpureclaim_trace.h"

#define GPR_EXPORT __attribute__((visibility("default")))

static struct {
	void *lib;
	CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc,
				 void *);
	CUptiResult (*subscribe_v2)(CUpti_SubscriberHandle *,
				    CUpti_CallbackFunc, void *,
				    CUpti_SubscriberParams *);
	CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
	CUptiResult (*enable_callback)(uint32_t, CUpti_SubscriberHandle,
				       CUpti_CallbackDomain, CUpti_CallbackId);
	CUptiResult (*result_string)(CUptiResult, const char **);
	CUresult (*ctx_get_device)(CUdevice *);
	CUpti_SubscriberHandle sub;
} api;

/* The CUPTI callback id of a GPR_TRACE_OPS row (trace_ops.h). */
#define CBID_DRIVER_API(name) CUPTI_DRIVER_TRACE_CBID_##name
#define CBID_RESOURCE(name) CUPTI_CBID_RESOURCE_##name
#define CBID(domain, name) CBID_##domain(name)

/* The two CUPTI domains the table uses, as indexes of op_of_cbid. */
#define DOM_DRIVER_API 0
#define DOM_RESOURCE 1

/* cbid -> op + 1 (0: not traced), per domain; cbids are small integers. */
#define MAX_CBID 1024
#define GPR_X_OP(op, name, kind, domain, cbid, cbid2)                          \
	_Static_assert(CBID(domain, cbid) < MAX_CBID &&                        \
			   CBID(domain, cbid2) < MAX_CBID,                     \
		       "a callback id beyond MAX_CBID: " name);
GPR_TRACE_OPS(GPR_X_OP)
#undef GPR_X_OP
_Static_assert(GPR_TRACE_N_OPS < 255, "op + 1 fits in a byte");
static uint8_t op_of_cbid[2][MAX_CBID];

/* Fills op_of_cbid from the table (once, before any callback is on). */
static void map_cbids(void)
{
#define GPR_X_OP(op, name, kind, domain, cbid, cbid2)                          \
	op_of_cbid[DOM_##domain][CBID(domain, cbid)] = GPR_OP_##op + 1;        \
	if (CBID(domain, cbid2) != 0)                                          \
		op_of_cbid[DOM_##domain][CBID(domain, cbid2)] = GPR_OP_##op + 1;
	GPR_TRACE_OPS(GPR_X_OP)
#undef GPR_X_OP
}

static int device_of(struct gpr_inj_tt *tt, CUcontext ctx)
{
	if (!ctx || !api.ctx_get_device)
		return GPR_TRACE_NO_DEVICE;
	for (int i = 0; i < 4; i++)
		if (tt->ctx_key[i] == (void *)ctx)
			return tt->ctx_dev[i];
	CUdevice d;
	if (api.ctx_get_device(&d) != CUDA_SUCCESS)
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

/* At entry: who calls, the start time, and what a free gives back. */
static void on_enter(struct gpr_inj_tt *tt, int op,
		     const CUpti_CallbackData *cd)
{
	/* Calls entered before a pause never see their exit: forget them. */
	unsigned epoch =
	    atomic_load_explicit(&gpr_inj_state.epoch, memory_order_relaxed);
	if (tt->epoch != epoch) {
		tt->epoch = epoch;
		tt->depth = 0;
	}
	if (tt->depth >= GPR_INFLIGHT) {
		*cd->correlationData = 0;
		return;
	}
	struct gpr_inj_inflight *f = &tt->fl[tt->depth++];
	*cd->correlationData = (uint64_t)tt->depth;
	uint64_t t0 = gpr_inj_state.selftime ? gpr_inj_now() : 0;
	int how = gpr_inj_callsite(&f->lib, &f->site);
	if (gpr_inj_state.selftime) {
		uint64_t t1 = gpr_inj_now();
		gpr_inj_st_add(&tt->st.walk_ns, t1 - t0);
		gpr_inj_st_add(how == GPR_WALK_FAST ? &tt->st.fast
						    : &tt->st.full,
			       how != GPR_WALK_NONE);
		t0 = t1;
	}
	/*
	 * A free's size leaves the map before the driver frees, so another
	 * thread that gets the same address back cannot lose its entry.
	 */
	enum gpr_trace_memory m =
	    gpr_trace_kind_info(gpr_trace_op_kind_of((unsigned)op)).memory;
	f->size = 0;
	if (m == GPR_MEMORY_END_ADDR || m == GPR_MEMORY_END_HANDLE)
		f->size = gpr_inj_map_take(map_of(m),
					   ended_key(op, cd->functionParams));
	f->size_found = f->size != 0;
	if (gpr_inj_state.selftime)
		t0 = gpr_inj_now();
	f->wait_ok = gpr_inj_tt_wait_now(tt, &f->wait0, &f->csw0) == 0;
	f->t0 = gpr_inj_now();
	if (gpr_inj_state.selftime)
		gpr_inj_st_add(&tt->st.wait_ns, f->t0 - t0);
}

/* Fills the operation's own fields; 0 = ok. */
static void fill(int op, const void *p, int ok, struct gpr_trace_rec *r,
		 struct gpr_inj_inflight *f)
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
	enum gpr_trace_memory m =
	    gpr_trace_kind_info(gpr_trace_op_kind_of((unsigned)op)).memory;
	uint64_t key = map_of(m) == GPR_MAP_HANDLE ? r->aux : r->addr;
	switch (m) {
	case GPR_MEMORY_END_ADDR:
	case GPR_MEMORY_END_HANDLE:
		/* the size the allocation recorded */
		r->bytes = f->size;
		r->flags |= f->size_found ? GPR_TRACE_R_SIZE_MAP
					  : GPR_TRACE_R_SIZE_NONE;
		if (!ok && f->size_found) /* still allocated */
			gpr_inj_map_put(map_of(m), key, f->size);
		break;
	case GPR_MEMORY_NEW_ADDR:
	case GPR_MEMORY_NEW_HANDLE:
		if (ok)
			gpr_inj_map_put(map_of(m), key, r->bytes);
		break;
	case GPR_MEMORY_NONE:
		break;
	}
}

static void on_exit_cb(struct gpr_inj_tt *tt, int op,
		       const CUpti_CallbackData *cd)
{
	uint64_t t1 = gpr_inj_now();
	uint64_t idx = *cd->correlationData;
	if (idx == 0 || idx > GPR_INFLIGHT)
		return;
	struct gpr_inj_inflight *f = &tt->fl[idx - 1];
	tt->depth = (int)idx - 1;
	uint64_t w1 = 0, csw1;
	int wait_ok = f->wait_ok && gpr_inj_tt_wait_now(tt, &w1, &csw1) == 0;
	if (gpr_inj_state.selftime)
		gpr_inj_st_add(&tt->st.wait_ns, gpr_inj_now() - t1);
	struct gpr_trace_rec *r = gpr_inj_tt_slot(tt);
	if (!r) {
		gpr_inj_writer_wake();
		return;
	}
	memset(r, 0, sizeof(*r));
	r->t_ns = f->t0;
	r->dur_ns = t1 - f->t0;
	if (wait_ok && w1 >= f->wait0) {
		r->wait_ns = w1 - f->wait0;
		r->flags |= GPR_TRACE_R_WAIT;
	}
	r->tid = tt->tid;
	r->op = (uint32_t)op;
	r->lib = f->lib;
	r->site = f->site;
	CUresult res = cd->functionReturnValue
			   ? *(const CUresult *)cd->functionReturnValue
			   : CUDA_SUCCESS;
	r->result = res;
	r->device = (int16_t)device_of(tt, cd->context);
	fill(op, cd->functionParams, res == CUDA_SUCCESS, r, f);
	gpr_inj_tt_push(tt);
	uint32_t used = atomic_load_explicit(&tt->head, memory_order_relaxed) -
			atomic_load_explicit(&tt->tail, memory_order_relaxed);
	if (used == GPR_RING_SIZE / 2)
		gpr_inj_writer_wake();
}

static void on_resource(struct gpr_inj_tt *tt, int op,
			const CUpti_ResourceData *rd)
{
	struct gpr_trace_rec *r = gpr_inj_tt_slot(tt);
	if (!r)
		return;
	memset(r, 0, sizeof(*r));
	r->t_ns = gpr_inj_now();
	r->tid = tt->tid;
	r->op = (uint32_t)op;
	r->aux = (uintptr_t)rd->context;
	r->lib = r->site = GPR_TRACE_NO_STRING;
	r->device = GPR_TRACE_NO_DEVICE;
	for (int i = 0; i < 4; i++)
		if (tt->ctx_key[i] == (void *)rd->context)
			r->device = (int16_t)tt->ctx_dev[i];
	gpr_inj_callsite(&r->lib, &r->site);
	gpr_inj_tt_push(tt);
}

static void callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
		     const void *data)
{
	(void)ud;
	if (!atomic_load_explicit(&gpr_inj_state.active, memory_order_relaxed))
		return;
	if (dom == CUPTI_CB_DOMAIN_RESOURCE) {
		if (cbid >= MAX_CBID || !op_of_cbid[DOM_RESOURCE][cbid])
			return;
		struct gpr_inj_tt *tt = gpr_inj_tt_self();
		if (tt)
			on_resource(tt, op_of_cbid[DOM_RESOURCE][cbid] - 1,
				    data);
		return;
	}
	if (dom != CUPTI_CB_DOMAIN_DRIVER_API || cbid >= MAX_CBID ||
	    !op_of_cbid[DOM_DRIVER_API][cbid])
		return;
	const CUpti_CallbackData *cd = data;
	struct gpr_inj_tt *tt = gpr_inj_tt_self();
	if (!tt)
		return;
	int op = op_of_cbid[DOM_DRIVER_API][cbid] - 1;
	uint64_t t0 = gpr_inj_state.selftime ? gpr_inj_now() : 0;
	if (cd->callbackSite == CUPTI_API_ENTER) {
		on_enter(tt, op, cd);
	} else {
		on_exit_cb(tt, op, cd);
		if (gpr_inj_state.selftime)
			gpr_inj_st_add(&tt->st.calls, 1);
	}
	if (gpr_inj_state.selftime)
		gpr_inj_st_add(&tt->st.ns, gpr_inj_now() - t0);
}

static const char *cupti_error(CUptiResult r)
{
	const char *s = NULL;
	if (api.result_string && api.result_string(r, &s) == CUPTI_SUCCESS && s)
		return s;
	return "unknown CUPTI error";
}

static int load_cupti(void)
{
	const char *env = secure_getenv("GPURECLAIM_CUPTI_LIBRARY");
	const char *names[] = {env, "libcupti.so", "libcupti.so.13",
			       "libcupti.so.12"};
	char why[256] = "";
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!names[i] || !*names[i])
			continue;
		dlerror();
		api.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (api.lib)
			break;
		const char *e = dlerror();
		if (!why[0])
			snprintf(why, sizeof(why), "%s", e ? e : names[i]);
		if (env && *env)
			break; /* the user's choice or nothing */
	}
	if (!api.lib) {
		gpr_inj_say(
		    "cannot load CUPTI (%s); set GPURECLAIM_CUPTI_LIBRARY; "
		    "this run is not traced",
		    why);
		return -1;
	}
	*(void **)&api.subscribe = dlsym(api.lib, "cuptiSubscribe");
	*(void **)&api.subscribe_v2 = dlsym(api.lib, "cuptiSubscribe_v2");
	*(void **)&api.unsubscribe = dlsym(api.lib, "cuptiUnsubscribe");
	*(void **)&api.enable_callback = dlsym(api.lib, "cuptiEnableCallback");
	*(void **)&api.result_string = dlsym(api.lib, "cuptiGetResultString");
	if (!api.subscribe || !api.enable_callback || !api.unsubscribe) {
		gpr_inj_say("the CUPTI library lacks cuptiSubscribe/"
			    "cuptiEnableCallback; this run is not traced");
		return -1;
	}
	gpr_inj_callsite_exclude((const void *)api.subscribe);
	/* The driver that loaded us, for context -> device. */
	const char *cuda = secure_getenv("GPURECLAIM_CUDA_LIBRARY");
	void *cu = dlopen(cuda && *cuda ? cuda : "libcuda.so.1",
			  RTLD_NOLOAD | RTLD_LAZY);
	if (cu) {
		*(void **)&api.ctx_get_device = dlsym(cu, "cuCtxGetDevice");
		gpr_inj_callsite_exclude((const void *)api.ctx_get_device);
	}
	return 0;
}

/* What a failure to subscribe or enable means, said after its reason. */
static const char *fail_tail = "this run is not traced";

static int subscribe(void)
{
	CUptiResult r;
	char holder[GPR_CUPTI_OLD_SUBSCRIBER_LEN] = "";
	if (api.subscribe_v2) {
		CUpti_SubscriberParams sp;
		memset(&sp, 0, sizeof(sp));
		sp.structSize = sizeof(sp);
		sp.subscriberName = "gpureclaim trace";
		sp.oldSubscriberName = holder;
		sp.oldSubscriberSize = sizeof(holder);
		r = api.subscribe_v2(&api.sub, callback, NULL, &sp);
	} else {
		r = api.subscribe(&api.sub, callback, NULL);
	}
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		holder[sizeof(holder) - 1] = '\0';
		if (holder[0])
			gpr_inj_say("CUPTI is already in use by another tool "
				    "(%s); %s",
				    holder, fail_tail);
		else
			gpr_inj_say("CUPTI is already in use by another tool "
				    "(e.g. torch.profiler or nsys); %s",
				    fail_tail);
		return -1;
	}
	if (r != CUPTI_SUCCESS) {
		gpr_inj_say("cuptiSubscribe failed: %s; %s", cupti_error(r),
			    fail_tail);
		return -1;
	}
	return 0;
}

/*
 * GPURECLAIM_TRACE_SUBSCRIBE_ONLY: hold the subscription, enable no
 * callback, record nothing: what CUPTI's presence alone costs.
 */
static int subscribe_only;

/* 0: callbacks on; 1: on purpose none (SUBSCRIBE_ONLY); -1: failed. */
static int enable(void)
{
	if (subscribe_only)
		return 1;
	for (CUpti_CallbackId c = 0; c < MAX_CBID; c++) {
		if (!op_of_cbid[DOM_DRIVER_API][c])
			continue;
		CUptiResult r = api.enable_callback(
		    1, api.sub, CUPTI_CB_DOMAIN_DRIVER_API, c);
		if (r != CUPTI_SUCCESS) {
			gpr_inj_say("cuptiEnableCallback(%u) failed: %s; %s",
				    (unsigned)c, cupti_error(r), fail_tail);
			return -1;
		}
	}
	/* Context events are a bonus: a failure here is not fatal. */
	for (CUpti_CallbackId c = 0; c < MAX_CBID; c++)
		if (op_of_cbid[DOM_RESOURCE][c])
			api.enable_callback(1, api.sub,
					    CUPTI_CB_DOMAIN_RESOURCE, c);
	return 0;
}

/* Set once the callbacks are on: pausing has something to pause. */
static int tracing;

static void init_once(void)
{
	if (getauxval(AT_SECURE)) {
		gpr_inj_say("not tracing a setuid or setgid program (secure "
			    "execution); it runs untraced");
		return;
	}
	gpr_inj_state.selftime = gpr_inj_switch("GPURECLAIM_TRACE_SELFTIME");
	subscribe_only = gpr_inj_switch("GPURECLAIM_TRACE_SUBSCRIBE_ONLY");
	map_cbids();
	if (gpr_inj_tt_init() < 0 || gpr_inj_map_init() < 0 ||
	    gpr_inj_callsite_init() < 0) {
		gpr_inj_say("out of memory; this run is not traced");
		return;
	}
	gpr_inj_callsite_exclude((const void *)init_once);
	/*
	 * GPURECLAIM_TRACE_INJECT_ONLY: loaded by the driver, the log open,
	 * CUPTI never loaded: what the injection alone costs, to tell it
	 * from what CUPTI's subscription costs (SUBSCRIBE_ONLY).
	 */
	int inject_only = gpr_inj_switch("GPURECLAIM_TRACE_INJECT_ONLY");
	if (!inject_only && (load_cupti() < 0 || subscribe() < 0))
		return;
	char path[GPR_TRACE_MAX_PATH + 1];
	const char *out = secure_getenv("GPURECLAIM_TRACE_OUTPUT");
	if (out && strlen(out) > GPR_TRACE_MAX_PATH) {
		gpr_inj_say(
		    "GPURECLAIM_TRACE_OUTPUT is %zu bytes, more than %d; "
		    "this run is not traced",
		    strlen(out), GPR_TRACE_MAX_PATH);
		if (!inject_only)
			api.unsubscribe(api.sub);
		return;
	}
	if (out && *out)
		snprintf(path, sizeof(path), "%s", out);
	else
		snprintf(path, sizeof(path), "gpureclaim-%d.trace",
			 (int)getpid());
	if (gpr_inj_writer_start(path) < 0) {
		if (!inject_only)
			api.unsubscribe(api.sub);
		return;
	}
	if (inject_only)
		return;
	int on = enable();
	if (on < 0) {
		atomic_store(&gpr_inj_state.active, 0);
		api.unsubscribe(api.sub);
		return;
	}
	tracing = on == 0; /* not with SUBSCRIBE_ONLY */
}

/*
 * Pausing and resuming, called by the traced program: the contract is in
 * include/gpureclaim_trace.h. Paused, the callbacks are off and CUPTI is
 * unsubscribed; pause_mu serialises the two calls.
 */
static pthread_mutex_t pause_mu = PTHREAD_MUTEX_INITIALIZER;
static int paused;

GPR_EXPORT int gpureclaim_trace_pause(void)
{
	int rc = 1;
	pthread_mutex_lock(&pause_mu);
	if (!tracing || !atomic_load(&gpr_inj_state.active)) {
		rc = -1;
	} else if (!paused) {
		for (CUpti_CallbackId c = 0; c < MAX_CBID; c++)
			if (op_of_cbid[DOM_DRIVER_API][c])
				api.enable_callback(
				    0, api.sub, CUPTI_CB_DOMAIN_DRIVER_API, c);
		api.unsubscribe(api.sub);
		atomic_fetch_add(&gpr_inj_state.epoch, 1);
		paused = 1;
		rc = 0;
	}
	pthread_mutex_unlock(&pause_mu);
	return rc;
}

GPR_EXPORT int gpureclaim_trace_resume(void)
{
	int rc = 1;
	pthread_mutex_lock(&pause_mu);
	if (!tracing || !atomic_load(&gpr_inj_state.active)) {
		rc = -1;
	} else if (paused) {
		fail_tail = "tracing stays paused";
		rc = -2;
		if (subscribe() == 0) {
			if (enable() == 0) {
				paused = 0;
				rc = 0;
			} else {
				api.unsubscribe(api.sub);
			}
		}
	}
	pthread_mutex_unlock(&pause_mu);
	return rc;
}

/*
 * Called by libcuda once it has loaded this library. Returns 1 in every
 * case: a tracing failure is reported on stderr and must not fail cuInit.
 */
GPR_EXPORT int InitializeInjection(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, init_once);
	return 1;
}
