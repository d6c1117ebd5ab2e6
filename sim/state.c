/*
 * The state the simulated processes share: one fixed-size file under
 * /dev/shm per `state` name, mapped by every process that uses it and
 * guarded by flock. Each GPU has a table of {pid, flags, bytes, work}:
 * the per-process figure NVML reports, and whether the process keeps the
 * GPU busy (its utilization samples). Entries of processes that have exited
 * are dropped whenever the lock is taken, so a crashed test leaves nothing
 * behind that the next reader would trust, and the file is removed when
 * its table is empty, so unused states do not pile up in /dev/shm.
 */
#include "sim.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SIM_MAGIC 0x53525047u /* "GPRS" */
#define SIM_VERSION                                                            \
	3u /* 2: the checkpoint records; 3: the entries' GPU work              \
	    */

struct sim__shm {
	uint32_t magic;
	uint32_t version;
	uint64_t size; /* sizeof(struct sim__shm) of the writer */
	struct sim__entry gpu[SIM_MAX_GPUS][SIM_MAX_PROCS];
	struct sim__ckpt ckpt[SIM_MAX_PROCS];
};

static int valid(const struct sim__shm *m)
{
	return m->magic == SIM_MAGIC && m->version == SIM_VERSION &&
	       m->size == sizeof *m;
}

static void format(struct sim__shm *m)
{
	memset(m, 0, sizeof *m);
	m->size = sizeof *m;
	m->version = SIM_VERSION;
	m->magic = SIM_MAGIC;
}

void sim__state_close(struct sim__state *s)
{
	if (s->shm)
		munmap(s->shm, sizeof *s->shm);
	if (s->fd >= 0)
		close(s->fd);
	s->shm = NULL;
	s->fd = -1;
}

static int flock_retry(int fd, int op)
{
	while (flock(fd, op) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

void sim__state_init(struct sim__state *s, const char *name)
{
	sim__state_close(s);
	snprintf(s->path, sizeof s->path, "/dev/shm/gpureclaim-sim-%u-%s",
		 (unsigned)getuid(), name);
}

/* Whether fd is still the file at s->path (not unlinked meanwhile). */
static int still_linked(const struct sim__state *s, const struct stat *st)
{
	struct stat at;
	return stat(s->path, &at) == 0 && at.st_dev == st->st_dev &&
	       at.st_ino == st->st_ino;
}

/*
 * With the lock held on a file still linked: checks it and maps it. A
 * stale or foreign file (wrong size, magic or version) is re-initialised,
 * never trusted.
 */
static int map_locked(struct sim__state *s, const struct stat *st)
{
	if (!S_ISREG(st->st_mode) || st->st_uid != getuid())
		return -EPERM;
	int fresh = st->st_size != (off_t)sizeof(struct sim__shm);
	if (fresh && (ftruncate(s->fd, 0) < 0 ||
		      ftruncate(s->fd, sizeof(struct sim__shm)) < 0))
		return -errno;
	if (!s->shm) {
		void *map = mmap(NULL, sizeof(struct sim__shm),
				 PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
		if (map == MAP_FAILED)
			return -errno;
		s->shm = map;
	}
	if (fresh || !valid(s->shm)) {
		format(s->shm);
		if (fchmod(s->fd, 0600) < 0)
			return -errno;
	}
	return 0;
}

/* A zombie still answers kill(pid, 0) but holds no GPU memory any more. */
static int alive(pid_t pid)
{
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return 0;
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 1;
	buf[n] = '\0';
	char *paren = strrchr(buf, ')');
	if (paren && (paren[1] == ' ') && (paren[2] == 'Z' || paren[2] == 'X'))
		return 0;
	return 1;
}

int sim__state_lock(struct sim__state *s, int create)
{
	for (;;) {
		/*
		 * After fork the descriptor, and so its flock, is shared with
		 * the parent: open our own. Closing the copy leaves the
		 * parent's lock intact.
		 */
		if (s->fd >= 0 && s->owner != getpid())
			sim__state_close(s);
		if (s->fd < 0) {
			int flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW;
			s->fd =
			    open(s->path, flags | (create ? O_CREAT : 0), 0600);
			if (s->fd < 0)
				return errno == ENOENT && !create ? 0 : -errno;
			s->owner = getpid();
		}
		int r = flock_retry(s->fd, LOCK_EX);
		struct stat st;
		if (!r && fstat(s->fd, &st) < 0)
			r = -errno;
		if (!r && still_linked(s, &st)) {
			r = map_locked(s, &st);
			if (!r)
				break;
		}
		/* unlinked by its last user meanwhile, or unusable */
		flock_retry(s->fd, LOCK_UN);
		sim__state_close(s);
		if (r)
			return r;
	}
	for (int g = 0; g < SIM_MAX_GPUS; g++) {
		for (int i = 0; i < SIM_MAX_PROCS; i++) {
			struct sim__entry *e = &s->shm->gpu[g][i];
			if (e->pid > 0 && !alive(e->pid))
				memset(e, 0, sizeof *e);
		}
	}
	for (int i = 0; i < SIM_MAX_PROCS; i++) {
		struct sim__ckpt *c = &s->shm->ckpt[i];
		if (c->pid > 0 && !alive(c->pid))
			memset(c, 0, sizeof *c);
	}
	return 0;
}

static int empty(const struct sim__shm *m)
{
	for (int g = 0; g < SIM_MAX_GPUS; g++) {
		for (int i = 0; i < SIM_MAX_PROCS; i++) {
			if (m->gpu[g][i].pid)
				return 0;
		}
	}
	for (int i = 0; i < SIM_MAX_PROCS; i++) {
		if (m->ckpt[i].pid)
			return 0;
	}
	return 1;
}

void sim__state_unlock(struct sim__state *s)
{
	if (!s->shm)
		return;
	/*
	 * An empty table is the same as no file: remove it, so that states
	 * nobody uses any more do not pile up in /dev/shm. Openers that
	 * raced with us see it unlinked once they hold the lock, and retry.
	 */
	if (empty(s->shm)) {
		unlink(s->path);
		flock_retry(s->fd, LOCK_UN);
		sim__state_close(s);
		return;
	}
	flock_retry(s->fd, LOCK_UN);
}

uint64_t sim__state_used(struct sim__state *s, int gpu, pid_t except)
{
	uint64_t sum = 0;
	for (int i = 0; s->shm && i < SIM_MAX_PROCS; i++) {
		const struct sim__entry *e = &s->shm->gpu[gpu][i];
		if (e->pid > 0 && e->pid != except)
			sum += e->bytes;
	}
	return sum;
}

int sim__state_set(struct sim__state *s, int gpu, pid_t pid, uint64_t bytes,
		   uint32_t flags)
{
	if (!s->shm)
		return bytes || flags ? -ENOENT : 0;
	struct sim__entry *row = s->shm->gpu[gpu], *slot = NULL;
	for (int i = 0; i < SIM_MAX_PROCS && !slot; i++) {
		if (row[i].pid == pid)
			slot = &row[i];
	}
	for (int i = 0; i < SIM_MAX_PROCS && !slot && (bytes || flags); i++) {
		if (row[i].pid == 0)
			slot = &row[i];
	}
	if (!bytes && !flags) {
		if (slot)
			memset(slot, 0, sizeof *slot);
		return 0;
	}
	if (!slot)
		return -ENOSPC;
	slot->pid = pid;
	slot->flags = flags;
	slot->bytes = bytes;
	return 0;
}

int sim__state_work(struct sim__state *s, int gpu, pid_t pid, unsigned sm,
		    uint64_t now_us)
{
	struct sim__entry *row = s->shm ? s->shm->gpu[gpu] : NULL;
	for (int i = 0; row && i < SIM_MAX_PROCS; i++) {
		struct sim__entry *e = &row[i];
		if (e->pid != pid)
			continue;
		if (e->sm && !sm) { /* a busy period ends */
			e->last_sm = e->sm;
			e->idle_us = now_us;
		}
		e->sm = sm;
		return 0;
	}
	return -ENOENT;
}

size_t sim__state_list(struct sim__state *s, int gpu, struct sim__entry *out,
		       size_t max)
{
	size_t n = 0;
	for (int i = 0; s->shm && i < SIM_MAX_PROCS && n < max; i++) {
		if (s->shm->gpu[gpu][i].pid > 0)
			out[n++] = s->shm->gpu[gpu][i];
	}
	return n;
}

void sim__state_clear(struct sim__state *s)
{
	if (s->shm)
		format(s->shm);
}

struct sim__ckpt *sim__ckpt_find(struct sim__state *s, pid_t pid, int create)
{
	if (!s->shm || pid <= 0)
		return NULL;
	struct sim__ckpt *free_slot = NULL;
	for (int i = 0; i < SIM_MAX_PROCS; i++) {
		struct sim__ckpt *c = &s->shm->ckpt[i];
		if (c->pid == pid)
			return c;
		if (!c->pid && !free_slot)
			free_slot = c;
	}
	if (!create || !free_slot)
		return NULL;
	memset(free_slot, 0, sizeof *free_slot);
	free_slot->pid = pid;
	return free_slot;
}

void sim__ckpt_drop(struct sim__state *s, pid_t pid)
{
	struct sim__ckpt *c = sim__ckpt_find(s, pid, 0);
	if (c)
		memset(c, 0, sizeof *c);
}
