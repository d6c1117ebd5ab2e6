/*
 * The simulated libcuda.so.1 (docs/sim.md): the driver API calls a
 * framework makes to open a GPU and allocate on it, and the ones
 * gpureclaim makes to ask which GPUs a process holds. Each change of this
 * process's figure on a GPU (context + allocations) is written to the
 * shared state, which the simulated NVML reads.
 *
 * One mutex guards the process's tables; the current context is
 * per-thread, as in CUDA. A forked child starts from nothing (not
 * initialised, no context): like the real driver, it cannot use the
 * parent's contexts.
 */
#include "sim.h"

#include "cuda_abi.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct CUctx_st {
	int dev;
	int primary;
	int live;
	unsigned refs; /* primary contexts: retain count */
};

struct alloc {
	CUdeviceptr ptr;
	uint64_t bytes;
	struct CUctx_st *ctx;
};

#define MAX_CTX 1024

static pid_t owner; /* the process the tables below describe */
/* sim__forks() when they were set up; -1: never */
static _Atomic unsigned owner_forks = (unsigned)-1;
static int initialised;
static int init_calls, ctx_calls;
static struct CUctx_st primary[SIM_MAX_GPUS];
static struct CUctx_st others[MAX_CTX]; /* cuCtxCreate contexts */
static unsigned next_other;
static unsigned nctx[SIM_MAX_GPUS]; /* live contexts per GPU */
static uint64_t held[SIM_MAX_GPUS]; /* allocated bytes per GPU */
static CUdeviceptr next_ptr[SIM_MAX_GPUS];
static struct alloc *allocs;
static size_t nallocs, allocs_cap;
static struct sim__state state = SIM_STATE_INIT;
static __thread struct CUctx_st *current;
/* bytes mempool.c put on each GPU's figure, and how many times the GPU
 * lost its last context (which takes them) */
static uint64_t charged[SIM_MAX_GPUS];
static unsigned epoch[SIM_MAX_GPUS];
/* the checkpoint API (cuda_ckpt.c): while blocked, CUDA calls wait in
 * lock() (a controller locked this process); how many did; what memory
 * a checkpoint could not move */
static int blocked;
static pthread_cond_t unblocked = PTHREAD_COND_INITIALIZER;
static int blocked_calls;
static unsigned unmovable;

static const struct sim__config *cfg;

static void forget_process(void)
{
	initialised = 0;
	init_calls = ctx_calls = 0;
	memset(primary, 0, sizeof primary);
	memset(others, 0, sizeof others);
	next_other = 0;
	memset(nctx, 0, sizeof nctx);
	memset(held, 0, sizeof held);
	for (int i = 0; i < SIM_MAX_GPUS; i++) {
		primary[i].dev = i;
		primary[i].primary = 1;
		/* distinct, non-zero, 2 MiB aligned; never reused */
		next_ptr[i] = (CUdeviceptr)(i + 1) << 40;
	}
	nallocs = 0;
	current = NULL;
	owner = getpid();
	owner_forks = sim__forks();
	memset(charged, 0, sizeof charged);
	memset(epoch, 0, sizeof epoch);
	blocked = blocked_calls = 0;
	unmovable = 0;
	/* no thread of the parent's waits on this copy */
	pthread_cond_init(&unblocked, NULL);
}

/* The lock of a call that never waits for a checkpoint's lock (hooks). */
static void lock_nowait(void)
{
	sim__lock();
	if (!cfg)
		cfg = sim__config();
	if (owner_forks != sim__forks()) /* not getpid: no system call */
		forget_process();
}

/* Every CUDA call's: while a controller has this process locked, the call
 * waits until it is unlocked, as the real driver's do. */
static void lock(void)
{
	lock_nowait();
	if (blocked) {
		blocked_calls++;
		while (blocked)
			sim__wait(&unblocked);
	}
}

static void unlock(void)
{
	sim__unlock();
}

static CUresult need_init(void)
{
	return initialised ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

static CUresult need_device(CUdevice dev)
{
	CUresult r = need_init();
	if (r)
		return r;
	return dev >= 0 && dev < cfg->gpus ? CUDA_SUCCESS
					   : CUDA_ERROR_INVALID_DEVICE;
}

static int ctx_valid(const struct CUctx_st *c)
{
	if (!c)
		return 0;
	int known = (c >= primary && c < primary + SIM_MAX_GPUS) ||
		    (c >= others && c < others + MAX_CTX);
	return known && c->live;
}

/*
 * Publishes this process's figure on `dev` for the given context count
 * and allocated bytes. With `check`, fails with CUDA_ERROR_OUT_OF_MEMORY
 * when the GPU's total would be exceeded.
 */
static CUresult publish(int dev, unsigned n, uint64_t bytes, int check)
{
	uint64_t mine = (n ? cfg->context : 0) + bytes;
	if (sim__state_lock(&state, 1))
		return CUDA_ERROR_OPERATING_SYSTEM;
	CUresult r = CUDA_SUCCESS;
	pid_t me = getpid();
	if (check) {
		uint64_t others_used = sim__state_used(&state, dev, me) +
				       sim__extra_bytes(cfg, dev);
		if (mine > cfg->memory || others_used > cfg->memory - mine)
			r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (!r && sim__state_set(&state, dev, me, n ? mine : bytes,
				 n ? SIM_ENTRY_COMPUTE : 0))
		r = CUDA_ERROR_OUT_OF_MEMORY; /* the GPU's table is full */
	sim__state_unlock(&state);
	return r;
}

static CUresult ctx_activate(struct CUctx_st *c, int dev)
{
	CUresult r = publish(dev, nctx[dev] + 1, held[dev], nctx[dev] == 0);
	if (r)
		return r;
	nctx[dev]++;
	c->dev = dev;
	c->live = 1;
	return CUDA_SUCCESS;
}

/* Destroys a context and the allocations made in it. */
static void ctx_deactivate(struct CUctx_st *c)
{
	int dev = c->dev;
	size_t j = 0;
	for (size_t i = 0; i < nallocs; i++) {
		if (allocs[i].ctx == c)
			held[dev] -= allocs[i].bytes;
		else
			allocs[j++] = allocs[i];
	}
	nallocs = j;
	c->live = 0;
	c->refs = 0;
	if (--nctx[dev] == 0) { /* mempool.c's memory on it goes too */
		held[dev] -= charged[dev];
		charged[dev] = 0;
		epoch[dev]++;
	}
	publish(dev, nctx[dev], held[dev], 0);
	if (current == c)
		current = NULL;
}

void sim__cuda_lock(void)
{
	lock();
}

void sim__cuda_unlock(void)
{
	unlock();
}

int sim__cuda_current(int *dev)
{
	CUresult r = need_init();
	if (!r && !ctx_valid(current))
		r = CUDA_ERROR_INVALID_CONTEXT;
	if (!r)
		*dev = current->dev;
	return r;
}

int sim__cuda_device(int dev)
{
	return need_device(dev);
}

int sim__cuda_charge(int dev, int64_t delta)
{
	if (delta < 0) {
		held[dev] -= (uint64_t)-delta;
		charged[dev] -= (uint64_t)-delta;
		publish(dev, nctx[dev], held[dev], 0);
		return CUDA_SUCCESS;
	}
	CUresult r = publish(dev, nctx[dev], held[dev] + (uint64_t)delta, 1);
	if (!r) {
		held[dev] += (uint64_t)delta;
		charged[dev] += (uint64_t)delta;
	}
	return r;
}

unsigned sim__cuda_epoch(int dev)
{
	return epoch[dev];
}

/* ---- the checkpoint API's target side (cuda_ckpt.c) ---- */

void sim__cuda_unmovable(unsigned what)
{
	unmovable |= what;
}

static unsigned ckpt_unmovable_of(void)
{
	return unmovable;
}

static uint64_t ckpt_device_bytes(void)
{
	uint64_t sum = 0;
	for (int i = 0; i < SIM_MAX_GPUS; i++)
		sum += held[i];
	return sum;
}

int sim__cuda_controller(const struct sim__config **c)
{
	lock_nowait();
	int ok = initialised;
	*c = cfg;
	unlock();
	return ok;
}

static void ckpt_block(int on)
{
	blocked = on;
	if (!on)
		pthread_cond_broadcast(&unblocked);
}

/* This process's figure on dev as publish() writes it; 0: none. */
static uint64_t figure_of(int dev)
{
	return (nctx[dev] ? cfg->context : 0) + held[dev];
}

static int ckpt_listed(int off)
{
	pid_t me = getpid();
	if (sim__state_lock(&state, 1))
		return CUDA_ERROR_OPERATING_SYSTEM;
	CUresult r = CUDA_SUCCESS;
	for (int dev = 0; !off && dev < cfg->gpus; dev++) {
		uint64_t mine = figure_of(dev);
		uint64_t others = sim__state_used(&state, dev, me) +
				  sim__extra_bytes(cfg, dev);
		if (mine && (mine > cfg->memory || others > cfg->memory - mine))
			r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (int dev = 0; !r && dev < cfg->gpus; dev++) {
		uint64_t mine = off ? 0 : figure_of(dev);
		if (sim__state_set(&state, dev, me, mine,
				   mine && nctx[dev] ? SIM_ENTRY_COMPUTE : 0))
			r = CUDA_ERROR_OUT_OF_MEMORY; /* the table is full */
	}
	sim__state_unlock(&state);
	return r;
}

SIM_API(CUresult, cuInit, (unsigned int flags))
{
	lock();
	init_calls++;
	CUresult r = CUDA_SUCCESS;
	if (!cfg->ok)
		r = CUDA_ERROR_NOT_INITIALIZED;
	else if (flags != 0)
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r) {
		/* fails here, not later, when the state cannot be created */
		sim__state_init(&state, cfg->state);
		int e = sim__state_lock(&state, 1);
		if (e) {
			fprintf(stderr,
				"gpureclaim-sim: cannot open the state %s: "
				"%s\n",
				state.path, strerror(-e));
			r = CUDA_ERROR_OPERATING_SYSTEM;
		} else {
			sim__state_unlock(&state);
		}
	}
	if (!r) {
		static const struct sim__ckpt_ops ops = {
		    .block = ckpt_block,
		    .listed = ckpt_listed,
		    .device_bytes = ckpt_device_bytes,
		    .unmovable = ckpt_unmovable_of,
		};
		r = sim__ckpt_register(&state, &ops);
	}
	if (!r)
		initialised = 1;
	unlock();
	return r;
}

SIM_API(CUresult, cuDriverGetVersion, (int *version))
{
	if (!sim__config()->ok)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	*version = 13000;
	return CUDA_SUCCESS;
}

SIM_API(CUresult, cuDeviceGetCount, (int *count))
{
	lock();
	CUresult r = need_init();
	if (!r && !count)
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r)
		*count = cfg->gpus;
	unlock();
	return r;
}

SIM_API(CUresult, cuDeviceGet, (CUdevice * dev, int ordinal))
{
	lock();
	CUresult r = need_device(ordinal);
	if (!r && !dev)
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r)
		*dev = ordinal;
	unlock();
	return r;
}

SIM_API(CUresult, cuDeviceGetName, (char *name, int len, CUdevice dev))
{
	lock();
	CUresult r = need_device(dev);
	if (!r && (!name || len <= 0))
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r)
		snprintf(name, (size_t)len, "%s", cfg->name);
	unlock();
	return r;
}

SIM_API(CUresult, cuDeviceGetUuid, (CUuuid * uuid, CUdevice dev))
{
	static const unsigned char base[16] = {0x51, 0x11, 0xa0, 0x00, 0x00,
					       0x00, 0x40, 0x00, 0x80, 0x00};
	lock();
	CUresult r = need_device(dev);
	if (!r && !uuid)
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r) {
		memcpy(uuid->bytes, base, sizeof base);
		uuid->bytes[15] = (unsigned char)dev;
	}
	unlock();
	return r;
}

SIM_API(CUresult, cuDeviceGetUuid_v2, (CUuuid * uuid, CUdevice dev))
{
	return sim_cuDeviceGetUuid(uuid, dev);
}

SIM_API(CUresult, cuDeviceGetPCIBusId, (char *bus, int len, CUdevice dev))
{
	lock();
	CUresult r = need_device(dev);
	if (!r && (!bus || len <= 0))
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r)
		snprintf(bus, (size_t)len, "%04x:%02x:00.0", 0, dev + 1);
	unlock();
	return r;
}

SIM_API(CUresult, cuDeviceTotalMem_v2, (size_t * bytes, CUdevice dev))
{
	lock();
	CUresult r = need_device(dev);
	if (!r && !bytes)
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r)
		*bytes = (size_t)cfg->memory;
	unlock();
	return r;
}

SIM_API(CUresult, cuDevicePrimaryCtxGetState,
	(CUdevice dev, unsigned int *flags, int *active))
{
	lock();
	CUresult r = need_device(dev);
	if (!r && sim__broken(cfg, dev))
		r = CUDA_ERROR_INVALID_DEVICE;
	if (!r && (!flags || !active))
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r) {
		*flags = 0;
		*active = primary[dev].live;
	}
	unlock();
	return r;
}

SIM_API(CUresult, cuDevicePrimaryCtxRetain, (CUcontext * ctx, CUdevice dev))
{
	lock();
	CUresult r = need_device(dev);
	if (!r && sim__broken(cfg, dev))
		r = CUDA_ERROR_DEVICE_UNAVAILABLE;
	if (!r && !ctx)
		r = CUDA_ERROR_INVALID_VALUE;
	struct CUctx_st *c = &primary[dev < 0 ? 0 : dev % SIM_MAX_GPUS];
	if (!r && !c->live)
		r = ctx_activate(c, dev);
	if (!r) {
		c->refs++;
		ctx_calls++;
		*ctx = c;
	}
	unlock();
	return r;
}

SIM_API(CUresult, cuDevicePrimaryCtxRelease_v2, (CUdevice dev))
{
	lock();
	CUresult r = need_device(dev);
	if (!r && !primary[dev].live)
		r = CUDA_ERROR_INVALID_CONTEXT;
	if (!r && --primary[dev].refs == 0)
		ctx_deactivate(&primary[dev]);
	unlock();
	return r;
}

SIM_API(CUresult, cuDevicePrimaryCtxReset_v2, (CUdevice dev))
{
	lock();
	CUresult r = need_device(dev);
	if (!r && primary[dev].live)
		ctx_deactivate(&primary[dev]);
	unlock();
	return r;
}

SIM_API(CUresult, cuCtxCreate_v2,
	(CUcontext * ctx, unsigned int flags, CUdevice dev))
{
	(void)flags;
	lock();
	CUresult r = need_device(dev);
	if (!r && sim__broken(cfg, dev))
		r = CUDA_ERROR_DEVICE_UNAVAILABLE;
	if (!r && !ctx)
		r = CUDA_ERROR_INVALID_VALUE;
	struct CUctx_st *c = NULL;
	for (unsigned i = 0; !r && i < MAX_CTX && !c; i++) {
		struct CUctx_st *s = &others[(next_other + i) % MAX_CTX];
		if (!s->live)
			c = s;
	}
	if (!r && !c)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (!r)
		r = ctx_activate(c, dev);
	if (!r) {
		/* round-robin, so a stale handle rarely aliases a new one */
		next_other = (unsigned)(c - others + 1) % MAX_CTX;
		ctx_calls++;
		current = c;
		*ctx = c;
	}
	unlock();
	return r;
}

SIM_API(CUresult, cuCtxDestroy_v2, (CUcontext ctx))
{
	lock();
	CUresult r = need_init();
	if (!r && (!ctx_valid(ctx) || ctx->primary))
		r = CUDA_ERROR_INVALID_CONTEXT;
	if (!r)
		ctx_deactivate(ctx);
	unlock();
	return r;
}

/*
 * The older ABIs of four of these calls, which the real driver still
 * exports and answers for a look-up at an older version (the CUDA
 * runtime asks for cuDevicePrimaryCtxRelease and cuDevicePrimaryCtxReset
 * at 7000): the same calls here, as other functions.
 */
SIM_API(CUresult, cuDevicePrimaryCtxRelease, (CUdevice dev))
{
	return sim_cuDevicePrimaryCtxRelease_v2(dev);
}

SIM_API(CUresult, cuDevicePrimaryCtxReset, (CUdevice dev))
{
	return sim_cuDevicePrimaryCtxReset_v2(dev);
}

SIM_API(CUresult, cuCtxCreate,
	(CUcontext * ctx, unsigned int flags, CUdevice dev))
{
	return sim_cuCtxCreate_v2(ctx, flags, dev);
}

SIM_API(CUresult, cuCtxDestroy, (CUcontext ctx))
{
	return sim_cuCtxDestroy_v2(ctx);
}

SIM_API(CUresult, cuCtxSetCurrent, (CUcontext ctx))
{
	lock();
	CUresult r = need_init();
	if (!r && ctx && !ctx_valid(ctx))
		r = CUDA_ERROR_INVALID_CONTEXT;
	if (!r)
		current = ctx;
	unlock();
	return r;
}

/* A per-thread read and no lock, as in the real driver (~13 ns there):
 * the tracer asks it on every allocation. */
SIM_API(CUresult, cuCtxGetCurrent, (CUcontext * ctx))
{
	if (owner_forks != sim__forks() || !initialised)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!ctx)
		return CUDA_ERROR_INVALID_VALUE;
	*ctx = ctx_valid(current) ? current : NULL;
	return CUDA_SUCCESS;
}

SIM_API(CUresult, cuCtxGetDevice, (CUdevice * dev))
{
	lock();
	CUresult r = need_init();
	if (!r && !ctx_valid(current))
		r = CUDA_ERROR_INVALID_CONTEXT;
	if (!r && !dev)
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r)
		*dev = current->dev;
	unlock();
	return r;
}

int sim__cuda_alloc(uint64_t size, uint64_t *out)
{
	CUresult r = need_init();
	if (!r && !ctx_valid(current))
		r = CUDA_ERROR_INVALID_CONTEXT;
	if (!r && (!out || size == 0))
		r = CUDA_ERROR_INVALID_VALUE;
	uint64_t bytes = 0;
	if (!r) {
		if (size > UINT64_MAX - (SIM_GRANULE - 1))
			r = CUDA_ERROR_OUT_OF_MEMORY;
		bytes = (size + SIM_GRANULE - 1) & ~(SIM_GRANULE - 1);
	}
	if (!r && nallocs == allocs_cap) {
		size_t cap = allocs_cap ? allocs_cap * 2 : 64;
		struct alloc *a = realloc(allocs, cap * sizeof *a);
		if (!a)
			r = CUDA_ERROR_OUT_OF_MEMORY;
		else {
			allocs = a;
			allocs_cap = cap;
		}
	}
	int dev = r ? 0 : current->dev;
	if (!r && bytes > cfg->memory)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (!r)
		r = publish(dev, nctx[dev], held[dev] + bytes, 1);
	if (!r) {
		held[dev] += bytes;
		allocs[nallocs++] =
		    (struct alloc){next_ptr[dev], bytes, current};
		*out = next_ptr[dev];
		next_ptr[dev] += bytes;
	}
	return r;
}

int sim__cuda_free(uint64_t ptr)
{
	CUresult r = need_init();
	size_t i = 0;
	while (!r && i < nallocs && allocs[i].ptr != ptr)
		i++;
	if (!r && i == nallocs)
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r) {
		int dev = allocs[i].ctx->dev;
		held[dev] -= allocs[i].bytes;
		allocs[i] = allocs[--nallocs];
		publish(dev, nctx[dev], held[dev], 0);
	}
	return r;
}

SIM_API(CUresult, cuMemAlloc_v2, (CUdeviceptr * ptr, size_t size))
{
	lock();
	uint64_t p = 0;
	CUresult r = sim__cuda_alloc(size, ptr ? &p : NULL);
	if (!r)
		*ptr = p;
	unlock();
	return r;
}

SIM_API(CUresult, cuMemFree_v2, (CUdeviceptr ptr))
{
	lock();
	CUresult r = sim__cuda_free(ptr);
	unlock();
	return r;
}

/* cuda.h: CUipcMemHandle, 64 opaque bytes. Exporting memory to another
 * process makes this one impossible to checkpoint (docs/sim.md). */
typedef struct {
	char reserved[64];
} CUipcMemHandle;

SIM_API(CUresult, cuIpcGetMemHandle, (CUipcMemHandle * handle, CUdeviceptr ptr))
{
	lock();
	CUresult r = need_init();
	size_t i = 0;
	while (!r && i < nallocs && allocs[i].ptr != ptr)
		i++;
	if (!r && (!handle || i == nallocs))
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r) {
		memset(handle, 0, sizeof *handle);
		memcpy(handle->reserved, &ptr, sizeof ptr);
		unmovable |= SIM_UNMOVABLE_IPC;
	}
	unlock();
	return r;
}

SIM_API(CUresult, cuMemGetInfo_v2, (size_t * free_bytes, size_t *total))
{
	lock();
	CUresult r = need_init();
	if (!r && !ctx_valid(current))
		r = CUDA_ERROR_INVALID_CONTEXT;
	if (!r && (!free_bytes || !total))
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r && sim__state_lock(&state, 0))
		r = CUDA_ERROR_OPERATING_SYSTEM;
	if (!r) {
		int dev = current->dev;
		uint64_t used = sim__state_used(&state, dev, 0) +
				sim__extra_bytes(cfg, dev);
		sim__state_unlock(&state);
		*total = (size_t)cfg->memory;
		*free_bytes =
		    (size_t)(used < cfg->memory ? cfg->memory - used : 0);
	}
	unlock();
	return r;
}

#define SIM_CUDA_ERRORS(X)                                                     \
	X(CUDA_SUCCESS, "no error")                                            \
	X(CUDA_ERROR_INVALID_VALUE, "invalid argument")                        \
	X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")                           \
	X(CUDA_ERROR_NOT_INITIALIZED, "initialization error")                  \
	X(CUDA_ERROR_DEINITIALIZED, "driver shutting down")                    \
	X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected")          \
	X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")                 \
	X(CUDA_ERROR_DEVICE_NOT_LICENSED,                                      \
	  "device doesn't have valid Grid license")                            \
	X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context")                \
	X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")                \
	X(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in "    \
				    "the present state")                       \
	X(CUDA_ERROR_NOT_FOUND, "named symbol not found")                      \
	X(CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not "      \
				       "supported on this OS")                 \
	X(CUDA_ERROR_DEVICE_UNAVAILABLE,                                       \
	  "CUDA-capable device(s) is/are busy or unavailable")                 \
	X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted")                 \
	X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")                 \
	X(CUDA_ERROR_TIMEOUT, "the operation timed out")                       \
	X(CUDA_ERROR_UNKNOWN, "unknown error")

SIM_API(CUresult, cuGetErrorString, (CUresult error, const char **str))
{
	if (!str)
		return CUDA_ERROR_INVALID_VALUE;
	switch (error) {
#define X(code, text)                                                          \
	case code:                                                             \
		*str = text;                                                   \
		return CUDA_SUCCESS;
		SIM_CUDA_ERRORS(X)
#undef X
	}
	*str = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

SIM_API(CUresult, cuGetErrorName, (CUresult error, const char **str))
{
	if (!str)
		return CUDA_ERROR_INVALID_VALUE;
	switch (error) {
#define X(code, text)                                                          \
	case code:                                                             \
		*str = #code;                                                  \
		return CUDA_SUCCESS;
		SIM_CUDA_ERRORS(X)
#undef X
	}
	*str = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

static const struct sim__proc procs[] = {
    {"cuInit", 2000, (void *)sim_cuInit, NULL},
    {"cuDriverGetVersion", 2020, (void *)sim_cuDriverGetVersion, NULL},
    {"cuDeviceGetCount", 2000, (void *)sim_cuDeviceGetCount, NULL},
    {"cuDeviceGet", 2000, (void *)sim_cuDeviceGet, NULL},
    {"cuDeviceGetName", 2000, (void *)sim_cuDeviceGetName, NULL},
    {"cuDeviceGetUuid", 9020, (void *)sim_cuDeviceGetUuid, NULL},
    {"cuDeviceGetUuid", 11040, (void *)sim_cuDeviceGetUuid_v2, NULL},
    {"cuDeviceGetPCIBusId", 4010, (void *)sim_cuDeviceGetPCIBusId, NULL},
    {"cuDeviceTotalMem", 3020, (void *)sim_cuDeviceTotalMem_v2, NULL},
    {"cuDevicePrimaryCtxGetState", 7000, (void *)sim_cuDevicePrimaryCtxGetState,
     NULL},
    {"cuDevicePrimaryCtxRetain", 7000, (void *)sim_cuDevicePrimaryCtxRetain,
     NULL},
    {"cuDevicePrimaryCtxRelease", 7000, (void *)sim_cuDevicePrimaryCtxRelease,
     NULL},
    {"cuDevicePrimaryCtxRelease", 11000,
     (void *)sim_cuDevicePrimaryCtxRelease_v2, NULL},
    {"cuDevicePrimaryCtxReset", 7000, (void *)sim_cuDevicePrimaryCtxReset,
     NULL},
    {"cuDevicePrimaryCtxReset", 11000, (void *)sim_cuDevicePrimaryCtxReset_v2,
     NULL},
    {"cuCtxCreate", 2000, (void *)sim_cuCtxCreate, NULL},
    {"cuCtxCreate", 3020, (void *)sim_cuCtxCreate_v2, NULL},
    {"cuCtxDestroy", 2000, (void *)sim_cuCtxDestroy, NULL},
    {"cuCtxDestroy", 4000, (void *)sim_cuCtxDestroy_v2, NULL},
    {"cuCtxSetCurrent", 4000, (void *)sim_cuCtxSetCurrent, NULL},
    {"cuCtxGetCurrent", 4000, (void *)sim_cuCtxGetCurrent, NULL},
    {"cuCtxGetDevice", 2000, (void *)sim_cuCtxGetDevice, NULL},
    {"cuMemAlloc", 3020, (void *)sim_cuMemAlloc_v2, NULL},
    {"cuMemFree", 3020, (void *)sim_cuMemFree_v2, NULL},
    {"cuMemGetInfo", 3020, (void *)sim_cuMemGetInfo_v2, NULL},
    {"cuIpcGetMemHandle", 4010, (void *)sim_cuIpcGetMemHandle, NULL},
    {"cuGetErrorString", 6000, (void *)sim_cuGetErrorString, NULL},
    {"cuGetErrorName", 6000, (void *)sim_cuGetErrorName, NULL},
};

const struct sim__proc *sim__cuda_procs(size_t *n)
{
	*n = sizeof(procs) / sizeof(procs[0]);
	return procs;
}

/* ---- hooks for tests (docs/sim.md) ---- */

SIM_EXPORT int gprsim_init_calls(void)
{
	lock_nowait();
	int n = init_calls;
	unlock();
	return n;
}

SIM_EXPORT int gprsim_ctx_calls(void)
{
	lock_nowait();
	int n = ctx_calls;
	unlock();
	return n;
}

/*
 * This process's SM utilization on GPU `dev` from now on (0: idle), which
 * NVML's per-process samples then show (nvmlDeviceGetProcessUtilization):
 * the sim runs no kernels, so a test says when a process keeps its GPU
 * busy. 0; -EINVAL for a bad GPU or percent; -ENOENT without a context
 * there.
 */
SIM_EXPORT int gprsim_busy(int dev, unsigned percent)
{
	lock();
	int r = cfg->ok && dev >= 0 && dev < cfg->gpus && percent <= 100
		    ? 0
		    : -EINVAL;
	if (!r && (!initialised || !nctx[dev]))
		r = -ENOENT;
	if (!r)
		r = sim__state_lock(&state, 0);
	if (!r) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		r = sim__state_work(&state, dev, getpid(), percent,
				    (uint64_t)ts.tv_sec * 1000000u +
					(uint64_t)ts.tv_nsec / 1000u);
		sim__state_unlock(&state);
	}
	unlock();
	return r;
}

SIM_EXPORT int gprsim_blocked_calls(void)
{
	lock_nowait();
	int n = blocked_calls;
	unlock();
	return n;
}

SIM_EXPORT int gprsim_reset_state(void)
{
	lock_nowait();
	int r = cfg->ok ? 0 : -EINVAL;
	if (!r) {
		sim__state_init(&state, cfg->state);
		r = sim__state_lock(&state, 0);
	}
	if (!r) {
		sim__state_clear(&state);
		sim__state_unlock(&state);
	}
	unlock();
	return r;
}

/*
 * The real driver frees a process's memory when it exits, or when the
 * program unloads it (dlclose): stop the checkpoint thread, take our
 * entries out of the shared state, and free the table of allocations. A process
 * that dies without exit() is pruned by the next reader instead.
 */
__attribute__((destructor)) static void sim_cuda_exit(void)
{
	sim__ckpt_stop();
	if (sim__trylock() != 0)
		return;
	if (initialised && owner == getpid() &&
	    sim__state_lock(&state, 0) == 0) {
		for (int i = 0; i < SIM_MAX_GPUS; i++)
			sim__state_set(&state, i, owner, 0, 0);
		sim__ckpt_unregister(&state);
		sim__state_unlock(&state);
	}
	free(allocs);
	allocs = NULL;
	nallocs = allocs_cap = 0;
	sim__unlock();
}
