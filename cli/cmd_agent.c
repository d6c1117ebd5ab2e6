/*
 * `gpureclaim release --pid N` and `gpureclaim explain --pid N`: the
 * agent's client in C (docs/agent.md; the protocol and the checks are
 * python/gpureclaim/agent.py's, which `reclaim` and `ps --explain` use).
 *
 * Why in C: the target is the in-process release plus 5 ms, and a
 * Python interpreter's start with the package's import costs more than
 * that on its own. So the one-process commands are a connect, a line out
 * and a line in; the help, and the forms without --pid, stay in Python
 * (cmd_python.c), and `python3 -m gpureclaim release --pid N` runs this
 * command, so both spellings are one program.
 *
 * The checks, before a byte is sent: the socket is in a private folder of
 * the target's user (mode 0700, not a link), is a socket owned by that
 * user (not a link), and the process serving it is the target (its pid
 * and uid, SO_PEERCRED). The answer is read for at most --timeout, at most
 * 16 MiB, and must be one JSON object of protocol version 1; anything else
 * is one line that says what came back. Nothing here waits past the
 * timeout.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
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

#include "out/buf.h"

#define MAX_ANSWER (16u << 20)
#define MAX_DIRS 8

static struct env {
	const char *cmd; /* "release" or "explain" */
	long pid;	 /* --pid N */
	int json;	 /* --json: the result's JSON document */
	double timeout;	 /* --timeout SECONDS */
	int workspaces;	 /* release --workspaces */
	int collect;	 /* release --collect: -1 auto, 0 never, 1 always */
	int holders;	 /* explain --holders */
} env;

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
 * dying process's files before it shows it as ended (agent.py _ended). */
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

/* ---------------- the folders (agent.py _dirs_of) ---------------- */

/* A real directory (not a link) of uid, mode 0700. */
static int private_dir(const char *d, long uid)
{
	struct stat st;
	return lstat(d, &st) == 0 && S_ISDIR(st.st_mode) &&
	       (long)st.st_uid == uid && (st.st_mode & 07777) == 0700;
}

/* XDG_RUNTIME_DIR as the protocol takes it: absolute, a directory of uid
 * with mode 0700 (through a link is fine). */
static int xdg_ok(const char *d, long uid)
{
	struct stat st;
	return d && d[0] == '/' && stat(d, &st) == 0 && S_ISDIR(st.st_mode) &&
	       (long)st.st_uid == uid && (st.st_mode & 07777) == 0700;
}

struct dirs {
	char d[MAX_DIRS][PATH_MAX];
	int n;
};

static void add_dir(struct dirs *ds, const char *d, long uid)
{
	if (!d || d[0] != '/' || ds->n == MAX_DIRS || !private_dir(d, uid))
		return;
	for (int i = 0; i < ds->n; i++)
		if (strcmp(ds->d[i], d) == 0)
			return;
	snprintf(ds->d[ds->n++], PATH_MAX, "%s", d);
}

static void add_xdg(struct dirs *ds, const char *x, long uid)
{
	char d[PATH_MAX];
	if (!xdg_ok(x, uid) || strlen(x) + sizeof("/gpureclaim") > sizeof(d))
		return;
	snprintf(d, sizeof(d), "%s/gpureclaim", x);
	add_dir(ds, d, uid);
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

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "gpureclaim CMD: process N...": the one line of a failed request. */
static int fail(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "gpureclaim %s: ", env.cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return GPR_CLI_ERROR;
}

/* ---------------- connecting (agent.py _connect) ---------------- */

static int connect_agent(long pid, double deadline, int *fd_out)
{
	long uid = proc_uid(pid);
	if (uid < 0)
		return fail("process %ld does not exist", pid);
	long me = (long)getuid();
	if (me != 0 && uid != me)
		return fail(
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
		fail("process %ld has no agent (no socket in %s); start one "
		     "with gpureclaim.agent.start() or GPURECLAIM_AGENT=1",
		     pid, gpr__buf_str(&where));
		gpr__buf_free(&where);
		return GPR_CLI_ERROR;
	}
	if (why)
		return fail("%s %s: not an agent's socket; not used", path,
			    why);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path))
		return fail("%s: too long for a Unix socket", path);
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return fail("cannot make a socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 &&
	    errno != EINPROGRESS && errno != EAGAIN) {
		int e = errno;
		close(fd);
		if (e == ECONNREFUSED || e == ENOENT) {
			if (!alive(pid))
				return fail("process %ld ended", pid);
			return fail("process %ld's agent is not listening (a "
				    "stale socket at %s)",
				    pid, path);
		}
		if (e == EACCES || e == EPERM)
			return fail("%s: %s", path, strerror(e));
		return fail("cannot connect to %s: %s", path, strerror(e));
	}
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	int err = 0;
	socklen_t el = sizeof(err);
	if (poll(&p, 1, ms_left(deadline)) != 1 ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err) {
		close(fd);
		if (err)
			return fail("cannot connect to %s: %s", path,
				    strerror(err));
		return fail("process %ld's agent did not accept the "
			    "connection in time%s",
			    pid, why_silent(pid));
	}
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 ||
	    (long)cred.pid != pid || (long)cred.uid != uid) {
		close(fd);
		return fail("%s is served by process %ld (uid %ld), not "
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
	const char *s = p;
	if (p < e && *p == '-')
		p++;
	while (p < e && strchr("0123456789.eE+-", *p) && *p)
		p++;
	return p > s ? p : NULL;
}

/* The top-level members of the answer the command reads. */
struct answer {
	const char *v, *v_end;
	const char *ok, *ok_end;
	const char *result, *result_end;
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
			else if (strcmp(name, "text") == 0 && *v == '"')
				a->text = v;
			else if (strcmp(name, "error") == 0 && *v == '"')
				a->error = v;
			else if (strcmp(name, "kind") == 0 && *v == '"')
				a->kind = v;
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

/* ---------------- the exchange (agent.py exchange, ask_full) -------- */

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
			return fail("process %ld did not answer in time%s", pid,
				    why_silent(pid));
		ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0) {
			int e = errno;
			if (ended(pid, deadline))
				return fail("process %ld ended before it "
					    "answered",
					    pid);
			return fail("process %ld's agent broke the connection "
				    "(%s)",
				    pid, strerror(e));
		}
		if (n == 0) {
			if (ended(pid, deadline))
				return fail("process %ld ended before it "
					    "answered",
					    pid);
			return fail("process %ld's agent closed the connection "
				    "without a full answer",
				    pid);
		}
		char *nl = memchr(chunk, '\n', (size_t)n);
		gpr__buf_putn(b, chunk, nl ? (size_t)(nl - chunk) : (size_t)n);
		if (b->oom || b->len >= MAX_ANSWER)
			return fail(
			    "process %ld's answer is larger than %u MiB; "
			    "refused",
			    pid, MAX_ANSWER >> 20);
		if (nl)
			return GPR_CLI_OK;
	}
}

static void request(struct gpr__buf *r)
{
	gpr__buf_printf(r, "{\"v\":1,\"op\":\"%s\",\"args\":{", env.cmd);
	const char *sep = "";
	if (env.workspaces) {
		gpr__buf_puts(r, "\"workspaces\":true");
		sep = ",";
	}
	if (env.collect >= 0) {
		gpr__buf_printf(r, "%s\"collect\":%s", sep,
				env.collect ? "true" : "false");
		sep = ",";
	}
	if (env.holders)
		gpr__buf_printf(r, "%s\"holders\":true", sep);
	gpr__buf_printf(r, "},\"timeout\":%.6g}\n", env.timeout);
}

static int ask(void)
{
	double deadline = now() + env.timeout;
	int fd = -1, rc = connect_agent(env.pid, deadline, &fd);
	if (rc != GPR_CLI_OK)
		return rc;
	struct gpr__buf req = {0}, line = {0};
	request(&req);
	int s = req.oom ? -1 : send_all(fd, req.data, req.len, deadline);
	gpr__buf_free(&req);
	if (s == -2)
		rc = fail("process %ld did not take the request in time%s",
			  env.pid, why_silent(env.pid));
	else if (s != 0 && !alive(env.pid))
		rc = fail("process %ld ended", env.pid);
	else if (s != 0)
		rc = fail("process %ld's agent closed the connection (%s)",
			  env.pid, strerror(errno));
	else
		rc = read_line(fd, env.pid, deadline, &line);
	close(fd);
	if (rc != GPR_CLI_OK) {
		gpr__buf_free(&line);
		return rc;
	}
	struct answer a;
	const char *text = gpr__buf_str(&line);
	if (parse_answer(text, line.len, &a) != 0) {
		char head[48];
		size_t n = line.len < 40 ? line.len : 40;
		for (size_t i = 0; i < n; i++)
			head[i] =
			    (text[i] >= 0x20 && text[i] < 0x7f) ? text[i] : '?';
		head[n] = '\0';
		rc = fail("process %ld's agent answered something that is not "
			  "JSON (%s)",
			  env.pid, head);
	} else if (!is(a.v, a.v_end, "1") || !(is(a.ok, a.ok_end, "true") ||
					       is(a.ok, a.ok_end, "false"))) {
		rc = fail("process %ld's agent answered JSON that is not "
			  "protocol version 1's",
			  env.pid);
	} else if (is(a.ok, a.ok_end, "false")) {
		struct gpr__buf err = {0};
		if (!a.error)
			rc = fail("process %ld's agent failed without saying "
				  "why",
				  env.pid);
		else {
			jstring(a.error, a.end, &err);
			/* one line: white space runs as one blank */
			char *m = err.data ? err.data : "";
			for (char *c = m; *c; c++)
				if (*c == '\n' || *c == '\r' || *c == '\t')
					*c = ' ';
			rc = fail("process %ld: %.500s", env.pid, m);
		}
		gpr__buf_free(&err);
	} else if (!a.result) {
		rc = fail("process %ld's agent answered ok without a result",
			  env.pid);
	} else {
		struct gpr__buf out = {0};
		if (env.json || !a.text) {
			gpr__buf_putn(&out, a.result,
				      (size_t)(a.result_end - a.result));
		} else {
			jstring(a.text, a.end, &out);
			while (out.len && out.data[out.len - 1] == '\n')
				out.len--;
		}
		gpr__buf_puts(&out, "\n");
		rc = gpr__buf_write(&out, stdout) == 0 ? GPR_CLI_OK
						       : GPR_CLI_ERROR;
		gpr__buf_free(&out);
	}
	gpr__buf_free(&line);
	return rc;
}

/* ---------------- the options ---------------- */

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "gpureclaim %s: ", env.cmd);
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nRun 'gpureclaim %s --help' for the options.\n",
		env.cmd);
	return GPR_CLI_USAGE;
}

int gpr_cli_has_pid(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strncmp(argv[i], "--pid", 5) == 0 &&
		    (argv[i][5] == '\0' || argv[i][5] == '='))
			return 1;
	return 0;
}

int gpr_cli_agent_ask(int argc, char **argv)
{
	enum {
		OPT_PID = 256,
		OPT_JSON,
		OPT_TIMEOUT,
		OPT_WS,
		OPT_COLLECT,
		OPT_HOLDERS
	};
	static const struct option release_opts[] = {
	    {"pid", required_argument, NULL, OPT_PID},
	    {"json", no_argument, NULL, OPT_JSON},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	    {"workspaces", no_argument, NULL, OPT_WS},
	    {"collect", required_argument, NULL, OPT_COLLECT},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	static const struct option explain_opts[] = {
	    {"pid", required_argument, NULL, OPT_PID},
	    {"json", no_argument, NULL, OPT_JSON},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	    {"holders", no_argument, NULL, OPT_HOLDERS},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int release = strcmp(argv[0], "release") == 0;
	env = (struct env){.cmd = release ? "release" : "explain",
			   .pid = -1,
			   .timeout = release ? 30 : 10,
			   .collect = -1};
	opterr = 0;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, ":h",
				release ? release_opts : explain_opts, NULL)) !=
	       -1) {
		char *end;
		switch (c) {
		case 'h':
			/* one help, the Python side's (cmd_python.c) */
			return gpr_cli_cluster(argc, argv);
		case OPT_PID:
			errno = 0;
			env.pid = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || env.pid <= 0 ||
			    env.pid > 0x7fffffff)
				return usage_error("--pid needs a process id "
						   "(a positive number), not "
						   "'%s'",
						   optarg);
			break;
		case OPT_JSON:
			env.json = 1;
			break;
		case OPT_TIMEOUT:
			if (gpr_cli_parse_seconds(optarg, &env.timeout) != 0)
				return usage_error(
				    "--timeout needs a number of seconds "
				    "from 0.1 to 86400 (0.5, 10), not '%s'",
				    optarg);
			break;
		case OPT_WS:
			env.workspaces = 1;
			break;
		case OPT_COLLECT:
			if (strcmp(optarg, "auto") == 0)
				env.collect = -1;
			else if (strcmp(optarg, "always") == 0)
				env.collect = 1;
			else if (strcmp(optarg, "never") == 0)
				env.collect = 0;
			else
				return usage_error("--collect needs auto, "
						   "always or never, not '%s'",
						   optarg);
			break;
		case OPT_HOLDERS:
			env.holders = 1;
			break;
		case ':':
			return usage_error("%s needs a value",
					   argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'",
					   argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (env.pid < 0)
		return usage_error("%s", "--pid needs a process id");
	return ask();
}
