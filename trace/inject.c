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
#include "env_flag.h"

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

static const struct {
	CUpti_CallbackId cbid;
	uint16_t op;
} driver_ops[] = {
    {CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2, 1},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, 2},
    {CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, 3},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, 4},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, 4},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync, 5},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz, 5},
    {CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, 6},
    {CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz, 6},
    {CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo, 7},
    {CUPTI_DRIVER_TRACE_CBID_cuMemCreate, 8},
    {CUPTI_DRIVER_TRACE_CBID_cuMemRelease, 9},
    {CUPTI_DRIVER_TRACE_CBID_cuMemMap, 10},
    {CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, 11},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, 12},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree, 13},
    {CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, 14},
    {CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc_v2, 14},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2, 15},
    {CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost, 16},
};
#define N_DRIVER_OPS (sizeof(driver_ops) / sizeof(driver_ops[0]))

/* cbid -> op + 1 (0: not traced); cbids are small integers. */
#define MAX_CBID 1024
static uint8_t op_of_cbid[MAX_CBID];

static int device_of(struct gpr__tt *tt, CUcontext ctx)
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

/* At entry: who calls, the start time, and what a free gives back. */
static void on_enter(struct gpr__tt *tt, int op, const CUpti_CallbackData *cd)
{
	/* Calls entered before a pause never see their exit: forget them. */
	unsigned epoch =
	    atomic_load_explicit(&gpr__epoch, memory_order_relaxed);
	if (tt->epoch != epoch) {
		tt->epoch = epoch;
		tt->depth = 0;
	}
	if (tt->depth >= GPR_INFLIGHT) {
		*cd->correlationData = 0;
		return;
	}
	struct gpr__inflight *f = &tt->fl[tt->depth++];
	*cd->correlationData = (uint64_t)tt->depth;
	uint64_t t0 = gpr__selftime_on ? gpr__now() : 0;
	int how = gpr__callsite(&f->lib, &f->site);
	if (gpr__selftime_on) {
		uint64_t t1 = gpr__now();
		gpr__st_add(&tt->st.walk_ns, t1 - t0);
		gpr__st_add(how == GPR_WALK_FAST ? &tt->st.fast : &tt->st.full,
			    how != GPR_WALK_NONE);
		t0 = t1;
	}
	/*
	 * A free's size leaves the map before the driver frees, so another
	 * thread that gets the same address back cannot lose its entry.
	 */
	const void *p = cd->functionParams;
	f->size = 0;
	switch (op) {
	case 3:
		f->size = gpr__map_take(GPR_MAP_ADDR,
					((const cuMemFree_v2_params *)p)->dptr);
		break;
	case 6:
		f->size = gpr__map_take(
		    GPR_MAP_ADDR, ((const cuMemFreeAsync_params *)p)->dptr);
		break;
	case 16:
		f->size = gpr__map_take(
		    GPR_MAP_ADDR,
		    (uintptr_t)((const cuMemFreeHost_params *)p)->p);
		break;
	case 9:
		f->size = gpr__map_take(
		    GPR_MAP_HANDLE, ((const cuMemRelease_params *)p)->handle);
		break;
	}
	f->size_found = f->size != 0;
	if (gpr__selftime_on)
		t0 = gpr__now();
	f->wait_ok = gpr__tt_wait_now(tt, &f->wait0, &f->csw0) == 0;
	f->t0 = gpr__now();
	if (gpr__selftime_on)
		gpr__st_add(&tt->st.wait_ns, f->t0 - t0);
}

/* Fills the operation's own fields; 0 = ok. */
static void fill(int op, const void *p, int ok, struct gpr_trace_rec *r,
		 struct gpr__inflight *f)
{
	switch (op) {
	case 0: {
		const cuMemAlloc_v2_params *a = p;
		r->bytes = a->bytesize;
		if (ok && a->dptr)
			r->addr = *a->dptr;
		break;
	}
	case 1: {
		const cuMemAllocPitch_v2_params *a = p;
		r->bytes = a->WidthInBytes * a->Height;
		if (ok && a->pPitch)
			r->bytes = *a->pPitch * a->Height;
		if (ok && a->dptr)
			r->addr = *a->dptr;
		break;
	}
	case 2: {
		const cuMemAllocManaged_params *a = p;
		r->bytes = a->bytesize;
		if (ok && a->dptr)
			r->addr = *a->dptr;
		break;
	}
	case 4: {
		const cuMemAllocAsync_params *a = p;
		r->bytes = a->bytesize;
		r->aux = (uintptr_t)a->hStream;
		if (ok && a->dptr)
			r->addr = *a->dptr;
		break;
	}
	case 5: {
		const cuMemAllocFromPoolAsync_params *a = p;
		r->bytes = a->bytesize;
		r->aux = (uintptr_t)a->pool;
		if (ok && a->dptr)
			r->addr = *a->dptr;
		break;
	}
	case 14:
	case 15: {
		const cuMemHostAlloc_params *a = p;
		r->bytes = a->bytesize;
		if (ok && a->pp)
			r->addr = (uintptr_t)*a->pp;
		break;
	}
	case 3:
		r->addr = ((const cuMemFree_v2_params *)p)->dptr;
		break;
	case 6:
		r->addr = ((const cuMemFreeAsync_params *)p)->dptr;
		r->aux = (uintptr_t)((const cuMemFreeAsync_params *)p)->hStream;
		break;
	case 16:
		r->addr = (uintptr_t)((const cuMemFreeHost_params *)p)->p;
		break;
	case 9:
		r->aux = ((const cuMemRelease_params *)p)->handle;
		break;
	case 7: {
		const cuMemPoolTrimTo_params *a = p;
		r->aux = (uintptr_t)a->pool;
		r->bytes = a->minBytesToKeep;
		break;
	}
	case 8: {
		const cuMemCreate_params *a = p;
		r->bytes = a->size;
		if (ok && a->handle)
			r->aux = *a->handle;
		if (a->prop &&
		    a->prop->location.type == GPR_CU_MEM_LOCATION_TYPE_DEVICE)
			r->device = (int16_t)a->prop->location.id;
		break;
	}
	case 10: {
		const cuMemMap_params *a = p;
		r->addr = a->ptr;
		r->bytes = a->size;
		r->aux = a->handle;
		break;
	}
	case 11:
		r->addr = ((const cuMemUnmap_params *)p)->ptr;
		r->bytes = ((const cuMemUnmap_params *)p)->size;
		break;
	case 12: {
		const cuMemAddressReserve_params *a = p;
		r->bytes = a->size;
		if (ok && a->ptr)
			r->addr = *a->ptr;
		break;
	}
	case 13:
		r->addr = ((const cuMemAddressFree_params *)p)->ptr;
		r->bytes = ((const cuMemAddressFree_params *)p)->size;
		break;
	}
	/* Frees and releases: the size the allocation recorded. */
	if (op == 3 || op == 6 || op == 16 || op == 9) {
		r->bytes = f->size;
		r->flags |= f->size_found ? GPR_TRACE_R_SIZE_MAP
					  : GPR_TRACE_R_SIZE_NONE;
		if (!ok && f->size_found) /* still allocated */
			gpr__map_put(op == 9 ? GPR_MAP_HANDLE : GPR_MAP_ADDR,
				     op == 9 ? r->aux : r->addr, f->size);
	}
	if (ok && (op <= 2 || op == 4 || op == 5 || op == 14 || op == 15))
		gpr__map_put(GPR_MAP_ADDR, r->addr, r->bytes);
	if (ok && op == 8)
		gpr__map_put(GPR_MAP_HANDLE, r->aux, r->bytes);
}

static void on_exit_cb(struct gpr__tt *tt, int op, const CUpti_CallbackData *cd)
{
	uint64_t t1 = gpr__now();
	uint64_t idx = *cd->correlationData;
	if (idx == 0 || idx > GPR_INFLIGHT)
		return;
	struct gpr__inflight *f = &tt->fl[idx - 1];
	tt->depth = (int)idx - 1;
	uint64_t w1 = 0, csw1;
	int wait_ok = f->wait_ok && gpr__tt_wait_now(tt, &w1, &csw1) == 0;
	if (gpr__selftime_on)
		gpr__st_add(&tt->st.wait_ns, gpr__now() - t1);
	struct gpr_trace_rec *r = gpr__tt_slot(tt);
	if (!r) {
		gpr__writer_wake();
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
	gpr__tt_push(tt);
	uint32_t used = atomic_load_explicit(&tt->head, memory_order_relaxed) -
			atomic_load_explicit(&tt->tail, memory_order_relaxed);
	if (used == GPR_RING_SIZE / 2)
		gpr__writer_wake();
}

static void on_resource(struct gpr__tt *tt, CUpti_CallbackId cbid,
			const CUpti_ResourceData *rd)
{
	struct gpr_trace_rec *r = gpr__tt_slot(tt);
	if (!r)
		return;
	memset(r, 0, sizeof(*r));
	r->t_ns = gpr__now();
	r->tid = tt->tid;
	r->op = cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED ? 17 : 18;
	r->aux = (uintptr_t)rd->context;
	r->lib = r->site = GPR_TRACE_NO_STRING;
	r->device = GPR_TRACE_NO_DEVICE;
	for (int i = 0; i < 4; i++)
		if (tt->ctx_key[i] == (void *)rd->context)
			r->device = (int16_t)tt->ctx_dev[i];
	gpr__callsite(&r->lib, &r->site);
	gpr__tt_push(tt);
}

static void callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
		     const void *data)
{
	(void)ud;
	if (!atomic_load_explicit(&gpr__active, memory_order_relaxed))
		return;
	if (dom == CUPTI_CB_DOMAIN_RESOURCE) {
		if (cbid != CUPTI_CBID_RESOURCE_CONTEXT_CREATED &&
		    cbid != CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING)
			return;
		struct gpr__tt *tt = gpr__tt_self();
		if (tt)
			on_resource(tt, cbid, data);
		return;
	}
	if (dom != CUPTI_CB_DOMAIN_DRIVER_API || cbid >= MAX_CBID ||
	    !op_of_cbid[cbid])
		return;
	const CUpti_CallbackData *cd = data;
	struct gpr__tt *tt = gpr__tt_self();
	if (!tt)
		return;
	int op = op_of_cbid[cbid] - 1;
	uint64_t t0 = gpr__selftime_on ? gpr__now() : 0;
	if (cd->callbackSite == CUPTI_API_ENTER) {
		on_enter(tt, op, cd);
	} else {
		on_exit_cb(tt, op, cd);
		if (gpr__selftime_on)
			gpr__st_add(&tt->st.calls, 1);
	}
	if (gpr__selftime_on)
		gpr__st_add(&tt->st.ns, gpr__now() - t0);
}

int gpr__env_switch(const char *name)
{
	const char *v = secure_getenv(name);
	int on = gpr__flag_parse(v);
	if (on < 0) {
		gpr__say("%s='%.64s' is not one of " GPR_FLAG_WORDS
			 "; taken as off",
			 name, v);
		on = 0;
	}
	return on;
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
		gpr__say(
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
		gpr__say("the CUPTI library lacks cuptiSubscribe/"
			 "cuptiEnableCallback; this run is not traced");
		return -1;
	}
	gpr__callsite_exclude((const void *)api.subscribe);
	/* The driver that loaded us, for context -> device. */
	const char *cuda = secure_getenv("GPURECLAIM_CUDA_LIBRARY");
	void *cu = dlopen(cuda && *cuda ? cuda : "libcuda.so.1",
			  RTLD_NOLOAD | RTLD_LAZY);
	if (cu) {
		*(void **)&api.ctx_get_device = dlsym(cu, "cuCtxGetDevice");
		gpr__callsite_exclude((const void *)api.ctx_get_device);
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
			gpr__say("CUPTI is already in use by another tool "
				 "(%s); %s",
				 holder, fail_tail);
		else
			gpr__say("CUPTI is already in use by another tool "
				 "(e.g. torch.profiler or nsys); %s",
				 fail_tail);
		return -1;
	}
	if (r != CUPTI_SUCCESS) {
		gpr__say("cuptiSubscribe failed: %s; %s", cupti_error(r),
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
	for (size_t i = 0; i < N_DRIVER_OPS; i++) {
		CUptiResult r = api.enable_callback(
		    1, api.sub, CUPTI_CB_DOMAIN_DRIVER_API, driver_ops[i].cbid);
		if (r != CUPTI_SUCCESS) {
			gpr__say("cuptiEnableCallback(%u) failed: %s; %s",
				 (unsigned)driver_ops[i].cbid, cupti_error(r),
				 fail_tail);
			return -1;
		}
	}
	/* Context events are a bonus: a failure here is not fatal. */
	api.enable_callback(1, api.sub, CUPTI_CB_DOMAIN_RESOURCE,
			    CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
	api.enable_callback(1, api.sub, CUPTI_CB_DOMAIN_RESOURCE,
			    CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
	return 0;
}

int gpr__selftime_on;
_Atomic unsigned gpr__epoch;
/* Set once the callbacks are on: pausing has something to pause. */
static int tracing;

static void init_once(void)
{
	if (getauxval(AT_SECURE)) {
		gpr__say("not tracing a setuid or setgid program (secure "
			 "execution); it runs untraced");
		return;
	}
	gpr__selftime_on = gpr__env_switch("GPURECLAIM_TRACE_SELFTIME");
	subscribe_only = gpr__env_switch("GPURECLAIM_TRACE_SUBSCRIBE_ONLY");
	for (size_t i = 0; i < N_DRIVER_OPS; i++)
		op_of_cbid[driver_ops[i].cbid] =
		    (uint8_t)(driver_ops[i].op + 1);
	if (gpr__tt_init() < 0 || gpr__map_init() < 0 ||
	    gpr__callsite_init() < 0) {
		gpr__say("out of memory; this run is not traced");
		return;
	}
	gpr__callsite_exclude((const void *)init_once);
	/*
	 * GPURECLAIM_TRACE_INJECT_ONLY: loaded by the driver, the log open,
	 * CUPTI never loaded: what the injection alone costs, to tell it
	 * from what CUPTI's subscription costs (SUBSCRIBE_ONLY).
	 */
	int inject_only = gpr__env_switch("GPURECLAIM_TRACE_INJECT_ONLY");
	if (!inject_only && (load_cupti() < 0 || subscribe() < 0))
		return;
	char path[GPR_TRACE_MAX_PATH + 1];
	const char *out = secure_getenv("GPURECLAIM_TRACE_OUTPUT");
	if (out && strlen(out) > GPR_TRACE_MAX_PATH) {
		gpr__say("GPURECLAIM_TRACE_OUTPUT is %zu bytes, more than %d; "
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
	if (gpr__writer_start(path) < 0) {
		if (!inject_only)
			api.unsubscribe(api.sub);
		return;
	}
	if (inject_only)
		return;
	int on = enable();
	if (on < 0) {
		atomic_store(&gpr__active, 0);
		api.unsubscribe(api.sub);
		return;
	}
	tracing = on == 0; /* not with SUBSCRIBE_ONLY */
}

/*
 * Pausing and resuming, called by the traced program (docs/trace.md):
 * paused, the callbacks are off and CUPTI is unsubscribed, so nothing is
 * recorded and another tool may take CUPTI. A call in flight on another
 * thread while pausing may go unrecorded. 0: done; 1: already so;
 * -1: this process is not being traced; -2: CUPTI could not be taken
 * back (said on stderr; tracing stays paused).
 */
static pthread_mutex_t pause_mu = PTHREAD_MUTEX_INITIALIZER;
static int paused;

GPR_EXPORT int gpureclaim_trace_pause(void)
{
	int rc = 1;
	pthread_mutex_lock(&pause_mu);
	if (!tracing || !atomic_load(&gpr__active)) {
		rc = -1;
	} else if (!paused) {
		for (size_t i = 0; i < N_DRIVER_OPS; i++)
			api.enable_callback(0, api.sub,
					    CUPTI_CB_DOMAIN_DRIVER_API,
					    driver_ops[i].cbid);
		api.unsubscribe(api.sub);
		atomic_fetch_add(&gpr__epoch, 1);
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
	if (!tracing || !atomic_load(&gpr__active)) {
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
