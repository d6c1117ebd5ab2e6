/*
 * `gpureclaim reclaim`: every process of this user with an agent (every
 * process, as root) asked at once to give its cached GPU memory back, and
 * what came back, exactly, per process and per GPU; then the processes on
 * the GPUs that have no agent or did not answer, and why (docs/agent.md).
 *
 * In C, as explain/release --pid: an interpreter's start and the
 * package's import cost more than the 100 ms the issue allows on top of
 * the slowest release. The agents are asked a thread each, started before
 * the GPUs are read (with --gpu, once the GPU's rows say who is on it),
 * each bounded by --timeout (cli/agent_client.c). The agent's server adds
 * flat integer fields to its answers (python/gpureclaim/agent/_server.py:
 * "ordinals", "groups", "returned"): what a part is stays Python's policy,
 * this file adds numbers. The help is the Python side's (cmd_python.c).
 *
 * The numbers are another user's process's word, so each is checked
 * (issue 34): a GPU's figure above what the driver counts for that
 * process there (its ps row, read before any release is sent) makes the
 * answer a bad one; a negative figure (a process that allocated while it
 * released) counts as 0; a process's row is the sum of its GPUs', the
 * total the sum of the rows, every sum checked for overflow. One deadline
 * (--timeout from the command's start) bounds every request, asked in
 * threads or, where none can be started, in turn.
 */
#include "agent_client.h"
#include "ps.h"
#include "ps_explain.h"
#include "reclaim_idle.h"
#include "suspend_run.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "out/fmt.h"
#include "out/json.h"
#include "out/text.h"

#define MAX_GPUS 64

static struct env {
	int gpu;	/* --gpu INDEX, -1: every GPU */
	long long min;	/* --min SIZE, -1: none */
	int dry_run;	/* --dry-run */
	int json;	/* --json */
	double timeout; /* --timeout SECONDS */
	double idle;	/* --idle DURATION: then suspend; -1: not asked */
	int target;	/* --target: 0 none, 1 bytes, 2 percent */
	long long target_bytes;
	double target_percent;
} env;

/* The command's one deadline (gpr_cli_agent_now's clock). */
static double deadline;

/* The GPUs' rows, once read: the driver's figures the answers are checked
 * against. The threads wait for them before they ask for a release. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int ready;
	const struct gpr_cli_ps_round *round; /* NULL: none could be read */
} rows = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL};

/* A GPU of a process's answer. */
struct rgpu {
	long long device, nvml, bytes, known; /* -1: unknown */
};

struct target {
	long pid;
	int agent; /* it has one: asked */
	pthread_t thread;
	int started, done;
	/* the answer */
	int ok;
	const char *kind;
	char error[640];
	long long value; /* returned, or would_return */
	struct rgpu gpus[MAX_GPUS];
	int n_gpus;
	char skipped[192];
	int has_release_seconds;
	double release_seconds;
	double seconds;
	/* who it is, from ps's rows or /proc */
	char user[64], cmd[1024];
	int user_known, cmd_known;
	int held_index[MAX_GPUS];
	long long held_bytes[MAX_GPUS]; /* -1: not known */
	int n_held, listed;
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char *fb(long long v, char *out, size_t len)
{
	return gpr__fmt_bytes(v < 0 ? 0 : (uint64_t)v, out, len);
}

/* ---------------- one process ---------------- */

static int ask(struct target *t, const char *op, const char *args,
	       struct gpr_cli_agent_reply *r)
{
	if (gpr_cli_agent_request_by(t->pid, op, args, deadline, r) ==
	    GPR_CLI_OK)
		return 0;
	t->kind = r->kind;
	snprintf(t->error, sizeof(t->error), "%s", r->error);
	gpr_cli_agent_reply_free(r);
	return -1;
}

/* The integers of answer member name (at most cap); how many. */
static size_t ints(const struct gpr_cli_agent_reply *r, const char *name,
		   long long *out, size_t cap)
{
	const char *v, *e;
	if (gpr_cli_agent_member(r, name, &v, &e) != 0)
		return 0;
	return gpr_cli_agent_ints(v, e, out, cap);
}

static void rows_set(const struct gpr_cli_ps_round *round)
{
	pthread_mutex_lock(&rows.lock);
	rows.round = round;
	rows.ready = 1;
	pthread_cond_broadcast(&rows.cond);
	pthread_mutex_unlock(&rows.lock);
}

/* Waits for the GPUs' rows (at most until the deadline): the round, or
 * NULL when none could be read in time. */
static const struct gpr_cli_ps_round *rows_wait(void)
{
	pthread_mutex_lock(&rows.lock);
	while (!rows.ready) {
		double left = deadline - now();
		if (left <= 0)
			break;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		long long ns = (long long)ts.tv_nsec + (long long)(left * 1e9);
		ts.tv_sec += (time_t)(ns / 1000000000);
		ts.tv_nsec = (long)(ns % 1000000000);
		pthread_cond_timedwait(&rows.cond, &rows.lock, &ts);
	}
	const struct gpr_cli_ps_round *round = rows.ready ? rows.round : NULL;
	pthread_mutex_unlock(&rows.lock);
	return round;
}

/* The driver's figure for pid on GPU index, from the round: its row's
 * bytes, the GPU's total where NVML withholds the figure, 0 where the
 * driver lists no such process there; -1 where the round did not read
 * that GPU (nothing to check against). */
static long long driver_figure(const struct gpr_cli_ps_round *round, long pid,
			       long long index)
{
	for (size_t k = 0; round && k < round->n; k++) {
		const struct gpr_cli_ps_gpu *g = &round->gpus[k];
		if (g->index != index || g->err)
			continue;
		for (size_t p = 0; p < g->n; p++)
			if (g->rows[p].pid == (uint32_t)pid)
				return g->rows[p].bytes_known
					   ? (long long)g->rows[p].bytes
					   : (long long)g->info.total;
		return 0;
	}
	return -1;
}

static long long gpu_index(const struct rgpu *g);

static int refuse(struct target *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The answer of t becomes a bad one, said in one line. */
static int refuse(struct target *t, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t->error, sizeof(t->error), fmt, ap);
	va_end(ap);
	t->kind = "bad_answer";
	t->n_gpus = 0;
	t->value = 0;
	return -1;
}

/* t's figures checked against the driver's (the file's comment), its row
 * their sum: 0, or -1 with t's answer made a bad one. */
static int check_figures(struct target *t)
{
	const struct gpr_cli_ps_round *round = rows_wait();
	long long sum = 0;
	for (int k = 0; k < t->n_gpus; k++) {
		struct rgpu *g = &t->gpus[k];
		if (g->bytes < 0)
			g->bytes = 0;
		long long cap = driver_figure(round, t->pid, gpu_index(g));
		if (cap >= 0 && g->bytes > cap) {
			char a[32], b[32];
			return refuse(
			    t,
			    "process %ld's agent says GPU %lld %s %s (%lld "
			    "bytes), more than the %s the driver counts for "
			    "it there; not counted",
			    t->pid, gpu_index(g),
			    env.dry_run ? "has releasable" : "released",
			    fb(g->bytes, a, sizeof(a)), g->bytes,
			    fb(cap, b, sizeof(b)));
		}
		if (__builtin_add_overflow(sum, g->bytes, &sum))
			return refuse(t,
				      "process %ld's agent answered figures "
				      "too large to add; not counted",
				      t->pid);
	}
	t->value = sum;
	return 0;
}

static void reclaim_one(struct target *t)
{
	double t0 = now();
	struct gpr_cli_agent_reply r;
	long long n[GPR_CLI_PS_GPU_INTS * MAX_GPUS];
	char args[512] = "";
	t->ok = 0;
	if (env.gpu >= 0) { /* the CUDA ordinals it knows that GPU by */
		if (ask(t, "status", "", &r) != 0)
			goto out;
		size_t k = ints(&r, "ordinals", n, 2 * MAX_GPUS);
		gpr_cli_agent_reply_free(&r);
		size_t len = 0;
		int any = 0;
		for (size_t i = 0; i + 2 <= k; i += 2)
			if (n[i + 1] == env.gpu && n[i] >= 0 &&
			    len + 24 < sizeof(args)) {
				len += (size_t)snprintf(
				    args + len, sizeof(args) - len, "%s%lld",
				    any ? "," : "\"devices\":[", n[i]);
				any = 1;
			}
		if (!any) {
			t->ok = 1;
			snprintf(t->skipped, sizeof(t->skipped),
				 "holds no context on GPU %d", env.gpu);
			goto out;
		}
		snprintf(args + len, sizeof(args) - len, "]");
	}
	if (env.dry_run || env.min >= 0) {
		if (ask(t, "explain", args, &r) != 0)
			goto out;
		size_t k = ints(&r, "groups", n, sizeof(n) / sizeof(*n));
		gpr_cli_agent_reply_free(&r);
		t->n_gpus = 0;
		for (size_t i = 0;
		     i + GPR_CLI_PS_GPU_INTS <= k && t->n_gpus < MAX_GPUS;
		     i += GPR_CLI_PS_GPU_INTS) {
			struct rgpu *g = &t->gpus[t->n_gpus++];
			g->device = n[i];
			g->nvml = n[i + 1];
			g->bytes = n[i + 3]; /* releasable */
			g->known = 1;
		}
		if (check_figures(t) != 0)
			goto out;
		long long would = t->value;
		if (env.dry_run) {
			t->ok = 1;
			goto out;
		}
		if (would < env.min) {
			char a[32], b[32];
			t->ok = 1;
			t->n_gpus = 0;
			t->value = 0;
			snprintf(t->skipped, sizeof(t->skipped),
				 "would return %s, less than --min %s",
				 fb(would, a, sizeof(a)),
				 fb(env.min, b, sizeof(b)));
			goto out;
		}
	}
	/* what it held is read before it is asked to give any back */
	rows_wait();
	if (ask(t, "release", args, &r) != 0)
		goto out;
	size_t k = ints(&r, "returned", n, 1 + 4 * MAX_GPUS);
	const char *v, *e;
	if (gpr_cli_agent_member(&r, "release_seconds", &v, &e) == 0 &&
	    *v != 'n') {
		t->release_seconds = strtod(v, NULL);
		t->has_release_seconds = 1;
	}
	gpr_cli_agent_reply_free(&r);
	/* its row is the sum of its GPUs' (n[0], the process's own total,
	 * is not read: it could differ) */
	t->n_gpus = 0;
	for (size_t i = 1; i + 4 <= k && t->n_gpus < MAX_GPUS; i += 4) {
		struct rgpu *g = &t->gpus[t->n_gpus++];
		g->device = n[i];
		g->nvml = n[i + 1];
		g->bytes = n[i + 2];
		g->known = n[i + 3];
	}
	t->ok = check_figures(t) == 0;
out:
	t->seconds = now() - t0;
	t->done = 1;
}

static void *reclaim_thread(void *arg)
{
	reclaim_one(arg);
	return NULL;
}

static void ask_all(struct target **ts, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (ts[i]->agent && !ts[i]->done && !ts[i]->started)
			ts[i]->started =
			    pthread_create(&ts[i]->thread, NULL, reclaim_thread,
					   ts[i]) == 0;
}

static void wait_all(struct target **ts, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (ts[i]->started)
			pthread_join(ts[i]->thread, NULL);
		else if (ts[i]->agent && !ts[i]->done)
			reclaim_one(ts[i]); /* no thread: here, in turn */
		ts[i]->started = 0;
	}
}

/* ---------------- the report ---------------- */

/* The key of the bytes (docs/naming.md), and the one of the release
 * before, still written beside it (deprecated). */
static const char *key(void)
{
	return env.dry_run ? "releasable" : "released";
}

static const char *old_key(void)
{
	return env.dry_run ? "would_return" : "returned";
}

/* A GPU's index as the report gives it: NVML's, else the CUDA ordinal. */
static long long gpu_index(const struct rgpu *g)
{
	return g->nvml >= 0 ? g->nvml : g->device;
}

struct total {
	long long index, bytes;
	int processes;
	char name[24]; /* the index as text: the order of the report */
};

static int cmp_total(const void *a, const void *b)
{
	return strcmp(((const struct total *)a)->name,
		      ((const struct total *)b)->name);
}

static size_t totals(struct target *const *ts, size_t n, struct total *out,
		     size_t cap)
{
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		const struct target *t = ts[i];
		if (!t->agent || !t->ok)
			continue;
		for (int k = 0; k < t->n_gpus; k++) {
			long long ix = gpu_index(&t->gpus[k]);
			size_t j = 0;
			while (j < m && out[j].index != ix)
				j++;
			if (j == m) {
				if (m == cap)
					continue;
				out[m] = (struct total){.index = ix};
				snprintf(out[m].name, sizeof(out[m].name),
					 "%lld", ix);
				m++;
			}
			/* each >= 0 (check_figures) and the total of all of
			 * them did not overflow: neither does this */
			out[j].bytes += t->gpus[k].bytes;
			out[j].processes++;
		}
	}
	qsort(out, m, sizeof(*out), cmp_total);
	return m;
}

static void base(struct gpr__json *j, const struct target *t)
{
	gpr__json_kv_i64(j, "pid", t->pid);
	gpr__json_kv_str(j, "user", t->user_known ? t->user : NULL);
	gpr__json_kv_str(j, "command", t->cmd_known ? t->cmd : NULL);
	gpr__json_key(j, "held");
	gpr__json_object(j);
	for (int k = 0; k < t->n_held; k++) {
		char name[24];
		snprintf(name, sizeof(name), "%d", t->held_index[k]);
		gpr__json_key(j, name);
		if (t->held_bytes[k] >= 0)
			gpr__json_i64(j, t->held_bytes[k]);
		else
			gpr__json_null(j);
	}
	gpr__json_object_end(j);
}

static void opt_i64(struct gpr__json *j, const char *k, long long v)
{
	gpr__json_key(j, k);
	if (v >= 0)
		gpr__json_i64(j, v);
	else
		gpr__json_null(j);
}

static const char no_agent_why[] = "no agent (GPURECLAIM_AGENT=1, gpureclaim "
				   "run --agent, or gpureclaim.agent.start())";

static void report_json(struct gpr__buf *b, struct target *const *ts, size_t n,
			double seconds, long long total, const char *note,
			const struct gpr_cli_idle_result *idle)
{
	struct gpr__json j;
	gpr__json_init(&j, b);
	gpr__json_object(&j);
	gpr__json_kv_bool(&j, "dry_run", env.dry_run);
	opt_i64(&j, "gpu", env.gpu);
	opt_i64(&j, "min", env.min);
	gpr__json_key(&j, "seconds");
	gpr__json_double(&j, seconds, 6);
	gpr__json_kv_i64(&j, "total", total);
	gpr__json_key(&j, "processes");
	gpr__json_array(&j);
	for (size_t i = 0; i < n; i++) {
		const struct target *t = ts[i];
		if (!t->agent || !t->ok)
			continue;
		gpr__json_object(&j);
		base(&j, t);
		gpr__json_kv_i64(&j, key(), t->value);
		gpr__json_kv_i64(&j, old_key(), t->value);
		gpr__json_key(&j, "gpus");
		gpr__json_array(&j);
		for (int k = 0; k < t->n_gpus; k++) {
			const struct rgpu *g = &t->gpus[k];
			gpr__json_object(&j);
			opt_i64(&j, "gpu", g->nvml);
			opt_i64(&j, "device", g->device);
			opt_i64(&j, key(), g->bytes);
			if (!env.dry_run)
				gpr__json_kv_bool(&j, "known", g->known != 0);
			/* the keys of the release before (deprecated) */
			opt_i64(&j, "nvml_index", g->nvml);
			opt_i64(&j, env.dry_run ? "returnable" : "returned",
				g->bytes);
			gpr__json_object_end(&j);
		}
		gpr__json_array_end(&j);
		gpr__json_key(&j, "seconds");
		gpr__json_double(&j, t->seconds, 6);
		if (t->skipped[0])
			gpr__json_kv_str(&j, "skipped", t->skipped);
		if (t->has_release_seconds) {
			gpr__json_key(&j, "release_seconds");
			gpr__json_double(&j, t->release_seconds, 6);
		}
		gpr__json_object_end(&j);
	}
	gpr__json_array_end(&j);
	struct total tot[MAX_GPUS];
	size_t m = totals(ts, n, tot, MAX_GPUS);
	gpr__json_key(&j, "gpus");
	gpr__json_array(&j);
	for (size_t k = 0; k < m; k++) {
		gpr__json_object(&j);
		gpr__json_kv_i64(&j, "gpu", tot[k].index);
		gpr__json_kv_i64(&j, key(), tot[k].bytes);
		gpr__json_kv_i64(&j, "processes", tot[k].processes);
		gpr__json_kv_i64(&j, "index", tot[k].index); /* deprecated */
		gpr__json_kv_i64(&j, old_key(), tot[k].bytes);
		gpr__json_object_end(&j);
	}
	gpr__json_array_end(&j);
	for (int pass = 0; pass < 2; pass++) {
		gpr__json_key(&j, pass ? "no_agent" : "failed");
		gpr__json_array(&j);
		for (size_t i = 0; i < n; i++) {
			const struct target *t = ts[i];
			if (pass ? t->agent : !t->agent || t->ok)
				continue;
			gpr__json_object(&j);
			base(&j, t);
			gpr__json_kv_str(&j, "kind",
					 pass ? "no_agent" : t->kind);
			gpr__json_kv_str(&j, "error",
					 pass ? no_agent_why : t->error);
			gpr__json_object_end(&j);
		}
		gpr__json_array_end(&j);
	}
	gpr__json_key(&j, "notes");
	gpr__json_array(&j);
	if (note)
		gpr__json_str(&j, note);
	gpr__json_array_end(&j);
	/* --idle: the suspends after the caches (cli/reclaim_idle.c) */
	gpr__json_key(&j, "idle");
	if (idle)
		gpr_cli_idle_json(&j, idle);
	else
		gpr__json_null(&j);
	gpr__json_object_end(&j);
}

/* Compact JSON laid out as Python's json.dumps(indent=2) lays it out. */
static void indent2(struct gpr__buf *o, const char *s, size_t n)
{
	int depth = 0, in_str = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (in_str) {
			gpr__buf_putn(o, &c, 1);
			if (c == '\\' && i + 1 < n)
				gpr__buf_putn(o, &s[++i], 1);
			else if (c == '"')
				in_str = 0;
			continue;
		}
		switch (c) {
		case '"':
			in_str = 1;
			gpr__buf_putn(o, &c, 1);
			break;
		case '{':
		case '[':
			gpr__buf_putn(o, &c, 1);
			if (i + 1 < n && (s[i + 1] == '}' || s[i + 1] == ']')) {
				gpr__buf_putn(o, &s[++i], 1);
				break;
			}
			depth++;
			gpr__buf_printf(o, "\n%*s", 2 * depth, "");
			break;
		case '}':
		case ']':
			depth--;
			gpr__buf_printf(o, "\n%*s", 2 * depth, "");
			gpr__buf_putn(o, &c, 1);
			break;
		case ',':
			gpr__buf_printf(o, ",\n%*s", 2 * depth, "");
			break;
		case ':':
			gpr__buf_puts(o, ": ");
			break;
		default:
			gpr__buf_putn(o, &c, 1);
		}
	}
	gpr__buf_puts(o, "\n");
}

static const char *drop_pid(const char *msg, long pid)
{
	char p[40];
	int k = snprintf(p, sizeof(p), "process %ld: ", pid);
	return strncmp(msg, p, (size_t)k) == 0 ? msg + k : msg;
}

/* A command on one line, white space runs as one blank, cut to 60. */
static void short_cmd(struct gpr__buf *b, const struct target *t)
{
	if (!t->cmd_known)
		return;
	char s[sizeof(t->cmd)];
	size_t len = 0;
	int blank = 0;
	for (const char *c = t->cmd; *c; c++) {
		if (*c == ' ' || (*c >= '\t' && *c <= '\r')) {
			blank = len > 0;
			continue;
		}
		if (blank)
			s[len++] = ' ';
		blank = 0;
		s[len++] = *c;
	}
	s[len] = '\0';
	/* another user's command line: terminal-safe, as ps shows it */
	if (gpr__text_len(s) <= 60) {
		gpr__text_put(b, s, 0, 0);
	} else {
		gpr__text_put(b, s, 57, 0);
		gpr__buf_puts(b, "...");
	}
}

/* "  PID USER " of a row: the user's name terminal-safe, 10 columns. */
static void who(struct gpr__buf *b, const struct target *t)
{
	gpr__buf_printf(b, "  %7ld ", t->pid);
	gpr__text_put(b, t->user_known && t->user[0] ? t->user : "-", 10, 1);
	gpr__buf_puts(b, " ");
}

static void report_text(struct gpr__buf *b, struct target *const *ts, size_t n,
			long long total, const char *note)
{
	char x[32];
	size_t answered = 0, asked = 0, failed = 0, none = 0;
	for (size_t i = 0; i < n; i++) {
		asked += ts[i]->agent;
		answered += ts[i]->agent && ts[i]->ok;
		failed += ts[i]->agent && !ts[i]->ok;
		none += !ts[i]->agent;
	}
	gpr__buf_printf(
	    b,
	    "gpureclaim reclaim%s: %zu process%s with an agent "
	    "asked; %zu answered%s %s%s (%lld bytes)\n",
	    env.dry_run ? " --dry-run" : "", asked, asked != 1 ? "es" : "",
	    answered, env.dry_run ? ";" : " and released",
	    fb(total, x, sizeof(x)), env.dry_run ? " releasable" : "", total);
	if (answered)
		gpr__buf_printf(b, "  %7s %-10s %14s  PER GPU / COMMAND\n",
				"PID", "USER",
				env.dry_run ? "RELEASABLE" : "RELEASED");
	for (size_t i = 0; i < n; i++) {
		const struct target *t = ts[i];
		if (!t->agent || !t->ok)
			continue;
		who(b, t);
		gpr__buf_printf(b, "%14s  ", fb(t->value, x, sizeof(x)));
		for (int k = 0; k < t->n_gpus; k++)
			gpr__buf_printf(b, "%sGPU %lld %s", k ? ", " : "",
					gpu_index(&t->gpus[k]),
					fb(t->gpus[k].bytes, x, sizeof(x)));
		if (!t->n_gpus)
			gpr__buf_puts(b, "-");
		if (t->skipped[0])
			gpr__buf_printf(b, " (%s)", t->skipped);
		gpr__buf_puts(b, "  ");
		short_cmd(b, t);
		gpr__buf_puts(b, "\n");
	}
	struct total tot[MAX_GPUS];
	size_t m = totals(ts, n, tot, MAX_GPUS);
	for (size_t k = 0; k < m; k++)
		gpr__buf_printf(
		    b, "GPU %lld: %s (%lld bytes) %s %d process%s\n",
		    tot[k].index, fb(tot[k].bytes, x, sizeof(x)), tot[k].bytes,
		    env.dry_run ? "releasable in" : "released by",
		    tot[k].processes, tot[k].processes != 1 ? "es" : "");
	if (failed)
		gpr__buf_puts(b, "Did not answer:\n");
	for (size_t i = 0; i < n; i++) {
		const struct target *t = ts[i];
		if (t->agent && !t->ok) {
			who(b, t);
			gpr__buf_printf(b, "%s: ", t->kind);
			gpr__text_put(b, drop_pid(t->error, t->pid), 0, 0);
			gpr__buf_puts(b, "\n");
		}
	}
	if (none)
		gpr__buf_puts(b, "No agent (not asked):\n");
	for (size_t i = 0; i < n; i++) {
		const struct target *t = ts[i];
		if (t->agent)
			continue;
		who(b, t);
		gpr__buf_puts(b, "holds ");
		for (int k = 0; k < t->n_held; k++) {
			if (t->held_bytes[k] >= 0)
				fb(t->held_bytes[k], x, sizeof(x));
			else
				snprintf(x, sizeof(x), "-");
			gpr__buf_printf(b, "%sGPU %d %s", k ? ", " : "",
					t->held_index[k], x);
		}
		if (!t->n_held)
			gpr__buf_puts(b, "nothing listed");
		gpr__buf_puts(b, "  ");
		short_cmd(b, t);
		gpr__buf_puts(b, "\n");
	}
	if (note)
		gpr__buf_printf(b, "%s\n", note);
}

/* ---------------- who is on the GPUs ---------------- */

static struct target *find(struct target **ts, size_t n, long pid)
{
	for (size_t i = 0; i < n; i++)
		if (ts[i]->pid == pid)
			return ts[i];
	return NULL;
}

/* This user's to ask (its own, or any as root). */
static int askable(long pid)
{
	char p[64];
	struct stat st;
	snprintf(p, sizeof(p), "/proc/%ld", pid);
	return stat(p, &st) == 0 && (getuid() == 0 || st.st_uid == getuid());
}

static int cmp_target(const void *a, const void *b)
{
	long x = (*(struct target *const *)a)->pid,
	     y = (*(struct target *const *)b)->pid;
	return (x > y) - (x < y);
}

/* ---------------- the options ---------------- */

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "gpureclaim reclaim: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nRun 'gpureclaim reclaim --help' for the options.\n");
	return GPR_CLI_USAGE;
}

/* "2GiB", "512MiB", "1.5GB", "4096" (bytes) -> bytes; -1 if not a size
 * (the forms the Python reclaim took before it moved here). */
static long long parse_size(const char *s)
{
	static const struct {
		const char *unit;
		double mult;
	} units[] = {{"", 1},
		     {"b", 1},
		     {"kb", 1e3},
		     {"mb", 1e6},
		     {"gb", 1e9},
		     {"tb", 1e12},
		     {"kib", 1024.0},
		     {"mib", 1048576.0},
		     {"gib", 1073741824.0},
		     {"tib", 1099511627776.0}};
	while (*s == ' ' || *s == '\t')
		s++;
	double v;
	int i = gpr_cli_number_prefix(s, &v);
	if (i < 0)
		return -1;
	const char *u = s + i;
	while (*u == ' ' || *u == '\t')
		u++;
	char unit[8];
	size_t k = 0;
	while (u[k] && u[k] != ' ' && u[k] != '\t' && k < sizeof(unit) - 1) {
		char c = u[k];
		unit[k++] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
	}
	unit[k] = '\0';
	for (const char *t = u + k; *t; t++)
		if (*t != ' ' && *t != '\t')
			return -1;
	for (size_t j = 0; j < sizeof(units) / sizeof(*units); j++)
		if (strcmp(unit, units[j].unit) == 0) {
			double b = v * units[j].mult;
			return b < 9.2e18 ? (long long)b : -1;
		}
	return -1;
}

static int parse_args(int argc, char **argv, int *help)
{
	enum {
		OPT_MIN = 256,
		OPT_DRY,
		OPT_JSON,
		OPT_TIMEOUT,
		OPT_IDLE,
		OPT_TARGET
	};
	static const struct option opts[] = {
	    {"gpu", required_argument, NULL, 'i'},
	    {"min", required_argument, NULL, OPT_MIN},
	    {"idle", required_argument, NULL, OPT_IDLE},
	    {"target", required_argument, NULL, OPT_TARGET},
	    {"dry-run", no_argument, NULL, OPT_DRY},
	    {"json", no_argument, NULL, OPT_JSON},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	env = (struct env){.gpu = -1, .min = -1, .timeout = 30, .idle = -1};
	opterr = 0;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, ":hi:", opts, NULL)) != -1) {
		char *end;
		switch (c) {
		case 'h':
			*help = 1;
			return GPR_CLI_OK;
		case 'i': {
			errno = 0;
			long v = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || v < 0 ||
			    v > 0xffff)
				return usage_error(
				    "--gpu needs a GPU index (0, "
				    "1, ...), not '%s'",
				    optarg);
			env.gpu = (int)v;
			break;
		}
		case OPT_MIN:
			env.min = parse_size(optarg);
			if (env.min < 0)
				return usage_error(
				    "--min needs a size (512MiB, "
				    "2GiB, bytes), not '%s'",
				    optarg);
			break;
		case OPT_DRY:
			env.dry_run = 1;
			break;
		case OPT_IDLE:
			env.idle = gpr_cli_parse_duration(optarg);
			if (env.idle < 0)
				return usage_error(
				    "--idle needs a duration (30m, 2h, 1d, or "
				    "seconds), not '%s'",
				    optarg);
			break;
		case OPT_TARGET: {
			size_t len = strlen(optarg);
			if (len > 1 && optarg[len - 1] == '%') {
				char num[32];
				char *end;
				snprintf(num, sizeof(num), "%.*s",
					 (int)(len - 1), optarg);
				errno = 0;
				env.target_percent = strtod(num, &end);
				if (errno || end == num || *end ||
				    !(env.target_percent >= 0) ||
				    env.target_percent > 100)
					return usage_error(
					    "--target needs a size (8GiB) or a "
					    "percent of the GPU (50%%), not "
					    "'%s'",
					    optarg);
				env.target = 2;
			} else {
				env.target_bytes = parse_size(optarg);
				if (env.target_bytes < 0)
					return usage_error(
					    "--target needs a size (8GiB) or a "
					    "percent of the GPU (50%%), not "
					    "'%s'",
					    optarg);
				env.target = 1;
			}
			break;
		}
		case OPT_JSON:
			env.json = 1;
			break;
		case OPT_TIMEOUT:
			if (gpr_cli_parse_seconds(optarg, &env.timeout) != 0)
				return usage_error(
				    "--timeout must be positive: a number of "
				    "seconds from 0.1 to 86400 (0.5, 30), not "
				    "'%s'",
				    optarg);
			break;
		case ':':
			return usage_error("%s needs a value",
					   argv[optind - 1]);
		default:
			if (optopt) {
				char o[3] = {'-', (char)optopt, '\0'};
				return usage_error("unknown option '%s'", o);
			}
			return usage_error("unknown option '%s'",
					   argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (env.target && env.idle < 0)
		return usage_error("%s", "--target goes with --idle (how far "
					 "to suspend idle processes)");
	return GPR_CLI_OK;
}

/* ---------------- --idle ---------------- */

/* After the caches: the cache releases logged, then the idle processes
 * suspended (cli/reclaim_idle.c); NULL when out of memory. */
static struct gpr_cli_idle_result *
reclaim_idle(gpr_ctx *ctx, struct target *const *ts, size_t n, int *failed)
{
	char d[48], cause[96];
	snprintf(cause, sizeof(cause), "reclaim --idle %s: caches first",
		 gpr_cli_fmt_duration(env.idle, d, sizeof(d)));
	struct gpr_cli_idle_opts o = {
	    .idle_s = env.idle,
	    .target = env.target,
	    .target_bytes =
		(uint64_t)(env.target_bytes > 0 ? env.target_bytes : 0),
	    .target_percent = env.target_percent,
	    .gpu = env.gpu,
	    .dry_run = env.dry_run};
	for (size_t i = 0; i < n; i++) {
		const struct target *t = ts[i];
		if (!t->agent)
			continue;
		if (!env.dry_run && !t->skipped[0])
			gpr_cli_release_log(t->pid, t->ok, t->value, cause,
					    t->error);
		for (int k = 0; t->ok && k < t->n_gpus; k++) {
			long long ix = gpu_index(&t->gpus[k]), sum;
			if (ix >= 0 && ix < 64 &&
			    !__builtin_add_overflow(o.cache_releasable[ix],
						    t->gpus[k].bytes, &sum))
				o.cache_releasable[ix] = sum;
		}
	}
	return gpr_cli_reclaim_idle(ctx, &o, failed);
}

/* ---------------- the command ---------------- */

int gpr_cli_reclaim(int argc, char **argv)
{
	int help = 0, code = parse_args(argc, argv, &help);
	if (code != GPR_CLI_OK)
		return code;
	if (help) /* one help, with the Python side's (help_python.c) */
		return gpr_cli_python_help(argc, argv);
	double t0 = now();
	deadline = gpr_cli_agent_now() + env.timeout;
	gpr_ctx *ctx = NULL;
	struct gpr_cli_ps_start start = {0};
	struct gpr_cli_ps_variant variant = {0};
	int opened = gpr_open(NULL, &ctx) == 0;
	if (opened) /* NVML starts while the agents are found and asked */
		gpr_cli_ps_start(&start, ctx, &variant);

	long *pids = NULL;
	size_t n_agents = 0;
	gpr_cli_agent_discover(&pids, &n_agents);
	/* each target apart: the threads hold pointers to them */
	size_t cap = n_agents + 16, n = 0;
	struct target **ts = calloc(cap, sizeof(*ts));
	for (size_t i = 0; ts && i < n_agents; i++) {
		struct target *t = calloc(1, sizeof(*t));
		if (!t)
			break;
		t->pid = pids[i];
		t->agent = 1;
		ts[n++] = t;
	}
	free(pids);
	if (!ts) {
		fprintf(stderr, "gpureclaim reclaim: out of memory\n");
		return GPR_CLI_ERROR;
	}
	if (env.gpu < 0)
		ask_all(ts, n);

	/* the GPUs' rows, read while the agents answer */
	struct gpr_cli_ps_round round = {0};
	const char *note = NULL;
	int rc = GPR_CLI_ERROR, got = 0;
	gpr_cli_ps_name = "reclaim";
	if (opened) {
		gpr_cli_ps_started(&start);
		got = gpr_cli_ps_query(ctx, env.gpu >= 0 ? &env.gpu : NULL,
				       env.gpu >= 0, 0, &round, &rc) == 0;
	}
	rows_set(got ? &round : NULL);
	if (!got && rc == GPR_CLI_USAGE) { /* a GPU index no GPU has */
		wait_all(ts, n);
		code = GPR_CLI_USAGE;
		goto done;
	}
	if (!got)
		note = "the GPUs' process list is missing: the NVIDIA driver "
		       "could not be read (gpureclaim ps says why)";
	for (size_t k = 0; got && k < round.n; k++) {
		const struct gpr_cli_ps_gpu *g = &round.gpus[k];
		for (size_t p = 0; !g->err && p < g->n; p++) {
			const struct gpr_cli_ps_row *row = &g->rows[p];
			if (row->state != GPR_CLI_PID_ALIVE ||
			    !askable(row->pid))
				continue;
			struct target *t = find(ts, n, row->pid);
			if (!t) {
				if (n == cap) {
					struct target **m =
					    realloc(ts, 2 * cap * sizeof(*ts));
					if (!m)
						continue;
					ts = m;
					cap *= 2;
				}
				if (!(t = calloc(1, sizeof(*t))))
					continue;
				t->pid = row->pid;
				ts[n++] = t;
			}
			if (!t->listed) {
				t->listed = 1;
				t->user_known = row->user_known;
				t->cmd_known = row->cmd_known;
				snprintf(t->user, sizeof(t->user), "%s",
					 row->user);
				snprintf(t->cmd, sizeof(t->cmd), "%s",
					 row->cmd);
			}
			if (t->n_held < MAX_GPUS) {
				t->held_index[t->n_held] = g->index;
				t->held_bytes[t->n_held++] =
				    row->bytes_known ? (long long)row->bytes
						     : -1;
			}
		}
	}
	if (env.gpu >= 0) { /* only the processes on that GPU (none asked
			     * yet) */
		size_t m = 0;
		for (size_t i = 0; i < n; i++)
			if (ts[i]->n_held)
				ts[m++] = ts[i];
			else
				free(ts[i]);
		n = m;
		ask_all(ts, n);
	}
	wait_all(ts, n);
	if (n > 1)
		qsort(ts, n, sizeof(*ts), cmp_target);
	long long total = 0;
	for (size_t i = 0; i < n; i++) {
		struct target *t = ts[i];
		long long sum;
		if (t->agent && t->ok &&
		    !__builtin_add_overflow(total, t->value, &sum))
			total = sum;
		else if (t->agent && t->ok) {
			t->ok = 0;
			refuse(t,
			       "process %ld's agent answered figures too "
			       "large to add to the others'; not counted",
			       t->pid);
		}
		if (!t->listed) { /* an agent on no GPU of the list */
			char v[1024];
			t->cmd_known = gpr_cli_proc_cmdline((pid_t)t->pid, v,
							    sizeof(v)) == 0;
			if (t->cmd_known) {
				size_t len = strlen(v);
				while (len && v[len - 1] == ' ')
					v[--len] = '\0';
				snprintf(t->cmd, sizeof(t->cmd), "%s", v);
			}
			t->user_known =
			    gpr_cli_proc_user((pid_t)t->pid, t->user,
					      sizeof(t->user)) == 0;
		}
	}
	struct gpr_cli_idle_result *idle = NULL;
	int idle_failed = 0;
	if (env.idle >= 0 && opened)
		idle = reclaim_idle(ctx, ts, n, &idle_failed);
	struct gpr__buf out = {0};
	if (env.json) {
		struct gpr__buf j = {0};
		report_json(&j, ts, n, now() - t0, total, note, idle);
		indent2(&out, j.data ? j.data : "", j.len);
		gpr__buf_free(&j);
	} else {
		report_text(&out, ts, n, total, note);
		if (idle) {
			gpr__buf_puts(&out, "\n");
			gpr_cli_idle_text(&out, idle);
		}
	}
	gpr_cli_idle_free(idle);
	code = GPR_CLI_OK;
	for (size_t i = 0; i < n; i++)
		if (ts[i]->agent && !ts[i]->ok)
			code = 3; /* some agents did not answer */
	if (idle_failed || (env.idle >= 0 && (!opened || !idle)))
		code = GPR_CLI_ERROR; /* a suspend failed: said in its row */
	if (out.oom || gpr__buf_write(&out, stdout) != 0)
		code = GPR_CLI_ERROR;
	gpr__buf_free(&out);
done:
	gpr_cli_ps_round_free(&round);
	for (size_t i = 0; i < n; i++)
		free(ts[i]);
	free(ts);
	if (opened)
		gpr_close(ctx);
	return code;
}
