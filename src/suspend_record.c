/*
 * The records of suspended processes (suspend_record.h says the folder,
 * the file and why). Paths in a folder another process could write are
 * never followed: the folder is checked to be the user's own, 0700, not a
 * link; files are opened with O_NOFOLLOW and checked with fstat before a
 * byte is read; a record is written to a temporary file of its own
 * (O_EXCL) and renamed over the old one, so a reader never sees half.
 */
#include "suspend_record.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpureclaim.h"
#include "private_dir.h"
#include "suspend_host.h"

#define MAX_RECORD 8192
#define SUBDIR "suspended"

/* The agent's folder of this user (agent.py server_dir), unchecked. */
static int base_dir(char *out, size_t len)
{
	long uid = (long)getuid();
	const char *mine = getenv("GPURECLAIM_AGENT_DIR");
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;
	if (mine && *mine && mine[0] == '/') {
		n = snprintf(out, len, "%s", mine);
	} else if (mine && *mine) {
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof cwd))
			return -1;
		n = snprintf(out, len, "%s/%s", cwd, mine);
	} else if (gpr__xdg_ok(xdg, uid)) {
		n = snprintf(out, len, "%s/gpureclaim", xdg);
	} else {
		n = snprintf(out, len, "/tmp/gpureclaim-%ld", uid);
	}
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* dir, made 0700 with `create` where missing, then checked private. */
static int private_or_made(const char *dir, int create, char *err,
			   size_t errlen)
{
	long uid = (long)getuid();
	if (create && mkdir(dir, 0700) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot make %s: %s", dir,
			 strerror(errno));
		return GPR_E_IO;
	}
	struct stat st;
	if (lstat(dir, &st) != 0) {
		snprintf(err, errlen, "%s does not exist", dir);
		return GPR_E_NOT_FOUND;
	}
	if (!gpr__private_dir(dir, uid)) {
		snprintf(err, errlen,
			 "%s is not a folder of uid %ld with mode 0700 (a "
			 "link, a file, another user's or open to others); "
			 "not used: remove it",
			 dir, uid);
		return GPR_E_PERM;
	}
	return 0;
}

int gpr__record_dir(char *out, size_t len, int create, char *err, size_t errlen)
{
	char base[PATH_MAX];
	if (base_dir(base, sizeof base) != 0) {
		snprintf(err, errlen, "gpureclaim's folder: path too long");
		return GPR_E_INVAL;
	}
	int rc = private_or_made(base, create, err, errlen);
	if (rc)
		return rc;
	if ((size_t)snprintf(out, len, "%s/" SUBDIR, base) >= len) {
		snprintf(err, errlen, "%s/" SUBDIR ": path too long", base);
		return GPR_E_INVAL;
	}
	return private_or_made(out, create, err, errlen);
}

static int add_folder(struct gpr__record_folder **v, size_t *n, size_t *cap,
		      const char *path, long uid)
{
	if (!gpr__private_dir(path, uid))
		return 0;
	for (size_t i = 0; i < *n; i++)
		if (strcmp((*v)[i].path, path) == 0)
			return 0;
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 8;
		struct gpr__record_folder *g = realloc(*v, c * sizeof *g);
		if (!g)
			return GPR_E_NOMEM;
		*v = g;
		*cap = c;
	}
	snprintf((*v)[*n].path, sizeof(*v)[*n].path, "%s", path);
	(*v)[*n].uid = uid;
	(*n)++;
	return 0;
}

/* Every user's records folder under `parent`: the entries named prefix
 * + uid, whose base folder (the entry + base_suffix) is that user's and
 * private. */
static int add_users(struct gpr__record_folder **v, size_t *n, size_t *cap,
		     const char *parent, const char *prefix,
		     const char *base_suffix)
{
	DIR *d = opendir(parent);
	if (!d)
		return 0;
	int rc = 0;
	size_t plen = strlen(prefix);
	for (struct dirent *e; rc == 0 && (e = readdir(d));) {
		if (strncmp(e->d_name, prefix, plen) != 0)
			continue;
		char *end;
		errno = 0;
		long uid = strtol(e->d_name + plen, &end, 10);
		if (errno || end == e->d_name + plen || *end || uid < 0)
			continue;
		char base[PATH_MAX], path[PATH_MAX + 16];
		snprintf(base, sizeof base, "%s/%s%s", parent, e->d_name,
			 base_suffix);
		if (!gpr__private_dir(base, uid))
			continue;
		snprintf(path, sizeof path, "%s/" SUBDIR, base);
		rc = add_folder(v, n, cap, path, uid);
	}
	closedir(d);
	return rc;
}

int gpr__record_dirs(struct gpr__record_folder **dirs, size_t *n)
{
	*dirs = NULL;
	*n = 0;
	size_t cap = 0;
	char mine[PATH_MAX], err[256];
	int rc = 0;
	if (gpr__record_dir(mine, sizeof mine, 0, err, sizeof err) == 0)
		rc = add_folder(dirs, n, &cap, mine, (long)getuid());
	const char *only = getenv("GPURECLAIM_AGENT_DIR");
	if (rc == 0 && geteuid() == 0 && !(only && *only)) {
		rc = add_users(dirs, n, &cap, "/tmp", "gpureclaim-", "");
		if (rc == 0)
			rc = add_users(dirs, n, &cap, "/run/user", "",
				       "/gpureclaim");
	}
	if (rc) {
		free(*dirs);
		*dirs = NULL;
		*n = 0;
	}
	return rc;
}

static void record_path(char *out, size_t len, const char *dir, int pid)
{
	snprintf(out, len, "%s/%d.suspended", dir, pid);
}

/* text on one line: every control character a space (a newline would
 * end the record's line). */
static void one_line(const char *text, char *out, size_t len)
{
	size_t n = 0;
	for (; text[n] && n + 1 < len; n++)
		out[n] = (unsigned char)text[n] < 0x20 || text[n] == 0x7f
			     ? ' '
			     : text[n];
	out[n] = '\0';
}

int gpr__record_write(const char *dir, const struct gpr__record *r, char *err,
		      size_t errlen)
{
	char path[PATH_MAX + 32], tmp[PATH_MAX + 64];
	record_path(path, sizeof path, dir, r->pid);
	snprintf(tmp, sizeof tmp, "%s/.%d.%ld.tmp", dir, r->pid,
		 (long)getpid());
	unlink(tmp);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		      0600);
	if (fd < 0) {
		snprintf(err, errlen, "cannot write %s: %s", tmp,
			 strerror(errno));
		return GPR_E_IO;
	}
	char text[MAX_RECORD];
	size_t n = 0;
#define PUT(...)                                                               \
	do {                                                                   \
		int w = snprintf(text + n, sizeof text - n, __VA_ARGS__);      \
		if (w > 0 && (size_t)w < sizeof text - n)                      \
			n += (size_t)w;                                        \
	} while (0)
	PUT("gpureclaim-suspended 1\npid %d\nstart %llu\nuid %ld\n"
	    "time %.3f\n",
	    r->pid, (unsigned long long)r->start, r->uid, r->time);
	if (r->host_known)
		PUT("host_bytes %llu\n", (unsigned long long)r->host_bytes);
	else
		PUT("host_bytes unknown\n");
	for (size_t i = 0; i < r->n_gpus && i < GPR__RECORD_GPUS; i++)
		PUT("gpu %d %s %llu\n", r->gpu[i].index,
		    r->gpu[i].uuid[0] ? r->gpu[i].uuid : "-",
		    (unsigned long long)r->gpu[i].bytes);
	if (r->restore_tid > 0)
		PUT("restore_thread %d\n", r->restore_tid);
	for (size_t i = 0; i < r->n_waits && i < GPR__RECORD_WAITS; i++)
		PUT("driver_wait %d %ld %llx %llx %llx\n", r->waits[i].tid,
		    r->waits[i].nr, (unsigned long long)r->waits[i].arg0,
		    (unsigned long long)r->waits[i].sp,
		    (unsigned long long)r->waits[i].pc);
	if (r->watcher > 0)
		PUT("watcher %d %llu\n", r->watcher,
		    (unsigned long long)r->watcher_start);
	if (r->wake_error_time > 0) {
		char line[sizeof r->wake_error];
		one_line(r->wake_error, line, sizeof line);
		PUT("wake_error %.3f %s\n", r->wake_error_time, line);
	}
#undef PUT
	int ok = write(fd, text, n) == (ssize_t)n;
	ok &= close(fd) == 0;
	if (!ok || rename(tmp, path) != 0) {
		snprintf(err, errlen, "cannot write %s: %s", path,
			 strerror(errno));
		unlink(tmp);
		return GPR_E_IO;
	}
	return 0;
}

/* One "key value" line's value after `key ` at l, or NULL. */
static const char *value_of(const char *l, const char *key)
{
	size_t k = strlen(key);
	return strncmp(l, key, k) == 0 && l[k] == ' ' ? l + k + 1 : NULL;
}

static int parse_u64(const char *s, uint64_t *out)
{
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

static int parse_line(char *l, struct gpr__record *r, unsigned *seen)
{
	const char *v;
	uint64_t u;
	if ((v = value_of(l, "gpureclaim-suspended")))
		return strcmp(v, "1") == 0 ? (*seen |= 1, 0) : -1;
	if ((v = value_of(l, "pid"))) {
		if (parse_u64(v, &u) || u == 0 || u > INT_MAX)
			return -1;
		r->pid = (int)u;
		*seen |= 2;
		return 0;
	}
	if ((v = value_of(l, "start"))) {
		*seen |= 4;
		return parse_u64(v, &r->start);
	}
	if ((v = value_of(l, "uid"))) {
		if (parse_u64(v, &u) || u > LONG_MAX)
			return -1;
		r->uid = (long)u;
		*seen |= 8;
		return 0;
	}
	if ((v = value_of(l, "time"))) {
		char *end;
		r->time = strtod(v, &end);
		*seen |= 16;
		return *end || end == v ? -1 : 0;
	}
	if ((v = value_of(l, "host_bytes"))) {
		if (strcmp(v, "unknown") == 0)
			return 0;
		r->host_known = 1;
		return parse_u64(v, &r->host_bytes);
	}
	if ((v = value_of(l, "restore_thread"))) {
		if (parse_u64(v, &u) || u == 0 || u > INT_MAX)
			return -1;
		r->restore_tid = (int)u;
		return 0;
	}
	if ((v = value_of(l, "driver_wait"))) {
		if (r->n_waits == GPR__RECORD_WAITS)
			return -1;
		struct gpr__wait_sig *w = &r->waits[r->n_waits];
		unsigned long long a, sp, pc;
		int used = 0;
		memset(w, 0, sizeof *w);
		if (sscanf(v, "%d %ld %llx %llx %llx%n", &w->tid, &w->nr, &a,
			   &sp, &pc, &used) != 5 ||
		    v[used] || w->tid <= 0 || w->nr < 0)
			return -1;
		w->arg0 = a;
		w->sp = sp;
		w->pc = pc;
		r->n_waits++;
		return 0;
	}
	if ((v = value_of(l, "watcher"))) {
		unsigned long long start;
		int used = 0;
		if (sscanf(v, "%d %llu%n", &r->watcher, &start, &used) != 2 ||
		    v[used] || r->watcher <= 0)
			return -1;
		r->watcher_start = start;
		return 0;
	}
	if ((v = value_of(l, "wake_error"))) {
		char *end;
		r->wake_error_time = strtod(v, &end);
		if (end == v || *end != ' ' || !(r->wake_error_time > 0))
			return -1;
		snprintf(r->wake_error, sizeof r->wake_error, "%s", end + 1);
		return 0;
	}
	if ((v = value_of(l, "gpu"))) {
		if (r->n_gpus == GPR__RECORD_GPUS)
			return -1;
		int index, used = 0;
		char uuid[96];
		unsigned long long bytes;
		if (sscanf(v, "%d %95s %llu%n", &index, uuid, &bytes, &used) !=
			3 ||
		    v[used] || index < 0)
			return -1;
		r->gpu[r->n_gpus].index = index;
		snprintf(r->gpu[r->n_gpus].uuid, sizeof r->gpu[0].uuid, "%s",
			 strcmp(uuid, "-") == 0 ? "" : uuid);
		r->gpu[r->n_gpus++].bytes = bytes;
		return 0;
	}
	return -1;
}

int gpr__record_read(const char *dir, int pid, struct gpr__record *r)
{
	memset(r, 0, sizeof *r);
	struct stat ds, st;
	if (lstat(dir, &ds) != 0)
		return GPR_E_NOT_FOUND;
	char path[PATH_MAX + 32];
	record_path(path, sizeof path, dir, pid);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? GPR_E_NOT_FOUND : GPR_E_FORMAT;
	char text[MAX_RECORD + 1];
	ssize_t n = -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_uid == ds.st_uid && st.st_size <= MAX_RECORD)
		n = read(fd, text, MAX_RECORD);
	close(fd);
	if (n < 0)
		return GPR_E_FORMAT;
	text[n] = '\0';
	unsigned seen = 0;
	for (char *l = text; *l;) {
		char *nl = strchr(l, '\n');
		if (!nl)
			return GPR_E_FORMAT; /* cut short */
		*nl = '\0';
		if (parse_line(l, r, &seen) != 0)
			return GPR_E_FORMAT;
		l = nl + 1;
	}
	if (seen != 31 || r->pid != pid)
		return GPR_E_FORMAT;
	return 0;
}

static void lock_path(char *out, size_t len, const char *dir, int pid)
{
	snprintf(out, len, "%s/.%d.lock", dir, pid);
}

int gpr__record_lock(const char *dir, int pid, double seconds)
{
	char path[PATH_MAX + 32];
	lock_path(path, sizeof path, dir, pid);
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int fd =
		    open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return GPR_E_IO;
		struct stat a, b;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			/* the file may have been removed by the holder we
			 * waited for: a lock on it is no lock */
			if (fstat(fd, &a) == 0 && stat(path, &b) == 0 &&
			    a.st_ino == b.st_ino && a.st_dev == b.st_dev)
				return fd;
			close(fd);
			continue;
		}
		close(fd);
		if (errno != EWOULDBLOCK)
			return GPR_E_IO;
		clock_gettime(CLOCK_MONOTONIC, &t);
		double waited = (double)(t.tv_sec - t0.tv_sec) +
				(double)(t.tv_nsec - t0.tv_nsec) / 1e9;
		if (waited >= seconds)
			return GPR_E_BUSY;
		struct timespec pause = {0, 20 * 1000 * 1000};
		nanosleep(&pause, NULL);
	}
}

void gpr__record_unlock(const char *dir, int pid, int fd)
{
	if (fd < 0)
		return;
	char path[PATH_MAX + 32];
	lock_path(path, sizeof path, dir, pid);
	unlink(path); /* under the lock; a waiter sees it (gpr__record_lock) */
	close(fd);
}

int gpr__record_remove(const char *dir, int pid)
{
	char path[PATH_MAX + 32];
	record_path(path, sizeof path, dir, pid);
	return unlink(path) == 0 || errno == ENOENT ? 0 : GPR_E_IO;
}

int gpr__record_pids(const char *dir, int **pids, size_t *n)
{
	*pids = NULL;
	*n = 0;
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	size_t cap = 0;
	int rc = 0;
	for (struct dirent *e; (e = readdir(d));) {
		char *end;
		errno = 0;
		long pid = strtol(e->d_name, &end, 10);
		if (errno || end == e->d_name || pid <= 0 || pid > INT_MAX ||
		    strcmp(end, ".suspended") != 0)
			continue;
		if (*n == cap) {
			size_t c = cap ? 2 * cap : 16;
			int *p = realloc(*pids, c * sizeof *p);
			if (!p) {
				rc = GPR_E_NOMEM;
				break;
			}
			*pids = p;
			cap = c;
		}
		(*pids)[(*n)++] = (int)pid;
	}
	closedir(d);
	if (rc) {
		free(*pids);
		*pids = NULL;
		*n = 0;
	}
	return rc;
}

int gpr__record_current(const struct gpr__record *r, long folder_uid)
{
	struct gpr__proc p;
	char err[128];
	if (folder_uid != 0 && folder_uid != r->uid)
		return 0;
	return gpr__proc_read(r->pid, &p, err, sizeof err) == 0 &&
	       p.start == r->start && p.uid == r->uid && !p.zombie;
}
