/*
 * One round of `gpureclaim ps`: NVML's view of each GPU through the core,
 * and who each listed process is (/proc).
 *
 * The GPUs are queried side by side, one thread each: NVML attaches a GPU
 * on its first query of it (6.5 ms on an H200, nvml_cost in bench/), and
 * NVML is thread-safe, so the attachments of several GPUs overlap instead
 * of adding up. The handle is shared: the core's calls may be made from
 * several threads (only gpr_close may not), and gpr_last_error is per
 * thread, so each thread keeps its own GPU's detail. Split (a measurement
 * variant, cli/ps_start.c), each GPU gets two threads, one for its facts
 * (name, memory, MIG mode) and one for its processes, should the driver
 * answer the two at once.
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

/* What a job reads of its GPU. */
enum part { BOTH, FACTS, PROCESSES };

struct job {
	gpr_ctx *ctx;
	struct gpr_cli_ps_gpu *g;
	enum part part;
	char name[12];	  /* its thread, in the profile */
	int err;	  /* the failed query's GPR_E_*, kept apart until the
			   * jobs of a GPU are merged */
	char detail[512]; /* its gpr_last_error */
	int rc;		  /* 0 or GPR_E_NOMEM */
	struct gpr_cli_ps_ids *ids; /* the round's, or NULL */
};

/* Who each process is (/proc, getpwuid_r), the profile timing each kind
 * of look-up over the GPU's processes. */
static void identify(struct gpr_cli_ps_gpu *g, struct gpr_cli_ps_ids *ids)
{
	double state = 0, user = 0, cmd = 0;
	for (size_t i = 0; i < g->n; i++) {
		struct gpr_cli_ps_row *r = &g->rows[i];
		double t0 = gpr_cli_prof_clock();
		unsigned long long start;
		r->state = gpr_cli_proc_state_at(r->pid, &start);
		double t1 = gpr_cli_prof_clock();
		state += t1 - t0;
		/* another namespace's pid would name an unrelated process */
		if (r->state == GPR_CLI_PID_OUTSIDE)
			continue;
		if (ids) { /* a watching top: known processes not read again */
			gpr_cli_ps_ids_fill(ids, r, start);
			continue;
		}
		r->user_known = gpr_cli_proc_user((pid_t)r->pid, r->user,
						  sizeof(r->user)) == 0;
		double t2 = gpr_cli_prof_clock();
		user += t2 - t1;
		r->cmd_known = gpr_cli_proc_cmdline((pid_t)r->pid, r->cmd,
						    sizeof(r->cmd)) == 0;
		cmd += gpr_cli_prof_clock() - t2;
	}
	if (!gpr_cli_prof_on() || g->n == 0)
		return;
	/* as steps ending now, each as long as its sum */
	double now = gpr_cli_prof_clock();
	gpr_cli_prof_step(now - state,
			  "GPU %d pid states (kill, /proc/PID/stat)", g->index);
	gpr_cli_prof_step(now - user, "GPU %d users (stat, getpwuid_r)",
			  g->index);
	gpr_cli_prof_step(now - cmd, "GPU %d commands (/proc/PID/cmdline)",
			  g->index);
}

/* Fills j->g's part j->part for GPU j->g->index. */
static void *query_gpu(void *arg)
{
	struct job *j = arg;
	struct gpr_cli_ps_gpu *g = j->g;
	struct gpr_process *procs = NULL;
	size_t n = 0;
	const char *was = gpr_cli_prof_thread_name();
	gpr_cli_prof_thread(j->name);
	int err = 0;
	double t0;
	if (j->part != PROCESSES) {
		t0 = gpr_cli_prof_clock();
		err = gpr_gpu_info(j->ctx, g->index, &g->info);
		gpr_cli_prof_step(t0, "GPU %d gpr_gpu_info", g->index);
	}
	if (err == 0 && j->part != FACTS) {
		t0 = gpr_cli_prof_clock();
		err = gpr_gpu_processes(j->ctx, g->index, &procs, &n);
		gpr_cli_prof_step(t0, "GPU %d gpr_gpu_processes", g->index);
	}
	if (err != 0) {
		j->err = err;
		snprintf(j->detail, sizeof(j->detail), "%s",
			 gpr_last_error(j->ctx));
		gpr_cli_prof_thread(was);
		return NULL;
	}
	if (j->part == FACTS) {
		gpr_cli_prof_thread(was);
		return NULL;
	}
	if (n > 0) {
		g->rows = calloc(n, sizeof(*g->rows));
		if (!g->rows) {
			gpr_free(procs);
			j->rc = GPR_E_NOMEM;
			gpr_cli_prof_thread(was);
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
	}
	g->n = n;
	gpr_free(procs);
	identify(g, j->ids);
	for (size_t i = 0; i < n; i++)
		g->hidden += !g->rows[i].bytes_known;
	if (g->n > 1) /* qsort(NULL, 0) is undefined */
		qsort(g->rows, g->n, sizeof(*g->rows), row_cmp);
	gpr_cli_prof_thread(was);
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

/* Each GPU's jobs into it, facts first: the first failure is the GPU's
 * (as one thread reading facts, then processes, would stop there). */
static void merge(struct job *jobs, size_t n_jobs)
{
	for (size_t i = 0; i < n_jobs; i++) {
		struct gpr_cli_ps_gpu *g = jobs[i].g;
		if (!jobs[i].err || g->err)
			continue;
		g->err = jobs[i].err;
		snprintf(g->detail, sizeof(g->detail), "%s", jobs[i].detail);
		free(g->rows);
		g->rows = NULL;
		g->n = g->hidden = 0;
	}
}

/* The GPU where pid holds the most bytes in r, other than `skip`; its
 * figure in *most. -1 when none. */
static int busiest(const struct gpr_cli_ps_round *r, uint32_t pid, size_t skip,
		   uint64_t *most)
{
	int at = -1;
	*most = 0;
	for (size_t h = 0; h < r->n; h++) {
		const struct gpr_cli_ps_gpu *g = &r->gpus[h];
		for (size_t p = 0; h != skip && p < g->n; p++)
			if (g->rows[p].pid == pid && g->rows[p].bytes_known &&
			    g->rows[p].bytes > *most) {
				*most = g->rows[p].bytes;
				at = g->index;
			}
	}
	return at;
}

void gpr_cli_ps_mark_strays(struct gpr_cli_ps_round *r)
{
	for (size_t k = 0; k < r->n; k++) {
		struct gpr_cli_ps_gpu *g = &r->gpus[k];
		for (size_t p = 0; p < g->n; p++) {
			struct gpr_cli_ps_row *row = &g->rows[p];
			row->stray_of = -1;
			if (!row->bytes_known || row->bytes > GPR_CLI_STRAY_MAX)
				continue;
			uint64_t most;
			int at = busiest(r, row->pid, k, &most);
			if (at >= 0 && most >= 2 * row->bytes &&
			    most - row->bytes >= ((uint64_t)1 << 30))
				row->stray_of = at;
		}
	}
}

const char *gpr_cli_ps_name = "ps";

int gpr_cli_ps_query(gpr_ctx *ctx, const int *select, int n_select, int split,
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
		if (err == GPR_E_NO_NVML || err == GPR_E_NO_DRIVER)
			gpr_cli_sim_hint();
		*code = GPR_CLI_ERROR;
		return -1;
	}
	for (int s = 0; s < n_select; s++) {
		if (select[s] < count)
			continue;
		if (count == 0)
			fprintf(stderr,
				"gpureclaim %s: no GPU %d: NVML sees no GPU\n",
				gpr_cli_ps_name, select[s]);
		else
			fprintf(stderr,
				"gpureclaim %s: no GPU %d: NVML sees %d "
				"(0-%d)\n",
				gpr_cli_ps_name, select[s], count, count - 1);
		*code = GPR_CLI_USAGE;
		return -1;
	}
	size_t n = n_select ? (size_t)n_select : (size_t)count;
	size_t n_jobs = split ? 2 * n : n;
	struct job *jobs = n ? calloc(n_jobs, sizeof(*jobs)) : NULL;
	r->gpus = n ? calloc(n, sizeof(*r->gpus)) : NULL;
	if (n && (!jobs || !r->gpus))
		goto oom;
	r->n = n;
	for (size_t g = 0; g < n; g++)
		r->gpus[g].index = n_select ? select[g] : (int)g;
	/* listed in index order, whatever order -i gave */
	if (n > 1)
		qsort(r->gpus, n, sizeof(*r->gpus), cmp_index);
	for (size_t k = 0; k < n_jobs; k++) {
		struct job *j = &jobs[k];
		*j = (struct job){
		    .ctx = ctx, .g = &r->gpus[k % n], .ids = r->ids};
		j->part = !split ? BOTH : k < n ? FACTS : PROCESSES;
		snprintf(j->name, sizeof(j->name), "gpu%d%s", j->g->index,
			 j->part == PROCESSES ? "p" : "");
	}
	double t0 = gpr_cli_prof_clock();
	run_jobs(jobs, n_jobs);
	gpr_cli_prof_step(t0, "every GPU read (%s)",
			  split ? "two threads each" : "a thread each");
	merge(jobs, n_jobs);
	for (size_t k = 0; k < n_jobs; k++)
		if (jobs[k].rc)
			goto oom;
	free(jobs);
	gpr_cli_ps_mark_strays(r);
	return 0;
oom:
	free(jobs);
	gpr_cli_ps_round_free(r);
	fprintf(stderr, "gpureclaim: out of memory\n");
	*code = GPR_CLI_ERROR;
	return -1;
}
