/*
 * A stand-in for libcupti (and cuCtxGetDevice of libcuda) so the injection
 * library can be tested without a GPU: it keeps the subscriber's callback
 * and lets the test "make" driver calls (fake_call) and context events
 * (fake_resource), each with the enter and exit callbacks CUPTI would give.
 *
 * FAKE_CUPTI_BUSY=NAME makes subscribing fail as when another tool holds
 * CUPTI (NAME is reported as the holder; "-" reports none).
 * fake_other_subscribe() makes another tool (a profiler) really hold it:
 * its callback sees every fake call, and subscribing fails as CUPTI's one
 * subscriber rule makes it fail, naming "fake-profiler";
 * fake_other_calls() counts what that tool saw.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../trace/inject/cupti_abi.h"

#define EXPORT __attribute__((visibility("default")))

static CUpti_CallbackFunc cb;
static void *cb_ud;
static unsigned char enabled[8][1024];
static __thread CUcontext current;

static CUpti_CallbackFunc other_cb;
static long other_calls;

static void other_callback(void *ud, CUpti_CallbackDomain d,
			   CUpti_CallbackId id, const void *data)
{
	(void)ud;
	(void)d;
	(void)id;
	(void)data;
	other_calls++;
}

EXPORT void fake_other_subscribe(void)
{
	other_cb = other_callback;
}

EXPORT long fake_other_calls(void)
{
	return other_calls;
}

static CUptiResult busy(CUpti_SubscriberParams *p)
{
	const char *b = other_cb ? "fake-profiler" : getenv("FAKE_CUPTI_BUSY");
	if (!b || !*b)
		return CUPTI_SUCCESS;
	if (p && p->oldSubscriberName && p->oldSubscriberSize &&
	    strcmp(b, "-") != 0) {
		strncpy(p->oldSubscriberName, b, p->oldSubscriberSize - 1);
		p->oldSubscriberName[p->oldSubscriberSize - 1] = '\0';
	}
	return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
}

EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *s,
				  CUpti_CallbackFunc f, void *ud)
{
	CUptiResult r = busy(NULL);
	if (r != CUPTI_SUCCESS)
		return r;
	cb = f;
	cb_ud = ud;
	*s = (CUpti_SubscriberHandle)&cb;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *s,
				     CUpti_CallbackFunc f, void *ud,
				     CUpti_SubscriberParams *p)
{
	if (!p || p->structSize < sizeof(size_t))
		return 1;
	CUptiResult r = busy(p);
	if (r != CUPTI_SUCCESS)
		return r;
	return cuptiSubscribe(s, f, ud);
}

EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle s)
{
	(void)s;
	cb = NULL;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiEnableCallback(uint32_t on, CUpti_SubscriberHandle s,
				       CUpti_CallbackDomain d,
				       CUpti_CallbackId id)
{
	(void)s;
	if (d < 0 || d >= 8 || id >= 1024)
		return 1;
	enabled[d][id] = (unsigned char)on;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetResultString(CUptiResult r, const char **s)
{
	*s = r == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR_FAKE";
	return CUPTI_SUCCESS;
}

/* The device of a context, as CUPTI says it: contexts are 1 + device. */
EXPORT CUptiResult cuptiGetDeviceId(CUcontext ctx, uint32_t *id)
{
	if (!ctx)
		return CUPTI_ERROR_UNKNOWN;
	*id = (uint32_t)((uintptr_t)ctx - 1);
	return CUPTI_SUCCESS;
}

/* The device of the current context: contexts are 1 + device. */
EXPORT CUresult cuCtxGetDevice(CUdevice *d)
{
	if (!current)
		return CUDA_ERROR_INVALID_CONTEXT;
	*d = (CUdevice)((uintptr_t)current - 1);
	return CUDA_SUCCESS;
}

EXPORT int fake_enabled(int domain, unsigned cbid)
{
	return domain >= 0 && domain < 8 && cbid < 1024 &&
	       enabled[domain][cbid];
}

/*
 * One driver call: enter callback, `work` (may be NULL), exit callback
 * with `result`. The context is current for the call's duration.
 */
static __thread void *last_caller; /* threads call at once: one each */

/* The return address of this thread's latest fake_call: a call site. */
EXPORT void *fake_last_caller(void)
{
	return last_caller;
}

EXPORT CUresult fake_call(unsigned cbid, void *params, CUresult result,
			  CUcontext ctx, void (*work)(void *), void *arg)
{
	last_caller = __builtin_return_address(0);
	CUcontext saved = current;
	current = ctx;
	uint64_t corr = 0;
	CUresult ret = result;
	CUpti_CallbackData cd;
	memset(&cd, 0, sizeof(cd));
	cd.functionName = "fake";
	cd.functionParams = params;
	cd.functionReturnValue = &ret;
	cd.context = ctx;
	cd.correlationData = &corr;
	int on = cb && enabled[CUPTI_CB_DOMAIN_DRIVER_API][cbid];
	if (on) {
		cd.callbackSite = CUPTI_API_ENTER;
		cb(cb_ud, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cd);
	}
	if (other_cb)
		other_cb(NULL, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cd);
	if (work)
		work(arg);
	if (on) {
		cd.callbackSite = CUPTI_API_EXIT;
		cb(cb_ud, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cd);
	}
	current = saved;
	return ret;
}

/*
 * fake_call through a frame whose size changes with `pad` (alloca), as a
 * driver function with a variable-length buffer would: a frame size that
 * a stack walk cannot learn once for all.
 */
EXPORT CUresult fake_call_padded(size_t pad, unsigned cbid, void *params,
				 CUresult result, CUcontext ctx)
{
	volatile char *buf = __builtin_alloca(pad + 1);
	buf[0] = 1;
	buf[pad] = 2;
	CUresult r = fake_call(cbid, params, result, ctx, NULL, NULL);
	return r + (CUresult)(buf[pad] - 2);
}

/*
 * fake_call_padded whose buffer is filled with the word `fill`: a stack
 * walk that steps over this frame with a size learned for a smaller pad
 * reads `fill` where it expects a return address.
 */
EXPORT CUresult fake_call_stale(size_t pad, uintptr_t fill, unsigned cbid,
				void *params, CUresult result, CUcontext ctx)
{
	size_t words = pad / sizeof(uintptr_t) + 1;
	volatile uintptr_t *buf = __builtin_alloca(words * sizeof(uintptr_t));
	for (size_t i = 0; i < words; i++)
		buf[i] = fill;
	CUresult r = fake_call(cbid, params, result, ctx, NULL, NULL);
	return r + (CUresult)(buf[0] != fill);
}

EXPORT void fake_resource(unsigned cbid, CUcontext ctx)
{
	CUpti_ResourceData rd;
	memset(&rd, 0, sizeof(rd));
	rd.context = ctx;
	if (cb && enabled[CUPTI_CB_DOMAIN_RESOURCE][cbid])
		cb(cb_ud, CUPTI_CB_DOMAIN_RESOURCE, cbid, &rd);
}
