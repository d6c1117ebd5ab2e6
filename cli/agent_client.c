/*
 * The agent's client in C (docs/agent.md; the protocol and the checks are
 * python/gpureclaim/agent/'s): connect, ask, read the answer. Used by
 * `release --pid`/`explain --pid` (cli/cmd_agent.c) and `ps --explain`
 * (cli/ps_explain.c), which asks every agent at once, a thread each: so
 * nothing here prints or keeps state between requests; a failure is
 * written into the request's reply (its kind and its one line).
 *
 * The checks, before a byte is sent: the socket is in a private folder of
 * the target's user (mode 0700, not a link), is a socket owned by that
 * user (not a link), and the process serving it is the target (its pid
 * and uid, SO_PEERCRED). The answer is read for at most the timeout, at
 * most 16 MiB, and must be one JSON object of protocol version 1;
 * anything else is one line that says what came back. Nothing here waits
 * past the timeout.
 */
#include "agent_client.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "out/json.h"
#include "out/text.h"
#include "private_dir.h"

#define MAX_ANSWER (16u << 20)
#define MAX_DIRS 8

/* ---------------- time ---------------- */

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int ms_left(double deadline)
{
	double left = deadline - now();
	return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

/* ---------------- the process ---------------- */

/* The uid owning /proc/PID; -1 when there is no such process. */
static long proc_uid(long pid)
{
	char p[64];
	struct stat st;
	snprintf(p, sizeof(p), "/proc/%ld", pid);
	return stat(p, &st) == 0 ? (long)st.st_uid : -1;
}

/* The state letter of /proc/PID/stat (R, S, T, Z...), or 0. */
static char proc_state(long pid)
{
	char p[64], buf[1024];
	snprintf(p, sizeof(p), "/proc/%ld/stat", pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *r = strrchr(buf, ')');
	return r && r[1] == ' ' ? r[2] : 0;
}

static int alive(long pid)
{
	char s = proc_state(pid);
	return s && s != 'Z' && s != 'X';
}

/* Whether pid has ended, looking again for a moment: the kernel closes a
 * dying process's files before it shows it as ended (agent/ _ended). */
static int ended(long pid, double deadline)
{
	double end = now() + 0.5;
	if (end > deadline)
		end = deadline;
	for (;;) {
		if (!alive(pid))
			return 1;
		if (now() >= end)
			return 0;
		struct timespec ts = {0, 5000000};
		nanosleep(&ts, NULL);
	}
}

static const char *why_silent(long pid)
{
	char s = proc_state(pid);
	if (s == 'T' || s == 't')
		return " (it is stopped: SIGSTOP or a debugger; SIGCONT "
		       "resumes "
		       "it)";
	if (s == 'D')
		return " (it waits in the kernel, uninterruptibly)";
	return " (it may be busy in code that holds the GIL)";
}

/* A variable of the environment pid started with, into out; 0 or -1. */
static int proc_env(long pid, const char *name, char *out, size_t len)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%ld/environ", pid);
	FILE *f = fopen(p, "re");
	if (!f)
		return -1;
	size_t nl = strlen(name);
	char item[4096];
	int c, found = -1;
	size_t i = 0;
	while ((c = fgetc(f)) != EOF) {
		if (c != '\0') {
			if (i < sizeof(item) - 1)
				item[i++] = (char)c;
			continue;
		}
		item[i] = '\0';
		i = 0;
		if (strncmp(item, name, nl) == 0 && item[nl] == '=') {
			snprintf(out, len, "%s", item + nl + 1);
			found = 0;
			break;
		}
	}
	fclose(f);
	return found;
}

/* ---------------- the folders (agent/ _dirs_of) ---------------- */

struct dirs {
	char d[MAX_DIRS][PATH_MAX];
	int n;
};

static void add_dir(struct dirs *ds, const char *d, long uid)
{
	if (!d || d[0] != '/' || ds->n == MAX_DIRS || !gpr__private_dir(d, uid))
		return;
	for (int i = 0; i < ds->n; i++)
		if (strcmp(ds->d[i], d) == 0)
			return;
	snprintf(ds->d[ds->n++], PATH_MAX, "%s", d);
}

static void add_xdg(struct dirs *ds, const char *x, long uid)
{
	char d[PATH_MAX];
	if (!gpr__xdg_ok(x, uid) ||
	    strlen(x) + sizeof("/gpureclaim") > sizeof(d))
		return;
	snprintf(d, sizeof(d), "%s/gpureclaim", x);
	add_dir(ds, d, uid);
}

/* The folder of uid's sockets when another user holds /tmp/gpureclaim-UID
 * (agent/_protocol.py home_dir, the same rule): HOME/.gpureclaim, HOME uid's
 * home in the password database, a directory of uid or root nobody else may
 * write. 0 with it in out, or -1. */
static int home_dir(long uid, char *out, size_t len)
{
	struct passwd pw, *res = NULL;
	char buf[4096];
	struct stat st;
	if (getpwuid_r((uid_t)uid, &pw, buf, sizeof(buf), &res) != 0 || !res ||
	    !pw.pw_dir || pw.pw_dir[0] != '/' || stat(pw.pw_dir, &st) != 0 ||
	    !S_ISDIR(st.st_mode) ||
	    ((long)st.st_uid != uid && st.st_uid != 0) || (st.st_mode & 022))
		return -1;
	int n = snprintf(out, len, "%s/.gpureclaim", pw.pw_dir);
	return n > 0 && (size_t)n < len ? 0 : -1;
}

static void dirs_of(long pid, long uid, struct dirs *ds)
{
	char v[PATH_MAX];
	ds->n = 0;
	if (proc_env(pid, "GPURECLAIM_AGENT_DIR", v, sizeof(v)) == 0)
		add_dir(ds, v, uid);
	add_dir(ds, getenv("GPURECLAIM_AGENT_DIR"), uid);
	if (proc_env(pid, "XDG_RUNTIME_DIR", v, sizeof(v)) == 0)
		add_xdg(ds, v, uid);
	if ((long)getuid() == uid)
		add_xdg(ds, getenv("XDG_RUNTIME_DIR"), uid);
	snprintf(v, sizeof(v), "/run/user/%ld", uid);
	add_xdg(ds, v, uid);
	snprintf(v, sizeof(v), "/tmp/gpureclaim-%ld", uid);
	add_dir(ds, v, uid);
	if (home_dir(uid, v, sizeof(v)) == 0)
		add_dir(ds, v, uid);
}

/* NULL if path is a socket of uid (not a link); else why not, or
 * "missing". */
static const char *owned_socket(const char *path, long uid, char *why,
				size_t len)
{
	struct stat st;
	if (lstat(path, &st) != 0) {
		if (errno == ENOENT)
			return "missing";
		snprintf(why, len, "cannot be read (%s)", strerror(errno));
		return why;
	}
	if (S_ISLNK(st.st_mode))
		return "is a symbolic link";
	if (!S_ISSOCK(st.st_mode))
		return "is not a socket";
	if ((long)st.st_uid != uid) {
		snprintf(why, len, "belongs to uid %ld, not %ld",
			 (long)st.st_uid, uid);
		return why;
	}
	return NULL;
}

/* ---------------- failures ---------------- */

#define K_NO_AGENT "no_agent"
#define K_REFUSED "refused"
#define K_TIMEOUT "timeout"
#define K_DIED "died"
#define K_BAD "bad_answer"
#define K_ERROR "error"

/* The reply of the request this thread makes. */
static _Thread_local struct gpr_cli_agent_reply *cur;

static int fail(const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* "process N...": the one line of a failed request, into its reply,
 * terminal-safe (src/out/text.h): it may quote what another user's
 * process chose (its error, a folder named in its environment), and every
 * command prints it. */
static int fail(const char *kind, const char *fmt, ...)
{
	char raw[sizeof(cur->error)];
	struct gpr__buf safe = {0};
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	gpr__text_put(&safe, raw, 0, 0);
	snprintf(cur->error, sizeof(cur->error), "%s",
		 safe.oom ? "(out of memory)" : gpr__buf_str(&safe));
	gpr__buf_free(&safe);
	cur->kind = kind;
	return GPR_CLI_ERROR;
}

/* ---------------- connecting (agent/ _connect) ---------------- */

/* connect() of a non-blocking Unix socket: done at once, or EAGAIN when
 * the listener's queue of connections is full (a stopped or busy agent;
 * never "in progress", as for TCP), tried again until the deadline. 0 or
 * the errno. */
static int connect_unix(int fd, const struct sockaddr_un *sa, double deadline)
{
	long wait_ns = 1000000; /* 1 ms, doubled up to 50 ms */
	for (;;) {
		if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
			return 0;
		int e = errno;
		if (e == EINTR)
			continue;
		if (e != EAGAIN || now() >= deadline)
			return e;
		double left = deadline - now();
		struct timespec ts = {0, wait_ns};
		if (left < (double)wait_ns / 1e9)
			ts.tv_nsec = left > 0 ? (long)(left * 1e9) : 0;
		nanosleep(&ts, NULL);
		if (wait_ns < 50000000)
			wait_ns *= 2;
	}
}

static int connect_agent(long pid, double deadline, int *fd_out)
{
	long uid = proc_uid(pid);
	if (uid < 0)
		return fail(K_NO_AGENT, "process %ld does not exist", pid);
	long me = (long)getuid();
	if (me != 0 && uid != me)
		return fail(
		    K_REFUSED,
		    "process %ld belongs to uid %ld; only that user and "
		    "root may ask it",
		    pid, uid);
	struct dirs ds;
	dirs_of(pid, uid, &ds);
	char path[PATH_MAX + 32], whybuf[256];
	const char *why = "missing";
	int found = 0;
	for (int i = 0; i < ds.n && !found; i++) {
		snprintf(path, sizeof(path), "%s/%ld.sock", ds.d[i], pid);
		why = owned_socket(path, uid, whybuf, sizeof(whybuf));
		found = !why || strcmp(why, "missing") != 0;
	}
	if (!found) {
		struct gpr__buf where = {0};
		for (int i = 0; i < ds.n; i++)
			gpr__buf_printf(&where, "%s%s", i ? " or " : "",
					ds.d[i]);
		if (!ds.n)
			gpr__buf_printf(&where, "/tmp/gpureclaim-%ld", uid);
		fail(K_NO_AGENT,
		     "process %ld has no agent (no socket in %s); start one "
		     "with gpureclaim.agent.start() or GPURECLAIM_AGENT=1",
		     pid, gpr__buf_str(&where));
		gpr__buf_free(&where);
		return GPR_CLI_ERROR;
	}
	if (why)
		return fail(K_REFUSED, "%s %s: not an agent's socket; not used",
			    path, why);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path))
		return fail(K_ERROR, "%s: too long for a Unix socket", path);
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return fail(K_ERROR, "cannot make a socket: %s",
			    strerror(errno));
	int e = connect_unix(fd, &sa, deadline);
	if (e == EAGAIN) {
		close(fd);
		return fail(
		    K_TIMEOUT,
		    "process %ld's agent did not take the connection "
		    "in time: it is busy or not answering, its queue of "
		    "connections full%s",
		    pid, why_silent(pid));
	}
	if (e) {
		close(fd);
		if (e == ECONNREFUSED || e == ENOENT) {
			if (!alive(pid))
				return fail(K_DIED, "process %ld ended", pid);
			return fail(K_NO_AGENT,
				    "process %ld's agent is not listening (a "
				    "stale socket at %s)",
				    pid, path);
		}
		if (e == EACCES || e == EPERM)
			return fail(K_REFUSED, "%s: %s", path, strerror(e));
		return fail(K_ERROR, "cannot connect to %s: %s", path,
			    strerror(e));
	}
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 ||
	    (long)cred.pid != pid || (long)cred.uid != uid) {
		close(fd);
		return fail(K_REFUSED,
			    "%s is served by process %ld (uid %ld), not "
			    "process %ld (uid %ld): not its agent; not asked",
			    path, (long)cred.pid, (long)cred.uid, pid, uid);
	}
	*fd_out = fd;
	return GPR_CLI_OK;
}

/* ---------------- JSON, as much as the answer needs ---------------- */

static const char *ws(const char *p, const char *e)
{
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

static void put_utf8(struct gpr__buf *o, unsigned long c)
{
	char b[4];
	size_t n;
	if (c < 0x80) {
		b[0] = (char)c;
		n = 1;
	} else if (c < 0x800) {
		b[0] = (char)(0xC0 | (c >> 6));
		b[1] = (char)(0x80 | (c & 0x3F));
		n = 2;
	} else if (c < 0x10000) {
		b[0] = (char)(0xE0 | (c >> 12));
		b[1] = (char)(0x80 | ((c >> 6) & 0x3F));
		b[2] = (char)(0x80 | (c & 0x3F));
		n = 3;
	} else {
		b[0] = (char)(0xF0 | (c >> 18));
		b[1] = (char)(0x80 | ((c >> 12) & 0x3F));
		b[2] = (char)(0x80 | ((c >> 6) & 0x3F));
		b[3] = (char)(0x80 | (c & 0x3F));
		n = 4;
	}
	gpr__buf_putn(o, b, n);
}

static int hex4(const char *p, const char *e, unsigned long *v)
{
	if (e - p < 4)
		return -1;
	*v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		int d = c >= '0' && c <= '9'   ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10
					       : -1;
		if (d < 0)
			return -1;
		*v = *v * 16 + (unsigned long)d;
	}
	return 0;
}

/* A string at p (its opening quote); its end, or NULL. Decoded into o
 * when o is not NULL (a lone surrogate as U+FFFD). */
static const char *jstring(const char *p, const char *e, struct gpr__buf *o)
{
	if (p >= e || *p != '"')
		return NULL;
	for (p++; p < e; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '"')
			return p + 1;
		if (c < 0x20)
			return NULL;
		if (c >= 0x80) { /* UTF-8 only, as JSON is (and Python reads) */
			size_t n = gpr__utf8_len(p, NULL);
			if (n == 0 || n > (size_t)(e - p))
				return NULL;
			if (o)
				gpr__buf_putn(o, p, n);
			p += n - 1;
			continue;
		}
		if (c != '\\') {
			if (o)
				gpr__buf_putn(o, p, 1);
			continue;
		}
		if (++p >= e)
			return NULL;
		static const char from[] = "\"\\/bfnrt",
				  to[] = "\"\\/\b\f\n\r\t";
		const char *map = *p ? strchr(from, *p) : NULL;
		if (*p != 'u') {
			if (!map)
				return NULL;
			if (o)
				gpr__buf_putn(o, &to[map - from], 1);
			continue;
		}
		unsigned long u, lo;
		if (hex4(p + 1, e, &u) != 0)
			return NULL;
		p += 4;
		if (u >= 0xD800 && u < 0xDC00 && e - p > 6 && p[1] == '\\' &&
		    p[2] == 'u' && hex4(p + 3, e, &lo) == 0 && lo >= 0xDC00 &&
		    lo < 0xE000) {
			u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
			p += 6;
		} else if (u >= 0xD800 && u < 0xE000) {
			u = 0xFFFD;
		}
		if (o)
			put_utf8(o, u);
	}
	return NULL;
}

static const char *digits(const char *p, const char *e)
{
	const char *s = p;
	while (p < e && *p >= '0' && *p <= '9')
		p++;
	return p > s ? p : NULL;
}

/* A number at p by JSON's grammar (-?(0|[1-9][0-9]*)(.[0-9]+)?
 * ([eE][+-]?[0-9]+)?, what Python's json reads); its end, or NULL. */
static const char *jnumber(const char *p, const char *e)
{
	if (p < e && *p == '-')
		p++;
	if (p < e && *p == '0')
		p++;
	else if (!(p = digits(p, e)))
		return NULL;
	if (p < e && *p == '.' && !(p = digits(p + 1, e)))
		return NULL;
	if (p < e && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < e && (*p == '+' || *p == '-'))
			p++;
		p = digits(p, e);
	}
	return p;
}

/* Any value at p; its end, or NULL. depth bounds the nesting. */
static const char *jvalue(const char *p, const char *e, int depth)
{
	p = ws(p, e);
	if (p >= e || depth > 512)
		return NULL;
	if (*p == '"')
		return jstring(p, e, NULL);
	if (*p == '{' || *p == '[') {
		char close = *p == '{' ? '}' : ']';
		p = ws(p + 1, e);
		if (p < e && *p == close)
			return p + 1;
		for (;;) {
			if (close == '}') {
				p = jstring(ws(p, e), e, NULL);
				if (!p || (p = ws(p, e)) >= e || *p != ':')
					return NULL;
				p++;
			}
			p = jvalue(p, e, depth + 1);
			if (!p || (p = ws(p, e)) >= e)
				return NULL;
			if (*p == close)
				return p + 1;
			if (*p != ',')
				return NULL;
			p++;
		}
	}
	static const char *const words[] = {"true", "false", "null"};
	for (size_t i = 0; i < 3; i++) {
		size_t n = strlen(words[i]);
		if ((size_t)(e - p) >= n && memcmp(p, words[i], n) == 0)
			return p + n;
	}
	return jnumber(p, e);
}

/* The top-level members of the answer the command reads. */
struct answer {
	const char *v, *v_end;
	const char *ok, *ok_end;
	const char *result, *result_end;
	const char *groups, *groups_end;
	const char *text, *error, *kind; /* the strings' openings */
	const char *end;		 /* of the buffer */
};

/* 0 when line is one JSON object (members noted in a); -1 otherwise. */
static int parse_answer(const char *line, size_t n, struct answer *a)
{
	const char *p = ws(line, line + n), *e = line + n;
	memset(a, 0, sizeof(*a));
	a->end = e;
	if (p >= e || *p != '{')
		return -1;
	p = ws(p + 1, e);
	if (p < e && *p == '}')
		return ws(p + 1, e) == e ? 0 : -1;
	for (;;) {
		struct gpr__buf key = {0};
		const char *k = ws(p, e);
		p = jstring(k, e, &key);
		const char *name = gpr__buf_str(&key);
		if (!p || (p = ws(p, e)) >= e || *p != ':') {
			gpr__buf_free(&key);
			return -1;
		}
		const char *v = ws(p + 1, e);
		p = jvalue(v, e, 1);
		if (p) {
			if (strcmp(name, "v") == 0)
				a->v = v, a->v_end = p;
			else if (strcmp(name, "ok") == 0)
				a->ok = v, a->ok_end = p;
			else if (strcmp(name, "result") == 0)
				a->result = v, a->result_end = p;
			/* a member named twice: the last one counts (as in
			 * Python's dict), of whatever type it is */
			else if (strcmp(name, "groups") == 0)
				a->groups = *v == '[' ? v : NULL,
				a->groups_end = p;
			else if (strcmp(name, "text") == 0)
				a->text = *v == '"' ? v : NULL;
			else if (strcmp(name, "error") == 0)
				a->error = *v == '"' ? v : NULL;
			else if (strcmp(name, "kind") == 0)
				a->kind = *v == '"' ? v : NULL;
		}
		gpr__buf_free(&key);
		if (!p || (p = ws(p, e)) >= e)
			return -1;
		if (*p == '}')
			return ws(p + 1, e) == e ? 0 : -1;
		if (*p != ',')
			return -1;
		p++;
	}
}

static int is(const char *v, const char *end, const char *word)
{
	return v && (size_t)(end - v) == strlen(word) &&
	       memcmp(v, word, strlen(word)) == 0;
}

/* ---------------- the exchange (agent/ exchange, ask_full) -------- */

static int send_all(int fd, const char *s, size_t n, double deadline)
{
	while (n) {
		ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
		if (w > 0) {
			s += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		if (poll(&p, 1, ms_left(deadline)) <= 0)
			return -2;
	}
	return 0;
}

/* Reads the answer's line into b (its newline dropped); GPR_CLI_OK or the
 * failure, said. */
static int read_line(int fd, long pid, double deadline, struct gpr__buf *b)
{
	char chunk[65536];
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int left = ms_left(deadline);
		if (left == 0 || poll(&p, 1, left) == 0)
			return fail(K_TIMEOUT,
				    "process %ld did not answer in time%s", pid,
				    why_silent(pid));
		ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0) {
			int e = errno;
			if (ended(pid, deadline))
				return fail(K_DIED,
					    "process %ld ended before it "
					    "answered",
					    pid);
			if (n < 0)
				return fail(K_BAD,
					    "process %ld's agent broke the "
					    "connection (%s)",
					    pid, strerror(e));
			return fail(K_BAD,
				    "process %ld's agent closed the connection "
				    "without a full answer",
				    pid);
		}
		char *nl = memchr(chunk, '\n', (size_t)n);
		gpr__buf_putn(b, chunk, nl ? (size_t)(nl - chunk) : (size_t)n);
		if (b->oom || b->len >= MAX_ANSWER)
			return fail(
			    K_BAD,
			    "process %ld's answer is larger than %u MiB; "
			    "refused",
			    pid, MAX_ANSWER >> 20);
		if (nl)
			return GPR_CLI_OK;
	}
}

/* An agent's error as its clients say it (agent/_protocol.py one_line):
 * each run of ASCII white space one blank, none at the ends, at most 500
 * characters. */
static void one_line(const char *s, struct gpr__buf *o)
{
	static const char blank[] = " \t\n\v\f\r";
	size_t chars = 0;
	while (*s && chars < 500) {
		if (strchr(blank, *s)) {
			while (*s && strchr(blank, *s))
				s++;
			if (o->len && *s) {
				gpr__buf_putn(o, " ", 1);
				chars++;
			}
			continue;
		}
		size_t n = gpr__utf8_len(s, NULL);
		n = n ? n : 1;
		gpr__buf_putn(o, s, n);
		s += n;
		chars++;
	}
}

static const char *const kinds[] = {K_NO_AGENT, K_REFUSED, K_TIMEOUT,
				    K_DIED,	K_BAD,	   K_ERROR};

/* The answer in r->line, checked and its members noted in r. */
static int check_answer(long pid, struct gpr_cli_agent_reply *r)
{
	struct answer a;
	const char *text = gpr__buf_str(&r->line);
	if (parse_answer(text, r->line.len, &a) != 0) {
		const char *e = text + r->line.len, *v = jvalue(text, e, 0);
		if (v && ws(v, e) == e) /* JSON, but not an object */
			return fail(K_BAD,
				    "process %ld's agent answered JSON that is "
				    "not protocol version 1's",
				    pid);
		char head[48];
		size_t n = r->line.len < 40 ? r->line.len : 40;
		for (size_t i = 0; i < n; i++)
			head[i] =
			    (text[i] >= 0x20 && text[i] < 0x7f) ? text[i] : '?';
		head[n] = '\0';
		return fail(K_BAD,
			    "process %ld's agent answered something that is "
			    "not JSON (%s)",
			    pid, head);
	}
	if (!is(a.v, a.v_end, "1") ||
	    !(is(a.ok, a.ok_end, "true") || is(a.ok, a.ok_end, "false")))
		return fail(K_BAD,
			    "process %ld's agent answered JSON that is not "
			    "protocol version 1's",
			    pid);
	if (is(a.ok, a.ok_end, "false")) {
		if (!a.error)
			return fail(K_BAD,
				    "process %ld's agent failed without saying "
				    "why",
				    pid);
		struct gpr__buf err = {0}, kind = {0}, m = {0};
		jstring(a.error, a.end, &err);
		one_line(gpr__buf_str(&err), &m);
		const char *k = K_ERROR;
		if (a.kind && jstring(a.kind, a.end, &kind))
			for (size_t i = 0; i < sizeof(kinds) / sizeof(*kinds);
			     i++)
				if (strcmp(gpr__buf_str(&kind), kinds[i]) == 0)
					k = kinds[i];
		fail(k, "process %ld: %s", pid, gpr__buf_str(&m));
		gpr__buf_free(&err);
		gpr__buf_free(&kind);
		gpr__buf_free(&m);
		return GPR_CLI_ERROR;
	}
	if (!a.result)
		return fail(K_BAD,
			    "process %ld's agent answered ok without a result",
			    pid);
	r->result = a.result;
	r->result_end = a.result_end;
	r->text = a.text;
	r->groups = a.groups;
	r->groups_end = a.groups_end;
	r->end = a.end;
	return GPR_CLI_OK;
}

static int request(long pid, const char *op, const char *args, double timeout,
		   double deadline, struct gpr_cli_agent_reply *r);

int gpr_cli_agent_request(long pid, const char *op, const char *args,
			  double timeout, struct gpr_cli_agent_reply *r)
{
	return request(pid, op, args, timeout, now() + timeout, r);
}

double gpr_cli_agent_now(void)
{
	return now();
}

int gpr_cli_agent_request_by(long pid, const char *op, const char *args,
			     double deadline, struct gpr_cli_agent_reply *r)
{
	double timeout = deadline - now();
	if (timeout > 0)
		return request(pid, op, args, timeout, deadline, r);
	memset(r, 0, sizeof(*r));
	cur = r;
	fail(K_TIMEOUT,
	     "process %ld was not asked: the command's time (its --timeout) "
	     "was spent before its turn came",
	     pid);
	cur = NULL;
	return GPR_CLI_ERROR;
}

/* One request: "timeout" the request's field, deadline when this client
 * stops waiting. */
static int request(long pid, const char *op, const char *args, double timeout,
		   double deadline, struct gpr_cli_agent_reply *r)
{
	memset(r, 0, sizeof(*r));
	cur = r;
	int fd = -1, rc = connect_agent(pid, deadline, &fd);
	if (rc != GPR_CLI_OK) {
		cur = NULL;
		return rc;
	}
	/* "deadline": when this client stops waiting, on the machine's
	 * CLOCK_MONOTONIC (docs/agent.md, The protocol): an agent that reads
	 * the request later (it was stopped) runs nothing */
	struct gpr__buf req = {0};
	gpr__buf_printf(&req,
			"{\"v\":1,\"op\":\"%s\",\"args\":{%s},\"timeout\":%.6g,"
			"\"deadline\":%.6f}\n",
			op, args ? args : "", timeout, deadline);
	int s = req.oom ? -1 : send_all(fd, req.data, req.len, deadline);
	gpr__buf_free(&req);
	if (s == -2)
		rc = fail(K_TIMEOUT,
			  "process %ld did not take the request in time%s", pid,
			  why_silent(pid));
	else if (s != 0 && !alive(pid))
		rc = fail(K_DIED, "process %ld ended", pid);
	else if (s != 0) {
		/* it may have answered before it closed (a refusal) */
		int e = errno;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 0) == 1 && (p.revents & POLLIN))
			rc = read_line(fd, pid, deadline, &r->line);
		else
			rc = fail(K_BAD,
				  "process %ld's agent closed the connection "
				  "(%s)",
				  pid, strerror(e));
	} else
		rc = read_line(fd, pid, deadline, &r->line);
	close(fd);
	if (rc == GPR_CLI_OK)
		rc = check_answer(pid, r);
	if (rc != GPR_CLI_OK) {
		gpr__buf_free(&r->line);
		r->result = r->text = r->groups = NULL;
	}
	cur = NULL;
	return rc;
}

int gpr_cli_agent_answer(long pid, const char *line, size_t n,
			 struct gpr_cli_agent_reply *r)
{
	memset(r, 0, sizeof(*r));
	cur = r;
	gpr__buf_putn(&r->line, line, n);
	int rc =
	    r->line.oom ? fail(K_ERROR, "out of memory") : check_answer(pid, r);
	if (rc != GPR_CLI_OK) {
		gpr__buf_free(&r->line);
		r->result = r->text = r->groups = NULL;
	}
	cur = NULL;
	return rc;
}

void gpr_cli_agent_text_put(struct gpr__buf *o, const char *s, const char *end)
{
	struct gpr__buf t = {0};
	if (gpr_cli_agent_string(s, end, &t) != 0 || t.oom) {
		gpr__buf_free(&t);
		return;
	}
	/* line by line, each by the terminal-safe rule (a NUL the string
	 * held ends it) */
	const char *p = gpr__buf_str(&t);
	for (;;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char *line = strndup(p, len);
		if (line)
			gpr__text_put(o, line, 0, 0);
		free(line);
		if (!nl)
			break;
		gpr__buf_puts(o, "\n");
		p = nl + 1;
	}
	gpr__buf_free(&t);
}

void gpr_cli_agent_json_put(struct gpr__buf *o, const char *v, const char *end)
{
	/* v is a value check_answer read whole: outside its strings, only
	 * JSON's own characters and white space (dropped: one line, as the
	 * Python client writes it); each string written again by the JSON
	 * writer, which escapes what a terminal would obey */
	while (v < end) {
		if (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r') {
			v++;
			continue;
		}
		if (*v != '"') {
			gpr__buf_putn(o, v++, 1);
			continue;
		}
		struct gpr__buf str = {0};
		const char *after = jstring(v, end, &str);
		if (!after) {
			gpr__buf_free(&str);
			return;
		}
		struct gpr__json j;
		gpr__json_init(&j, o);
		gpr__json_str(&j, gpr__buf_str(&str));
		gpr__buf_free(&str);
		v = after;
	}
}

void gpr_cli_agent_reply_free(struct gpr_cli_agent_reply *r)
{
	gpr__buf_free(&r->line);
}

int gpr_cli_agent_string(const char *s, const char *end, struct gpr__buf *o)
{
	return s && jstring(s, end, o) ? 0 : -1;
}

size_t gpr_cli_agent_ints(const char *v, const char *end, long long *out,
			  size_t cap)
{
	size_t n = 0;
	if (!v || v >= end || *v != '[')
		return 0;
	const char *p = ws(v + 1, end);
	while (p < end && *p != ']' && n < cap) {
		char num[32];
		size_t k = 0;
		while (p < end && k < sizeof(num) - 1 &&
		       ((*p >= '0' && *p <= '9') || (*p == '-' && k == 0)))
			num[k++] = *p++;
		num[k] = '\0';
		if (k == 0 || (k == 1 && num[0] == '-'))
			return n; /* not an integer: what came before it */
		errno = 0;
		long long x = strtoll(num, NULL, 10);
		if (errno)
			return n;
		out[n++] = x;
		p = ws(p, end);
		if (p < end && *p == ',')
			p = ws(p + 1, end);
		else
			break;
	}
	return n;
}

/* ---------------- discovery (agent/ discover) ---------------- */

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;
	return (x > y) - (x < y);
}

/* The agents' sockets in d, of uid, appended to *pids. */
static void scan_dir(const char *d, long uid, long **pids, size_t *n,
		     size_t *cap)
{
	DIR *dir = opendir(d);
	if (!dir)
		return;
	struct dirent *e;
	while ((e = readdir(dir)) != NULL) {
		const char *name = e->d_name;
		size_t len = strlen(name);
		if (len <= 5 || len > 20 || strcmp(name + len - 5, ".sock"))
			continue;
		long pid = 0;
		size_t i = 0;
		for (; i < len - 5 && name[i] >= '0' && name[i] <= '9'; i++)
			pid = pid * 10 + (name[i] - '0');
		if (i != len - 5 || pid <= 0 || pid > 0x7fffffff)
			continue;
		char path[PATH_MAX + 32], why[256];
		snprintf(path, sizeof(path), "%s/%s", d, name);
		if (owned_socket(path, uid, why, sizeof(why)) != NULL)
			continue;
		if (!alive(pid) || proc_uid(pid) != uid)
			continue;
		int dup = 0;
		for (size_t k = 0; k < *n; k++)
			dup |= (*pids)[k] == pid;
		if (dup)
			continue;
		if (*n == *cap) {
			size_t c = *cap ? *cap * 2 : 16;
			long *m = realloc(*pids, c * sizeof(*m));
			if (!m)
				break;
			*pids = m;
			*cap = c;
		}
		(*pids)[(*n)++] = pid;
	}
	closedir(dir);
}

/* Root's folders of every user: /tmp/gpureclaim-UID, /run/user/UID,
 * and each user's HOME/.gpureclaim (home_dir). */
static void scan_all(long **pids, size_t *n, size_t *cap)
{
	/* the users first, then their folders (home_dir reads the password
	 * database too) */
	struct passwd *pw;
	long *uids = NULL;
	size_t nu = 0, cu = 0;
	setpwent();
	while ((pw = getpwent()) != NULL) {
		if (nu == cu) {
			size_t c = cu ? cu * 2 : 64;
			long *m = realloc(uids, c * sizeof(*m));
			if (!m)
				break;
			uids = m;
			cu = c;
		}
		uids[nu++] = (long)pw->pw_uid;
	}
	endpwent();
	for (size_t u = 0; u < nu; u++) {
		char d[PATH_MAX];
		struct stat st;
		if (home_dir(uids[u], d, sizeof(d)) != 0 || lstat(d, &st) != 0)
			continue;
		struct dirs ds;
		dirs_of(-1, uids[u], &ds);
		for (int i = 0; i < ds.n; i++)
			if (strcmp(ds.d[i], d) == 0)
				scan_dir(d, uids[u], pids, n, cap);
	}
	free(uids);
	static const char *const roots[] = {"/tmp", "/run/user"};
	for (int r = 0; r < 2; r++) {
		DIR *dir = opendir(roots[r]);
		if (!dir)
			continue;
		struct dirent *e;
		while ((e = readdir(dir)) != NULL) {
			char d[PATH_MAX];
			if (r == 0) {
				if (strncmp(e->d_name, "gpureclaim-", 11))
					continue;
				snprintf(d, sizeof(d), "/tmp/%s", e->d_name);
			} else {
				if (e->d_name[0] < '0' || e->d_name[0] > '9')
					continue;
				snprintf(d, sizeof(d),
					 "/run/user/%s/gpureclaim", e->d_name);
			}
			struct stat st;
			if (lstat(d, &st) != 0)
				continue;
			long uid = (long)st.st_uid;
			struct dirs ds;
			dirs_of(-1, uid, &ds);
			for (int i = 0; i < ds.n; i++)
				if (strcmp(ds.d[i], d) == 0)
					scan_dir(d, uid, pids, n, cap);
		}
		closedir(dir);
	}
}

int gpr_cli_agent_discover(long **pids, size_t *n)
{
	size_t cap = 0;
	long me = (long)getuid();
	const char *mine = getenv("GPURECLAIM_AGENT_DIR");
	*pids = NULL;
	*n = 0;
	if (mine && *mine) {
		char d[PATH_MAX];
		if (mine[0] == '/')
			snprintf(d, sizeof(d), "%s", mine);
		else if (!realpath(mine, d))
			return 0;
		if (gpr__private_dir(d, me))
			scan_dir(d, me, pids, n, &cap);
	} else if (me == 0) {
		scan_all(pids, n, &cap);
	} else {
		struct dirs ds;
		dirs_of(-1, me, &ds);
		for (int i = 0; i < ds.n; i++)
			scan_dir(ds.d[i], me, pids, n, &cap);
	}
	if (*n)
		qsort(*pids, *n, sizeof(**pids), cmp_long);
	return 0;
}

int gpr_cli_agent_member(const struct gpr_cli_agent_reply *r, const char *name,
			 const char **v, const char **v_end)
{
	const char *e = r->end, *p;
	*v = *v_end = NULL;
	if (!r->line.data || !e)
		return -1;
	p = ws(r->line.data, e);
	if (p >= e || *p != '{')
		return -1;
	p = ws(p + 1, e);
	size_t nl = strlen(name);
	while (p < e && *p == '"') {
		const char *k = p;
		p = jstring(k, e, NULL);
		if (!p || (p = ws(p, e)) >= e || *p != ':')
			return -1;
		const char *val = ws(p + 1, e);
		p = jvalue(val, e, 1);
		if (!p)
			return -1;
		/* a plain key: its bytes between the quotes */
		if ((size_t)(p - k) > nl + 2 && k[nl + 1] == '"' &&
		    memcmp(k + 1, name, nl) == 0) {
			*v = val;
			*v_end = p;
			return 0;
		}
		p = ws(p, e);
		if (p >= e || *p != ',')
			return -1;
		p = ws(p + 1, e);
	}
	return -1;
}
