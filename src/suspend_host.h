/*
 * What /proc and the cgroup file system say of a process about to be
 * suspended and of the host that will hold its memory (suspend_host.c).
 * Internal: the command (cli/) and, later, the extension read it.
 *
 * Two variables are for tests only (docs/suspend.md says so): they point
 * the reads at files a test wrote, so the refusals can be exercised
 * without filling a machine. Never set them in production.
 *   GPURECLAIM_TEST_MEMINFO     a file read instead of /proc/meminfo
 *   GPURECLAIM_TEST_CGROUP_FS   a folder read instead of /sys/fs/cgroup
 */
#ifndef GPR_SUSPEND_HOST_H
#define GPR_SUSPEND_HOST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A process as /proc shows it. */
struct gpr__proc {
	int pid;
	long uid;	/* owner of /proc/PID, as the agent's checks take it */
	uint64_t start; /* start time, clock ticks after boot (/proc/PID/stat
			 * field 22): a pid used again has another */
	int zombie;
	int rss_known;
	uint64_t rss; /* VmRSS, bytes */
};

/*
 * Reads pid's facts. 0; GPR_E_NOT_FOUND when there is no such process in
 * this pid namespace (err says so).
 */
int gpr__proc_read(int pid, struct gpr__proc *out, char *err, size_t errlen);

/* VmRSS of pid in bytes; 0, or GPR_E_NOT_FOUND. */
int gpr__proc_rss(int pid, uint64_t *bytes);

/* The start time of pid (as gpr__proc's), 0 when it cannot be read. */
uint64_t gpr__proc_start(int pid);

/*
 * What the host can take in: MemAvailable, and the tightest memory limit
 * of pid's memory cgroup and its ancestors (v2: memory.max and
 * memory.current; v1: memory.limit_in_bytes and memory.usage_in_bytes;
 * the inactive page cache of memory.stat counted as free, since the
 * kernel reclaims it before it fails an allocation). The driver copies a
 * process's GPU memory into that process's own memory (its RSS grows by
 * it, measured on an H200), which the kernel charges to the process's
 * cgroup; hence pid's cgroup, not the caller's.
 *
 * A margin is kept: GPR__HOST_RESERVE_PERCENT of MemTotal (at least
 * GPR__HOST_RESERVE_MIN) on the host, that percent of the limit in a
 * cgroup; `room` is what is left to fill after it.
 */
#define GPR__HOST_RESERVE_PERCENT 10
#define GPR__HOST_RESERVE_MIN (1ULL << 30)

struct gpr__host_room {
	int mem_known;
	uint64_t mem_total, mem_available;
	uint64_t host_room; /* mem_available - the host's margin, >= 0 */
	int cg_limited;	    /* a limited cgroup was found */
	int cg_version;	    /* 1 or 2; 0 when no memory cgroup was read */
	uint64_t cg_limit, cg_usage, cg_free; /* of the tightest level */
	uint64_t cg_room;		      /* cg_free - its margin, >= 0 */
	char cg_path[512]; /* that level, under the cgroup file system */
	uint64_t room;	   /* the smaller of host_room and cg_room */
};

/* Fills r for pid. 0; an error when MemAvailable cannot be read (err). */
int gpr__host_room(int pid, struct gpr__host_room *r, char *err, size_t errlen);

/*
 * 0 when `need` bytes fit the room, else GPR_E_NO_ROOM and one line in
 * `why` that says which limit, by how much, and what to do.
 */
int gpr__host_fits(const struct gpr__host_room *r, uint64_t need, char *why,
		   size_t len);

#endif /* GPR_SUSPEND_HOST_H */
