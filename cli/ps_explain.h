/*
 * `gpureclaim ps --explain` (cli/ps_explain.c): the agents asked while ps
 * reads the GPUs, and what they said, for the text and the JSON.
 */
#ifndef GPR_CLI_PS_EXPLAIN_H
#define GPR_CLI_PS_EXPLAIN_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "out/buf.h"

struct gpr_cli_ps_round;
struct gpr_cli_ps_gpu;

/* live, releasable, not releasable, workspaces, pools, rest */
#define GPR_CLI_PS_GROUPS 6
/* per explained GPU in an explain answer's "groups" (agent/_server.py
 * flat_groups): its CUDA ordinal, NVML index, the groups, the driver's
 * figure; -1 where unknown */
#define GPR_CLI_PS_GPU_INTS (GPR_CLI_PS_GROUPS + 3)
/* the groups' names in the text, their JSON keys, and the keys the release
 * before used, still written beside them (NULL: the same; docs/naming.md) */
extern const char *const gpr_cli_ps_group_names[GPR_CLI_PS_GROUPS];
extern const char *const gpr_cli_ps_group_keys[GPR_CLI_PS_GROUPS];
extern const char *const gpr_cli_ps_group_old_keys[GPR_CLI_PS_GROUPS];

/* One agent's explain(), asked in a thread of its own. */
struct gpr_cli_ps_agent {
	long pid;
	double deadline; /* the command's (gpr_cli_agent_now's clock) */
	pthread_t thread;
	int started;
	int done;	  /* answered or failed: never asked again */
	int ok;		  /* answered; else kind and error say why not */
	const char *kind; /* agent/_protocol.py's kinds */
	char error[640];
	/* the answer's "groups", GPR_CLI_PS_GPU_INTS per explained GPU */
	long long groups[GPR_CLI_PS_GPU_INTS * 64];
	size_t n_groups;
	/* called by the asking thread once a is answered or failed (top
	 * shows each answer as it comes); NULL: nobody is told */
	void (*answered)(void *arg);
	void *answered_arg;
};

struct gpr_cli_ps_agents {
	struct gpr_cli_ps_agent *a;
	size_t n;
};

/* Finds the agents this user may ask and asks each, a thread each. */
void gpr_cli_ps_agents_start(struct gpr_cli_ps_agents *s, double timeout);
/* The same but for the processes r lists as suspended (gpureclaim's
 * records, cli/ps_suspended.c): their CUDA calls wait until they are
 * resumed, so would their agents' answers. r NULL: every agent. */
void gpr_cli_ps_agents_start_but(struct gpr_cli_ps_agents *s, double timeout,
				 const struct gpr_cli_ps_round *r);
/* Whether r lists pid as suspended (or being suspended or resumed). */
int gpr_cli_ps_frozen(const struct gpr_cli_ps_round *r, long pid);
/* Asks a->pid's agent in a thread of its own (a->started), bounded by
 * a->deadline; without a thread, at once, here. */
void gpr_cli_ps_agent_ask(struct gpr_cli_ps_agent *a);
/* Waits for every answer: all of them within the timeout from the start
 * (where no thread can be started, the rest are asked in turn within
 * it). */
void gpr_cli_ps_agents_wait(struct gpr_cli_ps_agents *s);
/* Each answer's parts checked against the driver's figure for that
 * process in r (a negative part is 0; a part above the figure makes the
 * answer a bad one, said in one line): what the renderers show. */
void gpr_cli_ps_agents_check(struct gpr_cli_ps_agents *s,
			     const struct gpr_cli_ps_round *r);
void gpr_cli_ps_agents_free(struct gpr_cli_ps_agents *s);

/* The agent of pid, or NULL. */
const struct gpr_cli_ps_agent *
gpr_cli_ps_agent_of(const struct gpr_cli_ps_agents *s, long pid);
/* An answered agent's groups on NVML GPU index, and the driver's figure
 * (-1: unknown); 1, or 0 with zeros where its answer has no such GPU. */
int gpr_cli_ps_agent_parts(const struct gpr_cli_ps_agent *a, int index,
			   long long parts[GPR_CLI_PS_GROUPS],
			   long long *driver);
/* Per GPU: what a release of every process would give back (releasable),
 * how many answered, how many did not. */
void gpr_cli_ps_agents_tally(const struct gpr_cli_ps_agents *s,
			     const struct gpr_cli_ps_gpu *g,
			     uint64_t *releasable, int *with_agent,
			     int *silent);

/* The text of `ps --explain` (docs/agent.md shows it). */
void gpr_cli_ps_explain_text(struct gpr__buf *b,
			     const struct gpr_cli_ps_round *r,
			     const struct gpr_cli_ps_agents *s);

#endif /* GPR_CLI_PS_EXPLAIN_H */
