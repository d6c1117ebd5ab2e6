/*
 * The simulated driver's checkpoint API (docs/sim.md, sim/cuda_ckpt.c and
 * sim/ckpt_thread.c): the states, the memory moved into the target's own
 * host memory and off NVML's lists, calls that wait while a process is
 * locked, a restore that finds no room, the refusals and the faults. A
 * target is a forked child, or this process itself (the API takes any
 * pid, its own too). Each test runs in its own process (support.c).
 */
#include "support.h"

#include "cuda_abi.h"
#include "nvml_abi.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB (1ULL << 20)

struct api {
	void *lib;
	CUresult (*state)(int, CUprocessState *);
	CUresult (*lock)(int, CUcheckpointLockArgs *);
	CUresult (*checkpoint)(int, CUcheckpointCheckpointArgs *);
	CUresult (*restore)(int, CUcheckpointRestoreArgs *);
	CUresult (*unlock)(int, CUcheckpointUnlockArgs *);
	CUresult (*tid)(int, int *);
	int (*blocked)(void);
};

static struct api api_of(void *lib)
{
	struct api a = {.lib = lib};
	*(void **)&a.state = sim_sym(lib, "cuCheckpointProcessGetState");
	*(void **)&a.lock = sim_sym(lib, "cuCheckpointProcessLock");
	*(void **)&a.checkpoint = sim_sym(lib, "cuCheckpointProcessCheckpoint");
	*(void **)&a.restore = sim_sym(lib, "cuCheckpointProcessRestore");
	*(void **)&a.unlock = sim_sym(lib, "cuCheckpointProcessUnlock");
	*(void **)&a.tid =
	    sim_sym(lib, "cuCheckpointProcessGetRestoreThreadId");
	*(void **)&a.blocked = sim_sym(lib, "gprsim_blocked_calls");
	return a;
}

static int state_of(struct api *a, int pid)
{
	CUprocessState s = (CUprocessState)-1;
	assert_int_equal(a->state(pid, &s), CUDA_SUCCESS);
	return (int)s;
}

/* NVML's figure of pid on GPU 0, 0 when not listed. */
static unsigned long long figure(int pid)
{
	static void *nv;
	if (!nv) {
		nv = dlopen(sim_path("libnvidia-ml.so.1"), RTLD_NOW);
		assert_non_null(nv);
		assert_int_equal(((int (*)(void))sim_sym(nv, "nvmlInit_v2"))(),
				 0);
	}
	nvmlDevice_t d = NULL;
	assert_int_equal(((int (*)(unsigned, nvmlDevice_t *))sim_sym(
			     nv, "nvmlDeviceGetHandleByIndex_v2"))(0, &d),
			 0);
	gpr_nvmlProcessInfo_v2_t buf[16];
	unsigned count = 16;
	assert_int_equal(
	    ((int (*)(nvmlDevice_t, unsigned *, void *))sim_sym(
		nv, "nvmlDeviceGetComputeRunningProcesses_v3"))(d, &count, buf),
	    0);
	for (unsigned i = 0; i < count; i++)
		if (buf[i].pid == (unsigned)pid)
			return buf[i].usedGpuMemory;
	return 0;
}

static unsigned long long rss_of(int pid)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", pid);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	unsigned long long kb = 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

/* The sim as `config` says, its API, and a target holding `bytes`. */
static pid_t setup(const char *config, struct api *a, unsigned long long bytes,
		   int *keep)
{
	sim_setup(config);
	*a = api_of(sim_cuda_load());
	return sim_target(a->lib, bytes, keep);
}

/* The whole cycle on another process: states, NVML, its host memory. */
static void test_cycle_moves_the_memory_and_back(void **st)
{
	(void)st;
	struct api a;
	int keep;
	pid_t t = setup("context=16MiB", &a, 64 * MiB, &keep);
	assert_int_equal(state_of(&a, t), CU_PROCESS_STATE_RUNNING);
	assert_int_equal(figure(t), 80 * MiB);
	unsigned long long rss0 = rss_of(t);

	assert_int_equal(a.lock(t, NULL), 0);
	assert_int_equal(state_of(&a, t), CU_PROCESS_STATE_LOCKED);
	assert_int_equal(figure(t), 80 * MiB); /* a lock moves nothing */
	assert_int_equal(a.checkpoint(t, NULL), 0);
	assert_int_equal(state_of(&a, t), CU_PROCESS_STATE_CHECKPOINTED);
	assert_int_equal(figure(t), 0);
	/* the device memory, not the context, is in its own memory now
	 * (and whatever else it touched meanwhile: a page or so) */
	unsigned long long grown = rss_of(t) - rss0;
	assert_true(grown >= 64 * MiB && grown <= 65 * MiB);
	int tid = 0;
	assert_int_equal(a.tid(t, &tid), 0);
	char task[64];
	snprintf(task, sizeof task, "/proc/%d/task/%d", (int)t, tid);
	struct stat sb;
	assert_int_equal(stat(task, &sb), 0); /* one of its threads */
	assert_int_not_equal(tid, (int)t);

	/* a second checkpoint or a lock in this state: refused, no change */
	assert_int_equal(a.checkpoint(t, NULL), CUDA_ERROR_ILLEGAL_STATE);
	assert_int_equal(a.lock(t, NULL), CUDA_ERROR_ILLEGAL_STATE);
	assert_int_equal(a.unlock(t, NULL), CUDA_ERROR_ILLEGAL_STATE);
	assert_int_equal(state_of(&a, t), CU_PROCESS_STATE_CHECKPOINTED);

	assert_int_equal(a.restore(t, NULL), 0);
	assert_int_equal(state_of(&a, t), CU_PROCESS_STATE_LOCKED);
	assert_int_equal(figure(t), 80 * MiB);
	assert_true(rss_of(t) <= rss0 + (grown - 64 * MiB));
	assert_int_equal(a.unlock(t, NULL), 0);
	assert_int_equal(state_of(&a, t), CU_PROCESS_STATE_RUNNING);
	sim_target_end(t, keep);
	/* its record went with it */
	CUprocessState s;
	assert_int_equal(a.state(t, &s), CUDA_ERROR_NOT_FOUND);
}

struct caller {
	void *lib;
	int rc;
};

/* A thread's first CUDA calls: its current context, an allocation. */
static void *alloc_thread(void *arg)
{
	struct caller *c = arg;
	unsigned long long p;
	c->rc = sim_cuda_open_device(c->lib, 0);
	if (c->rc == 0)
		c->rc = sim_cuda_alloc(c->lib, 2 * MiB, &p);
	return NULL;
}

/* A call made while locked waits until the unlock, then goes on. */
static void test_calls_wait_while_locked(void **st)
{
	(void)st;
	sim_setup("context=16MiB");
	void *lib = sim_cuda_load();
	struct api a = api_of(lib);
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	int me = (int)getpid();
	assert_int_equal(a.lock(me, NULL), 0);
	struct caller c = {.lib = lib, .rc = -1};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, alloc_thread, &c), 0);
	while (a.blocked() == 0) /* it has come in and waits */
		sched_yield();
	assert_int_equal(c.rc, -1);
	assert_int_equal(a.unlock(me, NULL), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(c.rc, CUDA_SUCCESS);
	assert_int_equal(a.blocked(), 1);
	assert_int_equal(figure(me), 18 * MiB);
}

/* Memory the driver cannot move: refused, still locked, then unlocked. */
static void test_managed_and_ipc_memory_are_refused(void **st)
{
	(void)st;
	sim_setup("context=16MiB");
	void *lib = sim_cuda_load();
	struct api a = api_of(lib);
	assert_int_equal(sim_cuda_open_device(lib, 0), 0);
	int me = (int)getpid();
	unsigned long long p = 0;
	assert_int_equal(sim_cuda_alloc(lib, 4 * MiB, &p), 0);
	char handle[64];
	assert_int_equal(((CUresult(*)(void *, CUdeviceptr))sim_sym(
			     lib, "cuIpcGetMemHandle"))(handle, p),
			 0);
	assert_int_equal(a.lock(me, NULL), 0);
	assert_int_equal(a.checkpoint(me, NULL), CUDA_ERROR_NOT_SUPPORTED);
	assert_int_equal(state_of(&a, me), CU_PROCESS_STATE_LOCKED);
	assert_int_equal(figure(me), 20 * MiB);
	assert_int_equal(a.unlock(me, NULL), 0);

	/* managed memory, in a child (a forked child starts with nothing) */
	pid_t t;
	int up[2];
	assert_int_equal(pipe(up), 0);
	fflush(NULL);
	t = fork();
	if (t == 0) {
		unsigned long long q;
		int ok = ((int (*)(unsigned))sim_sym(lib, "cuInit"))(0) == 0 &&
			 sim_cuda_open_device(lib, 0) == 0 &&
			 ((CUresult(*)(CUdeviceptr *, size_t, unsigned))sim_sym(
			     lib, "cuMemAllocManaged"))(&q, 2 * MiB, 1) == 0;
		char c = ok ? 'y' : 'n';
		if (write(up[1], &c, 1) != 1)
			_exit(3);
		pause();
		_exit(0);
	}
	char c = 0;
	assert_int_equal(read(up[0], &c, 1), 1);
	assert_int_equal(c, 'y');
	assert_int_equal(a.lock(t, NULL), 0);
	assert_int_equal(a.checkpoint(t, NULL), CUDA_ERROR_NOT_SUPPORTED);
	assert_int_equal(a.unlock(t, NULL), 0);
	kill(t, SIGKILL);
	waitpid(t, NULL, 0);
}

/* Arguments: reserved fields must be zero; remapping is not simulated;
 * a controller must have called cuInit; a pid must be a CUDA process. */
static void test_arguments_and_who_may_call(void **st)
{
	(void)st;
	sim_setup("");
	void *lib = dlopen(sim_path("libcuda.so.1"), RTLD_NOW);
	assert_non_null(lib);
	struct api a = api_of(lib);
	CUprocessState s;
	assert_int_equal(a.state((int)getpid(), &s),
			 CUDA_ERROR_NOT_INITIALIZED);
	assert_int_equal(a.lock(1, NULL), CUDA_ERROR_NOT_INITIALIZED);
	assert_int_equal(((int (*)(unsigned))sim_sym(lib, "cuInit"))(0), 0);
	int me = (int)getpid();
	assert_int_equal(state_of(&a, me), CU_PROCESS_STATE_RUNNING);
	assert_int_equal(a.state(1, &s), CUDA_ERROR_NOT_FOUND);
	assert_int_equal(a.lock(1, NULL), CUDA_ERROR_NOT_FOUND);
	assert_int_equal(a.state(0, &s), CUDA_ERROR_INVALID_VALUE);

	CUcheckpointLockArgs la;
	memset(&la, 0, sizeof la);
	la.reserved1[6] = 1;
	assert_int_equal(a.lock(me, &la), CUDA_ERROR_INVALID_VALUE);
	CUcheckpointCheckpointArgs ca;
	memset(&ca, 0, sizeof ca);
	ca.reserved[0] = 1; /* CUDA 13.4's customStorageInfo_out */
	assert_int_equal(a.checkpoint(me, &ca), CUDA_ERROR_INVALID_VALUE);
	CUcheckpointRestoreArgs ra;
	memset(&ra, 0, sizeof ra);
	CUcheckpointGpuPair pair;
	memset(&pair, 0, sizeof pair);
	ra.gpuPairs = &pair;
	ra.gpuPairsCount = 1;
	assert_int_equal(a.restore(me, &ra), CUDA_ERROR_NOT_SUPPORTED);
	memset(&ra, 0, sizeof ra);
	ra.reserved1 = 1;
	assert_int_equal(a.restore(me, &ra), CUDA_ERROR_INVALID_VALUE);
	/* zeroed arguments are "as before": accepted */
	memset(&la, 0, sizeof la);
	assert_int_equal(a.lock(me, &la), 0);
	memset(&ca, 0, sizeof ca);
	assert_int_equal(a.checkpoint(me, &ca), 0);
	memset(&ra, 0, sizeof ra);
	assert_int_equal(a.restore(me, &ra), 0);
	CUcheckpointUnlockArgs ua;
	memset(&ua, 0, sizeof ua);
	assert_int_equal(a.unlock(me, &ua), 0);

	/* cuGetProcAddress knows them from CUDA 12.8 on */
	CUresult (*gpa)(const char *, void **, int, unsigned long long, int *) =
	    (CUresult(*)(const char *, void **, int, unsigned long long,
			 int *))sim_sym(lib, "cuGetProcAddress_v2");
	void *fn = NULL;
	int status = -1;
	assert_int_equal(gpa("cuCheckpointProcessLock", &fn, 12080, 0, &status),
			 0);
	assert_ptr_equal(fn, (void *)a.lock);
	assert_int_equal(gpa("cuCheckpointProcessLock", &fn, 12060, 0, &status),
			 CUDA_ERROR_NOT_FOUND);
	assert_int_equal(status, 2); /* only in a later version */
}

/* A restore finds the GPU taken: no change, it stays checkpointed. */
static void test_a_restore_without_room_changes_nothing(void **st)
{
	(void)st;
	struct api a;
	int k1, k2;
	pid_t t = setup("context=16MiB;memory=1GiB", &a, 512 * MiB, &k1);
	assert_int_equal(a.lock(t, NULL), 0);
	assert_int_equal(a.checkpoint(t, NULL), 0);
	pid_t other =
	    sim_target(a.lib, 600 * MiB, &k2); /* in the room it left */
	assert_int_equal(a.restore(t, NULL), CUDA_ERROR_OUT_OF_MEMORY);
	assert_int_equal(state_of(&a, t), CU_PROCESS_STATE_CHECKPOINTED);
	assert_int_equal(figure(t), 0);
	sim_target_end(other, k2);
	assert_int_equal(a.restore(t, NULL), 0);
	assert_int_equal(figure(t), 528 * MiB);
	assert_int_equal(a.unlock(t, NULL), 0);
	sim_target_end(t, k1);
}

/* The copy takes bytes / checkpoint_rate at least: a lower bound. */
static void test_the_copy_rate_sets_the_time(void **st)
{
	(void)st;
	struct api a;
	int keep;
	pid_t t =
	    setup("context=16MiB;checkpoint_rate=64MiB;restore_rate=128MiB", &a,
		  16 * MiB, &keep);
	struct timespec t0, t1, t2;
	assert_int_equal(a.lock(t, NULL), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(a.checkpoint(t, NULL), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_int_equal(a.restore(t, NULL), 0);
	clock_gettime(CLOCK_MONOTONIC, &t2);
	double c = (double)(t1.tv_sec - t0.tv_sec) +
		   (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	double r = (double)(t2.tv_sec - t1.tv_sec) +
		   (double)(t2.tv_nsec - t1.tv_nsec) / 1e9;
	assert_true(c >= 0.25);
	assert_true(r >= 0.125);
	assert_int_equal(a.unlock(t, NULL), 0);
	sim_target_end(t, keep);
}

static void test_faults(void **st)
{
	(void)st;
	/* the target's: its checkpoint fails halfway, as 570 warned */
	struct api a;
	int keep;
	pid_t t =
	    setup("context=16MiB;fault=checkpoint-fails", &a, 8 * MiB, &keep);
	assert_int_equal(a.lock(t, NULL), 0);
	assert_int_equal(a.checkpoint(t, NULL), CUDA_ERROR_UNKNOWN);
	assert_int_equal(state_of(&a, t), CU_PROCESS_STATE_FAILED);
	assert_int_equal(a.restore(t, NULL), CUDA_ERROR_ILLEGAL_STATE);
	assert_int_equal(a.unlock(t, NULL), CUDA_ERROR_ILLEGAL_STATE);
	kill(t, SIGKILL);
	waitpid(t, NULL, 0);
}

static void test_fault_lock_timeout(void **st)
{
	(void)st;
	sim_setup("fault=lock-timeout");
	void *lib = sim_cuda_load();
	struct api a = api_of(lib);
	int me = (int)getpid();
	CUcheckpointLockArgs la;
	memset(&la, 0, sizeof la);
	la.timeoutMs = 50;
	assert_int_equal(a.lock(me, &la), CUDA_ERROR_TIMEOUT);
	assert_int_equal(state_of(&a, me), CU_PROCESS_STATE_RUNNING);
	/* withdrawn: a later request is answered */
	assert_int_equal(a.checkpoint(me, NULL), CUDA_ERROR_ILLEGAL_STATE);
}

/* The controller's driver refuses every lock (another user's, say). */
static void test_fault_checkpoint_denied(void **st)
{
	(void)st;
	sim_setup("fault=checkpoint-denied");
	void *lib = sim_cuda_load();
	struct api a = api_of(lib);
	int me = (int)getpid();
	assert_int_equal(a.lock(me, NULL), CUDA_ERROR_NOT_PERMITTED);
	assert_int_equal(state_of(&a, me), CU_PROCESS_STATE_RUNNING);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cycle_moves_the_memory_and_back),
	    cmocka_unit_test(test_calls_wait_while_locked),
	    cmocka_unit_test(test_managed_and_ipc_memory_are_refused),
	    cmocka_unit_test(test_arguments_and_who_may_call),
	    cmocka_unit_test(test_a_restore_without_room_changes_nothing),
	    cmocka_unit_test(test_the_copy_rate_sets_the_time),
	    cmocka_unit_test(test_faults),
	    cmocka_unit_test(test_fault_lock_timeout),
	    cmocka_unit_test(test_fault_checkpoint_denied),
	};
	return gpr_test_main(argc, argv, "sim_checkpoint", tests,
			     sizeof tests / sizeof tests[0]);
}
