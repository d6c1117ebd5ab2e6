/*
 * Internals of the simulated driver (docs/sim.md), compiled into both
 * libcuda.so.1 and libnvidia-ml.so.1. Everything here is hidden (the build
 * uses -fvisibility=hidden): each library carries its own copy, and only
 * the vendor-named functions and the gprsim_* hooks are exported.
 */
#ifndef GPR_SIM_H
#define GPR_SIM_H

#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#define SIM_EXPORT __attribute__((visibility("default")))

/*
 * A driver function: exported under its vendor name as an alias of the
 * hidden sim_<name>, which the library itself calls and whose address
 * cuGetProcAddress answers, as the real driver answers with its own
 * definitions: a preloaded library that defines the same name (the
 * tracer's interposer) does not change what the sim calls or hands out.
 */
#define SIM_API(ret, name, params)                                             \
	static ret sim_##name params;                                          \
	SIM_EXPORT ret name params __attribute__((alias("sim_" #name)));       \
	static ret sim_##name params

#define SIM_MAX_GPUS 16
#define SIM_MAX_PROCS 128 /* processes per GPU in the shared table */
/* 16 GPUs x 64 processes: bench/metrics_bench.py */
#define SIM_MAX_EXTRA 1024
#define SIM_GRANULE (2ULL << 20) /* allocation granularity: 2 MiB */
#define SIM_FOREIGN_PID_OFFSET 1000000U

enum sim__fault {
	SIM_FAULT_NVML_ABSENT = 1 << 0,
	SIM_FAULT_STRIDE32 = 1 << 1,
	SIM_FAULT_INSUFFICIENT_ONCE = 1 << 2,
	SIM_FAULT_MIG = 1 << 3,
	SIM_FAULT_FOREIGN_PID = 1 << 4,
	SIM_FAULT_MEMORY_V1 = 1 << 5,
	SIM_FAULT_PROCS_V2 = 1 << 6,
	SIM_FAULT_UNTERMINATED = 1 << 7,
	SIM_FAULT_GARBAGE_BYTES = 1 << 8,
	/* the checkpoint API (cuda_ckpt.c, docs/sim.md) */
	SIM_FAULT_CHECKPOINT_FAILS = 1 << 9,
	SIM_FAULT_CHECKPOINT_DENIED = 1 << 10,
	SIM_FAULT_LOCK_TIMEOUT = 1 << 11,
};
/* What SIM_FAULT_GARBAGE_BYTES adds to each process record's bytes. */
#define SIM_GARBAGE_BYTES (1ULL << 60)

struct sim__extra {
	int gpu;
	uint32_t pid;
	int graphics; /* `g` suffix: listed by the graphics list */
	uint64_t bytes;
};

struct sim__config {
	int ok; /* 0: GPURECLAIM_SIM was malformed, every call fails */
	int gpus;
	uint64_t memory;
	uint64_t context;
	char name[96];
	char state[65];
	unsigned faults;	  /* enum sim__fault bits */
	unsigned broken_mask;	  /* bit i: GPU i is broken */
	uint64_t checkpoint_rate; /* bytes a second a checkpoint copies; 0:
				   * as fast as memory goes */
	uint64_t restore_rate;	  /* and a restore */
	int nextra;
	struct sim__extra extra[SIM_MAX_EXTRA];
};

/*
 * Parses `text` (NULL or "" gives the defaults) into *c. Returns 0, or -1
 * with c->ok = 0 and a one-line reason in `why`.
 */
int sim__config_parse(const char *text, struct sim__config *c, char *why,
		      size_t whylen);

/*
 * The process's configuration from $GPURECLAIM_SIM, parsed once (the first
 * call prints the reason to stderr when it is malformed). Never NULL.
 */
const struct sim__config *sim__config(void);

/* The library's mutex (lock.c), held across fork(). */
void sim__lock(void);
int sim__trylock(void); /* 0 when taken */
void sim__unlock(void);
/* With the mutex held: waits on c, which releases it meanwhile. */
void sim__wait(pthread_cond_t *c);

/* Waiting (wait.c): a futex call on a word of a shared mapping (seconds
 * <= 0: no timeout), the monotonic clock, a sleep that outlasts signals. */
long sim__futex(uint32_t *word, int op, uint32_t val, double seconds);
double sim__now(void);
void sim__sleep(double seconds);

/* Counts the forks that led to this process (a child differs from its
 * parent; no system call, unlike getpid). */
unsigned sim__forks(void);

/* Bytes that `extra` items put on GPU `gpu`. */
uint64_t sim__extra_bytes(const struct sim__config *c, int gpu);

int sim__broken(const struct sim__config *c, int gpu);

/* ---- state shared between processes (/dev/shm), see state.c ---- */

#define SIM_ENTRY_COMPUTE 1u /* the process holds a context on the GPU */

struct sim__entry {
	int32_t pid; /* 0: free slot */
	uint32_t flags;
	uint64_t bytes;
	/* GPU work (gprsim_busy): the SM utilization now (0: idle); while
	 * idle, the last busy period's and when it ended (0: never busy) */
	uint32_t sm;
	uint32_t last_sm;
	uint64_t idle_us;
};

struct sim__shm;

struct sim__state {
	int fd;	     /* -1 while closed */
	pid_t owner; /* the process that opened fd (flock is per open file) */
	struct sim__shm *shm; /* NULL while no file is mapped */
	char path[128];
};

#define SIM_STATE_INIT                                                         \
	{                                                                      \
		.fd = -1                                                       \
	}

/* Names the state file of `name`; no I/O (the file is opened on lock). */
void sim__state_init(struct sim__state *s, const char *name);

/* Unmaps and closes it (a state of one call's, or a thread's own). */
void sim__state_close(struct sim__state *s);

/*
 * Takes the cross-process lock (after the caller serialized its own
 * threads: flock does not) and drops the entries of processes that no
 * longer exist. With `create`, the file is created (mode 0600) if needed;
 * without, a missing file is an empty table: 0 is returned, no lock is
 * held and s->shm is NULL, which the functions below read as empty.
 * Returns 0 or -errno.
 */
int sim__state_lock(struct sim__state *s, int create);

/* Drops the lock; removes the file when its table is empty. */
void sim__state_unlock(struct sim__state *s);

/* Under the lock: sum of all processes' bytes on `gpu`, except `except`. */
uint64_t sim__state_used(struct sim__state *s, int gpu, pid_t except);

/*
 * Under the lock: sets pid's entry on `gpu` (flags 0 and bytes 0 remove
 * it). Returns 0, or -ENOSPC when the GPU's table is full (-ENOENT
 * without a file: lock with `create` to write).
 */
int sim__state_set(struct sim__state *s, int gpu, pid_t pid, uint64_t bytes,
		   uint32_t flags);

/*
 * Under the lock: pid's SM utilization on `gpu` from now (`now_us`, CPU
 * time in us since the epoch) on; 0 is idle, and a busy period that ends
 * is kept as the last one (its utilization, when it ended). 0, or -ENOENT
 * when pid has no entry there.
 */
int sim__state_work(struct sim__state *s, int gpu, pid_t pid, unsigned sm,
		    uint64_t now_us);

/* Under the lock: copies up to `max` entries of `gpu`; returns the count. */
size_t sim__state_list(struct sim__state *s, int gpu, struct sim__entry *out,
		       size_t max);

/* Under the lock: forgets every entry. */
void sim__state_clear(struct sim__state *s);

/*
 * A process's checkpoint record (cuda_ckpt.c), one per process that
 * called cuInit: its state as the driver's checkpoint API reports it, and
 * the mailbox through which a controller process asks the process's own
 * checkpoint thread to lock, checkpoint, restore or unlock it (the real
 * driver has such a thread in every CUDA process: the "restore thread").
 * req and seq are futex words: a controller writes req and wakes it; the
 * thread answers in result, clears req and bumps seq.
 */
enum sim__req {
	SIM_REQ_NONE = 0,
	SIM_REQ_LOCK,
	SIM_REQ_CHECKPOINT,
	SIM_REQ_RESTORE,
	SIM_REQ_UNLOCK,
};

struct sim__ckpt {
	int32_t pid;	/* 0: free slot */
	uint32_t state; /* CUprocessState */
	uint32_t req;	/* enum sim__req */
	uint32_t seq;
	int32_t result; /* CUresult of the last request answered */
	int32_t tid;	/* the process's checkpoint thread, 0 until it runs */
	uint64_t host;	/* bytes its checkpoint holds in host memory */
};

/* Under the lock: pid's record (made, state running, with `create`), or
 * NULL (no file, none, or the table full). */
struct sim__ckpt *sim__ckpt_find(struct sim__state *s, pid_t pid, int create);

/* Under the lock: forgets pid's record. */
void sim__ckpt_drop(struct sim__state *s, pid_t pid);

/* ---- libcuda's own, shared by cuda.c and mempool.c (not in NVML) ---- */

/* The library's lock as every CUDA call takes it (a forked child's first
 * call forgets the parent's tables first). */
void sim__cuda_lock(void);
void sim__cuda_unlock(void);

/* Under the lock: 0 (CUDA_SUCCESS) with *dev the GPU of the calling
 * thread's current context, else the error a call needing one returns. */
int sim__cuda_current(int *dev);

/* Under the lock: 0 if cuInit ran and `dev` is a GPU, else the error. */
int sim__cuda_device(int dev);

/* Under the lock: puts `delta` bytes on (or, negative, takes them off)
 * this process's figure on `dev`; growing fails with
 * CUDA_ERROR_OUT_OF_MEMORY past the GPU's total. The bytes put there go
 * when the GPU's last context does. */
int sim__cuda_charge(int dev, int64_t delta);

/* Under the lock: how many times `dev` lost its last context in this
 * process; what was charged before a change is gone. */
unsigned sim__cuda_epoch(int dev);

/* Under the lock: cuMemAlloc_v2 / cuMemFree_v2 (CUresult, a CUdeviceptr). */
int sim__cuda_alloc(uint64_t size, uint64_t *out);
int sim__cuda_free(uint64_t ptr);

/* Under the lock (mempool.c): the size of a live cuMemCreate handle, 0
 * when there is none (for cuMemMap). */
uint64_t sim__vmm_size(unsigned long long handle);

/* ---- the checkpoint API's target side, for cuda_ckpt.c ---- */

/* Memory a checkpoint cannot move (cuMemAllocManaged, cuIpcGetMemHandle). */
#define SIM_UNMOVABLE_UVM 1u
#define SIM_UNMOVABLE_IPC 2u

/* Under the lock: marks this process as holding unmovable memory. */
void sim__cuda_unmovable(unsigned what);

/* For a controller's call: whether this process called cuInit (never
 * waiting for a lock on this process), and the configuration. */
int sim__cuda_controller(const struct sim__config **c);

/*
 * What the checkpoint thread (ckpt_thread.c) may do to this process's
 * tables, which are cuda.c's; each with the library's mutex held:
 * - block: while on, the process's CUDA calls wait (lock() in cuda.c);
 * - listed(off): take its figures off NVML's lists (1: checkpointed, the
 *   tables kept) or put them back (0), which fails with
 *   CUDA_ERROR_OUT_OF_MEMORY, changing nothing, when a GPU no longer has
 *   room for them;
 * - device_bytes: its device memory (allocations and pools, not the
 *   contexts);
 * - unmovable: the SIM_UNMOVABLE_* bits of what it holds.
 */
struct sim__ckpt_ops {
	void (*block)(int on);
	int (*listed)(int off);
	uint64_t (*device_bytes)(void);
	unsigned (*unmovable)(void);
};

/* ckpt_thread.c: at cuInit (under the lock), this process's record, and
 * its checkpoint thread started once per process. 0 or a CUresult. */
int sim__ckpt_register(struct sim__state *s, const struct sim__ckpt_ops *o);
/* At exit (under the lock): its record dropped. */
void sim__ckpt_unregister(struct sim__state *s);
/* At exit or dlclose, before the lock is taken: the thread stopped and
 * joined, so none of this library's code runs once it is unloaded. */
void sim__ckpt_stop(void);

/*
 * What cuGetProcAddress may answer (cuda_proc.c): a driver API name (as
 * cuda.h spells it before its _v2 define), the CUDA version that gave it
 * this ABI, the function and its per-thread-default-stream variant (NULL:
 * none). A name may have several rows, one per ABI. Each file lists its
 * own functions.
 */
struct sim__proc {
	const char *name;
	int since;
	void *fn;
	void *ptsz;
};
const struct sim__proc *sim__cuda_procs(size_t *n);	    /* cuda.c */
const struct sim__proc *sim__cuda_mem_procs(size_t *n);	    /* cuda_mem.c */
const struct sim__proc *sim__cuda_mempool_procs(size_t *n); /* mempool.c */
const struct sim__proc *sim__cuda_ckpt_procs(size_t *n);    /* cuda_ckpt.c */

#endif /* GPR_SIM_H */
