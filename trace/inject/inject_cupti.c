/*
 * The CUPTI front end: driver-API callbacks of the memory calls plus the
 * resource callbacks of context creation and destruction, each call timed
 * between its enter and exit callbacks (inject_record.c records it).
 *
 * Used when the driver loads the library from CUDA_INJECTION64_PATH and
 * the interposer is not in the process (`gpureclaim trace
 * --backend=cupti`, or the fallback of --backend=auto), and when a running
 * program starts a session without the interposer preloaded: CUPTI may be
 * subscribed to at any time. One subscriber per process (before CUPTI
 * 13.3 with driver r610): when another tool holds CUPTI the subscription
 * fails, the tracer says so in one line and leaves that tool alone.
 *
 * Only the driver layer is recorded: the runtime (cudaMalloc) calls the
 * driver (cuMemAlloc_v2), so recording both would count each allocation
 * twice; the runtime's own frames are skipped when looking for the caller.
 */
#include "tracer.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../format/trace_ops.h"
#include "cupti_abi.h"
#include "callers.h"
#include "clock.h"
#include "dl.h"
#include "frontend.h"
#include "recorder.h"
#include "threads.h"

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
	/* the device of a context no call has named yet (optional) */
	CUptiResult (*device_id)(CUcontext, uint32_t *);
	CUpti_SubscriberHandle sub;
	int subscribed;
	int counting; /* GPURECLAIM_TRACE_CROSSCHECK: count, record nothing */
	_Atomic uint64_t counts[GPR_TRACE_N_OPS];
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
#define GPR_X_OP(op, name, kind, domain, cbid, cbid2, entries)                 \
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
#define GPR_X_OP(op, name, kind, domain, cbid, cbid2, entries)                 \
	op_of_cbid[DOM_##domain][CBID(domain, cbid)] = GPR_OP_##op + 1;        \
	if (CBID(domain, cbid2) != 0)                                          \
		op_of_cbid[DOM_##domain][CBID(domain, cbid2)] = GPR_OP_##op + 1;
	GPR_TRACE_OPS(GPR_X_OP)
#undef GPR_X_OP
}

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
	gpr_inj_rec_enter(tt, f, op, cd->functionParams);
}

static struct gpr_inj_inflight *on_exit_cb(struct gpr_inj_tt *tt, int op,
					   const CUpti_CallbackData *cd)
{
	uint64_t idx = *cd->correlationData;
	if (idx == 0 || idx > GPR_INFLIGHT)
		return NULL;
	struct gpr_inj_inflight *f = &tt->fl[idx - 1];
	tt->depth = (int)idx - 1;
	CUresult res = cd->functionReturnValue
			   ? *(const CUresult *)cd->functionReturnValue
			   : CUDA_SUCCESS;
	gpr_inj_rec_exit(tt, f, op, cd->functionParams, res, cd->context);
	return f;
}

static void on_resource(struct gpr_inj_tt *tt, int op,
			const CUpti_ResourceData *rd)
{
	int device = GPR_TRACE_NO_DEVICE;
	for (int i = 0; i < 4; i++)
		if (tt->ctx_key[i] == (void *)rd->context)
			device = tt->ctx_dev[i];
	/* a context just created is in no thread's cache yet (a session
	 * begun before CUDA was first used sees it first): CUPTI knows */
	uint32_t id;
	if (device == GPR_TRACE_NO_DEVICE && api.device_id && rd->context &&
	    api.device_id(rd->context, &id) == CUPTI_SUCCESS && id < 32768)
		device = (int)id;
	gpr_inj_rec_event(tt, op, rd->context, device);
}

static void callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
		     const void *data)
{
	(void)ud;
	if (atomic_load_explicit(&gpr_inj_state.active, memory_order_relaxed) !=
	    (api.counting ? GPR_INJ_INTERPOSE : GPR_INJ_CUPTI))
		return;
	int d = dom == CUPTI_CB_DOMAIN_RESOURCE	    ? DOM_RESOURCE
		: dom == CUPTI_CB_DOMAIN_DRIVER_API ? DOM_DRIVER_API
						    : -1;
	if (d < 0 || cbid >= MAX_CBID || !op_of_cbid[d][cbid])
		return;
	int op = op_of_cbid[d][cbid] - 1;
	if (api.counting) {
		if (d == DOM_RESOURCE ||
		    ((const CUpti_CallbackData *)data)->callbackSite ==
			CUPTI_API_ENTER)
			atomic_fetch_add_explicit(&api.counts[op], 1,
						  memory_order_relaxed);
		return;
	}
	struct gpr_inj_tt *tt = gpr_inj_tt_self();
	if (!tt)
		return;
	atomic_store_explicit(&tt->inside, 1, memory_order_relaxed);
	if (d == DOM_RESOURCE) {
		on_resource(tt, op, data);
		atomic_store_explicit(&tt->inside, 0, memory_order_release);
		return;
	}
	const CUpti_CallbackData *cd = data;
	uint64_t t0 = gpr_inj_state.selftime ? gpr_inj_stamp() : 0;
	if (cd->callbackSite == CUPTI_API_ENTER) {
		on_enter(tt, op, cd);
		if (gpr_inj_state.selftime && tt->depth > 0)
			tt->fl[tt->depth - 1].self_ticks = gpr_inj_stamp() - t0;
	} else {
		struct gpr_inj_inflight *f = on_exit_cb(tt, op, cd);
		if (gpr_inj_state.selftime && f)
			gpr_inj_rec_selftime(tt, f->self_ticks +
						     gpr_inj_stamp() - t0);
	}
	atomic_store_explicit(&tt->inside, 0, memory_order_release);
}

static const char *cupti_error(CUptiResult r)
{
	const char *s = NULL;
	if (api.result_string && api.result_string(r, &s) == CUPTI_SUCCESS && s)
		return s;
	return "unknown CUPTI error";
}

/*
 * A libcupti already in the process (a framework's profiler loaded it):
 * two copies of CUPTI in one process do not mix.
 */
static int mapped_cupti(char *out, size_t len)
{
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return -1;
	char line[4608];
	int found = -1;
	while (found < 0 && fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');
		if (!path)
			continue;
		path[strcspn(path, "\n")] = '\0';
		const char *b = strrchr(path, '/');
		if (strncmp(b + 1, "libcupti.so", 11) == 0 &&
		    strlen(path) < len) {
			snprintf(out, len, "%s", path);
			found = 0;
		}
	}
	fclose(f);
	return found;
}

static int load_cupti(const char *path)
{
	if (api.lib)
		return 0;
	const char *env = secure_getenv("GPURECLAIM_CUPTI_LIBRARY");
	char mapped[4096] = "";
	if (!(path && *path) && !(env && *env))
		mapped_cupti(mapped, sizeof(mapped));
	const char *first = path && *path ? path : env && *env ? env : mapped;
	const char *names[] = {first, "libcupti.so", "libcupti.so.13",
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
		if (i == 0 && first != mapped)
			break; /* the user's choice or nothing */
	}
	if (!api.lib) {
		gpr_inj_say(
		    "cannot load CUPTI (%s); set GPURECLAIM_CUPTI_LIBRARY; "
		    "this run is not traced",
		    why[0] ? why : "no libcupti found");
		return -1;
	}
	*(void **)&api.subscribe =
	    gpr_inj_real_dlsym(api.lib, "cuptiSubscribe");
	*(void **)&api.subscribe_v2 =
	    gpr_inj_real_dlsym(api.lib, "cuptiSubscribe_v2");
	*(void **)&api.unsubscribe =
	    gpr_inj_real_dlsym(api.lib, "cuptiUnsubscribe");
	*(void **)&api.enable_callback =
	    gpr_inj_real_dlsym(api.lib, "cuptiEnableCallback");
	*(void **)&api.result_string =
	    gpr_inj_real_dlsym(api.lib, "cuptiGetResultString");
	*(void **)&api.device_id =
	    gpr_inj_real_dlsym(api.lib, "cuptiGetDeviceId");
	if (!api.subscribe || !api.enable_callback || !api.unsubscribe) {
		gpr_inj_say("the CUPTI library lacks cuptiSubscribe/"
			    "cuptiEnableCallback; this run is not traced");
		api.lib = NULL;
		return -1;
	}
	gpr_inj_callsite_exclude((const void *)api.subscribe);
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
	api.subscribed = 1;
	return 0;
}

static void unsubscribe(void)
{
	if (api.subscribed)
		api.unsubscribe(api.sub);
	api.subscribed = 0;
}

static void enable_all(uint32_t on)
{
	for (CUpti_CallbackId c = 0; c < MAX_CBID; c++)
		if (op_of_cbid[DOM_DRIVER_API][c])
			api.enable_callback(on, api.sub,
					    CUPTI_CB_DOMAIN_DRIVER_API, c);
}

/*
 * GPURECLAIM_TRACE_SUBSCRIBE_ONLY: hold the subscription, enable no
 * callback, record nothing: what CUPTI's presence alone costs. Read once.
 */
int gpr_inj_cupti_subscribe_only(void)
{
	static int only = -1;
	if (only < 0)
		only = gpr_inj_switch("GPURECLAIM_TRACE_SUBSCRIBE_ONLY");
	return only;
}

/* 0: callbacks on; 1: on purpose none (SUBSCRIBE_ONLY); -1: failed. */
static int enable(void)
{
	if (gpr_inj_cupti_subscribe_only())
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

int gpr_inj_cupti_attach(const char *path)
{
	fail_tail = "this run is not traced";
	if (!op_of_cbid[DOM_DRIVER_API][CBID_DRIVER_API(cuMemAlloc_v2)])
		map_cbids();
	if (load_cupti(path) < 0 || subscribe() < 0)
		return -1;
	if (enable() < 0) {
		unsubscribe();
		return -1;
	}
	return 0;
}

int gpr_inj_cupti_attach_counting(const char *path)
{
	api.counting = 1;
	return gpr_inj_cupti_attach(path);
}

void gpr_inj_cupti_counts(uint64_t *calls)
{
	for (int i = 0; i < GPR_TRACE_N_OPS; i++)
		calls[i] =
		    atomic_load_explicit(&api.counts[i], memory_order_relaxed);
}

void gpr_inj_cupti_detach(void)
{
	if (!api.subscribed)
		return;
	enable_all(0);
	unsubscribe();
}

int gpr_inj_cupti_pause(void)
{
	gpr_inj_cupti_detach();
	atomic_fetch_add(&gpr_inj_state.epoch, 1);
	return 0;
}

int gpr_inj_cupti_resume(void)
{
	fail_tail = "tracing stays paused";
	if (subscribe() < 0)
		return -1;
	if (enable() != 0) {
		unsubscribe();
		return -1;
	}
	return 0;
}
