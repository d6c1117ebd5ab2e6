/*
 * `top`'s readings. One reading is `ps --explain`'s (the round, the GPU
 * work, every agent's answer), made once for a one-shot top, or over and
 * over by a thread of its own for the view: so the screen never waits on
 * NVML or on an agent (the exporter's rule: each reading bounded, the
 * screen shows what has answered).
 *
 * The reader's thread reads a round every interval, asks again every
 * agent whose last answer is in (a thread each, bounded by the timeout,
 * as ps --explain asks), and publishes a copy of what it knows each time
 * a round is read or an agent answers: the round, each agent's latest
 * answer, and which agents have not answered yet. An agent that is slow
 * keeps its last answer on the screen until its next one; one asked for
 * the first time shows as being asked.
 */
#include "top.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent_client.h"
#include "suspend_run.h"

void gpr_cli_top_reading_free(struct gpr_cli_top_reading *r)
{
	if (!r)
		return;
	gpr_cli_ps_round_free(&r->round);
	gpr_cli_ps_agents_free(&r->agents);
	free(r->asking);
	r->asking = NULL;
}

int gpr_cli_top_asking(const struct gpr_cli_top_reading *r,
		       const struct gpr_cli_ps_agent *a)
{
	if (!r->asking || !a || a < r->agents.a ||
	    a >= r->agents.a + r->agents.n)
		return 0;
	return r->asking[a - r->agents.a];
}

static void host_of(struct gpr_cli_top_reading *out)
{
	if (gethostname(out->host, sizeof(out->host) - 1) != 0)
		out->host[0] = '\0';
	out->round.host = out->host;
}

int gpr_cli_top_read_once(gpr_ctx *ctx, const int *select, int n_select,
			  double timeout, struct gpr_cli_top_reading *out,
			  int *code)
{
	memset(out, 0, sizeof(*out));
	host_of(out);
	if (gpr_cli_ps_query(ctx, select, n_select, 0, &out->round, code) < 0) {
		gpr_cli_top_reading_free(out);
		return -1;
	}
	if (gpr_cli_ps_suspended(&out->round) != 0) {
		fprintf(stderr, "gpureclaim: out of memory\n");
		*code = GPR_CLI_ERROR;
		gpr_cli_top_reading_free(out);
		return -1;
	}
	/* after the round: the suspended processes' agents are not asked
	 * (their CUDA calls, and so their answers, wait for a resume) */
	gpr_cli_ps_agents_start_but(&out->agents, timeout, &out->round);
	gpr_cli_ps_work(ctx, &out->round, NULL);
	gpr_cli_ps_agents_wait(&out->agents);
	gpr_cli_ps_agents_check(&out->agents, &out->round);
	return 0;
}

/* ---------------- the reader's thread ---------------- */

/* An agent as the reader keeps it. */
struct tagent {
	struct gpr_cli_ps_agent req;   /* being asked, or the last asked */
	struct gpr_cli_ps_agent shown; /* its latest answer or failure */
	int has_shown;
	int checked;   /* shown checked against a round's figures */
	int in_flight; /* req is being asked */
	int finished;  /* req's asking is done (set under the lock) */
	int seen;      /* found in this round's look-up */
	double retry;  /* not asked again before (after a failure) */
	struct gpr_cli_top_reader *owner;
};

/* After a failure an agent is asked again this much later at the
 * soonest (and at least 4 timeouts later): a stopped or stuck process
 * would otherwise get a connection it never takes every interval, which
 * fill its queue of connections until it runs again. */
#define RETRY_S 10.0

/* Answers that come this close together make one screen: the agents are
 * asked at once and answer together, and each screen is a copy of the
 * round (a thousand rows on a big node) and a view. */
#define COALESCE_S 0.02

struct gpr_cli_top_reader {
	gpr_ctx *ctx;
	int select[64];
	int n_select;
	double interval, timeout;
	int wake_fd;
	pthread_t thread;
	int running;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int stop, poke, answered;	       /* under the lock */
	struct gpr_cli_top_reading *published; /* under the lock */
	/* the thread's own */
	struct tagent **agents;
	size_t n_agents, cap_agents;
	struct gpr_cli_ps_memo *memo;
	struct gpr_cli_ps_ids *ids;
	struct gpr_cli_ps_round round;
	int have_round, failed;
	char error[768];
	char host[256];
	double t0, when;
	/* GPURECLAIM_TOP_PROFILE (docs/top.md, Benchmarks): each round's
	 * reading (NVML, /proc, the GPU work) in ms, the publications */
	int profile;
	double *round_ms;
	size_t n_rounds, cap_rounds, publishes;
};

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Called by an agent's asking thread once it is done. */
static void on_answer(void *arg)
{
	struct tagent *t = arg;
	struct gpr_cli_top_reader *r = t->owner;
	pthread_mutex_lock(&r->lock);
	t->finished = 1;
	r->answered = 1;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

static struct tagent *find_agent(struct gpr_cli_top_reader *r, long pid)
{
	for (size_t i = 0; i < r->n_agents; i++)
		if (r->agents[i]->req.pid == pid)
			return r->agents[i];
	return NULL;
}

/* The agents found now: new ones added, gone ones (not being asked)
 * dropped, and each whose last asking is done asked again. */
static void ask_agents(struct gpr_cli_top_reader *r)
{
	long *pids = NULL;
	size_t n = 0;
	gpr_cli_agent_discover(&pids, &n);
	for (size_t i = 0; i < r->n_agents; i++)
		r->agents[i]->seen = 0;
	for (size_t i = 0; i < n; i++) {
		struct tagent *t = find_agent(r, pids[i]);
		if (!t) {
			if (r->n_agents == r->cap_agents) {
				size_t cap =
				    r->cap_agents ? 2 * r->cap_agents : 16;
				struct tagent **g =
				    realloc(r->agents, cap * sizeof(*g));
				if (!g)
					continue;
				r->agents = g;
				r->cap_agents = cap;
			}
			if (!(t = calloc(1, sizeof(*t))))
				continue;
			t->owner = r;
			t->req.pid = pids[i];
			r->agents[r->n_agents++] = t;
		}
		t->seen = 1;
	}
	free(pids);
	size_t w = 0;
	for (size_t i = 0; i < r->n_agents; i++) {
		struct tagent *t = r->agents[i];
		if (!t->seen && !t->in_flight) {
			free(t);
			continue;
		}
		r->agents[w++] = t;
	}
	r->n_agents = w;
	double now = mono();
	for (size_t i = 0; i < r->n_agents; i++) {
		struct tagent *t = r->agents[i];
		if (!t->seen || t->in_flight || now < t->retry ||
		    gpr_cli_ps_frozen(r->have_round ? &r->round : NULL,
				      t->req.pid))
			continue;
		long pid = t->req.pid;
		memset(&t->req, 0, sizeof(t->req));
		t->req.pid = pid;
		t->req.deadline = gpr_cli_agent_now() + r->timeout;
		t->req.answered = on_answer;
		t->req.answered_arg = t;
		t->finished = 0;
		t->in_flight = 1;
		gpr_cli_ps_agent_ask(&t->req);
	}
}

/*
 * Each new answer checked as ps --explain checks it (every part at most
 * the driver's figure for the process, none negative), once, against the
 * round read when it came in (the one it was asked after, unless it took
 * longer than an interval): the figure of about its own moment, so an
 * answer that a release or a free has since made too large is not taken
 * for a lie later; it is replaced by the next.
 */
static void check(struct gpr_cli_top_reader *r)
{
	for (size_t i = 0; r->have_round && i < r->n_agents; i++) {
		struct tagent *t = r->agents[i];
		if (!t->has_shown || t->checked)
			continue;
		struct gpr_cli_ps_agents one = {&t->shown, 1};
		gpr_cli_ps_agents_check(&one, &r->round);
		t->checked = 1;
	}
}

/* The answers that came in since the last look, made the shown ones. */
static void collect(struct gpr_cli_top_reader *r)
{
	for (size_t i = 0; i < r->n_agents; i++) {
		struct tagent *t = r->agents[i];
		pthread_mutex_lock(&r->lock);
		int done = t->in_flight && t->finished;
		pthread_mutex_unlock(&r->lock);
		if (!done)
			continue;
		if (t->req.started)
			pthread_join(t->req.thread, NULL);
		t->req.started = 0;
		t->shown = t->req;
		t->has_shown = 1;
		t->in_flight = 0;
		t->checked = 0;
		double wait =
		    4 * r->timeout > RETRY_S ? 4 * r->timeout : RETRY_S;
		t->retry = t->req.ok ? 0 : mono() + wait;
	}
	check(r);
}

static int copy_round(const struct gpr_cli_ps_round *from,
		      struct gpr_cli_ps_round *to)
{
	*to = *from;
	to->ids = NULL; /* the reader's */
	to->gpus = from->n ? calloc(from->n, sizeof(*to->gpus)) : NULL;
	if (from->n && !to->gpus) {
		to->n = 0;
		return -1;
	}
	for (size_t k = 0; k < from->n; k++) {
		to->gpus[k] = from->gpus[k];
		to->gpus[k].rows = NULL;
		size_t n = from->gpus[k].n;
		if (!n)
			continue;
		to->gpus[k].rows = malloc(n * sizeof(*to->gpus[k].rows));
		if (!to->gpus[k].rows) {
			to->gpus[k].n = 0;
			gpr_cli_ps_round_free(to);
			return -1;
		}
		memcpy(to->gpus[k].rows, from->gpus[k].rows,
		       n * sizeof(*to->gpus[k].rows));
	}
	return 0;
}

/* A copy of what the thread knows, for the screen. */
static struct gpr_cli_top_reading *snapshot(struct gpr_cli_top_reader *r)
{
	struct gpr_cli_top_reading *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	snprintf(s->host, sizeof(s->host), "%s", r->host);
	s->interval = r->interval;
	s->watched = r->when - r->t0;
	s->failed = r->failed;
	snprintf(s->error, sizeof(s->error), "%s", r->error);
	if (r->have_round && copy_round(&r->round, &s->round) != 0)
		goto oom;
	s->round.host = s->host;
	if (r->n_agents) {
		s->agents.a = calloc(r->n_agents, sizeof(*s->agents.a));
		s->asking = calloc(r->n_agents, 1);
		if (!s->agents.a || !s->asking)
			goto oom;
	}
	for (size_t i = 0; i < r->n_agents; i++) {
		const struct tagent *t = r->agents[i];
		struct gpr_cli_ps_agent *a = &s->agents.a[s->agents.n++];
		if (t->has_shown) {
			*a = t->shown;
		} else {
			a->pid = t->req.pid;
			s->asking[i] = 1;
		}
		a->started = 0;
		a->answered = NULL;
	}
	return s;
oom:
	gpr_cli_top_reading_free(s);
	free(s);
	return NULL;
}

static void publish(struct gpr_cli_top_reader *r)
{
	struct gpr_cli_top_reading *s = snapshot(r);
	if (!s)
		return; /* out of memory: the screen keeps the last one */
	pthread_mutex_lock(&r->lock);
	struct gpr_cli_top_reading *old = r->published;
	r->published = s;
	pthread_mutex_unlock(&r->lock);
	if (old) {
		gpr_cli_top_reading_free(old);
		free(old);
	}
	r->publishes++;
	char c = 'r';
	if (write(r->wake_fd, &c, 1) < 0) {
		/* a full pipe has a wake-up waiting already */
	}
}

static void read_round(struct gpr_cli_top_reader *r)
{
	struct gpr_cli_ps_round next = {.host = r->host, .ids = r->ids};
	int code = 0;
	r->when = mono();
	if (gpr_cli_ps_query(r->ctx, r->n_select ? r->select : NULL,
			     r->n_select, 0, &next, &code) < 0) {
		r->failed = 1;
		snprintf(
		    r->error, sizeof(r->error),
		    "the GPUs could not be read (the bottom line says why); "
		    "the last reading shown");
		return;
	}
	if (r->ids)
		gpr_cli_ps_ids_done(r->ids);
	/* the processes gpureclaim suspended, which NVML lists no more */
	if (gpr_cli_ps_suspended(&next) != 0) {
		gpr_cli_ps_round_free(&next);
		r->failed = 1;
		snprintf(r->error, sizeof(r->error), "out of memory");
		return;
	}
	gpr_cli_ps_work(r->ctx, &next, r->memo);
	if (r->profile) {
		if (r->n_rounds == r->cap_rounds) {
			size_t cap = r->cap_rounds ? 2 * r->cap_rounds : 256;
			double *g = realloc(r->round_ms, cap * sizeof(*g));
			if (g) {
				r->round_ms = g;
				r->cap_rounds = cap;
			}
		}
		if (r->n_rounds < r->cap_rounds)
			r->round_ms[r->n_rounds++] = (mono() - r->when) * 1e3;
	}
	gpr_cli_ps_round_free(&r->round);
	r->round = next;
	r->have_round = 1;
	r->failed = 0;
	r->error[0] = '\0';
}

/* Under the lock: waits for a signal, or until `at` (mono()). */
static void wait_until(struct gpr_cli_top_reader *r, double at)
{
	double left = at - mono();
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	long long ns = (long long)(left * 1e9) + ts.tv_nsec;
	ts.tv_sec += (time_t)(ns / 1000000000LL);
	ts.tv_nsec = (long)(ns % 1000000000LL);
	pthread_cond_timedwait(&r->cond, &r->lock, &ts);
}

static void *reader_main(void *arg)
{
	struct gpr_cli_top_reader *r = arg;
	double next = mono();
	for (;;) {
		pthread_mutex_lock(&r->lock);
		while (!r->stop && !r->poke && !r->answered && mono() < next)
			wait_until(r, next);
		int stop = r->stop, round = r->poke || mono() >= next;
		if (!stop && !round) {
			/* an agent answered: the others asked with it answer
			 * about now; one screen for them all */
			double until = mono() + COALESCE_S;
			if (until > next)
				until = next;
			while (!r->stop && !r->poke && mono() < until)
				wait_until(r, until);
			stop = r->stop;
			round = r->poke;
		}
		r->poke = r->answered = 0;
		pthread_mutex_unlock(&r->lock);
		if (stop)
			break;
		if (round) { /* the round first: it says who is suspended */
			read_round(r);
			ask_agents(r);
			next = mono() + r->interval;
		}
		collect(r);
		publish(r);
	}
	return NULL;
}

struct gpr_cli_top_reader *
gpr_cli_top_reader_start(gpr_ctx *ctx, const int *select, int n_select,
			 double interval, double timeout, int wake_fd)
{
	struct gpr_cli_top_reader *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->ctx = ctx;
	r->n_select = n_select < 64 ? n_select : 64;
	for (int i = 0; i < r->n_select; i++)
		r->select[i] = select[i];
	r->interval = interval;
	r->timeout = timeout;
	r->wake_fd = wake_fd;
	r->memo = gpr_cli_ps_memo_new();
	r->ids = gpr_cli_ps_ids_new(); /* NULL: each round reads /proc */
	r->t0 = mono();
	const char *prof = getenv("GPURECLAIM_TOP_PROFILE");
	r->profile = prof && *prof && strcmp(prof, "0") != 0;
	if (gethostname(r->host, sizeof(r->host) - 1) != 0)
		r->host[0] = '\0';
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	if (!r->memo || pthread_create(&r->thread, NULL, reader_main, r) != 0) {
		gpr_cli_ps_memo_free(r->memo);
		gpr_cli_ps_ids_free(r->ids);
		pthread_mutex_destroy(&r->lock);
		pthread_cond_destroy(&r->cond);
		free(r);
		return NULL;
	}
	r->running = 1;
	return r;
}

struct gpr_cli_top_reading *
gpr_cli_top_reader_take(struct gpr_cli_top_reader *r)
{
	pthread_mutex_lock(&r->lock);
	struct gpr_cli_top_reading *s = r->published;
	r->published = NULL;
	pthread_mutex_unlock(&r->lock);
	return s;
}

void gpr_cli_top_reader_poke(struct gpr_cli_top_reader *r)
{
	pthread_mutex_lock(&r->lock);
	r->poke = 1;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

void gpr_cli_top_reader_stop(struct gpr_cli_top_reader *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = 1;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	if (r->running)
		pthread_join(r->thread, NULL);
	if (r->profile) {
		fprintf(stderr, "top-profile rounds %zu publishes %zu\n",
			r->n_rounds, r->publishes);
		fprintf(stderr, "top-profile round_ms");
		for (size_t i = 0; i < r->n_rounds; i++)
			fprintf(stderr, " %.3f", r->round_ms[i]);
		fprintf(stderr, "\n");
	}
	free(r->round_ms);
	r->round_ms = NULL;
	/* an agent still being asked is not waited for (up to the timeout
	 * after the person pressed q): its thread keeps its record and the
	 * reader's lock, so both are left for the exit to end */
	int left = 0;
	for (size_t i = 0; i < r->n_agents; i++) {
		struct tagent *t = r->agents[i];
		pthread_mutex_lock(&r->lock);
		int running = t->in_flight && !t->finished && t->req.started;
		pthread_mutex_unlock(&r->lock);
		if (running) {
			pthread_detach(t->req.thread);
			left = 1;
			continue;
		}
		if (t->in_flight && t->req.started)
			pthread_join(t->req.thread, NULL);
		free(t);
	}
	free(r->agents);
	r->agents = NULL;
	r->n_agents = 0;
	if (r->published) {
		gpr_cli_top_reading_free(r->published);
		free(r->published);
	}
	gpr_cli_ps_round_free(&r->round);
	gpr_cli_ps_memo_free(r->memo);
	r->memo = NULL;
	gpr_cli_ps_ids_free(r->ids);
	r->ids = NULL;
	if (left)
		return;
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	free(r);
}
