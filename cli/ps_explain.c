/*
 * `gpureclaim ps --explain`: ps's rows, and under each process that runs
 * the agent its parts, as its own explain() says (docs/agent.md). Every
 * agent is asked in a thread of its own, started while NVML starts
 * (cli/cmd_ps.c), so the agents' time overlaps ps's own; each request is
 * bounded by --timeout (cli/agent_client.c). The agent's server adds to
 * its explain answer a flat "groups" array (python/gpureclaim/
 * agent/_server.py flat_groups): Python keeps the policy of what a group
 * is, this file reads numbers, and checks them against the driver's
 * figure for the process (issue 34: another user's process's word). One
 * deadline bounds every request, in threads or, where none can be
 * started, in turn. Text from the agents and /proc is terminal-safe.
 */
#include "ps.h"
#include "ps_explain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_client.h"
#include "suspend.h"
#include "out/fmt.h"
#include "out/text.h"

/* The groups' names, in the order of the answer's numbers. */
const char *const gpr_cli_ps_group_names[GPR_CLI_PS_GROUPS] = {
    "live", "releasable", "not releasable", "workspaces", "pools", "rest"};
const char *const gpr_cli_ps_group_keys[GPR_CLI_PS_GROUPS] = {
    "live", "releasable", "not_releasable", "workspaces", "pools", "rest"};
const char *const gpr_cli_ps_group_old_keys[GPR_CLI_PS_GROUPS] = {
    NULL, "returnable", "not returnable", NULL, NULL, NULL};

static const char *fb(uint64_t v, char *out, size_t len);

static void *ask_one(void *arg)
{
	struct gpr_cli_ps_agent *a = arg;
	struct gpr_cli_agent_reply r;
	if (gpr_cli_agent_request_by(a->pid, "explain", "", a->deadline, &r) ==
	    GPR_CLI_OK) {
		a->ok = 1;
		a->n_groups =
		    gpr_cli_agent_ints(r.groups, r.groups_end, a->groups,
				       sizeof(a->groups) / sizeof(*a->groups));
	} else {
		a->kind = r.kind;
		snprintf(a->error, sizeof(a->error), "%s", r.error);
	}
	gpr_cli_agent_reply_free(&r);
	if (a->answered)
		a->answered(a->answered_arg);
	return NULL;
}

void gpr_cli_ps_agent_ask(struct gpr_cli_ps_agent *a)
{
	a->started = pthread_create(&a->thread, NULL, ask_one, a) == 0;
	if (!a->started) { /* no thread to be had: here, now */
		ask_one(a);
		a->done = 1;
	}
}

void gpr_cli_ps_agents_start(struct gpr_cli_ps_agents *s, double timeout)
{
	gpr_cli_ps_agents_start_but(s, timeout, NULL);
}

void gpr_cli_ps_agents_start_but(struct gpr_cli_ps_agents *s, double timeout,
				 const struct gpr_cli_ps_round *r)
{
	long *pids = NULL;
	size_t n = 0;
	memset(s, 0, sizeof(*s));
	gpr_cli_agent_discover(&pids, &n);
	size_t kept = 0; /* the suspended left out */
	for (size_t i = 0; i < n; i++)
		if (!gpr_cli_ps_frozen(r, pids[i]))
			pids[kept++] = pids[i];
	n = kept;
	if (n)
		s->a = calloc(n, sizeof(*s->a));
	if (!s->a) {
		free(pids);
		return;
	}
	s->n = n;
	double deadline = gpr_cli_agent_now() + timeout;
	for (size_t i = 0; i < n; i++) {
		struct gpr_cli_ps_agent *a = &s->a[i];
		a->pid = pids[i];
		a->deadline = deadline;
		a->started = pthread_create(&a->thread, NULL, ask_one, a) == 0;
		/* no thread to be had: asked in turn by agents_wait */
	}
	free(pids);
}

int gpr_cli_ps_frozen(const struct gpr_cli_ps_round *r, long pid)
{
	for (size_t k = 0; r && k < r->n; k++)
		for (size_t p = 0; p < r->gpus[k].n; p++) {
			const struct gpr_cli_ps_row *row = &r->gpus[k].rows[p];
			if (row->pid == (uint32_t)pid && row->recorded &&
			    row->suspend != GPR__PS_RUNNING)
				return 1;
		}
	return 0;
}

void gpr_cli_ps_agents_wait(struct gpr_cli_ps_agents *s)
{
	for (size_t i = 0; i < s->n; i++) {
		struct gpr_cli_ps_agent *a = &s->a[i];
		if (a->started)
			pthread_join(a->thread, NULL);
		else if (!a->done)
			ask_one(a); /* no thread to be had: here, in turn */
		a->started = 0;
		a->done = 1;
	}
}

void gpr_cli_ps_agents_free(struct gpr_cli_ps_agents *s)
{
	free(s->a);
	memset(s, 0, sizeof(*s));
}

/* The driver's figure for pid on g: its row's bytes, the GPU's total
 * where NVML withholds it, 0 where the driver does not list pid. */
static uint64_t driver_figure(const struct gpr_cli_ps_gpu *g, long pid)
{
	for (size_t p = 0; p < g->n; p++)
		if (g->rows[p].pid == (uint32_t)pid)
			return g->rows[p].bytes_known ? g->rows[p].bytes
						      : g->info.total;
	return 0;
}

void gpr_cli_ps_agents_check(struct gpr_cli_ps_agents *s,
			     const struct gpr_cli_ps_round *r)
{
	for (size_t i = 0; i < s->n; i++) {
		struct gpr_cli_ps_agent *a = &s->a[i];
		for (size_t k = 0; a->ok && k < r->n; k++) {
			const struct gpr_cli_ps_gpu *g = &r->gpus[k];
			if (g->err)
				continue;
			uint64_t cap = driver_figure(g, a->pid);
			for (size_t j = 0;
			     j + GPR_CLI_PS_GPU_INTS <= a->n_groups;
			     j += GPR_CLI_PS_GPU_INTS) {
				long long *v = &a->groups[j + 2];
				if (a->groups[j + 1] != g->index)
					continue;
				for (int p = 0; a->ok && p < GPR_CLI_PS_GROUPS;
				     p++) {
					if (v[p] < 0)
						v[p] = 0;
					if ((uint64_t)v[p] <= cap)
						continue;
					char x[32], y[32];
					a->ok = 0;
					a->kind = "bad_answer";
					snprintf(
					    a->error, sizeof(a->error),
					    "process %ld's agent says %s "
					    "%s (%lld bytes) on GPU %d, "
					    "more than the %s the driver "
					    "counts for it there; not "
					    "shown",
					    a->pid, gpr_cli_ps_group_names[p],
					    fb((uint64_t)v[p], x, sizeof(x)),
					    v[p], g->index,
					    fb(cap, y, sizeof(y)));
				}
			}
		}
	}
}

const struct gpr_cli_ps_agent *
gpr_cli_ps_agent_of(const struct gpr_cli_ps_agents *s, long pid)
{
	for (size_t i = 0; s && i < s->n; i++)
		if (s->a[i].pid == pid)
			return &s->a[i];
	return NULL;
}

int gpr_cli_ps_agent_parts(const struct gpr_cli_ps_agent *a, int index,
			   long long parts[GPR_CLI_PS_GROUPS],
			   long long *driver)
{
	memset(parts, 0, sizeof(long long) * GPR_CLI_PS_GROUPS);
	*driver = -1;
	/* the first explained GPU that NVML index is (as the Python one did) */
	for (size_t i = 0; i + GPR_CLI_PS_GPU_INTS <= a->n_groups;
	     i += GPR_CLI_PS_GPU_INTS) {
		if (a->groups[i + 1] != index)
			continue;
		for (int k = 0; k < GPR_CLI_PS_GROUPS; k++)
			parts[k] = a->groups[i + 2 + (size_t)k];
		*driver = a->groups[i + GPR_CLI_PS_GPU_INTS - 1];
		return 1;
	}
	return 0;
}

void gpr_cli_ps_agents_tally(const struct gpr_cli_ps_agents *s,
			     const struct gpr_cli_ps_gpu *g,
			     uint64_t *releasable, int *with_agent, int *silent)
{
	*releasable = 0;
	*with_agent = *silent = 0;
	for (size_t p = 0; p < g->n; p++) {
		const struct gpr_cli_ps_agent *a =
		    gpr_cli_ps_agent_of(s, g->rows[p].pid);
		if (!a)
			continue;
		if (!a->ok) {
			(*silent)++;
			continue;
		}
		long long parts[GPR_CLI_PS_GROUPS], driver;
		gpr_cli_ps_agent_parts(a, g->index, parts, &driver);
		*releasable += parts[1] > 0 ? (uint64_t)parts[1] : 0;
		(*with_agent)++;
	}
}

/* "process N: why" without "process N: " (the row says which). */
static const char *drop_pid(const char *msg, long pid)
{
	char p[40];
	int n = snprintf(p, sizeof(p), "process %ld: ", pid);
	return strncmp(msg, p, (size_t)n) == 0 ? msg + n : msg;
}

/* A command on one line, white space runs as one blank, cut to n. */
static void short_cmd(struct gpr__buf *b, const char *cmd, size_t n)
{
	struct gpr__buf t = {0};
	int blank = 0;
	for (const char *c = cmd; *c; c++) {
		if (*c == ' ' || *c == '\t' || *c == '\n' || *c == '\r' ||
		    *c == '\v' || *c == '\f') {
			blank = t.len > 0;
			continue;
		}
		if (blank)
			gpr__buf_putn(&t, " ", 1);
		blank = 0;
		gpr__buf_putn(&t, c, 1);
	}
	/* another user's command line: terminal-safe, as ps shows it */
	const char *c = gpr__buf_str(&t);
	if (gpr__text_len(c) <= (int)n) {
		gpr__text_put(b, c, 0, 0);
	} else {
		gpr__text_put(b, c, (int)n - 3, 0);
		gpr__buf_puts(b, "...");
	}
	gpr__buf_free(&t);
}

static const char *fb(uint64_t v, char *out, size_t len)
{
	return gpr__fmt_bytes(v, out, len);
}

void gpr_cli_ps_explain_text(struct gpr__buf *b,
			     const struct gpr_cli_ps_round *r,
			     const struct gpr_cli_ps_agents *s)
{
	int stray = 0;
	char x[32], y[32], z[32];
	for (size_t k = 0; k < r->n; k++) {
		const struct gpr_cli_ps_gpu *g = &r->gpus[k];
		if (k)
			gpr__buf_puts(b, "\n");
		if (g->err) {
			char msg[768];
			gpr_cli_ps_describe(g->err, g->detail, msg,
					    sizeof(msg));
			gpr__buf_printf(b, "GPU %d: %s\n", g->index, msg);
			continue;
		}
		gpr__buf_printf(b, "GPU %d: %s, %s / %s used, %s free\n",
				g->index, g->info.name,
				fb(g->info.used, x, sizeof(x)),
				fb(g->info.total, y, sizeof(y)),
				fb(g->info.free, z, sizeof(z)));
		if (!g->n) {
			gpr__buf_puts(b, "  no processes\n");
			continue;
		}
		gpr__buf_printf(b, "  %7s %-8s %10s %6s  COMMAND\n", "PID",
				"USER", "MEMORY", "SHARE");
		for (size_t p = 0; p < g->n; p++) {
			const struct gpr_cli_ps_row *row = &g->rows[p];
			char share[32];
			if (row->bytes_known)
				snprintf(share, sizeof(share), "%.1f%%",
					 gpr_cli_ps_share(g, row));
			else
				snprintf(share, sizeof(share), "n/a");
			const char *user =
			    row->user_known && row->user[0] ? row->user : "-";
			gpr__buf_printf(b, "  %7u ", row->pid);
			gpr__text_put(b, user, 16, 0);
			for (int w = gpr__text_len(user); w < 8; w++)
				gpr__buf_puts(b, " ");
			gpr__buf_printf(b, " %10s %6s  ",
					row->bytes_known
					    ? fb(row->bytes, x, sizeof(x))
					    : "n/a",
					share);
			if (row->state == GPR_CLI_PID_EXITED)
				gpr__buf_puts(b, "<exited> ");
			else if (row->state != GPR_CLI_PID_ALIVE)
				gpr__buf_puts(b,
					      "<not in this pid namespace> ");
			if (row->stray_of >= 0) {
				stray = 1;
				gpr__buf_printf(b,
						"<stray context: works on GPU "
						"%d> ",
						row->stray_of);
			}
			short_cmd(
			    b, row->cmd_known && row->cmd[0] ? row->cmd : "?",
			    200);
			gpr__buf_puts(b, "\n");
			const struct gpr_cli_ps_agent *a =
			    gpr_cli_ps_agent_of(s, row->pid);
			if (!a)
				continue;
			if (!a->ok) {
				gpr__buf_printf(b, "  %7s agent: %s: ", "",
						a->kind);
				gpr__text_put(b, drop_pid(a->error, a->pid), 0,
					      0);
				gpr__buf_puts(b, "\n");
				continue;
			}
			long long parts[GPR_CLI_PS_GROUPS], driver;
			gpr_cli_ps_agent_parts(a, g->index, parts, &driver);
			gpr__buf_printf(b, "  %7s ", "");
			for (int i = 0; i < GPR_CLI_PS_GROUPS; i++)
				gpr__buf_printf(
				    b, "%s%s %s", i ? ", " : "",
				    gpr_cli_ps_group_names[i],
				    fb(parts[i] > 0 ? (uint64_t)parts[i] : 0, x,
				       sizeof(x)));
			gpr__buf_puts(b, "\n");
		}
		uint64_t releasable;
		int with, silent;
		gpr_cli_ps_agents_tally(s, g, &releasable, &with, &silent);
		if (with) {
			gpr__buf_printf(b,
					"  releasable by the %d process%s with "
					"an agent: %s",
					with, with != 1 ? "es" : "",
					fb(releasable, x, sizeof(x)));
			if (silent)
				gpr__buf_printf(b,
						"; %d agent%s did not answer",
						silent, silent != 1 ? "s" : "");
			gpr__buf_puts(b, "\n");
		} else if (silent) {
			gpr__buf_printf(
			    b, "  no agent here answered (%d asked)\n", silent);
		} else {
			gpr__buf_puts(b, "  no process here runs the agent\n");
		}
	}
	if (stray)
		gpr__buf_puts(b,
			      "\n<stray context>: about a CUDA context on a "
			      "GPU the process does not work on, the missing "
			      "torch.cuda.set_device(local_rank) before the "
			      "first CUDA call (pytorch#135279); call it first "
			      "in each rank\n");
}
