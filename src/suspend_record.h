/*
 * The records of the processes gpureclaim suspended (suspend_record.c):
 * one small file per process in a private folder of the user who
 * suspended it, so `ps` can list a process NVML no longer does. A record
 * says what was done and measured then; the process's state now is the
 * driver's to say (gpr__suspend_state), never the record's. Internal.
 *
 * The folder is the agent's (docs/agent.md): $GPURECLAIM_AGENT_DIR, else
 * $XDG_RUNTIME_DIR/gpureclaim (when that is an absolute folder of this
 * user, mode 0700), else /tmp/gpureclaim-UID; the records go in its
 * "suspended" subfolder, mode 0700, checked to be this user's and not a
 * link before anything is read or written there. Root's are root's own.
 *
 * The file, <pid>.suspended, mode 0600, lines of "key value":
 *   gpureclaim-suspended 1
 *   pid 4242
 *   start 123456        (/proc/PID/stat's start time: a pid used again
 *                        is another process, whose record is stale)
 *   uid 1000
 *   time 1764900000.250 (when it was suspended, seconds since the epoch)
 *   host_bytes 3221225472   (or "unknown")
 *   gpu 0 GPU-5111a000-... 3758096384   (NVML index, UUID, the bytes the
 *                        GPU got back there; one line per GPU)
 * and, for resume on demand (docs/suspend.md), where known:
 *   restore_thread 4250  (the driver's restore thread in the process)
 *   driver_wait 4251 202 7f3a10 7f3a9c00 7f3b2040   (a thread that waited
 *                        inside libcuda before the lock: tid, system call,
 *                        first argument, stack pointer, user PC; hex for
 *                        the last three; at most GPR__RECORD_WAITS)
 *   watcher 4300 123460  (the watcher's pid and start time)
 *   wake_error 1764900100.5 the restore failed: ...   (the last resume on
 *                        demand that failed: when, and its one line)
 */
#ifndef GPR_SUSPEND_RECORD_H
#define GPR_SUSPEND_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_waiters.h"

#define GPR__RECORD_GPUS 16
#define GPR__RECORD_WAITS 32

struct gpr__record {
	int pid;
	uint64_t start;
	long uid;
	double time;
	int host_known;
	uint64_t host_bytes;
	size_t n_gpus;
	struct {
		int index;
		char uuid[96];
		uint64_t bytes;
	} gpu[GPR__RECORD_GPUS];
	/* resume on demand */
	int restore_tid; /* 0: unknown */
	size_t n_waits;
	struct gpr__wait_sig waits[GPR__RECORD_WAITS];
	int watcher; /* 0: none */
	uint64_t watcher_start;
	double wake_error_time; /* 0: none */
	char wake_error[400];
};

/*
 * This user's records folder into out. With `create`, made (0700) where
 * missing; without, GPR_E_NOT_FOUND when it is not there. Anything there
 * that is not this user's private folder is GPR_E_PERM (err says what:
 * never used).
 */
int gpr__record_dir(char *out, size_t len, int create, char *err,
		    size_t errlen);

/* A records folder and the user it belongs to. */
struct gpr__record_folder {
	char path[4096];
	long uid;
};

/*
 * The folders `ps` reads that exist: this user's, and as root every
 * user's (/tmp/gpureclaim-UID and /run/user/UID/gpureclaim, each checked
 * to be that user's private folder); with $GPURECLAIM_AGENT_DIR set,
 * that one only. *dirs is malloc'd (free it; NULL when n is 0); 0, or
 * GPR_E_NOMEM.
 */
int gpr__record_dirs(struct gpr__record_folder **dirs, size_t *n);

/* Writes r atomically (a temporary file renamed over the record). */
int gpr__record_write(const char *dir, const struct gpr__record *r, char *err,
		      size_t errlen);

/*
 * The record of pid in dir: 0; GPR_E_NOT_FOUND when there is none;
 * GPR_E_FORMAT for a file that is not one (a link, another user's, too
 * large, malformed: never trusted).
 */
int gpr__record_read(const char *dir, int pid, struct gpr__record *r);

/*
 * The lock of pid's suspension in dir, held until gpr__record_unlock:
 * suspend, resume and a watcher take it, so two never act on one process
 * at once. Waits at most `seconds`. The lock's descriptor, or
 * GPR_E_BUSY (another holds it still), GPR_E_IO.
 */
int gpr__record_lock(const char *dir, int pid, double seconds);
/* Lets it go (its file removed: nothing is left between actions). */
void gpr__record_unlock(const char *dir, int pid, int fd);

/* Removes pid's record; 0 when it is gone (or was never there). */
int gpr__record_remove(const char *dir, int pid);

/* The pids with a record file in dir, malloc'd (free it); 0. */
int gpr__record_pids(const char *dir, int **pids, size_t *n);

/*
 * Whether record r, read from a folder of user `folder_uid`, still
 * describes the process now at its pid: that pid exists, started when
 * the record says and belongs to the record's uid, which is the folder's
 * user's own unless that user is root (only root suspends another's
 * process): a record planted about someone else's process is not one.
 */
int gpr__record_current(const struct gpr__record *r, long folder_uid);

#endif /* GPR_SUSPEND_RECORD_H */
