/*
 * The facts a suspend checks before anything is locked, read from /proc
 * and the cgroup file system (suspend_host.h): who owns the process, when
 * it started (a pid used again is another process), its resident memory,
 * and how much the host and the process's memory cgroup can still take.
 * Every file is read whole with one bounded read; a value that does not
 * parse is unknown, never guessed.
 */
#include "suspend_host.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpureclaim.h"
#include "out/fmt.h"
#include "procfs.h"

/* A whole decimal number at s (digits only, then a blank or the end). */
static int number(const char *s, uint64_t *out)
{
	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || (*end && !isspace((unsigned char)*end)))
		return -1;
	*out = v;
	return 0;
}

/* "Key:   123 kB" of a /proc status or meminfo text, in bytes. */
static int kb_field(const char *text, const char *key, uint64_t *out)
{
	size_t k = strlen(key);
	for (const char *l = text; l && *l; l = strchr(l, '\n')) {
		if (*l == '\n')
			l++;
		if (strncmp(l, key, k) != 0 || l[k] != ':')
			continue;
		const char *v = l + k + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		uint64_t kb;
		char *end;
		errno = 0;
		kb = strtoull(v, &end, 10);
		if (errno || end == v || strncmp(end, " kB", 3) != 0 ||
		    kb > UINT64_MAX / 1024)
			return -1;
		*out = kb * 1024;
		return 0;
	}
	return -1;
}

int gpr__proc_rss(int pid, uint64_t *bytes)
{
	char path[64], text[4096];
	snprintf(path, sizeof path, "/proc/%d/status", pid);
	if (gpr__read_small(path, text, sizeof text) < 0)
		return GPR_E_NOT_FOUND;
	return kb_field(text, "VmRSS", bytes) == 0 ? 0 : GPR_E_NOT_FOUND;
}

/* Field 22 (starttime) and the state letter of /proc/PID/stat. */
static int stat_fields(int pid, uint64_t *start, char *state)
{
	char path[64], text[2048];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	if (gpr__read_small(path, text, sizeof text) < 0)
		return -1;
	/* the command name may hold blanks and parentheses: after the last */
	char *p = strrchr(text, ')');
	if (!p || p[1] != ' ')
		return -1;
	p += 2;
	*state = *p;
	/* fields 3.. follow; starttime is the 22nd, the 20th after state */
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -1;
		p++;
	}
	return number(p, start);
}

uint64_t gpr__proc_start(int pid)
{
	uint64_t start = 0;
	char state;
	return stat_fields(pid, &start, &state) == 0 ? start : 0;
}

int gpr__proc_read(int pid, struct gpr__proc *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	out->pid = pid;
	char path[64];
	struct stat st;
	char state = '?';
	snprintf(path, sizeof path, "/proc/%d", pid);
	if (pid <= 0 || stat(path, &st) != 0 ||
	    stat_fields(pid, &out->start, &state) != 0) {
		snprintf(err, errlen, "process %d does not exist", pid);
		return GPR_E_NOT_FOUND;
	}
	out->uid = (long)st.st_uid;
	out->zombie = state == 'Z' || state == 'X';
	out->rss_known = gpr__proc_rss(pid, &out->rss) == 0;
	return 0;
}

/* ---------------- the host ---------------- */

static const char *test_path(const char *var, const char *fallback)
{
	const char *v = getenv(var);
	return v && *v ? v : fallback;
}

/* The margin kept of `whole`: a percent of it, at least `min`. */
static uint64_t margin(uint64_t whole, uint64_t min)
{
	uint64_t m = whole / 100 * GPR__HOST_RESERVE_PERCENT;
	return m < min ? min : m;
}

static uint64_t left_after(uint64_t have, uint64_t keep)
{
	return have > keep ? have - keep : 0;
}

/* A cgroup file's one number; "max" (v2) is no limit (UINT64_MAX). */
static int cg_value(const char *dir, const char *file, uint64_t *out)
{
	char path[1024], text[64];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	if (gpr__read_small(path, text, sizeof text) <= 0)
		return -1;
	if (strncmp(text, "max", 3) == 0) {
		*out = UINT64_MAX;
		return 0;
	}
	return number(text, out);
}

/* The inactive page cache of a cgroup (memory.stat), 0 if unknown. */
static uint64_t cg_inactive_file(const char *dir, int version)
{
	char path[1024], text[8192];
	snprintf(path, sizeof path, "%s/memory.stat", dir);
	if (gpr__read_small(path, text, sizeof text) <= 0)
		return 0;
	const char *key =
	    version == 2 ? "inactive_file " : "total_inactive_file ";
	for (const char *l = text; l && *l; l = strchr(l, '\n')) {
		if (*l == '\n')
			l++;
		uint64_t v;
		if (strncmp(l, key, strlen(key)) == 0 &&
		    number(l + strlen(key), &v) == 0)
			return v;
	}
	return 0;
}

/*
 * pid's memory cgroup path and version from /proc/PID/cgroup: a v1 line
 * naming the memory controller wins (a hybrid system keeps memory on
 * v1), else the v2 line "0::/path". -1 when neither is there.
 */
static int cg_of(int pid, char *path, size_t len, int *version)
{
	char file[64], text[4096];
	snprintf(file, sizeof file, "/proc/%d/cgroup", pid);
	if (gpr__read_small(file, text, sizeof text) <= 0)
		return -1;
	int found = 0;
	for (char *l = text; l && *l;) {
		char *nl = strchr(l, '\n');
		if (nl)
			*nl = '\0';
		char *c1 = strchr(l, ':'),
		     *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (c2 && c2[1] == '/') {
			*c2 = '\0';
			const char *ctl = c1 + 1;
			int v1_memory = 0;
			for (const char *t = ctl; *t;) {
				size_t n = strcspn(t, ",");
				v1_memory |= n == 6 && !strncmp(t, "memory", 6);
				t += n + (t[n] == ',');
			}
			if (v1_memory) {
				snprintf(path, len, "%s", c2 + 1);
				*version = 1;
				return 0;
			}
			if (!*ctl && !strncmp(l, "0", 1) && c1 == l + 1) {
				snprintf(path, len, "%s", c2 + 1);
				*version = 2;
				found = 1;
			}
		}
		l = nl ? nl + 1 : NULL;
	}
	return found ? 0 : -1;
}

/* The tightest level from pid's cgroup up to the root of the mount. */
static void cg_room(int pid, struct gpr__host_room *r)
{
	char rel[512];
	int version = 0;
	if (cg_of(pid, rel, sizeof rel, &version) != 0)
		return;
	const char *root =
	    test_path("GPURECLAIM_TEST_CGROUP_FS", "/sys/fs/cgroup");
	char dir[768];
	snprintf(dir, sizeof dir, "%s%s%s", root, version == 1 ? "/memory" : "",
		 strcmp(rel, "/") == 0 ? "" : rel);
	size_t base = strlen(root) + (version == 1 ? strlen("/memory") : 0);
	r->cg_version = version;
	const char *limit_file =
	    version == 2 ? "memory.max" : "memory.limit_in_bytes";
	const char *usage_file =
	    version == 2 ? "memory.current" : "memory.usage_in_bytes";
	/* v1 writes a limit near 2^63 for "none" */
	const uint64_t none = version == 2 ? UINT64_MAX : (1ULL << 62);
	for (;;) {
		uint64_t limit, usage;
		if (cg_value(dir, limit_file, &limit) == 0 && limit < none &&
		    cg_value(dir, usage_file, &usage) == 0) {
			uint64_t idle = cg_inactive_file(dir, version);
			uint64_t used = usage > idle ? usage - idle : 0;
			uint64_t free = left_after(limit, used);
			uint64_t room = left_after(free, margin(limit, 0));
			if (!r->cg_limited || room < r->cg_room) {
				r->cg_limited = 1;
				r->cg_limit = limit;
				r->cg_usage = usage;
				r->cg_free = free;
				r->cg_room = room;
				snprintf(r->cg_path, sizeof r->cg_path, "%s",
					 dir + base);
				if (!r->cg_path[0])
					snprintf(r->cg_path, sizeof r->cg_path,
						 "/");
			}
		}
		char *slash = strrchr(dir, '/');
		if (!slash || (size_t)(slash - dir) < base ||
		    strlen(dir) <= base)
			break;
		*slash = '\0';
	}
}

int gpr__host_room(int pid, struct gpr__host_room *r, char *err, size_t errlen)
{
	memset(r, 0, sizeof *r);
	const char *path =
	    test_path("GPURECLAIM_TEST_MEMINFO", "/proc/meminfo");
	char text[8192];
	if (gpr__read_small(path, text, sizeof text) <= 0 ||
	    kb_field(text, "MemTotal", &r->mem_total) != 0 ||
	    kb_field(text, "MemAvailable", &r->mem_available) != 0) {
		snprintf(err, errlen,
			 "cannot read MemTotal and MemAvailable from %s", path);
		return GPR_E_IO;
	}
	r->mem_known = 1;
	r->host_room = left_after(r->mem_available,
				  margin(r->mem_total, GPR__HOST_RESERVE_MIN));
	r->room = r->host_room;
	cg_room(pid, r);
	if (r->cg_limited && r->cg_room < r->room)
		r->room = r->cg_room;
	return 0;
}

int gpr__host_fits(const struct gpr__host_room *r, uint64_t need, char *why,
		   size_t len)
{
	char n[24], have[24], keep[24];
	gpr__fmt_bytes(need, n, sizeof n);
	if (need > r->host_room) {
		snprintf(
		    why, len,
		    "host memory cannot hold it: %s to move, %s "
		    "available of which %s is kept free (%d%% of the "
		    "host's memory, 1 GiB at least); free host memory, or "
		    "release the process's caches first",
		    n, gpr__fmt_bytes(r->mem_available, have, sizeof have),
		    gpr__fmt_bytes(margin(r->mem_total, GPR__HOST_RESERVE_MIN),
				   keep, sizeof keep),
		    GPR__HOST_RESERVE_PERCENT);
		return GPR_E_NO_ROOM;
	}
	if (r->cg_limited && need > r->cg_room) {
		char lim[24];
		snprintf(why, len,
			 "its memory cgroup %s cannot hold it: %s to move, %s "
			 "free under its limit of %s, of which %d%% is kept "
			 "free; raise the limit, or release the process's "
			 "caches first",
			 r->cg_path, n,
			 gpr__fmt_bytes(r->cg_free, have, sizeof have),
			 gpr__fmt_bytes(r->cg_limit, lim, sizeof lim),
			 GPR__HOST_RESERVE_PERCENT);
		return GPR_E_NO_ROOM;
	}
	if (len)
		why[0] = '\0';
	return 0;
}
