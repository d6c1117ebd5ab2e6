/*
 * `gpureclaim ps`: per GPU, the processes holding memory on it and how
 * much, as NVML's per-process figure (what nvidia-smi lists) says.
 *
 * Decisions (docs/ps.md repeats them for users):
 * - Output is built whole in memory and written only once a round is
 *   complete, so stdout never holds half a JSON document.
 * - A GPU that cannot be queried is shown as an error line (JSON: an
 *   object with "error") and the others are still listed; the exit code
 *   is then 1.
 * - Where NVML withholds the per-process figure (MIG), the pids are still
 *   listed with bytes "n/a" (JSON: null, "bytes_known": false), a note
 *   goes to stderr and the exit code is 0: the list is what the driver
 *   knows, and JSON readers see the missing figure on each process.
 * - An index given with -i that no GPU has is bad usage (exit 2); it can
 *   only be checked once NVML answered.
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpureclaim.h"

#define MAX_SELECT 64

static struct env {
	int json;		/* --json: one JSON document per round */
	double watch;		/* --watch SECONDS: 0 runs once */
	int select[MAX_SELECT]; /* -i/--gpu INDEX[,INDEX]: only these */
	int n_select;		/* 0: every GPU */
} env = {
    .json = 0,
    .watch = 0,
    .n_select = 0,
};

static const char usage_text[] =
    "USAGE: gpureclaim ps [--json] [--watch SECONDS] [-i INDEX]...\n"
    "\n"
    "List, per GPU, the processes holding memory on it: pid, user,\n"
    "command, the driver's per-process figure (as nvidia-smi shows it)\n"
    "and its share of the GPU's memory.\n"
    "\n"
    "OPTIONS:\n"
    "    --json              one JSON document (with --watch: one per\n"
    "                        line, JSON Lines)\n"
    "    --watch SECONDS     repeat every SECONDS (0.1 to 86400, "
    "e.g. 0.5) until Ctrl-C\n"
    "    -i, --gpu INDEX     only GPU INDEX (NVML index); repeat it or\n"
    "                        give a comma list (-i 0,2)\n"
    "    -h, --help          show this help\n"
    "\n"
    "EXAMPLES:\n"
    "    gpureclaim ps                    # every GPU\n"
    "    gpureclaim ps -i 0               # GPU 0 only\n"
    "    gpureclaim ps --json | jq '.gpus[].processes[].pid'\n"
    "    gpureclaim ps --watch 1          # refresh every second\n"
    "    gpureclaim ps --json --watch 0.5 > log.jsonl\n"
    "\n"
    "Exit status: 0 ok; 1 runtime error (no NVIDIA driver, a GPU that\n"
    "cannot be queried: the others are still listed); 2 bad usage.\n"
    "Memory that NVML does not report per process (MIG) shows as n/a.\n";

struct row {
	uint32_t pid;
	uint64_t bytes;
	int bytes_known;
	int compute, graphics;
	int user_known, cmd_known;
	char user[64];
	char cmd[1024];
};

struct gpu_view {
	int index;
	int err;	  /* 0 or the GPR_E_* of the failed query */
	char detail[512]; /* gpr_last_error of that query */
	struct gpr_gpu info;
	struct row *rows;
	size_t n;
};

static void copy_detail(gpr_ctx *ctx, char *out, size_t len)
{
	snprintf(out, len, "%s", gpr_last_error(ctx));
}

/* "<what went wrong> (<detail>)", the detail left out when empty. */
static void describe(int err, const char *detail, char *out, size_t len)
{
	const char *what = gpr_strerror(err);
	if (err == GPR_E_NO_NVML || err == GPR_E_NO_DRIVER ||
	    (err == GPR_E_NVML && strstr(detail, "DRIVER_NOT_LOADED")))
		what = "NVIDIA driver not found";
	else if (err == GPR_E_BAD_LIBRARY)
		what = "not an NVIDIA NVML library";
	if (*detail)
		snprintf(out, len, "%s (%s)", what, detail);
	else
		snprintf(out, len, "%s", what);
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "gpureclaim ps: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nRun 'gpureclaim ps --help' for the options.\n");
	return GPR_CLI_USAGE;
}

/* Parses argv into env; GPR_CLI_OK, or an exit code to return now. */
static int parse_args(int argc, char **argv, int *help)
{
	enum { OPT_JSON = 256, OPT_WATCH };
	static const struct option longopts[] = {
	    {"json", no_argument, NULL, OPT_JSON},
	    {"watch", required_argument, NULL, OPT_WATCH},
	    {"gpu", required_argument, NULL, 'i'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	opterr = 0;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, ":hi:", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_JSON:
			env.json = 1;
			break;
		case OPT_WATCH:
			if (cli_parse_seconds(optarg, &env.watch) != 0)
				return usage_error(
				    "--watch needs a number of seconds "
				    "from 0.1 to 86400, digits with an "
				    "optional fraction (0.5, 2), not '%s'",
				    optarg);
			break;
		case 'i':
			if (cli_parse_index_list(optarg, env.select,
						 &env.n_select,
						 MAX_SELECT) != 0)
				return usage_error(
				    "-i/--gpu needs GPU indexes (0, 1, "
				    "0,2), not '%s'",
				    optarg);
			break;
		case 'h':
			*help = 1;
			return GPR_CLI_OK;
		case ':':
			return usage_error("option '%s' needs a value",
					   argv[optind - 1]);
		default:
			if (optopt) {
				char opt[3] = {'-', (char)optopt, '\0'};
				return usage_error("unknown option '%s'", opt);
			}
			return usage_error("unknown option '%s'",
					   argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	return GPR_CLI_OK;
}

/* Largest figure first, hidden figures last, then by pid. */
static int row_cmp(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->bytes_known != y->bytes_known)
		return y->bytes_known - x->bytes_known;
	if (x->bytes_known && x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* Fills v for GPU v->index; a failed query is kept in v->err. */
static int query_gpu(gpr_ctx *ctx, struct gpu_view *v)
{
	struct gpr_process *procs = NULL;
	size_t n = 0;
	int err = gpr_gpu_info(ctx, v->index, &v->info);
	if (err == 0)
		err = gpr_gpu_processes(ctx, v->index, &procs, &n);
	if (err != 0) {
		v->err = err;
		copy_detail(ctx, v->detail, sizeof(v->detail));
		return 0;
	}
	if (n > 0) {
		v->rows = calloc(n, sizeof(*v->rows));
		if (!v->rows) {
			gpr_free(procs);
			return GPR_E_NOMEM;
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct row *r = &v->rows[i];
		r->pid = procs[i].pid;
		r->bytes = procs[i].bytes;
		r->bytes_known = procs[i].bytes_known;
		r->compute = procs[i].compute;
		r->graphics = procs[i].graphics;
		r->user_known =
		    cli_proc_user((pid_t)r->pid, r->user, sizeof(r->user)) == 0;
		r->cmd_known = cli_proc_cmdline((pid_t)r->pid, r->cmd,
						sizeof(r->cmd)) == 0;
	}
	v->n = n;
	gpr_free(procs);
	if (v->n > 1) /* qsort(NULL, 0) is undefined */
		qsort(v->rows, v->n, sizeof(*v->rows), row_cmp);
	return 0;
}

static double share(const struct gpu_view *v, const struct row *r)
{
	return v->info.total ? 100.0 * (double)r->bytes / (double)v->info.total
			     : 0.0;
}

static void render_json(struct cli_buf *b, const struct gpu_view *views,
			size_t n)
{
	cli_buf_puts(b, "{\"gpus\":[");
	for (size_t g = 0; g < n; g++) {
		const struct gpu_view *v = &views[g];
		const struct gpr_gpu *i = &v->info;
		cli_buf_puts(b, g ? ",{" : "{");
		cli_json_kv_int(b, "index", v->index);
		if (v->err) {
			char msg[768];
			describe(v->err, v->detail, msg, sizeof(msg));
			cli_buf_puts(b, ",");
			cli_json_kv_str(b, "error", msg);
			cli_buf_puts(b, "}");
			continue;
		}
		cli_buf_puts(b, ",");
		cli_json_kv_str(b, "name", i->name);
		cli_buf_puts(b, ",");
		cli_json_kv_str(b, "uuid", i->uuid);
		cli_buf_puts(b, ",");
		cli_json_kv_str(b, "pci_bus_id", i->pci_bus_id);
		cli_buf_puts(b, ",");
		cli_json_kv_u64(b, "total", i->total);
		cli_buf_puts(b, ",");
		cli_json_kv_u64(b, "used", i->used);
		cli_buf_puts(b, ",");
		cli_json_kv_u64(b, "free", i->free);
		cli_buf_puts(b, ",");
		cli_json_kv_bool(b, "mig", i->mig);
		cli_buf_puts(b, ",");
		cli_json_kv_str(b, "memory_info",
				i->memory_info_v2 ? "v2" : "v1");
		cli_buf_puts(b, ",\"processes\":[");
		for (size_t p = 0; p < v->n; p++) {
			const struct row *r = &v->rows[p];
			cli_buf_puts(b, p ? ",{" : "{");
			cli_json_kv_u64(b, "pid", r->pid);
			cli_buf_puts(b, ",");
			cli_json_kv_str(b, "user",
					r->user_known ? r->user : NULL);
			cli_buf_puts(b, ",");
			cli_json_kv_str(b, "command",
					r->cmd_known ? r->cmd : NULL);
			cli_buf_puts(b, ",");
			cli_json_key(b, "bytes");
			if (r->bytes_known)
				cli_buf_printf(b, "%llu",
					       (unsigned long long)r->bytes);
			else
				cli_buf_puts(b, "null");
			cli_buf_puts(b, ",");
			cli_json_kv_bool(b, "bytes_known", r->bytes_known);
			cli_buf_puts(b, ",");
			cli_json_key(b, "share");
			if (r->bytes_known)
				cli_buf_printf(b, "%.3f", share(v, r));
			else
				cli_buf_puts(b, "null");
			cli_buf_puts(b, ",");
			cli_json_kv_bool(b, "compute", r->compute);
			cli_buf_puts(b, ",");
			cli_json_kv_bool(b, "graphics", r->graphics);
			cli_buf_puts(b, "}");
		}
		cli_buf_puts(b, "]}");
	}
	cli_buf_puts(b, "]}\n");
}

static void render_text(struct cli_buf *b, const struct gpu_view *views,
			size_t n)
{
	int width = cli_term_width(STDOUT_FILENO);
	if (n == 0)
		cli_buf_puts(b, "No GPU found.\n");
	for (size_t g = 0; g < n; g++) {
		const struct gpu_view *v = &views[g];
		const struct gpr_gpu *i = &v->info;
		char used[24], total[24], fr[24];
		if (g)
			cli_buf_puts(b, "\n");
		if (v->err) {
			char msg[768];
			describe(v->err, v->detail, msg, sizeof(msg));
			cli_buf_printf(b, "GPU %d: error: %s\n", v->index, msg);
			continue;
		}
		cli_buf_printf(b, "GPU %d: %s%s, %s / %s used, %s free\n",
			       v->index, i->name, i->mig ? " (MIG)" : "",
			       cli_fmt_bytes(i->used, used, sizeof(used)),
			       cli_fmt_bytes(i->total, total, sizeof(total)),
			       cli_fmt_bytes(i->free, fr, sizeof(fr)));
		if (v->n == 0) {
			cli_buf_puts(b, "  no processes\n");
			continue;
		}
		int uw = 4;
		for (size_t p = 0; p < v->n; p++) {
			int l = v->rows[p].user_known
				    ? cli_text_len(v->rows[p].user)
				    : 1;
			if (l > uw)
				uw = l;
		}
		if (uw > 16)
			uw = 16;
		/* "  " + pid 7 + " " + user + " " + 10 + " " + 6 + "  " */
		int cmdw =
		    width ? width - (2 + 7 + 1 + uw + 1 + 10 + 1 + 6 + 2) : 0;
		cli_buf_printf(b, "  %7s %-*s %10s %6s  %s\n", "PID", uw,
			       "USER", "MEMORY", "SHARE", "COMMAND");
		for (size_t p = 0; p < v->n; p++) {
			const struct row *r = &v->rows[p];
			char mem[24] = "n/a", sh[16] = "n/a";
			if (r->bytes_known) {
				cli_fmt_bytes(r->bytes, mem, sizeof(mem));
				snprintf(sh, sizeof(sh), "%.1f%%", share(v, r));
			}
			/*
			 * Another user's command line may hold any byte:
			 * shown terminal-safe, cut to the terminal's width.
			 */
			cli_buf_printf(b, "  %7u ", (unsigned)r->pid);
			cli_buf_put_text(b, r->user_known ? r->user : "-", uw,
					 1);
			cli_buf_printf(b, " %10s %6s  ", mem, sh);
			cli_buf_put_text(b, r->cmd_known ? r->cmd : "?",
					 cmdw > 3 ? cmdw : 0, 0);
			cli_buf_puts(b, "\n");
		}
	}
}

/* One note per run, however many rounds --watch makes. */
static void note_hidden(const struct gpu_view *views, size_t n)
{
	static int shown;
	if (shown)
		return;
	for (size_t g = 0; g < n; g++) {
		const struct gpu_view *v = &views[g];
		size_t hidden = 0;
		for (size_t p = 0; p < v->n; p++)
			hidden += !v->rows[p].bytes_known;
		if (v->err || hidden == 0)
			continue;
		if (v->info.mig)
			fprintf(stderr,
				"gpureclaim: NVML has no per-process figures "
				"on MIG (GPU %d): memory shown as n/a\n",
				v->index);
		else
			fprintf(stderr,
				"gpureclaim: NVML withholds the memory of %zu "
				"process(es) on GPU %d: shown as n/a\n",
				hidden, v->index);
		shown = 1;
	}
}

static void free_views(struct gpu_view *views, size_t n)
{
	for (size_t g = 0; g < n; g++)
		free(views[g].rows);
	free(views);
}

/*
 * One round: queries the GPUs and renders into out. Returns GPR_CLI_OK,
 * GPR_CLI_ERROR when a GPU failed (out holds the rest), or a negative
 * value when nothing can be listed (message already on stderr; *code is
 * the exit code).
 */
static int round_once(gpr_ctx *ctx, struct cli_buf *out, int *code)
{
	int count = 0, err = gpr_gpu_count(ctx, &count);
	if (err != 0) {
		char detail[512], msg[768];
		copy_detail(ctx, detail, sizeof(detail));
		describe(err, detail, msg, sizeof(msg));
		fprintf(stderr, "gpureclaim: %s\n", msg);
		*code = GPR_CLI_ERROR;
		return -1;
	}
	for (int s = 0; s < env.n_select; s++) {
		if (env.select[s] >= count) {
			if (count == 0)
				fprintf(stderr,
					"gpureclaim ps: no GPU %d: NVML sees "
					"no GPU\n",
					env.select[s]);
			else
				fprintf(stderr,
					"gpureclaim ps: no GPU %d: NVML sees "
					"%d (0-%d)\n",
					env.select[s], count, count - 1);
			*code = GPR_CLI_USAGE;
			return -1;
		}
	}
	size_t n = env.n_select ? (size_t)env.n_select : (size_t)count;
	struct gpu_view *views = n ? calloc(n, sizeof(*views)) : NULL;
	if (n && !views)
		goto oom;
	for (size_t g = 0; g < n; g++)
		views[g].index = env.n_select ? env.select[g] : (int)g;
	if (env.n_select) {
		/* listed in index order, whatever order -i gave */
		for (size_t a = 1; a < n; a++)
			for (size_t c = a;
			     c > 0 && views[c - 1].index > views[c].index;
			     c--) {
				int t = views[c].index;
				views[c].index = views[c - 1].index;
				views[c - 1].index = t;
			}
	}
	int failed = 0;
	for (size_t g = 0; g < n; g++) {
		if (query_gpu(ctx, &views[g]) != 0) {
			free_views(views, n);
			goto oom;
		}
		if (views[g].err) {
			char msg[768];
			describe(views[g].err, views[g].detail, msg,
				 sizeof(msg));
			fprintf(stderr, "gpureclaim: GPU %d: %s\n",
				views[g].index, msg);
			failed = 1;
		}
	}
	note_hidden(views, n);
	if (env.json)
		render_json(out, views, n);
	else
		render_text(out, views, n);
	free_views(views, n);
	if (out->oom)
		goto oom;
	return failed ? GPR_CLI_ERROR : GPR_CLI_OK;
oom:
	fprintf(stderr, "gpureclaim: out of memory\n");
	*code = GPR_CLI_ERROR;
	return -1;
}

/*
 * Waits `seconds` with SIGINT blocked and taken with sigtimedwait: a
 * Ctrl-C during a round is kept pending and ends the wait that follows,
 * so the round's output is always written whole. 1 if SIGINT came.
 */
static int wait_interrupted(const sigset_t *set, double seconds)
{
	struct timespec end, now;
	clock_gettime(CLOCK_MONOTONIC, &end);
	long long ns = (long long)(seconds * 1e9);
	end.tv_sec += ns / 1000000000LL;
	end.tv_nsec += ns % 1000000000LL;
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		long long left = (end.tv_sec - now.tv_sec) * 1000000000LL +
				 (end.tv_nsec - now.tv_nsec);
		if (left <= 0)
			return 0;
		struct timespec ts = {left / 1000000000LL, left % 1000000000LL};
		int sig = sigtimedwait(set, NULL, &ts);
		if (sig == SIGINT)
			return 1;
		if (sig < 0 && errno == EAGAIN)
			return 0;
	}
}

int gpr_cli_ps(int argc, char **argv)
{
	int help = 0;
	int code = parse_args(argc, argv, &help);
	if (code != GPR_CLI_OK)
		return code;
	if (help) {
		fputs(usage_text, stdout);
		return GPR_CLI_OK;
	}

	/* A reader that leaves (`| head -1`) ends the run through EPIPE,
	 * quietly with 0, instead of killing it with SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	gpr_ctx *ctx = NULL;
	struct cli_buf out = {0};
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	int err = gpr_open(NULL, &ctx);
	if (err != 0) {
		fprintf(stderr, "gpureclaim: %s\n", gpr_strerror(err));
		code = GPR_CLI_ERROR;
		goto cleanup;
	}
	if (env.watch > 0)
		sigprocmask(SIG_BLOCK, &set, NULL);
	int clear = env.watch > 0 && !env.json && isatty(STDOUT_FILENO);
	for (;;) {
		cli_buf_reset(&out);
		if (clear)
			cli_buf_puts(&out, "\033[H\033[2J");
		int rc = round_once(ctx, &out, &code);
		if (rc < 0)
			goto cleanup;
		if (cli_buf_write_stdout(&out) != 0) {
			/* EPIPE: SIGPIPE ignored, the reader left */
			code = errno == EPIPE ? GPR_CLI_OK : GPR_CLI_ERROR;
			if (code)
				fprintf(stderr, "gpureclaim: stdout: %s\n",
					strerror(errno));
			goto cleanup;
		}
		code = rc;
		if (env.watch <= 0)
			break;
		if (wait_interrupted(&set, env.watch)) {
			code = GPR_CLI_OK;
			break;
		}
	}
cleanup:
	cli_buf_free(&out);
	gpr_close(ctx);
	return code;
}
