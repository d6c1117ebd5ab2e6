/*
 * The simulated libnvidia-ml.so.1 (docs/sim.md). It reads the shared state
 * that the simulated libcuda writes and never loads libcuda itself. The
 * process lists follow the real calling convention: *count is the
 * capacity on the way in and the number needed on the way out.
 */
#include "sim.h"

#include "nvml_abi.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

struct nvmlDevice_st {
	int index;
};

static pid_t owner;   /* the process insufficient_done refers to */
static unsigned refs; /* nvmlInit_v2 minus nvmlShutdown */
static int insufficient_done;
/* The real NVML keeps its device files (/dev/nvidiactl, /dev/nvidiaN)
 * open from its initialisation to its shutdown; the sim keeps /dev/zero,
 * a character device too, so tests can see who holds it. */
static int device_fd = -1;
static struct nvmlDevice_st devices[SIM_MAX_GPUS];
static struct sim__state state = SIM_STATE_INIT;
static const struct sim__config *cfg;

static void lock(void)
{
	sim__lock();
	if (!cfg)
		cfg = sim__config();
	if (owner != getpid()) {
		owner = getpid();
		insufficient_done = 0;
	}
}

static void unlock(void)
{
	sim__unlock();
}

/* The index behind a handle, checking init, the handle and the fault. */
static nvmlReturn_t device(nvmlDevice_t d, int *index)
{
	if (!refs)
		return NVML_ERROR_UNINITIALIZED;
	if (!d || d < devices || d >= devices + cfg->gpus)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (sim__broken(cfg, d->index))
		return NVML_ERROR_GPU_IS_LOST;
	*index = d->index;
	return NVML_SUCCESS;
}

static nvmlReturn_t copy_string(char *dst, unsigned len, const char *src)
{
	if (!dst)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (cfg->faults & SIM_FAULT_UNTERMINATED) {
		/* a hostile NVML: the whole buffer, a control byte last, and
		 * no NUL anywhere */
		if (len) {
			memset(dst, 'Z', len);
			dst[len - 1] = '\003';
		}
		return NVML_SUCCESS;
	}
	if (strlen(src) >= len)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	strcpy(dst, src);
	return NVML_SUCCESS;
}

static void uuid_of(int i, char *buf, size_t len)
{
	snprintf(buf, len, "GPU-5111a000-0000-4000-8000-%012x", i);
}

SIM_EXPORT nvmlReturn_t nvmlInit_v2(void)
{
	lock();
	nvmlReturn_t r = NVML_SUCCESS;
	if (!cfg->ok)
		r = NVML_ERROR_UNINITIALIZED;
	else if (cfg->faults & SIM_FAULT_NVML_ABSENT)
		r = NVML_ERROR_DRIVER_NOT_LOADED;
	if (!r)
		sim__state_init(&state, cfg->state);
	if (!r) {
		for (int i = 0; i < SIM_MAX_GPUS; i++)
			devices[i].index = i;
		if (refs++ == 0)
			device_fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	}
	unlock();
	return r;
}

SIM_EXPORT nvmlReturn_t nvmlShutdown(void)
{
	lock();
	nvmlReturn_t r = refs ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
	if (refs && --refs == 0 && device_fd >= 0) {
		close(device_fd);
		device_fd = -1;
	}
	unlock();
	return r;
}

SIM_EXPORT const char *nvmlErrorString(nvmlReturn_t r)
{
	switch (r) {
	case NVML_SUCCESS:
		return "Success";
	case NVML_ERROR_UNINITIALIZED:
		return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT:
		return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED:
		return "Not Supported";
	case NVML_ERROR_NO_PERMISSION:
		return "Insufficient Permissions";
	case NVML_ERROR_ALREADY_INITIALIZED:
		return "Already Initialized";
	case NVML_ERROR_NOT_FOUND:
		return "Not Found";
	case NVML_ERROR_INSUFFICIENT_SIZE:
		return "Insufficient Size";
	case NVML_ERROR_DRIVER_NOT_LOADED:
		return "Driver Not Loaded";
	case NVML_ERROR_FUNCTION_NOT_FOUND:
		return "Function Not Found";
	case NVML_ERROR_GPU_IS_LOST:
		return "GPU is lost";
	case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
		return "Argument version mismatch";
	case NVML_ERROR_UNKNOWN:
		return "Unknown Error";
	default:
		return "Unknown Error";
	}
}

SIM_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version,
						   unsigned int len)
{
	lock();
	nvmlReturn_t r = refs ? copy_string(version, len, "580.0-sim")
			      : NVML_ERROR_UNINITIALIZED;
	unlock();
	return r;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	lock();
	nvmlReturn_t r = refs ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
	if (!r && !count)
		r = NVML_ERROR_INVALID_ARGUMENT;
	if (!r)
		*count = (unsigned)cfg->gpus;
	unlock();
	return r;
}

static nvmlReturn_t handle_of(int i, nvmlDevice_t *out)
{
	if (!out)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (sim__broken(cfg, i))
		return NVML_ERROR_GPU_IS_LOST;
	*out = &devices[i];
	return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
						      nvmlDevice_t *out)
{
	lock();
	nvmlReturn_t r = refs ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
	if (!r && index >= (unsigned)cfg->gpus)
		r = NVML_ERROR_INVALID_ARGUMENT;
	if (!r)
		r = handle_of((int)index, out);
	unlock();
	return r;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid,
						  nvmlDevice_t *out)
{
	lock();
	nvmlReturn_t r = refs ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
	if (!r && !uuid)
		r = NVML_ERROR_INVALID_ARGUMENT;
	int found = -1;
	for (int i = 0; !r && i < cfg->gpus && found < 0; i++) {
		char u[GPR_NVML_DEVICE_UUID_V2_BUFFER_SIZE];
		uuid_of(i, u, sizeof u);
		if (strcasecmp(u, uuid) == 0)
			found = i;
	}
	if (!r)
		r = found < 0 ? NVML_ERROR_NOT_FOUND : handle_of(found, out);
	unlock();
	return r;
}

/* Accepts "DDDD:BB:DD.F" and "DDDDDDDD:BB:DD.F", any case. */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus,
							 nvmlDevice_t *out)
{
	lock();
	nvmlReturn_t r = refs ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
	unsigned dom, b, dev, fn;
	char tail;
	if (!r && (!bus || sscanf(bus, "%x:%x:%x.%x%c", &dom, &b, &dev, &fn,
				  &tail) != 4))
		r = NVML_ERROR_INVALID_ARGUMENT;
	if (!r)
		r = dom == 0 && dev == 0 && fn == 0 && b >= 1 &&
			    b <= (unsigned)cfg->gpus
			? handle_of((int)b - 1, out)
			: NVML_ERROR_NOT_FOUND;
	unlock();
	return r;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name,
					  unsigned int len)
{
	lock();
	int i;
	nvmlReturn_t r = device(d, &i);
	if (!r)
		r = copy_string(name, len, cfg->name);
	unlock();
	return r;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid,
					  unsigned int len)
{
	lock();
	int i;
	nvmlReturn_t r = device(d, &i);
	char u[GPR_NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	if (!r) {
		uuid_of(i, u, sizeof u);
		r = copy_string(uuid, len, u);
	}
	unlock();
	return r;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d,
						gpr_nvmlPciInfo_t *pci)
{
	lock();
	int i;
	nvmlReturn_t r = device(d, &i);
	if (!r && !pci)
		r = NVML_ERROR_INVALID_ARGUMENT;
	if (!r) {
		memset(pci, 0, sizeof *pci);
		pci->domain = 0;
		pci->bus = (unsigned)i + 1;
		pci->device = 0;
		pci->pciDeviceId = 0x233510de; /* H200's id, vendor NVIDIA */
		pci->pciSubSystemId = 0x18b010de;
		snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy,
			 "%04x:%02x:00.0", 0, i + 1);
		snprintf(pci->busId, sizeof pci->busId, "%08x:%02x:00.0", 0,
			 i + 1);
	}
	unlock();
	return r;
}

/* Bytes in use on GPU i: every process of the state plus `extra`. */
static nvmlReturn_t used_bytes(int i, uint64_t *used)
{
	if (sim__state_lock(&state, 0))
		return NVML_ERROR_UNKNOWN;
	*used = sim__state_used(&state, i, 0) + sim__extra_bytes(cfg, i);
	sim__state_unlock(&state);
	if (*used > cfg->memory)
		*used = cfg->memory;
	return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d,
						gpr_nvmlMemory_v1_t *mem)
{
	lock();
	int i;
	uint64_t used = 0;
	nvmlReturn_t r = device(d, &i);
	if (!r && !mem)
		r = NVML_ERROR_INVALID_ARGUMENT;
	if (!r)
		r = used_bytes(i, &used);
	if (!r) {
		mem->total = cfg->memory;
		mem->used = used;
		mem->free = cfg->memory - used;
	}
	unlock();
	return r;
}

/*
 * Under the memory-v1 fault it answers NVML_ERROR_FUNCTION_NOT_FOUND, as
 * a library cannot hide one of its exports per run.
 */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d,
						   gpr_nvmlMemory_v2_t *mem)
{
	lock();
	int i;
	uint64_t used = 0;
	nvmlReturn_t r = cfg->ok && (cfg->faults & SIM_FAULT_MEMORY_V1)
			     ? NVML_ERROR_FUNCTION_NOT_FOUND
			     : device(d, &i);
	if (!r && !mem)
		r = NVML_ERROR_INVALID_ARGUMENT;
	if (!r &&
	    mem->version != GPR_NVML_STRUCT_VERSION(gpr_nvmlMemory_v2_t, 2))
		r = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	if (!r)
		r = used_bytes(i, &used);
	if (!r) {
		mem->total = cfg->memory;
		mem->reserved = 0;
		mem->used = used;
		mem->free = cfg->memory - used;
	}
	unlock();
	return r;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d,
					     unsigned int *current,
					     unsigned int *pending)
{
	lock();
	int i;
	nvmlReturn_t r = device(d, &i);
	if (!r && (!current || !pending))
		r = NVML_ERROR_INVALID_ARGUMENT;
	if (!r)
		*current = *pending = (cfg->faults & SIM_FAULT_MIG) ? 1 : 0;
	unlock();
	return r;
}

struct record {
	uint32_t pid;
	uint64_t bytes;
};

/* The compute (processes with a context, extras) or graphics list. */
static nvmlReturn_t gather(int i, int graphics, struct record *out, size_t *n)
{
	*n = 0;
	if (!graphics) {
		struct sim__entry e[SIM_MAX_PROCS];
		if (sim__state_lock(&state, 0))
			return NVML_ERROR_UNKNOWN;
		size_t k = sim__state_list(&state, i, e, SIM_MAX_PROCS);
		sim__state_unlock(&state);
		for (size_t j = 0; j < k; j++) {
			if (e[j].flags & SIM_ENTRY_COMPUTE)
				out[(*n)++] = (struct record){
				    (uint32_t)e[j].pid, e[j].bytes};
		}
	}
	for (int j = 0; j < cfg->nextra; j++) {
		const struct sim__extra *x = &cfg->extra[j];
		if (x->gpu == i && x->graphics == graphics)
			out[(*n)++] = (struct record){x->pid, x->bytes};
	}
	return NVML_SUCCESS;
}

static void write_record(void *infos, size_t k, const struct record *rec)
{
	uint32_t pid = rec->pid;
	if (cfg->faults & SIM_FAULT_FOREIGN_PID)
		pid += SIM_FOREIGN_PID_OFFSET;
	int mig = (cfg->faults & SIM_FAULT_MIG) != 0;
	gpr_nvmlProcessInfo_cc_t r = {
	    .pid = pid,
	    .usedGpuMemory = mig ? GPR_NVML_VALUE_NOT_AVAILABLE
			     : (cfg->faults & SIM_FAULT_GARBAGE_BYTES)
				 ? rec->bytes + SIM_GARBAGE_BYTES
				 : rec->bytes,
	    .gpuInstanceId = mig ? 0 : 0xffffffffu,
	    .computeInstanceId = mig ? 0 : 0xffffffffu,
	    .usedGpuCcProtectedMemory = 0,
	};
	if (cfg->faults & SIM_FAULT_STRIDE32) {
		memcpy((char *)infos + k * sizeof r, &r, sizeof r);
	} else {
		gpr_nvmlProcessInfo_v2_t v = {r.pid, r.usedGpuMemory,
					      r.gpuInstanceId,
					      r.computeInstanceId};
		memcpy((char *)infos + k * sizeof v, &v, sizeof v);
	}
}

/* Compute-list calls of this process, for gprsim_nvml_list_calls. */
static int list_calls;

static nvmlReturn_t processes(nvmlDevice_t d, unsigned int *count, void *infos,
			      int graphics, int v3)
{
	lock();
	if (!graphics)
		list_calls++;
	int i;
	nvmlReturn_t r = cfg->ok && v3 && (cfg->faults & SIM_FAULT_PROCS_V2)
			     ? NVML_ERROR_FUNCTION_NOT_FOUND
			     : device(d, &i);
	if (!r && !count)
		r = NVML_ERROR_INVALID_ARGUMENT;
	struct record recs[SIM_MAX_PROCS + SIM_MAX_EXTRA];
	size_t n = 0;
	if (!r)
		r = gather(i, graphics, recs, &n);
	if (!r && (cfg->faults & SIM_FAULT_INSUFFICIENT_ONCE) &&
	    !insufficient_done) {
		insufficient_done = 1;
		*count = (unsigned)n + 2;
		r = NVML_ERROR_INSUFFICIENT_SIZE;
	} else if (!r && n > 0 && (!infos || *count < n)) {
		*count = (unsigned)n;
		r = NVML_ERROR_INSUFFICIENT_SIZE;
	} else if (!r) {
		for (size_t k = 0; k < n; k++)
			write_record(infos, k, &recs[k]);
		*count = (unsigned)n;
	}
	unlock();
	return r;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(
    nvmlDevice_t d, unsigned int *count, void *infos)
{
	return processes(d, count, infos, 0, 1);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(
    nvmlDevice_t d, unsigned int *count, void *infos)
{
	return processes(d, count, infos, 0, 0);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(
    nvmlDevice_t d, unsigned int *count, void *infos)
{
	return processes(d, count, infos, 1, 1);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(
    nvmlDevice_t d, unsigned int *count, void *infos)
{
	return processes(d, count, infos, 1, 0);
}

/* How far back the sim's sample buffer reaches (the real driver's length
 * is its own): a busy period that ended longer ago shows no sample. */
#define WORK_WINDOW_US (600ull * 1000000ull)

/*
 * One sample per process with a context that did work (gprsim_busy):
 * stamped now while it is busy, else when its last busy period ended,
 * within WORK_WINDOW_US; only those newer than `since`. No sample is
 * NVML_ERROR_NOT_FOUND, as in the real driver; MIG is not supported.
 */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(
    nvmlDevice_t d, gpr_nvmlProcessUtilizationSample_t *buf,
    unsigned int *count, unsigned long long since)
{
	lock();
	int i;
	nvmlReturn_t r = device(d, &i);
	if (!r && !count)
		r = NVML_ERROR_INVALID_ARGUMENT;
	if (!r && (cfg->faults & SIM_FAULT_MIG))
		r = NVML_ERROR_NOT_SUPPORTED;
	struct sim__entry e[SIM_MAX_PROCS];
	size_t k = 0;
	if (!r && sim__state_lock(&state, 0))
		r = NVML_ERROR_UNKNOWN;
	else if (!r) {
		k = sim__state_list(&state, i, e, SIM_MAX_PROCS);
		sim__state_unlock(&state);
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t now =
	    (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
	gpr_nvmlProcessUtilizationSample_t out[SIM_MAX_PROCS];
	size_t n = 0;
	for (size_t j = 0; !r && j < k; j++) {
		const struct sim__entry *x = &e[j];
		uint64_t when = x->sm ? now : x->idle_us;
		unsigned sm = x->sm ? x->sm : x->last_sm;
		if (!(x->flags & SIM_ENTRY_COMPUTE) || !when ||
		    now - when > WORK_WINDOW_US || when <= since)
			continue;
		uint32_t pid = (uint32_t)x->pid;
		if (cfg->faults & SIM_FAULT_FOREIGN_PID)
			pid += SIM_FOREIGN_PID_OFFSET;
		out[n++] =
		    (gpr_nvmlProcessUtilizationSample_t){.pid = pid,
							 .timeStamp = when,
							 .smUtil = sm,
							 .memUtil = sm / 2};
	}
	if (!r && n == 0)
		r = NVML_ERROR_NOT_FOUND;
	else if (!r && (!buf || *count < n)) {
		*count = (unsigned)n;
		r = NVML_ERROR_INSUFFICIENT_SIZE;
	} else if (!r) {
		memcpy(buf, out, n * sizeof *out);
		*count = (unsigned)n;
	}
	unlock();
	return r;
}

/* ---- hooks for tests (docs/sim.md) ---- */

SIM_EXPORT int gprsim_nvml_list_calls(void)
{
	lock();
	int n = list_calls;
	unlock();
	return n;
}
