/*
 * `top`'s screen as lines, from a reading: no terminal here, so the
 * one-shot text (stdout not a terminal) and the ncurses view
 * (cli/top_screen.c) show the same lines, and tests can read them.
 *
 * From the top: a header (time, interval, host, agents); per GPU its
 * figures, a bar of its memory by part (the parts of the processes whose
 * agent answered, the whole figure of those without one, what no process
 * of the list holds, the free memory) and a bar by process (each
 * process's letter over its share); a legend; the processes, largest
 * first (or by what a release would give back), each with its figure,
 * its parts where its agent answered and its state (running and how busy,
 * idle for how long); then, on a terminal, the selected process's parts
 * and the bottom line (the keys, a question, an outcome). Where the
 * height is short the GPUs take one line each, then only as many as
 * leave the processes room, "+N more GPUs" saying so; the process list
 * scrolls to keep the selection in view.
 *
 * Text from outside (commands, an agent's messages, a GPU's name) goes
 * through the terminal rule of src/out/text.h: no control, no bidi
 * override reaches the terminal.
 */
#include "top.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "out/fmt.h"
#include "out/text.h"
#include "suspend.h"

/* A process is running (busy) when its latest sample showing work is
 * this recent: NVML samples about once a second while a process works. */
#define BUSY_WINDOW_S 3.0

/* ---------------- lines ---------------- */

void gpr_cli_top_screen_reset(struct gpr_cli_top_screen *s)
{
	for (size_t i = 0; i < s->n; i++) {
		gpr__buf_reset(&s->lines[i].text);
		gpr__buf_reset(&s->lines[i].roles);
		s->lines[i].cols = 0;
	}
	s->n = 0;
	s->oom = 0;
}

void gpr_cli_top_screen_free(struct gpr_cli_top_screen *s)
{
	for (size_t i = 0; i < s->cap; i++) {
		gpr__buf_free(&s->lines[i].text);
		gpr__buf_free(&s->lines[i].roles);
	}
	free(s->lines);
	memset(s, 0, sizeof(*s));
}

/* The lines being laid out. */
struct lay {
	struct gpr_cli_top_screen *s;
	int width;
	int ascii;
	struct gpr_cli_top_line *cur;
};

static void new_line(struct lay *l)
{
	struct gpr_cli_top_screen *s = l->s;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		struct gpr_cli_top_line *g =
		    realloc(s->lines, cap * sizeof(*g));
		if (!g) {
			s->oom = 1;
			l->cur = NULL;
			return;
		}
		memset(g + s->cap, 0, (cap - s->cap) * sizeof(*g));
		s->lines = g;
		s->cap = cap;
	}
	l->cur = &s->lines[s->n++];
	gpr__buf_reset(&l->cur->text);
	gpr__buf_reset(&l->cur->roles);
	l->cur->cols = 0;
}

/* Columns left on the current line. */
static int room(const struct lay *l)
{
	return l->cur ? l->width - l->cur->cols : 0;
}

/* Appends text (terminal-safe by the rule of out/text.h, ASCII only where
 * the terminal is not UTF-8) in `role`, at most max columns (<= 0: as
 * many as the line has). */
static void put(struct lay *l, int role, const char *s, int max)
{
	struct gpr_cli_top_line *c = l->cur;
	if (!c || !s)
		return;
	int limit = room(l);
	if (max > 0 && max < limit)
		limit = max;
	char r = (char)role;
	for (const char *p = s; *p && limit > 0;) {
		uint32_t cp = '?';
		size_t n = gpr__utf8_len(p, &cp);
		const char *show = p;
		size_t len = n;
		if (n == 0 || gpr__text_unsafe(cp) ||
		    (l->ascii && cp >= 0x80)) {
			show = "?";
			len = 1;
			cp = '?';
		}
		int w = gpr_cli_term_columns(cp);
		if (w > limit)
			break;
		gpr__buf_putn(&c->text, show, len);
		for (size_t i = 0; i < len; i++)
			gpr__buf_putn(&c->roles, &r, 1);
		c->cols += w;
		limit -= w;
		p += n ? n : 1;
	}
}

static void putf(struct lay *l, int role, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void putf(struct lay *l, int role, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	put(l, role, buf, 0);
}

/* n cells of character ch in role. */
static void fill(struct lay *l, int role, char ch, int n)
{
	char s[2] = {ch, '\0'};
	for (int i = 0; i < n && room(l) > 0; i++)
		put(l, role, s, 1);
}

/* Pads the line to the width in role (a selected row, the bottom line). */
static void pad(struct lay *l, int role)
{
	fill(l, role, ' ', room(l));
}

void gpr_cli_top_text(const struct gpr_cli_top_screen *s, struct gpr__buf *b)
{
	for (size_t i = 0; i < s->n; i++) {
		const struct gpr__buf *t = &s->lines[i].text;
		size_t len = t->len;
		while (len && t->data[len - 1] == ' ')
			len--;
		gpr__buf_putn(b, t->data ? t->data : "", len);
		gpr__buf_puts(b, "\n");
	}
}

/* ---------------- figures ---------------- */

static const char *fb(long long v, char *out, size_t len)
{
	return gpr__fmt_bytes(v > 0 ? (uint64_t)v : 0, out, len);
}

/* The parts' order in the agents' answers (ps_explain.h) and their
 * letters in the bars. */
static const struct {
	int role;
	char ch;
	const char *name;
} kinds[] = {
    {GPR_CLI_TOP_LIVE, 'L', "live"},
    {GPR_CLI_TOP_RELEASABLE, 'R', "releasable"},
    {GPR_CLI_TOP_NOT_RELEASABLE, 'N', "not releasable"},
    {GPR_CLI_TOP_WORKSPACES, 'W', "workspaces"},
    {GPR_CLI_TOP_POOLS, 'P', "pools"},
    {GPR_CLI_TOP_REST, 'C', "rest"},
    {GPR_CLI_TOP_NO_AGENT, '?', "no agent"},
    {GPR_CLI_TOP_OTHERS, 'O', "others"},
    {GPR_CLI_TOP_FREE, '.', "free"},
};
#define K_NO_AGENT 6
#define K_OTHERS 7
#define K_FREE 8

/* ---------------- the list ---------------- */

static long long releasable_of(const struct gpr_cli_top_entry *e)
{
	return e->parts_known ? e->parts[1] : -1;
}

static int entry_cmp(const void *a, const void *b, void *sort)
{
	const struct gpr_cli_top_entry *x = a, *y = b;
	if (*(const int *)sort == GPR_CLI_TOP_BY_RELEASABLE) {
		long long p = releasable_of(x), q = releasable_of(y);
		if (p != q)
			return p < q ? 1 : -1;
	}
	if (x->row->bytes_known != y->row->bytes_known)
		return y->row->bytes_known - x->row->bytes_known;
	if (x->row->bytes != y->row->bytes)
		return x->row->bytes < y->row->bytes ? 1 : -1;
	if (x->row->pid != y->row->pid)
		return x->row->pid < y->row->pid ? -1 : 1;
	return (x->gpu->index > y->gpu->index) -
	       (x->gpu->index < y->gpu->index);
}

static char key_for(size_t i)
{
	static const char keys[] =
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
	return i < sizeof(keys) - 1 ? keys[i] : '*';
}

/* The list's indexes sorted by pid, then by place. */
static int by_pid(const void *a, const void *b, void *list)
{
	const struct gpr_cli_top_entry *e = list;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	uint32_t p = e[x].row->pid, q = e[y].row->pid;
	if (p != q)
		return p < q ? -1 : 1;
	return (x > y) - (x < y);
}

/* A letter a process, in the order of the list: each of its rows (one a
 * GPU it holds memory on) gets its first row's. */
static void letters(struct gpr_cli_top_entry *e, size_t m)
{
	size_t *idx = malloc(m * sizeof(*idx));
	size_t *group = malloc(m * sizeof(*group));
	char *key = calloc(m, 1);
	if (!idx || !group || !key) {
		for (size_t i = 0; i < m; i++)
			e[i].key = key_for(i);
		goto out;
	}
	for (size_t i = 0; i < m; i++)
		idx[i] = i;
	qsort_r(idx, m, sizeof(*idx), by_pid, e);
	for (size_t k = 0, first = 0; k < m; k++) {
		if (k && e[idx[k]].row->pid != e[idx[k - 1]].row->pid)
			first = idx[k];
		else if (!k)
			first = idx[0];
		group[idx[k]] = first; /* the process's first row */
	}
	size_t next = 0;
	for (size_t i = 0; i < m; i++) {
		if (!key[group[i]])
			key[group[i]] = key_for(next++);
		e[i].key = key[group[i]];
	}
out:
	free(idx);
	free(group);
	free(key);
}

size_t gpr_cli_top_entries(const struct gpr_cli_top_reading *r, int sort,
			   struct gpr_cli_top_entry **out)
{
	size_t n = 0;
	*out = NULL;
	for (size_t k = 0; k < r->round.n; k++)
		n += r->round.gpus[k].err ? 0 : r->round.gpus[k].n;
	if (!n)
		return 0;
	struct gpr_cli_top_entry *e = calloc(n, sizeof(*e));
	if (!e)
		return 0;
	size_t m = 0;
	for (size_t k = 0; k < r->round.n; k++) {
		const struct gpr_cli_ps_gpu *g = &r->round.gpus[k];
		for (size_t p = 0; !g->err && p < g->n; p++) {
			struct gpr_cli_top_entry *x = &e[m++];
			x->gpu = g;
			x->row = &g->rows[p];
			x->shade = (int)(p % GPR_CLI_TOP_PROCS);
			/* a suspended process's agent is not asked (its
			 * answer would wait for the resume) */
			x->agent =
			    x->row->recorded
				? NULL
				: gpr_cli_ps_agent_of(&r->agents, x->row->pid);
			x->asking = gpr_cli_top_asking(r, x->agent);
			if (x->agent && x->agent->ok) {
				long long driver;
				x->parts_known = 1;
				gpr_cli_ps_agent_parts(x->agent, g->index,
						       x->parts, &driver);
			}
		}
	}
	qsort_r(e, m, sizeof(*e), entry_cmp, &sort);
	letters(e, m);
	*out = e;
	return m;
}

/* ---------------- the header and the GPUs ---------------- */

static void header(struct lay *l, const struct gpr_cli_top_reading *r, int live)
{
	new_line(l);
	struct tm tm;
	char when[32];
	localtime_r(&r->round.when.tv_sec, &tm);
	strftime(when, sizeof(when), live ? "%H:%M:%S" : "%Y-%m-%d %H:%M:%S",
		 &tm);
	putf(l, GPR_CLI_TOP_TITLE, "gpureclaim top  %s", when);
	if (live)
		putf(l, GPR_CLI_TOP_TITLE, "  every %g s", r->interval);
	put(l, GPR_CLI_TOP_TITLE, "  ", 0);
	put(l, GPR_CLI_TOP_TITLE, r->host, 24);
	size_t asking = 0, failed = 0;
	for (size_t i = 0; i < r->agents.n; i++) {
		asking += gpr_cli_top_asking(r, &r->agents.a[i]);
		failed += !r->agents.a[i].ok &&
			  !gpr_cli_top_asking(r, &r->agents.a[i]);
	}
	char n[64];
	putf(l, GPR_CLI_TOP_PLAIN, "  %s",
	     gpr__fmt_count(r->agents.n, "agent", "agents", n, sizeof(n)));
	if (asking)
		putf(l, GPR_CLI_TOP_DIM, ", %zu asked", asking);
	if (failed)
		putf(l, GPR_CLI_TOP_WARN, ", %zu silent", failed);
	if (live)
		pad(l, GPR_CLI_TOP_TITLE);
}

/* Bytes per kind on a GPU: the parts of the processes whose agent
 * answered, the whole figure of the others, what no process holds, the
 * free memory. */
static void gpu_kinds(const struct gpr_cli_ps_gpu *g,
		      const struct gpr_cli_top_entry *e, size_t n,
		      long long out[9], long long *releasable, int *answered)
{
	memset(out, 0, 9 * sizeof(*out));
	*releasable = 0;
	*answered = 0;
	long long listed = 0;
	for (size_t i = 0; i < n; i++) {
		if (e[i].gpu != g)
			continue;
		long long bytes =
		    e[i].row->bytes_known ? (long long)e[i].row->bytes : 0;
		listed += bytes;
		if (!e[i].parts_known) {
			out[K_NO_AGENT] += bytes;
			continue;
		}
		(*answered)++;
		for (int k = 0; k < GPR_CLI_PS_GROUPS; k++)
			out[k] += e[i].parts[k] > 0 ? e[i].parts[k] : 0;
		*releasable += e[i].parts[1] > 0 ? e[i].parts[1] : 0;
	}
	long long used = (long long)g->info.used;
	out[K_OTHERS] = used > listed ? used - listed : 0;
	out[K_FREE] = (long long)g->info.free;
}

/* A bar of `cells` cells over `total` bytes: the stretches take as many
 * cells as their bytes' share rounds to, and every stretch that holds a
 * byte at least one (as the HTML bar gives a small part its minimum
 * width): the cells go to the stretches by their exact shares, the
 * largest remainders first, then the ones below one cell take theirs from
 * the largest. */
struct stretch {
	long long bytes;
	int role;
	char ch;
};

static void bar(struct lay *l, const struct stretch *s, size_t n,
		long long total, int cells)
{
	if (cells <= 0)
		return;
	put(l, GPR_CLI_TOP_DIM, "[", 1);
	double sum = 0;
	int nonzero = 0;
	for (size_t i = 0; i < n; i++)
		if (s[i].bytes > 0) {
			sum += (double)s[i].bytes;
			nonzero++;
		}
	int used = total > 0 ? (int)(sum / (double)total * cells + 0.5) : 0;
	if (used < nonzero)
		used = nonzero;
	if (used > cells)
		used = cells;
	int *c = calloc(n ? n : 1, sizeof(*c));
	double *left = calloc(n ? n : 1, sizeof(*left));
	int given = 0;
	for (size_t i = 0; c && left && i < n && sum > 0; i++) {
		if (s[i].bytes <= 0)
			continue;
		double exact = (double)s[i].bytes / sum * used;
		c[i] = (int)exact;
		left[i] = exact - c[i];
		given += c[i];
	}
	while (c && left && given < used) { /* largest remainders */
		size_t best = n;
		for (size_t i = 0; i < n; i++)
			if (s[i].bytes > 0 &&
			    (best == n || left[i] > left[best]))
				best = i;
		if (best == n)
			break;
		c[best]++;
		left[best] = -1;
		given++;
	}
	for (size_t i = 0; c && i < n; i++) { /* a cell for every part */
		if (s[i].bytes <= 0 || c[i] > 0)
			continue;
		size_t big = 0;
		for (size_t k = 1; k < n; k++)
			if (c[k] > c[big])
				big = k;
		if (c[big] <= 1)
			break;
		c[big]--;
		c[i] = 1;
	}
	int done = 0;
	for (size_t i = 0; c && i < n; i++) {
		fill(l, s[i].role, s[i].ch, c[i]);
		done += c[i];
	}
	free(c);
	free(left);
	fill(l, GPR_CLI_TOP_FREE, '.', cells - done);
	put(l, GPR_CLI_TOP_DIM, "]", 1);
}

static void gpu_title(struct lay *l, const struct gpr_cli_ps_gpu *g,
		      long long releasable, int answered)
{
	char used[24], total[24], fr[24], rel[24], figures[192];
	snprintf(figures, sizeof(figures), "%s  %s / %s used, %s free",
		 g->info.mig ? " (MIG)" : "",
		 fb((long long)g->info.used, used, sizeof(used)),
		 fb((long long)g->info.total, total, sizeof(total)),
		 fb((long long)g->info.free, fr, sizeof(fr)));
	char tail[64] = "";
	if (answered)
		snprintf(tail, sizeof(tail), ", %s releasable",
			 fb(releasable, rel, sizeof(rel)));
	char label[24];
	snprintf(label, sizeof(label), "GPU %d ", g->index);
	new_line(l);
	put(l, GPR_CLI_TOP_TITLE, label, 0);
	int name = room(l) - (int)strlen(figures) - (int)strlen(tail);
	if (gpr__text_len(g->info.name) > name && name > 3) {
		put(l, GPR_CLI_TOP_TITLE, g->info.name, name - 3);
		put(l, GPR_CLI_TOP_TITLE, "...", 0);
	} else if (name > 0) {
		put(l, GPR_CLI_TOP_TITLE, g->info.name, name);
	}
	put(l, GPR_CLI_TOP_TITLE, figures, 0);
	put(l, GPR_CLI_TOP_TITLE, tail, 0);
}

static void gpu_error(struct lay *l, const struct gpr_cli_ps_gpu *g)
{
	char msg[768];
	gpr_cli_ps_describe(g->err, g->detail, msg, sizeof(msg));
	new_line(l);
	putf(l, GPR_CLI_TOP_ERROR, "GPU %d: error: ", g->index);
	put(l, GPR_CLI_TOP_ERROR, msg, 0);
}

/* The bar by part. */
static void parts_bar(struct lay *l, const long long kinds_bytes[9],
		      long long total, int cells)
{
	struct stretch s[K_FREE];
	for (int k = 0; k < K_FREE; k++)
		s[k] = (struct stretch){kinds_bytes[k], kinds[k].role,
					kinds[k].ch};
	bar(l, s, K_FREE, total, cells);
}

/* The bar by process: each process's letter over its figure, largest
 * first, then what no process of the list holds. */
static void procs_bar(struct lay *l, const struct gpr_cli_ps_gpu *g,
		      const struct gpr_cli_top_entry *e, size_t n,
		      long long others, int cells)
{
	struct stretch *s = calloc(g->n + 1, sizeof(*s));
	if (!s)
		return;
	size_t m = 0;
	/* in the GPU's order (largest first), whatever the list's */
	for (size_t p = 0; p < g->n; p++)
		s[p] = (struct stretch){
		    g->rows[p].bytes_known ? (long long)g->rows[p].bytes : 0,
		    GPR_CLI_TOP_PROC0 + (int)(p % GPR_CLI_TOP_PROCS), '*'};
	for (size_t i = 0; i < n; i++)
		if (e[i].gpu == g)
			s[e[i].row - g->rows].ch = e[i].key;
	m = g->n;
	s[m++] = (struct stretch){others, GPR_CLI_TOP_OTHERS, 'O'};
	bar(l, s, m, (long long)g->info.total, cells);
	free(s);
}

/* The bars' letters, in 80 columns ('.', free, goes without saying). */
static void legend(struct lay *l)
{
	static const char *const names[] = {
	    "live",  "releasable", "not rel.", "workspaces",
	    "pools", "rest",	   "no agent", "other"};
	new_line(l);
	for (size_t k = 0; k < sizeof(names) / sizeof(*names); k++) {
		char ch[2] = {kinds[k].ch, '\0'};
		if (k)
			put(l, GPR_CLI_TOP_DIM, " ", 0);
		put(l, kinds[k].role, ch, 0);
		putf(l, GPR_CLI_TOP_DIM, " %s", names[k]);
	}
}

/* The GPUs in `lines` lines per GPU (3: title and both bars; 1: a line
 * with the bar by part), at most max_gpus of them. */
static void gpus(struct lay *l, const struct gpr_cli_top_reading *r,
		 const struct gpr_cli_top_entry *e, size_t n, int lines,
		 size_t max_gpus)
{
	size_t shown = 0;
	for (size_t k = 0; k < r->round.n; k++) {
		const struct gpr_cli_ps_gpu *g = &r->round.gpus[k];
		if (shown == max_gpus) {
			new_line(l);
			putf(l, GPR_CLI_TOP_DIM, "+%zu more GPU%s",
			     r->round.n - k, r->round.n - k != 1 ? "s" : "");
			return;
		}
		shown++;
		if (g->err) {
			gpu_error(l, g);
			continue;
		}
		long long by[9], releasable;
		int answered;
		gpu_kinds(g, e, n, by, &releasable, &answered);
		if (lines == 1) {
			char used[24], total[24], rel[24], tail[96];
			snprintf(
			    tail, sizeof(tail), " %s/%s",
			    fb((long long)g->info.used, used, sizeof(used)),
			    fb((long long)g->info.total, total, sizeof(total)));
			if (answered)
				snprintf(tail + strlen(tail),
					 sizeof(tail) - strlen(tail), " rel %s",
					 fb(releasable, rel, sizeof(rel)));
			new_line(l);
			putf(l, GPR_CLI_TOP_TITLE, "GPU %-2d ", g->index);
			parts_bar(l, by, (long long)g->info.total,
				  room(l) - (int)strlen(tail) - 2);
			put(l, GPR_CLI_TOP_PLAIN, tail, 0);
			continue;
		}
		gpu_title(l, g, releasable, answered);
		new_line(l);
		put(l, GPR_CLI_TOP_DIM, " parts ", 0);
		parts_bar(l, by, (long long)g->info.total, room(l) - 2);
		new_line(l);
		put(l, GPR_CLI_TOP_DIM, " procs ", 0);
		procs_bar(l, g, e, n, by[K_OTHERS], room(l) - 2);
	}
}

/* ---------------- the processes ---------------- */

/* How many parts get a column: at 80 columns what a release would give
 * back (the rest in the selected process's details line); from MEDIUM
 * the live bytes too; from WIDE every part. */
#define MEDIUM 100
#define WIDE 124

static void state_of(const struct gpr_cli_top_reading *r,
		     const struct gpr_cli_ps_row *row, char *out, size_t len,
		     int *role)
{
	*role = GPR_CLI_TOP_PLAIN;
	if (row->state == GPR_CLI_PID_EXITED) {
		snprintf(out, len, "exited");
		*role = GPR_CLI_TOP_WARN;
		return;
	}
	if (row->state != GPR_CLI_PID_ALIVE) {
		snprintf(out, len, "not here");
		*role = GPR_CLI_TOP_WARN;
		return;
	}
	if (row->recorded) { /* gpureclaim suspended it: the driver's word */
		snprintf(out, len, "%s",
			 row->suspend == GPR__PS_CHECKPOINTED ? "suspended"
			 : row->suspend == GPR__PS_LOCKED     ? "locked"
			 : row->suspend == GPR__PS_FAILED     ? "failed"
			 : row->suspend == GPR__PS_RUNNING    ? "running"
							      : "suspended?");
		*role = GPR_CLI_TOP_WARN;
		return;
	}
	if (row->work != 1) { /* NVML cannot tell its work */
		snprintf(out, len, "running");
		return;
	}
	double idle = gpr_cli_ps_idle(&r->round, row);
	char d[24];
	if (idle >= 0 && idle < BUSY_WINDOW_S) {
		snprintf(out, len, "running %u%%", row->sm);
		*role = GPR_CLI_TOP_BUSY;
	} else if (idle >= 0) {
		gpr_cli_fmt_duration_short(idle, d, sizeof(d));
		snprintf(out, len, "idle %s", d);
	} else if (r->watched >= 1) { /* none since the first reading */
		gpr_cli_fmt_duration_short(r->watched, d, sizeof(d));
		snprintf(out, len, "idle >%s", d);
	} else {
		snprintf(out, len, "idle");
	}
}

/* A part's cell: its bytes, "-" without an agent, "..." while asked, "?"
 * when the agent did not answer. */
static void part_cell(const struct gpr_cli_top_entry *e, int k, char *out,
		      size_t len)
{
	if (e->parts_known)
		fb(e->parts[k], out, len);
	else if (!e->agent)
		snprintf(out, len, "-");
	else if (e->asking)
		snprintf(out, len, "...");
	else
		snprintf(out, len, "?");
}

static void columns_head(struct lay *l, int level)
{
	new_line(l);
	putf(l, GPR_CLI_TOP_HEAD, "  %7s %-8s %3s %10s %10s ", "PID", "USER",
	     "GPU", "MEMORY", "RELEASABLE");
	if (level >= 1)
		putf(l, GPR_CLI_TOP_HEAD, "%10s ", "LIVE");
	if (level >= 2)
		putf(l, GPR_CLI_TOP_HEAD, "%10s %10s %10s %10s ", "NOT REL.",
		     "WORKSPACES", "POOLS", "REST");
	putf(l, GPR_CLI_TOP_HEAD, "%-11s COMMAND", "STATE");
	pad(l, GPR_CLI_TOP_HEAD);
}

/* A command on one line, blank runs as one blank, its program without
 * its folder (python3, not /usr/local/bin/python3: the columns are few). */
static void one_line(const char *cmd, char *out, size_t len)
{
	size_t n = 0;
	int blank = 0;
	const char *end = cmd + strcspn(cmd, " \t\n");
	for (const char *c = cmd; c < end; c++)
		if (*c == '/' && c + 1 < end)
			cmd = c + 1;
	for (const char *c = cmd; *c && n + 1 < len; c++) {
		if (*c == ' ' || (*c >= '\t' && *c <= '\r')) {
			blank = n > 0;
			continue;
		}
		if (blank && n + 2 < len)
			out[n++] = ' ';
		blank = 0;
		out[n++] = *c;
	}
	out[n] = '\0';
}

static void process_row(struct lay *l, const struct gpr_cli_top_reading *r,
			const struct gpr_cli_top_entry *e, int level,
			int selected)
{
	const struct gpr_cli_ps_row *row = e->row;
	int base = selected ? GPR_CLI_TOP_SELECTED : GPR_CLI_TOP_PLAIN;
	char mem[24], cells[6][24], state[48], gpu[8];
	if (row->bytes_known)
		fb((long long)row->bytes, mem, sizeof(mem));
	else
		snprintf(mem, sizeof(mem), "n/a");
	for (int k = 0; k < GPR_CLI_PS_GROUPS; k++)
		part_cell(e, k, cells[k], sizeof(cells[k]));
	int state_role;
	state_of(r, row, state, sizeof(state), &state_role);
	snprintf(gpu, sizeof(gpu), "%d", e->gpu->index);
	new_line(l);
	char key[2] = {e->key, '\0'};
	put(l, GPR_CLI_TOP_PROC0 + e->shade, key, 0);
	putf(l, base, " %7u ", row->pid);
	char user[16];
	snprintf(user, sizeof(user), "%-8.8s",
		 row->user_known && row->user[0] ? row->user : "-");
	put(l, base, user, 8);
	putf(l, base, " %3s %10s %10s ", gpu, mem, cells[1]);
	if (level >= 1)
		putf(l, base, "%10s ", cells[0]);
	if (level >= 2)
		putf(l, base, "%10s %10s %10s %10s ", cells[2], cells[3],
		     cells[4], cells[5]);
	char st[16];
	snprintf(st, sizeof(st), "%-11.11s", state);
	put(l, selected ? base : state_role, st, 0);
	put(l, base, " ", 0);
	if (row->stray_of >= 0)
		putf(l, selected ? base : GPR_CLI_TOP_WARN,
		     "<stray: works on GPU %d> ", row->stray_of);
	char cmd[sizeof(row->cmd)];
	one_line(row->cmd_known && row->cmd[0]	    ? row->cmd
		 : row->state == GPR_CLI_PID_EXITED ? "<exited>"
						    : "?",
		 cmd, sizeof(cmd));
	put(l, base, cmd, 0);
	if (selected)
		pad(l, base);
}

/* "PID on GPU N: live ..., releasable ..., ..." or why they are
 * unknown. */
static void details(struct lay *l, const struct gpr_cli_top_entry *e,
		    int indent)
{
	new_line(l);
	if (indent)
		put(l, GPR_CLI_TOP_PLAIN, "            ", 0);
	else
		putf(l, GPR_CLI_TOP_TITLE, "%u on GPU %d: ", e->row->pid,
		     e->gpu->index);
	char x[24];
	if (e->row->recorded) { /* suspended: what the GPU got back */
		putf(l, GPR_CLI_TOP_WARN, "%s: %s released on this GPU",
		     e->row->suspend == GPR__PS_CHECKPOINTED ? "suspended"
							     : "suspended?",
		     fb((long long)e->row->released, x, sizeof(x)));
		if (e->row->host_known)
			putf(l, GPR_CLI_TOP_WARN, ", %s in host memory",
			     fb((long long)e->row->host_bytes, x, sizeof(x)));
		put(l, GPR_CLI_TOP_DIM, "; u resumes it", 0);
		return;
	}
	if (e->parts_known) { /* the parts it has */
		int any = 0;
		for (int k = 0; k < GPR_CLI_PS_GROUPS; k++) {
			if (e->parts[k] <= 0)
				continue;
			if (any++)
				put(l, GPR_CLI_TOP_PLAIN, ", ", 0);
			put(l, kinds[k].role, kinds[k].name, 0);
			putf(l, GPR_CLI_TOP_PLAIN, " %s",
			     fb(e->parts[k], x, sizeof(x)));
		}
		if (!any)
			put(l, GPR_CLI_TOP_DIM,
			    "its agent counts no bytes here", 0);
		return;
	}
	if (!e->agent) {
		put(l, GPR_CLI_TOP_DIM,
		    "no agent: its parts are unknown (GPURECLAIM_AGENT=1, "
		    "docs/agent.md)",
		    0);
		return;
	}
	if (e->asking) {
		put(l, GPR_CLI_TOP_DIM, "asking its agent...", 0);
		return;
	}
	/* "process N: why" without "process N: " */
	char p[40];
	int k = snprintf(p, sizeof(p), "process %u: ", e->row->pid);
	const char *why = e->agent->error;
	if (strncmp(why, p, (size_t)k) == 0)
		why += k;
	putf(l, GPR_CLI_TOP_WARN,
	     "agent: %s: ", e->agent->kind ? e->agent->kind : "error");
	put(l, GPR_CLI_TOP_WARN, why, 0);
}

/* ---------------- the whole ---------------- */

/* Where a message longer than the width breaks: after the last blank
 * that leaves its first part within it; 0 when it fits. */
static size_t message_break(const char *msg, int width)
{
	if (gpr__text_len(msg) <= width)
		return 0;
	size_t at = 0, cols = 0;
	for (size_t i = 0; msg[i] && (int)cols <= width; cols++) {
		if (msg[i] == ' ')
			at = i;
		size_t n = gpr__utf8_len(msg + i, NULL);
		i += n ? n : 1;
	}
	return at;
}

/* The bottom line: the keys, or the message; a message that does not fit
 * takes the details line above it too (a question with its bytes on a
 * narrow terminal). */
static void bottom(struct lay *l, const struct gpr_cli_top_ui *ui)
{
	new_line(l);
	if (ui->bottom[0]) {
		size_t cut = message_break(ui->bottom, l->width);
		if (cut) {
			char first[sizeof(ui->bottom)];
			snprintf(first, sizeof(first), "%.*s", (int)cut,
				 ui->bottom);
			put(l, ui->bottom_role, first, 0);
			pad(l, ui->bottom_role);
			new_line(l);
		}
		put(l, ui->bottom_role, ui->bottom + (cut ? cut + 1 : 0), 0);
		pad(l, ui->bottom_role);
		return;
	}
	putf(l, GPR_CLI_TOP_STATUS,
	     "r release h holders z suspend u resume R reclaim s sort: %s "
	     "q quit",
	     ui->sort == GPR_CLI_TOP_BY_RELEASABLE ? "releasable" : "memory");
	pad(l, GPR_CLI_TOP_STATUS);
}

/* The holders' text filling the screen. */
static void page(struct lay *l, struct gpr_cli_top_ui *ui, int height)
{
	new_line(l);
	put(l, GPR_CLI_TOP_TITLE, ui->page_title, 0);
	put(l, GPR_CLI_TOP_DIM, "  (arrows scroll, q back)", 0);
	pad(l, GPR_CLI_TOP_TITLE);
	const char *t = gpr__buf_str(&ui->page);
	int lines = 0;
	for (const char *c = t; *c; c++)
		lines += *c == '\n';
	lines += t[0] && t[strlen(t) - 1] != '\n';
	int rows = height - 2;
	if (ui->page_first > lines - rows)
		ui->page_first = lines - rows;
	if (ui->page_first < 0)
		ui->page_first = 0;
	int at = 0;
	for (const char *c = t; *c && at < ui->page_first + rows;) {
		const char *nl = strchr(c, '\n');
		size_t len = nl ? (size_t)(nl - c) : strlen(c);
		if (at >= ui->page_first) {
			char buf[1024];
			snprintf(
			    buf, sizeof(buf), "%.*s",
			    (int)(len < sizeof(buf) ? len : sizeof(buf) - 1),
			    c);
			new_line(l);
			put(l, GPR_CLI_TOP_PLAIN, buf, 0);
		}
		at++;
		c += len + (nl != NULL);
	}
	while ((int)l->s->n < height - 1)
		new_line(l);
	bottom(l, ui);
}

/* Keeps the selection on a process of the list (the first when it is
 * gone) and the scrolling so that it shows in `rows` rows. */
static size_t select_in(struct gpr_cli_top_ui *ui,
			const struct gpr_cli_top_entry *e, size_t n, int rows)
{
	size_t at = 0;
	int found = 0;
	for (size_t i = 0; ui->selected && i < n && !found; i++)
		if (e[i].row->pid == ui->sel_pid &&
		    e[i].gpu->index == ui->sel_gpu) {
			at = i;
			found = 1;
		}
	if (!found && n) {
		at = ui->first >= 0 && (size_t)ui->first < n ? (size_t)ui->first
							     : 0;
		ui->selected = 1;
		ui->sel_pid = e[at].row->pid;
		ui->sel_gpu = e[at].gpu->index;
	}
	if (rows < 1)
		rows = 1;
	if ((int)at < ui->first)
		ui->first = (int)at;
	if ((int)at >= ui->first + rows)
		ui->first = (int)at - rows + 1;
	if (ui->first > (int)n - rows)
		ui->first = (int)n - rows;
	if (ui->first < 0)
		ui->first = 0;
	return at;
}

void gpr_cli_top_view(const struct gpr_cli_top_reading *r,
		      struct gpr_cli_top_ui *ui,
		      const struct gpr_cli_top_layout *lo,
		      struct gpr_cli_top_screen *out)
{
	struct lay l = {.s = out, .width = lo->width, .ascii = lo->ascii};
	int live = lo->height > 0;
	gpr_cli_top_screen_reset(out);
	if (live && ui->paging) {
		page(&l, ui, lo->height);
		return;
	}
	struct gpr_cli_top_entry *e = NULL;
	size_t n = gpr_cli_top_entries(r, ui->sort, &e);
	int level = lo->width >= WIDE ? 2 : lo->width >= MEDIUM ? 1 : 0;
	header(&l, r, live);
	if (r->failed) {
		new_line(&l);
		put(&l, GPR_CLI_TOP_ERROR, r->error, 0);
	}
	/* How the GPUs fit: three lines each, else one, else as many as
	 * leave the processes 5 rows (the fixed lines: header, legend,
	 * column names, details, bottom). */
	size_t ng = r->round.n, max_gpus = ng;
	int lines = 3;
	if (live) {
		int fixed = 5 + (r->failed ? 1 : 0);
		int want = (int)(n < 5 ? n : 5);
		if (fixed + 3 * (int)ng + want > lo->height)
			lines = 1;
		if (lines == 1 && fixed + (int)ng + want > lo->height) {
			int fit = lo->height - fixed - want - 1;
			max_gpus = fit > 0 ? (size_t)fit : 0;
		}
	}
	gpus(&l, r, e, n, lines, max_gpus);
	legend(&l);
	columns_head(&l, level);
	if (!live) {
		for (size_t i = 0; i < n; i++) {
			process_row(&l, r, &e[i], level, 0);
			if (level < 2 || !e[i].parts_known)
				details(&l, &e[i], 1);
		}
		if (!n) {
			new_line(&l);
			put(&l, GPR_CLI_TOP_DIM, "  no processes", 0);
		}
		free(e);
		return;
	}
	int rows = lo->height - (int)out->n - 2;
	size_t at = select_in(ui, e, n, rows);
	ui->list_rows = rows;
	for (int i = 0; i < rows; i++) {
		size_t k = (size_t)ui->first + (size_t)i;
		if (k < n)
			process_row(&l, r, &e[k], level, k == at);
		else {
			new_line(&l);
			if (k == 0)
				put(&l, GPR_CLI_TOP_DIM, "  no processes", 0);
		}
	}
	/* the details line, unless the bottom's message needs it */
	if (ui->bottom[0] && message_break(ui->bottom, lo->width))
		; /* bottom() takes two lines */
	else if (n)
		details(&l, &e[at], 0);
	else
		new_line(&l);
	bottom(&l, ui);
	free(e);
}
