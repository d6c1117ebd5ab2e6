/*
 * One round of `gpureclaim ps`: NVML's view of each GPU through the core,
 * and who each listed process is (/proc).
 *
 * The GPUs are queried side by side, one thread each: NVML attaches a GPU
 * on its first query of it (6.5 ms on an H200, nvml_cost in bench/), and
 * NVML is thread-safe, so the attachments of several GPUs overlap instead
 * of adding up. The handle is shared: the core's calls may be made from
 * several threads (only gpr_close may not), and gpr_last_error is per
 * thread, so each thread keeps its own GPU's detail.
 */
#include "ps.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void gpr_cli_ps_describe(int err, const char *detail, char *out, size_t len)
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

double gpr_cli_ps_share(const struct gpr_cli_ps_gpu *g,
			const struct gpr_cli_ps_row *r)
{
	return g->info.total ? 100.0 * (double)r->bytes / (double)g->info.total
			     : 0.0;
}

/* Largest figure first, hidden figures last, then by pid. */
static int row_cmp(const void *a, const void *b)
{
	const struct gpr_cli_ps_row *x = a, *y = b;
	if (x->bytes_known != y->bytes_known)
		return y->bytes_known - x->bytes_known;
	if (x->bytes_known && x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

struct job {
	gpr_ctx *ctx;
	struct gpr_cli_ps_gpu *g;
	int rc; /* 0 or GPR_E_NOMEM; a failed query is kept in g->err */
};

/* Fills j->g for GPU j->g->index. */
static void *query_gpu(void *arg)
{
	struct job *j = arg;
	struct gpr_cli_ps_gpu *g = j->g;
	struct gpr_process *procs = NULL;
	size_t n = 0;
	int err = gpr_gpu_info(j->ctx, g->index, &g->info);
	if (err == 0)
		err = gpr_gpu_processes(j->ctx, g->index, &procs, &n);
	if (err != 0) {
		g->err = err;
		snprintf(g->detail, sizeof(g->detail), "%s",
			 gpr_last_error(j->ctx));
		return NULL;
	}
	if (n > 0) {
		g->rows = calloc(n, sizeof(*g->rows));
		if (!g->rows) {
			gpr_free(procs);
			j->rc = GPR_E_NOMEM;
			return NULL;
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct gpr_cli_ps_row *r = &g->rows[i];
		r->pid = procs[i].pid;
		r->bytes = procs[i].bytes;
		r->bytes_known = procs[i].bytes_known;
		r->compute = procs[i].compute;
		r->graphics = procs[i].graphics;
		r->state = gpr_cli_proc_state(r->pid);
		/* another namespace's pid would name an unrelated process */
		if (r->state == GPR_CLI_PID_OUTSIDE)
			continue;
		r->user_known = gpr_cli_proc_user((pid_t)r->pid, r->user,
						  sizeof(r->user)) == 0;
		r->cmd_known = gpr_cli_proc_cmdline((pid_t)r->pid, r->cmd,
						    sizeof(r->cmd)) == 0;
	}
	g->n = n;
	for (size_t i = 0; i < n; i++)
		g->hidden += !g->rows[i].bytes_known;
	gpr_free(procs);
	if (g->n > 1) /* qsort(NULL, 0) is undefined */
		qsort(g->rows, g->n, sizeof(*g->rows), row_cmp);
	return NULL;
}

/* Runs every job, each in a thread but the first (run here). */
static void run_jobs(struct job *jobs, size_t n)
{
	pthread_t *th = n > 1 ? calloc(n, sizeof(*th)) : NULL;
	char *started = n > 1 ? calloc(n, 1) : NULL;
	for (size_t i = 1; th && started && i < n; i++)
		started[i] =
		    pthread_create(&th[i], NULL, query_gpu, &jobs[i]) == 0;
	if (n)
		query_gpu(&jobs[0]);
	/* a thread that could not start: its GPU is queried here */
	for (size_t i = 1; i < n; i++) {
		if (th && started && started[i])
			pthread_join(th[i], NULL);
		else
			query_gpu(&jobs[i]);
	}
	free(th);
	free(started);
}

static int cmp_index(const void *a, const void *b)
{
	int x = ((const struct gpr_cli_ps_gpu *)a)->index;
	int y = ((const struct gpr_cli_ps_gpu *)b)->index;
	return x < y ? -1 : x > y;
}

void gpr_cli_ps_round_free(struct gpr_cli_ps_round *r)
{
	for (size_t g = 0; g < r->n; g++)
		free(r->gpus[g].rows);
	free(r->gpus);
	r->gpus = NULL;
	r->n = 0;
}

int gpr_cli_ps_query(gpr_ctx *ctx, const int *select, int n_select,
		     struct gpr_cli_ps_round *r, int *code)
{
	r->gpus = NULL;
	r->n = 0;
	clock_gettime(CLOCK_REALTIME, &r->when);
	int count = 0, err = gpr_gpu_count(ctx, &count);
	if (err != 0) {
		char detail[512], msg[768];
		snprintf(detail, sizeof(detail), "%s", gpr_last_error(ctx));
		gpr_cli_ps_describe(err, detail, msg, sizeof(msg));
		fprintf(stderr, "gpureclaim: %s\n", msg);
		*code = GPR_CLI_ERROR;
		return -1;
	}
	for (int s = 0; s < n_select; s++) {
		if (select[s] < count)
			continue;
		if (count == 0)
			fprintf(stderr,
				"gpureclaim ps: no GPU %d: NVML sees no GPU\n",
				select[s]);
		else
			fprintf(stderr,
				"gpureclaim ps: no GPU %d: NVML sees %d "
				"(0-%d)\n",
				select[s], count, count - 1);
		*code = GPR_CLI_USAGE;
		return -1;
	}
	size_t n = n_select ? (size_t)n_select : (size_t)count;
	struct job *jobs = n ? calloc(n, sizeof(*jobs)) : NULL;
	r->gpus = n ? calloc(n, sizeof(*r->gpus)) : NULL;
	if (n && (!jobs || !r->gpus))
		goto oom;
	r->n = n;
	for (size_t g = 0; g < n; g++)
		r->gpus[g].index = n_select ? select[g] : (int)g;
	/* listed in index order, whatever order -i gave */
	if (n > 1)
		qsort(r->gpus, n, sizeof(*r->gpus), cmp_index);
	for (size_t g = 0; g < n; g++)
		jobs[g] = (struct job){.ctx = ctx, .g = &r->gpus[g]};
	run_jobs(jobs, n);
	for (size_t g = 0; g < n; g++)
		if (jobs[g].rc)
			goto oom;
	free(jobs);
	return 0;
oom:
	free(jobs);
	gpr_cli_ps_round_free(r);
	fprintf(stderr, "gpureclaim: out of memory\n");
	*code = GPR_CLI_ERROR;
	return -1;
}
