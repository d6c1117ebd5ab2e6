/*
 * `gpureclaim top` in parts (docs/top.md): cli/cmd_top.c holds the
 * options and either prints one reading (stdout not a terminal, --json)
 * or runs the view; cli/top_read.c reads in a thread of its own, so
 * nothing the screen does waits on NVML or an agent; cli/top_view.c lays
 * a reading out as lines (the terminal's, and the one-shot text);
 * cli/top_screen.c draws them with ncurses and takes the keys;
 * cli/top_act.c runs what a key asks for (release, holders, reclaim) in
 * threads of their own.
 *
 * A reading is `ps --explain`'s: the same round (cli/ps_query.c), the
 * same GPU work (cli/ps_work.c), the same agents' answers
 * (cli/ps_explain.c), so every figure on the screen is the one
 * `ps --explain --json` gives.
 */
#ifndef GPR_CLI_TOP_H
#define GPR_CLI_TOP_H

#include <stddef.h>
#include <stdint.h>

#include "out/buf.h"
#include "ps.h"
#include "ps_explain.h"

/* ---------------- a reading (cli/top_read.c) ---------------- */

struct gpr_cli_top_reading {
	struct gpr_cli_ps_round round; /* with GPU work; rows owned */
	char host[256];
	/* each agent's latest answer (or failure), copied; asking[i]: no
	 * answer from agents.a[i] yet, a request in flight */
	struct gpr_cli_ps_agents agents;
	unsigned char *asking;
	double watched; /* seconds since the first reading (idle times
			 * known to be at least this long) */
	double interval;
	int failed;	 /* the round could not be read */
	char error[768]; /* why */
};

void gpr_cli_top_reading_free(struct gpr_cli_top_reading *r);

/* Whether agent a (of r->agents) is being asked and has not answered. */
int gpr_cli_top_asking(const struct gpr_cli_top_reading *r,
		       const struct gpr_cli_ps_agent *a);

/*
 * One reading, as `ps --explain` makes it: the agents asked (each bounded
 * by timeout) while the GPUs are read, then every answer waited for.
 * 0, or -1 with a message on stderr and *code the exit code.
 */
int gpr_cli_top_read_once(gpr_ctx *ctx, const int *select, int n_select,
			  double timeout, struct gpr_cli_top_reading *out,
			  int *code);

/*
 * The reader: a thread that reads every `interval` seconds (and at once
 * when asked), asking every agent again whose last answer is in, each
 * bounded by `timeout`, and publishes a reading when a round is read and
 * when an agent answers; each publication writes a byte to wake_fd.
 */
struct gpr_cli_top_reader;
struct gpr_cli_top_reader *
gpr_cli_top_reader_start(gpr_ctx *ctx, const int *select, int n_select,
			 double interval, double timeout, int wake_fd);
/* The newest reading published since the last take (the caller owns it),
 * or NULL. */
struct gpr_cli_top_reading *
gpr_cli_top_reader_take(struct gpr_cli_top_reader *r);
/* Reads again now (after an action changed the figures). */
void gpr_cli_top_reader_poke(struct gpr_cli_top_reader *r);
/* Stops the thread and frees the reader; an agent still being asked is
 * not waited for (its thread is left to the exit). */
void gpr_cli_top_reader_stop(struct gpr_cli_top_reader *r);

/* ---------------- the view (cli/top_view.c) ---------------- */

/* What a stretch of a line shows, for its colour or attribute. */
enum gpr_cli_top_role {
	GPR_CLI_TOP_PLAIN = 0,
	GPR_CLI_TOP_TITLE,    /* the header and GPU lines: bold */
	GPR_CLI_TOP_DIM,      /* notes */
	GPR_CLI_TOP_HEAD,     /* the column names */
	GPR_CLI_TOP_SELECTED, /* the selected process */
	GPR_CLI_TOP_WARN,     /* markers, agents that did not answer */
	GPR_CLI_TOP_ERROR,    /* a GPU that cannot be read */
	GPR_CLI_TOP_BUSY,     /* a process working on its GPU */
	GPR_CLI_TOP_STATUS,   /* the bottom line */
	/* the parts, in the bars and the legend */
	GPR_CLI_TOP_LIVE,
	GPR_CLI_TOP_RELEASABLE,
	GPR_CLI_TOP_NOT_RELEASABLE,
	GPR_CLI_TOP_WORKSPACES,
	GPR_CLI_TOP_POOLS,
	GPR_CLI_TOP_REST,
	GPR_CLI_TOP_NO_AGENT, /* a process whose parts are unknown */
	GPR_CLI_TOP_OTHERS,   /* used, by no process of the list */
	GPR_CLI_TOP_FREE,
	/* the processes in the bar by process, in turn */
	GPR_CLI_TOP_PROC0,
	GPR_CLI_TOP_PROCS = 6,
	GPR_CLI_TOP_ROLES = GPR_CLI_TOP_PROC0 + GPR_CLI_TOP_PROCS,
};

/* One line: terminal-safe UTF-8 at most `width` columns, and the role of
 * each of its bytes. */
struct gpr_cli_top_line {
	struct gpr__buf text, roles;
	int cols;
};

struct gpr_cli_top_screen {
	struct gpr_cli_top_line *lines;
	size_t n, cap;
	int oom;
};

void gpr_cli_top_screen_reset(struct gpr_cli_top_screen *s);
void gpr_cli_top_screen_free(struct gpr_cli_top_screen *s);

enum gpr_cli_top_sort {
	GPR_CLI_TOP_BY_MEMORY = 0,
	GPR_CLI_TOP_BY_RELEASABLE,
};

/* What the person looking has chosen, kept from screen to screen. */
struct gpr_cli_top_ui {
	int sort;     /* enum gpr_cli_top_sort */
	int selected; /* a process is selected: sel_pid on sel_gpu */
	uint32_t sel_pid;
	int sel_gpu;
	int first;	  /* the first process row shown */
	int list_rows;	  /* how many rows the list had (PgUp, PgDn) */
	char bottom[640]; /* the bottom line; "" for the keys */
	int bottom_role;  /* its role (STATUS, WARN, ERROR) */
	int paging;	  /* a text fills the screen (the holders) */
	char page_title[160];
	struct gpr__buf page; /* that text, terminal-safe when drawn */
	int page_first;	      /* its first line shown */
};

/* How the lines are laid out. */
struct gpr_cli_top_layout {
	int width, height; /* height 0: every process, no keys (a one-shot
			    * reading) */
	int ascii;	   /* the terminal shows ASCII only: the rest as ? */
};

/* A process of the list: a row of one GPU and what its agent said. */
struct gpr_cli_top_entry {
	const struct gpr_cli_ps_gpu *gpu;
	const struct gpr_cli_ps_row *row;
	const struct gpr_cli_ps_agent *agent; /* NULL: it runs none */
	int asking;			      /* no answer yet */
	int parts_known;		      /* agent answered */
	long long parts[GPR_CLI_PS_GROUPS];   /* on this GPU */
	char key;			      /* its letter in the bars */
	int shade; /* its colour in its GPU's bar by process (0..PROCS-1) */
};

/* The processes of r sorted as ui->sort says, largest first (malloc'd
 * into *out; free it); how many. */
size_t gpr_cli_top_entries(const struct gpr_cli_top_reading *r, int sort,
			   struct gpr_cli_top_entry **out);

/* The lines of r as the layout and ui say; ui's selection and scrolling
 * are kept in bounds. */
void gpr_cli_top_view(const struct gpr_cli_top_reading *r,
		      struct gpr_cli_top_ui *ui,
		      const struct gpr_cli_top_layout *l,
		      struct gpr_cli_top_screen *out);

/* The screen as plain text, a newline after each line. */
void gpr_cli_top_text(const struct gpr_cli_top_screen *s, struct gpr__buf *b);

/* ---------------- the actions (cli/top_act.c) ---------------- */

enum gpr_cli_top_act_kind {
	GPR_CLI_TOP_RELEASE = 1, /* one process's caches, through its agent */
	GPR_CLI_TOP_HOLDERS,	 /* who holds its live memory (its agent) */
	GPR_CLI_TOP_RECLAIM_DRY, /* `gpureclaim reclaim --dry-run` */
	GPR_CLI_TOP_RECLAIM,	 /* `gpureclaim reclaim` */
	GPR_CLI_TOP_SUSPEND_DRY, /* `gpureclaim suspend --dry-run` */
	GPR_CLI_TOP_SUSPEND,	 /* `gpureclaim suspend` (cli/suspend_run.h) */
	GPR_CLI_TOP_RESUME,	 /* `gpureclaim resume` */
};

/* An action's outcome, for the bottom line (and the pager). */
struct gpr_cli_top_done {
	int kind;
	long pid;
	int ok;
	long long bytes;       /* released (a resume: taken back), or releasable
				* or what would move (the dry runs) */
	long long host_bytes;  /* suspend: in host memory; -1 unknown */
	long long cache;       /* suspend: its agent's release first */
	int processes, failed; /* reclaim: answered, did not */
	double seconds;	       /* the agent's own (release) */
	char line[640];	       /* what to show */
	struct gpr__buf text;  /* holders: the report */
};

/*
 * Starts an action in a thread of its own: pid's agent asked (release,
 * holders) or `gpureclaim reclaim` run (this very program, its JSON
 * read), each bounded by timeout. Once it is done, its outcome is kept
 * for gpr_cli_top_act_take and a byte written to wake_fd. One at a time:
 * -1 while another runs.
 */
int gpr_cli_top_act_start(int kind, long pid, double timeout, int wake_fd);
/* The outcome of the action that ended, or 0 when none has (or it runs
 * still); free done->text after. */
int gpr_cli_top_act_take(struct gpr_cli_top_done *done);
/* Whether an action runs. */
int gpr_cli_top_act_busy(void);
/* Done with actions: the last one's thread joined; 1 when one runs still
 * (its thread is left to the exit, and may still write to wake_fd). */
int gpr_cli_top_act_leave(void);

/* ---------------- the screen (cli/top_screen.c) ---------------- */

struct gpr_cli_top_opts {
	gpr_ctx *ctx;
	const int *select;
	int n_select;
	double interval, timeout;
	int color;
};

/* Runs the view on the terminal until q or a signal; the exit code. In a
 * build without ncurses (cli/top_none.c), one line that says how to get
 * it. */
int gpr_cli_top_screen(const struct gpr_cli_top_opts *o);

#endif /* GPR_CLI_TOP_H */
