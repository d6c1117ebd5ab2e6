/*
 * Who the processes of a watching `top` are, kept from round to round: a
 * round reads, for each row, the pid's state, user and command from
 * /proc, and the user is a getpwuid_r (NSS: /etc/passwd, or a directory
 * service); a node whose processes hold memory on several GPUs has a row
 * for each. Kept by pid and start time (a later process given the same
 * pid is another), the user and command are read once per process; the
 * state, whether it is alive or a zombie, every round.
 */
#include "ps.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct id {
	uint32_t pid;
	unsigned long long start;
	int seen; /* listed in the round being read */
	int user_known, cmd_known;
	char user[64];
	char *cmd;
};

struct gpr_cli_ps_ids {
	pthread_mutex_t lock;
	struct id *ids;
	size_t n, cap;
};

struct gpr_cli_ps_ids *gpr_cli_ps_ids_new(void)
{
	struct gpr_cli_ps_ids *c = calloc(1, sizeof(*c));
	if (c)
		pthread_mutex_init(&c->lock, NULL);
	return c;
}

void gpr_cli_ps_ids_free(struct gpr_cli_ps_ids *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		free(c->ids[i].cmd);
	free(c->ids);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* Under the lock: the entry of pid, or NULL. Binary search: kept sorted
 * by pid. */
static struct id *find(struct gpr_cli_ps_ids *c, uint32_t pid, size_t *at)
{
	size_t lo = 0, hi = c->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c->ids[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	*at = lo;
	return lo < c->n && c->ids[lo].pid == pid ? &c->ids[lo] : NULL;
}

static void read_row(struct gpr_cli_ps_row *row)
{
	row->user_known = gpr_cli_proc_user((pid_t)row->pid, row->user,
					    sizeof(row->user)) == 0;
	row->cmd_known = gpr_cli_proc_cmdline((pid_t)row->pid, row->cmd,
					      sizeof(row->cmd)) == 0;
}

void gpr_cli_ps_ids_fill(struct gpr_cli_ps_ids *c, struct gpr_cli_ps_row *row,
			 unsigned long long start)
{
	size_t at;
	pthread_mutex_lock(&c->lock);
	struct id *e = start ? find(c, row->pid, &at) : NULL;
	if (e && e->start == start) {
		e->seen = 1;
		row->user_known = e->user_known;
		row->cmd_known = e->cmd_known;
		memcpy(row->user, e->user, sizeof(row->user));
		snprintf(row->cmd, sizeof(row->cmd), "%s",
			 e->cmd ? e->cmd : "");
		pthread_mutex_unlock(&c->lock);
		return;
	}
	pthread_mutex_unlock(&c->lock);
	read_row(row); /* outside the lock: /proc and NSS take their time */
	if (!start)    /* no start time: nothing to know it again by */
		return;
	char *cmd = strdup(row->cmd);
	pthread_mutex_lock(&c->lock);
	e = find(c, row->pid, &at);
	if (!e && c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 64;
		struct id *g = realloc(c->ids, cap * sizeof(*g));
		if (g) {
			c->ids = g;
			c->cap = cap;
		}
	}
	if (!e && c->n < c->cap) {
		memmove(&c->ids[at + 1], &c->ids[at],
			(c->n - at) * sizeof(*c->ids));
		c->n++;
		e = &c->ids[at];
		e->cmd = NULL;
	}
	if (e && cmd) {
		free(e->cmd);
		e->pid = row->pid;
		e->start = start;
		e->seen = 1;
		e->user_known = row->user_known;
		e->cmd_known = row->cmd_known;
		memcpy(e->user, row->user, sizeof(e->user));
		e->cmd = cmd;
		cmd = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	free(cmd);
}

void gpr_cli_ps_ids_done(struct gpr_cli_ps_ids *c)
{
	pthread_mutex_lock(&c->lock);
	size_t w = 0;
	for (size_t i = 0; i < c->n; i++) {
		if (!c->ids[i].seen) {
			free(c->ids[i].cmd);
			continue;
		}
		c->ids[i].seen = 0;
		c->ids[w++] = c->ids[i];
	}
	c->n = w;
	pthread_mutex_unlock(&c->lock);
}
