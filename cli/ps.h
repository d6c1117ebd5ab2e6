/*
 * `gpureclaim ps` in parts: cli/ps_query.c reads one round (NVML through
 * the core, who each process is from /proc), cli/ps_text.c and
 * cli/ps_json.c render it, cli/ps_start.c starts NVML and ends a one-shot
 * listing, cli/ps_profile.c times the steps for the benchmark, and
 * cli/cmd_ps.c holds the options and the loop.
 */
#ifndef GPR_CLI_PS_H
#define GPR_CLI_PS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "cli.h"
#include "gpureclaim.h"
#include "out/buf.h"

/* A process holding memory on a GPU, and who it is. */
struct gpr_cli_ps_row {
	uint32_t pid; /* as NVML reports it */
	uint64_t bytes;
	int bytes_known;
	int compute, graphics;
	enum gpr_cli_pid_state state;
	int user_known, cmd_known;
	int stray_of; /* -1, or the GPU index this pid works on while it holds
		       * only about a context here (gpr_cli_ps_mark_strays) */
	/* GPU work, read by gpr_cli_ps_work (ps --explain, top) */
	int work;	  /* 0 not read, 1 read, -1 NVML cannot tell here */
	uint64_t work_us; /* the driver's stamp of its latest sample that
			   * showed work (us since the epoch); 0: none */
	unsigned sm;	  /* that sample's SM utilization, percent */
	/* a process gpureclaim suspended (cli/ps_suspended.c): the
	 * driver's state of it (GPR__PS_*; 0 running, and for rows NVML
	 * lists), the bytes this GPU got back then and its host bytes */
	int suspend;
	int recorded; /* the row comes from gpureclaim's record */
	uint64_t released;
	int host_known;
	uint64_t host_bytes;
	/* its resume on demand: the watcher's pid while one watches (0:
	 * none), the last failure and when (wake_error_time 0: none) */
	int watcher;
	double wake_error_time;
	char wake_error[400];
	char user[64];
	char cmd[1024];
};

/* One GPU of a round. */
struct gpr_cli_ps_gpu {
	int index;
	int err;	  /* 0 or the GPR_E_* of the failed query */
	char detail[512]; /* gpr_last_error of that query */
	struct gpr_gpu info;
	struct gpr_cli_ps_row *rows; /* largest figure first */
	size_t n;
	size_t hidden; /* rows whose figure NVML withholds */
};

/* What one round read, and when. */
struct gpr_cli_ps_round {
	struct timespec when; /* CLOCK_REALTIME as the round began */
	const char *host;     /* this machine's name */
	const char *driver;   /* the NVIDIA driver's version; NULL: unknown */
	struct gpr_cli_ps_gpu *gpus;
	size_t n;
	/* who each process is, kept across rounds (top); NULL: each row
	 * read from /proc (set by the caller, kept by the query) */
	struct gpr_cli_ps_ids *ids;
};

/*
 * Who the processes are, kept from round to round by a watching top
 * (cli/ps_ids.c): a process's user and command are read from /proc once
 * per process (its pid and start time), not once per round and GPU; its
 * state is read every round. Thread-safe (a round's GPUs are read in
 * threads). gpr_cli_ps_ids_done, after each round, forgets the
 * processes that round did not list.
 */
struct gpr_cli_ps_ids;
struct gpr_cli_ps_ids *gpr_cli_ps_ids_new(void);
void gpr_cli_ps_ids_free(struct gpr_cli_ps_ids *c);
/* Fills row's user and command, from c when it knows the process. */
void gpr_cli_ps_ids_fill(struct gpr_cli_ps_ids *c, struct gpr_cli_ps_row *row,
			 unsigned long long start);
void gpr_cli_ps_ids_done(struct gpr_cli_ps_ids *c);

/*
 * Reads a round: the GPUs in select[0..n_select) (every GPU when
 * n_select is 0) in index order, each queried in a thread of its own (a
 * GPU's first NVML query attaches it, several milliseconds each), or two
 * with `split` (its facts, its processes). 0 with r filled (a GPU that
 * failed has its err set); or -1 when nothing can be listed, a message on
 * stderr and *code the exit code.
 */
/* The command its messages name ("ps"; `reclaim` reads a round too). */
extern const char *gpr_cli_ps_name;
int gpr_cli_ps_query(gpr_ctx *ctx, const int *select, int n_select, int split,
		     struct gpr_cli_ps_round *r, int *code);
void gpr_cli_ps_round_free(struct gpr_cli_ps_round *r);

/*
 * A stray context: a process holding at most GPR_CLI_STRAY_MAX on one GPU
 * while it holds at least twice that, and 1 GiB more, on another of the
 * round (a rank that never called torch.cuda.set_device opens a context
 * on GPU 0 too: pytorch#135279). Sets each row's stray_of; the round's
 * GPUs only (with -i, the others are not read).
 */
#define GPR_CLI_STRAY_MAX ((uint64_t)3 << 29) /* 1.5 GiB */
void gpr_cli_ps_mark_strays(struct gpr_cli_ps_round *r);

/*
 * Which processes of the round did GPU work lately (cli/ps_work.c): each
 * row's work fields, from the core's gpr__gpu_work (NVML's per-process
 * utilization samples) of each GPU read without error. Without a memo,
 * the samples the driver keeps (ps --explain, a one-shot top); with one
 * (a watching top), only those newer than the memo's last, the memo
 * keeping each process's latest work across rounds.
 */
struct gpr_cli_ps_memo;
struct gpr_cli_ps_memo *gpr_cli_ps_memo_new(void);
void gpr_cli_ps_memo_free(struct gpr_cli_ps_memo *m);
void gpr_cli_ps_work(gpr_ctx *ctx, struct gpr_cli_ps_round *r,
		     struct gpr_cli_ps_memo *memo);
/* Seconds from row's latest work to the round's time (0 if later); -1
 * when none is known. */
double gpr_cli_ps_idle(const struct gpr_cli_ps_round *r,
		       const struct gpr_cli_ps_row *row);

/* "<what went wrong> (<detail>)" for a failed query, as users read it. */
void gpr_cli_ps_describe(int err, const char *detail, char *out, size_t len);

/* A row's share of its GPU's memory, in percent. */
double gpr_cli_ps_share(const struct gpr_cli_ps_gpu *g,
			const struct gpr_cli_ps_row *r);

/* How the text is laid out. */
struct gpr_cli_ps_layout {
	int width;    /* columns: every line is cut to it; 0: no limit */
	int height;   /* rows: the listing fits in height - 1; 0: no limit */
	int color;    /* SGR colours */
	double watch; /* > 0: a header line with the time and this interval */
};

/* The text listing of r (docs/ps.md shows it). */
void gpr_cli_ps_text(struct gpr__buf *b, const struct gpr_cli_ps_round *r,
		     const struct gpr_cli_ps_layout *l);

/* "time" (UTC, ISO 8601 with milliseconds) and "unix_time" of ts. */
struct gpr__json;
void gpr_cli_json_when(struct gpr__json *j, const struct timespec *ts);

/* The JSON document of r, one line (docs/ps.md, "JSON shape"). */
void gpr_cli_ps_json(struct gpr__buf *b, const struct gpr_cli_ps_round *r);
/* The same with ps --explain's agents: each process's "agent", each
 * GPU's "returnable", "agents" and "agents_silent" (docs/agent.md). */
struct gpr_cli_ps_agents;
void gpr_cli_ps_json_agents(struct gpr__buf *b,
			    const struct gpr_cli_ps_round *r,
			    const struct gpr_cli_ps_agents *s);

/* ---------------- start and end (cli/ps_start.c) ---------------- */

/* GPURECLAIM_PS_VARIANT, the measurement switch (docs/ps.md). */
struct gpr_cli_ps_variant {
	int serial; /* start=serial: NVML started by the first query */
	enum gpr_cli_end end; /* exit=detach|wait|fork|libc: how a one-shot
			       * listing ends (gpr_cli_end) */
	int split; /* gpu=split: two threads a GPU, facts and processes */
};

/* Reads the switch (all 0 when unset); -1 with a message when malformed. */
int gpr_cli_ps_variant(struct gpr_cli_ps_variant *v);

struct gpr_cli_ps_start {
	gpr_ctx *ctx;
	struct gpr_cli_ps_variant variant;
	pthread_t thread;
	int running; /* thread started, not joined */
};

/* Starts NVML for ctx on a thread (start=serial: leaves it to the first
 * query); the caller goes on preparing, then calls gpr_cli_ps_started. */
void gpr_cli_ps_start(struct gpr_cli_ps_start *s, gpr_ctx *ctx,
		      const struct gpr_cli_ps_variant *v);
void gpr_cli_ps_started(struct gpr_cli_ps_start *s);

/* Prints the profile, then ends a one-shot listing as the variant says
 * (gpr_cli_end: by default at once, NVML's release left to a detached
 * process); otherwise returns code. */
int gpr_cli_ps_end(const struct gpr_cli_ps_start *s, int code, int one_shot);

/* ---------------- profile (cli/ps_profile.c) ---------------- */

/* Reads GPURECLAIM_PS_PROFILE: call it first, as main's time is taken. */
void gpr_cli_prof_start(void);
int gpr_cli_prof_on(void);
/* Names the calling thread in the profile ("main" until named). */
void gpr_cli_prof_thread(const char *name);
const char *gpr_cli_prof_thread_name(void);
/* A step's start, for gpr_cli_prof_step; 0 when the profile is off. */
double gpr_cli_prof_clock(void);
/* Records the step "<what>: <ms since t0> ms" as ending now. */
void gpr_cli_prof_step(double t0, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Records a moment, without a duration. */
void gpr_cli_prof_note(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
/* The core's log (gpr_log_fn): each message recorded as a step. */
void gpr_cli_prof_log(void *user, int level, const char *msg);
/* Every step, to stderr, each line starting with "ps-profile ". */
void gpr_cli_prof_print(void);

#endif /* GPR_CLI_PS_H */
