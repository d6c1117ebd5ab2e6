/*
 * Threads waiting inside a CUDA call, from outside (cuda_waiters.h says
 * what counts and why). Everything is read through /proc: the maps once
 * (again when a stack lies outside every mapping known), the thread list
 * and each thread's syscall line each look, a stack only when its thread
 * waits somewhere new, and a few code bytes per return address candidate
 * (cached: a driver has few call sites on a waiting stack).
 */
#include "cuda_waiters.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "gpureclaim.h"

struct range {
	uint64_t lo, hi;
};

/* A thread as the last look saw it, so an unchanged wait is not read
 * again, and its syscall file kept open (read again with pread: the
 * kernel writes it anew), as many as KEPT of them. */
struct seen {
	int tid;
	int fd;		/* -1: not kept */
	char line[160]; /* its syscall line */
	unsigned returns;
};

#define KEPT 512

#define CALLS 1024 /* cached code addresses: verdict of "after a call" */
#define IGNORED 256

struct gpr__waiters {
	int pid;
	int mem; /* /proc/PID/mem */
	size_t window;
	unsigned min_returns;
	char library[64];
	struct range *maps; /* every mapping, sorted */
	size_t n_maps;
	struct range *code; /* the driver's executable mappings */
	size_t n_code;
	unsigned char *stack; /* window bytes */
	struct seen *seen, *next;
	size_t n_seen, n_next, cap; /* both hold cap */
	size_t kept;		    /* syscall files open */
	struct {
		uint64_t addr;
		unsigned char verdict; /* 1 after a call, 2 not */
	} calls[CALLS];
	int ignored_tids[IGNORED];
	size_t n_ignored_tids;
	struct gpr__wait_sig ignored[IGNORED];
	size_t n_ignored;
	struct gpr__waiters_stats stats;
};

static int perm_error(int pid, const char *what, int e, char *err,
		      size_t errlen)
{
	snprintf(err, errlen,
		 "cannot read process %d's %s (%s): only its user (when it "
		 "is dumpable and kernel.yama.ptrace_scope is 0) and root may",
		 pid, what, strerror(e));
	return GPR_E_PERM;
}

static int gone(int pid, char *err, size_t errlen)
{
	snprintf(err, errlen, "process %d has exited", pid);
	return GPR_E_NOT_FOUND;
}

/* The whole of a /proc file of any length (maps), malloc'd. */
static char *read_all(const char *path, int *e)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		*e = errno;
		return NULL;
	}
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	for (;;) {
		if (!buf) {
			*e = ENOMEM;
			break;
		}
		if (len + 1 == cap) {
			char *b =
			    cap < (1u << 26) ? realloc(buf, cap * 2) : NULL;
			if (!b) {
				free(buf);
				buf = NULL;
				*e = ENOMEM;
				break;
			}
			buf = b;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + len, cap - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			*e = errno;
			free(buf);
			buf = NULL;
			break;
		}
		if (r == 0) {
			buf[len] = '\0';
			break;
		}
		len += (size_t)r;
	}
	close(fd);
	return buf;
}

static int push(struct range **v, size_t *n, size_t *cap, uint64_t lo,
		uint64_t hi)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 256;
		struct range *g = realloc(*v, c * sizeof *g);
		if (!g)
			return -1;
		*v = g;
		*cap = c;
	}
	(*v)[(*n)++] = (struct range){lo, hi};
	return 0;
}

/* Whether a mapping's path names the driver: its base name begins with
 * the library's name ("libcuda.so", "libcuda.so.1", "libcuda.so.580..."). */
static int is_driver(const char *path, const char *library)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	return strncmp(b, library, strlen(library)) == 0;
}

static int read_maps(gpr__waiters *w, char *err, size_t errlen)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/maps", w->pid);
	int e = 0;
	char *text = read_all(path, &e);
	if (!text) {
		if (e == ENOENT || e == ESRCH)
			return gone(w->pid, err, errlen);
		if (e == EACCES || e == EPERM)
			return perm_error(w->pid, "maps", e, err, errlen);
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return e == ENOMEM ? GPR_E_NOMEM : GPR_E_IO;
	}
	struct range *maps = NULL, *code = NULL;
	size_t n_maps = 0, c_maps = 0, n_code = 0, c_code = 0;
	int rc = 0;
	for (char *l = text; rc == 0 && *l;) {
		char *nl = strchr(l, '\n');
		if (nl)
			*nl = '\0';
		unsigned long long lo, hi;
		char perms[8];
		int used = 0;
		if (sscanf(l, "%llx-%llx %7s %*s %*s %*s%n", &lo, &hi, perms,
			   &used) == 3) {
			const char *p = l + used;
			while (*p == ' ')
				p++;
			rc = push(&maps, &n_maps, &c_maps, lo, hi);
			if (rc == 0 && strchr(perms, 'x') &&
			    is_driver(p, w->library))
				rc = push(&code, &n_code, &c_code, lo, hi);
		}
		l = nl ? nl + 1 : l + strlen(l);
	}
	free(text);
	if (rc) {
		free(maps);
		free(code);
		return GPR_E_NOMEM;
	}
	free(w->maps);
	free(w->code);
	w->maps = maps;
	w->n_maps = n_maps;
	w->code = code;
	w->n_code = n_code;
	w->stats.maps_reads++;
	return 0;
}

/* The range of v (sorted, disjoint) that holds a, or NULL. */
static const struct range *find(const struct range *v, size_t n, uint64_t a)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (a < v[mid].lo)
			hi = mid;
		else if (a >= v[mid].hi)
			lo = mid + 1;
		else
			return &v[mid];
	}
	return NULL;
}

int gpr__waiters_open(int pid, const struct gpr__waiters_opts *o,
		      gpr__waiters **out, char *err, size_t errlen)
{
	*out = NULL;
	if (pid <= 0)
		return GPR_E_INVAL;
	gpr__waiters *w = calloc(1, sizeof *w);
	if (!w)
		return GPR_E_NOMEM;
	w->pid = pid;
	w->mem = -1;
	w->window = o && o->window ? o->window : GPR__WAITERS_WINDOW;
	w->window &= ~(size_t)7;
	w->min_returns = o && o->min_returns ? o->min_returns : 1;
	snprintf(w->library, sizeof w->library, "%s",
		 o && o->library ? o->library : "libcuda.so");
	w->stack = malloc(w->window ? w->window : 8);
	if (!w->stack) {
		gpr__waiters_close(w);
		return GPR_E_NOMEM;
	}
	int rc = read_maps(w, err, errlen);
	if (rc == 0 && w->n_code == 0) {
		snprintf(err, errlen,
			 "process %d has no %s mapped: it does not use the "
			 "CUDA driver",
			 pid, w->library);
		rc = GPR_E_NOT_LOADED;
	}
	if (rc == 0) {
		char path[64];
		snprintf(path, sizeof path, "/proc/%d/mem", pid);
		w->mem = open(path, O_RDONLY | O_CLOEXEC);
		if (w->mem < 0)
			rc = errno == ENOENT ? gone(pid, err, errlen)
					     : perm_error(pid, "memory", errno,
							  err, errlen);
	}
	if (rc) {
		gpr__waiters_close(w);
		return rc;
	}
	*out = w;
	return 0;
}

void gpr__waiters_close(gpr__waiters *w)
{
	if (!w)
		return;
	if (w->mem >= 0)
		close(w->mem);
	free(w->maps);
	free(w->code);
	free(w->stack);
	for (size_t i = 0; w->seen && i < w->n_seen; i++)
		if (w->seen[i].fd >= 0)
			close(w->seen[i].fd);
	free(w->seen);
	free(w->next);
	free(w);
}

int gpr__waiters_ignore_thread(gpr__waiters *w, int tid)
{
	if (w->n_ignored_tids == IGNORED)
		return GPR_E_NOMEM;
	w->ignored_tids[w->n_ignored_tids++] = tid;
	return 0;
}

int gpr__waiters_ignore_wait(gpr__waiters *w, const struct gpr__wait_sig *s)
{
	if (w->n_ignored == IGNORED)
		return GPR_E_NOMEM;
	w->ignored[w->n_ignored++] = *s;
	return 0;
}

static int set_aside(const gpr__waiters *w, const struct gpr__wait_sig *s)
{
	for (size_t i = 0; i < w->n_ignored_tids; i++)
		if (w->ignored_tids[i] == s->tid)
			return 1;
	for (size_t i = 0; i < w->n_ignored; i++) {
		const struct gpr__wait_sig *g = &w->ignored[i];
		if (g->tid == s->tid && g->nr == s->nr && g->arg0 == s->arg0 &&
		    g->sp == s->sp && g->pc == s->pc)
			return 1;
	}
	return 0;
}

/*
 * Whether the code at a follows a call instruction (a return address),
 * read from the process. Elsewhere than x86-64 and AArch64 every word
 * into the driver's code counts.
 */
static int after_call_code(const unsigned char *b)
{
#if defined(__x86_64__)
	/* b[0..7]: the 8 bytes before the address */
	if (b[3] == 0xE8) /* call rel32 */
		return 1;
	if (b[6] == 0xFF && ((b[7] & 0xF8) == 0xD0 || (b[7] & 0xF8) == 0x10))
		return 1; /* call *%reg, call *(%reg) */
	if (b[5] == 0xFF && ((b[6] & 0xF8) == 0x50 || b[6] == 0x14))
		return 1; /* call *d8(%reg), call *(sib) */
	if (b[4] == 0xFF && b[5] == 0x54)
		return 1; /* call *d8(sib) */
	if (b[2] == 0xFF && (b[3] == 0x15 || (b[3] & 0xF8) == 0x90))
		return 1; /* call *d32(%rip), call *d32(%reg) */
	if (b[1] == 0xFF && b[2] == 0x94)
		return 1; /* call *d32(sib) */
	return 0;
#elif defined(__aarch64__)
	uint32_t insn;
	memcpy(&insn, b + 4, 4);
	return (insn & 0xFC000000u) == 0x94000000u || /* bl */
	       (insn & 0xFFFFFC1Fu) == 0xD63F0000u || /* blr */
	       (insn & 0xFEFFF800u) == 0xD63F0800u;   /* blraa, blrab... */
#else
	(void)b;
	return 1;
#endif
}

static int after_call(gpr__waiters *w, uint64_t a)
{
	size_t h = (size_t)((a * 0x9E3779B97F4A7C15ULL) >> 54) % CALLS;
	for (size_t k = 0; k < CALLS; k++) {
		size_t i = (h + k) % CALLS;
		if (w->calls[i].addr == a)
			return w->calls[i].verdict == 1;
		if (w->calls[i].addr == 0) {
			unsigned char b[8];
			int yes = a >= 8 &&
				  pread(w->mem, b, 8, (off_t)(a - 8)) == 8 &&
				  after_call_code(b);
			w->calls[i].addr = a;
			w->calls[i].verdict = yes ? 1 : 2;
			return yes;
		}
	}
	memset(w->calls, 0, sizeof w->calls); /* full: start again */
	return after_call(w, a);
}

/* The return addresses into the driver's code on a stack from sp, read
 * up to `window` bytes and never past the mapping that holds sp. */
static unsigned returns_on(gpr__waiters *w, uint64_t sp)
{
	const struct range *m = find(w->maps, w->n_maps, sp);
	if (!m) {
		char e[128];
		if (read_maps(w, e, sizeof e) != 0)
			return 0;
		m = find(w->maps, w->n_maps, sp);
		if (!m)
			return 0;
	}
	uint64_t len = m->hi - sp;
	if (len > w->window)
		len = w->window;
	ssize_t got = len ? pread(w->mem, w->stack, (size_t)len, (off_t)sp) : 0;
	if (got <= 0)
		return 0;
	w->stats.stacks++;
	w->stats.stack_bytes += (uint64_t)got;
	unsigned n = 0;
	for (size_t i = 0; i + 8 <= (size_t)got; i += 8) {
		uint64_t v;
		memcpy(&v, w->stack + i, 8);
		if (find(w->code, w->n_code, v) && after_call(w, v))
			n++;
	}
	return n;
}

/* A syscall line: "NR ARG1..ARG6 SP PC", "-1 SP PC" (blocked, not in a
 * system call) or "running". 1 when in a system call, its fields in s. */
static int parse_syscall(const char *line, struct gpr__wait_sig *s)
{
	long nr;
	unsigned long long a[6], sp, pc;
	if (sscanf(line, "%ld %llx %llx %llx %llx %llx %llx %llx %llx", &nr,
		   &a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &sp, &pc) != 9 ||
	    nr < 0)
		return 0;
	s->nr = nr;
	s->arg0 = a[0];
	s->sp = sp;
	s->pc = pc;
	return 1;
}

/* The last look's entry of tid; the threads come in the same order each
 * look, so the search starts after the last one found (*hint). */
static struct seen *seen_before(gpr__waiters *w, int tid, size_t *hint)
{
	for (size_t k = 0; k < w->n_seen; k++) {
		size_t i = (*hint + k) % w->n_seen;
		if (w->seen[i].tid == tid) {
			*hint = i + 1;
			return &w->seen[i];
		}
	}
	return NULL;
}

/* tid's syscall line into line, from its kept file or a new one (*fd:
 * kept, or -1). 0; -1 when the thread is gone; GPR_E_PERM. */
static int syscall_line(gpr__waiters *w, long tid, int *fd, char *line,
			size_t len)
{
	if (*fd < 0) {
		char path[96];
		snprintf(path, sizeof path, "/proc/%d/task/%ld/syscall", w->pid,
			 tid);
		*fd = open(path, O_RDONLY | O_CLOEXEC);
		if (*fd < 0)
			return errno == EACCES || errno == EPERM ? GPR_E_PERM
								 : -1;
		w->kept++;
	}
	ssize_t n;
	do
		n = pread(*fd, line, len - 1, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		int e = errno;
		close(*fd);
		*fd = -1;
		w->kept--;
		return e == EACCES || e == EPERM ? GPR_E_PERM : -1;
	}
	line[n] = '\0';
	return 0;
}

/* Room for one more thread in both arrays of looks. */
static int grow(gpr__waiters *w)
{
	size_t c = w->cap ? w->cap * 2 : 64;
	struct seen *a = realloc(w->seen, c * sizeof *a);
	if (!a)
		return -1;
	w->seen = a;
	struct seen *b = realloc(w->next, c * sizeof *b);
	if (!b)
		return -1;
	w->next = b;
	w->cap = c;
	return 0;
}

/* The look behind both: every thread, set-aside ones counted or not. */
static int look(gpr__waiters *w, int all, struct gpr__wait_sig *sigs,
		size_t max, char *err, size_t errlen)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", w->pid);
	DIR *d = opendir(path);
	if (!d)
		return errno == ENOENT
			   ? gone(w->pid, err, errlen)
			   : perm_error(w->pid, "threads", errno, err, errlen);
	w->stats.looks++;
	w->n_next = 0;
	int found = 0, rc = 0;
	size_t threads = 0, hint = 0;
	for (struct dirent *e;
	     (e = readdir(d)) && threads < GPR__WAITERS_THREADS;) {
		char *end;
		long tid = strtol(e->d_name, &end, 10);
		if (*end || tid <= 0)
			continue;
		if (w->n_next == w->cap && grow(w) != 0) {
			rc = GPR_E_NOMEM;
			break;
		}
		struct seen *was = seen_before(w, (int)tid, &hint);
		int fd = was ? was->fd : -1;
		if (was)
			was->fd = -1; /* carried over */
		char line[160];
		int r = syscall_line(w, tid, &fd, line, sizeof line);
		if (r == GPR_E_PERM) {
			rc = perm_error(w->pid, "threads' system calls", EACCES,
					err, errlen);
			break;
		}
		if (r < 0)
			continue; /* it ended */
		if (fd >= 0 && w->kept > KEPT) {
			close(fd);
			fd = -1;
			w->kept--;
		}
		w->stats.threads++;
		threads++;
		struct seen *now = &w->next[w->n_next++];
		now->tid = (int)tid;
		now->fd = fd;
		now->returns = 0;
		snprintf(now->line, sizeof now->line, "%s", line);
		struct gpr__wait_sig s = {.tid = (int)tid};
		if (!parse_syscall(line, &s))
			continue;
		now->returns = was && strcmp(was->line, line) == 0
				   ? was->returns
				   : returns_on(w, s.sp);
		s.returns = now->returns;
		if (s.returns < w->min_returns || (!all && set_aside(w, &s)))
			continue;
		if ((size_t)found < max)
			sigs[found] = s;
		found++;
	}
	closedir(d);
	for (size_t i = 0; i < w->n_seen; i++) /* threads gone since */
		if (w->seen[i].fd >= 0) {
			close(w->seen[i].fd);
			w->kept--;
		}
	struct seen *t = w->seen;
	w->seen = w->next;
	w->n_seen = w->n_next;
	w->next = t;
	if (rc)
		return rc;
	/* the process gone meanwhile: its threads vanish one by one */
	if (threads == 0 && kill(w->pid, 0) != 0 && errno == ESRCH)
		return gone(w->pid, err, errlen);
	return found;
}

int gpr__waiters_look(gpr__waiters *w, struct gpr__wait_sig *sigs, size_t max,
		      char *err, size_t errlen)
{
	return look(w, 0, sigs, max, err, errlen);
}

int gpr__waiters_all(gpr__waiters *w, struct gpr__wait_sig *sigs, size_t max,
		     char *err, size_t errlen)
{
	return look(w, 1, sigs, max, err, errlen);
}

void gpr__waiters_stats(const gpr__waiters *w, struct gpr__waiters_stats *s)
{
	*s = w->stats;
}
