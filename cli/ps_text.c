/*
 * `gpureclaim ps` as text. On a terminal no line is longer than its width
 * (a wrapped line takes two rows, and with --watch pushes the first GPU
 * off the top), and with --watch the listing fits its height: the rows it
 * has room for are dealt to the GPUs in turn, largest figures first, and
 * "+N more" says what was left out. Colours are SGR sequences: bold GPU
 * lines, dim headers, yellow markers, red errors.
 */
#include "ps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "out/fmt.h"
#include "out/text.h"
#include "suspend.h"

#define SGR_RESET "\033[0m"
#define SGR_BOLD "\033[1m"
#define SGR_DIM "\033[2m"
#define SGR_RED "\033[31m"
#define SGR_YELLOW "\033[33m"

/* The lines being written: each built whole, then cut to the width. */
struct out {
	struct gpr__buf *b;
	struct gpr__buf line;
	int width, color;
};

static void sgr(struct out *o, const char *code)
{
	if (o->color)
		gpr__buf_puts(&o->line, code);
}

/*
 * Ends the line being built: written to b, cut at the width. The line is
 * terminal-safe text (gpr__text_put) and our own SGR sequences, which
 * take no column.
 */
static void end_line(struct out *o)
{
	const char *s = gpr__buf_str(&o->line);
	size_t len = o->line.len, i = 0;
	int cols = 0, colored = 0, cut = 0;
	while (i < len) {
		if (s[i] == '\033') { /* ESC [ ... m */
			size_t k = i + 1;
			while (k < len && s[k] != 'm')
				k++;
			k = k < len ? k + 1 : len;
			gpr__buf_putn(o->b, s + i, k - i);
			colored = 1;
			i = k;
			continue;
		}
		uint32_t cp = '?';
		size_t n = gpr__utf8_len(s + i, &cp);
		if (n == 0)
			n = 1;
		int w = gpr_cli_term_columns(cp);
		if (o->width && cols + w > o->width) {
			cut = 1;
			break;
		}
		gpr__buf_putn(o->b, s + i, n);
		cols += w;
		i += n;
	}
	if (cut && colored)
		gpr__buf_puts(o->b, SGR_RESET);
	gpr__buf_puts(o->b, "\n");
	gpr__buf_reset(&o->line);
}

static void watch_header(struct out *o, const struct gpr_cli_ps_round *r,
			 double interval)
{
	struct tm tm;
	char when[64];
	localtime_r(&r->when.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S %Z", &tm);
	sgr(o, SGR_BOLD);
	gpr__buf_printf(&o->line, "%s, every %g s, ", when, interval);
	gpr__text_put(&o->line, r->host ? r->host : "?", 0, 0);
	sgr(o, SGR_RESET);
	sgr(o, SGR_DIM);
	gpr__buf_puts(&o->line, " (Ctrl-C stops)");
	sgr(o, SGR_RESET);
	end_line(o);
}

/* "GPU 0: NAME, 1.5 GiB / 80.0 GiB used, 78.5 GiB free"; a name too long
 * for the width is cut (with "...") before the figures are. */
static void gpu_line(struct out *o, const struct gpr_cli_ps_gpu *g)
{
	const struct gpr_gpu *i = &g->info;
	char used[24], total[24], fr[24], figures[128], label[32];
	snprintf(label, sizeof(label), "GPU %d: ", g->index);
	snprintf(figures, sizeof(figures), "%s, %s / %s used, %s free",
		 i->mig ? " (MIG)" : "",
		 gpr__fmt_bytes(i->used, used, sizeof(used)),
		 gpr__fmt_bytes(i->total, total, sizeof(total)),
		 gpr__fmt_bytes(i->free, fr, sizeof(fr)));
	int room =
	    o->width ? o->width - (int)strlen(label) - (int)strlen(figures) : 0;
	int name = gpr__text_len(i->name);
	sgr(o, SGR_BOLD);
	gpr__buf_puts(&o->line, label);
	if (o->width && name > room && room > 3) {
		gpr__text_put(&o->line, i->name, room - 3, 0);
		gpr__buf_puts(&o->line, "...");
	} else {
		gpr__text_put(&o->line, i->name, 0, 0);
	}
	gpr__buf_puts(&o->line, figures);
	sgr(o, SGR_RESET);
	end_line(o);
}

static void error_line(struct out *o, const struct gpr_cli_ps_gpu *g)
{
	char msg[768];
	gpr_cli_ps_describe(g->err, g->detail, msg, sizeof(msg));
	sgr(o, SGR_RED);
	gpr__buf_printf(&o->line, "GPU %d: error: ", g->index);
	gpr__text_put(&o->line, msg, 0, 0);
	sgr(o, SGR_RESET);
	end_line(o);
}

/* Width of the USER column: the longest name shown, 4 to 16. */
static int user_width(const struct gpr_cli_ps_gpu *g, size_t rows)
{
	int uw = 4;
	for (size_t p = 0; p < rows; p++) {
		int l =
		    g->rows[p].user_known ? gpr__text_len(g->rows[p].user) : 1;
		if (l > uw)
			uw = l;
	}
	return uw > 16 ? 16 : uw;
}

/* A process gpureclaim suspended, as the driver says it is now. */
static void suspended_marker(struct out *o, const struct gpr_cli_ps_row *r)
{
	char back[24], host[24];
	gpr__fmt_bytes(r->released, back, sizeof back);
	sgr(o, SGR_YELLOW);
	switch (r->suspend) {
	case GPR__PS_CHECKPOINTED:
		gpr__buf_printf(&o->line, "<suspended: %s released", back);
		if (r->host_known)
			gpr__buf_printf(
			    &o->line, ", %s in host memory",
			    gpr__fmt_bytes(r->host_bytes, host, sizeof host));
		if (r->wake_error_time > 0) {
			gpr__buf_puts(&o->line,
				      "; its resume on demand failed: ");
			gpr__text_put(&o->line, r->wake_error, 0, 0);
		} else if (r->watcher) {
			gpr__buf_puts(&o->line, "; resumes on demand");
		}
		gpr__buf_puts(&o->line, ">");
		break;
	case GPR__PS_LOCKED:
		gpr__buf_puts(&o->line, "<locked: being suspended or resumed>");
		break;
	case GPR__PS_FAILED:
		gpr__buf_puts(&o->line,
			      "<failed: a checkpoint or restore failed>");
		break;
	default:
		gpr__buf_puts(&o->line,
			      "<suspended by gpureclaim: the driver cannot "
			      "say its state now>");
	}
	sgr(o, SGR_RESET);
	gpr__buf_puts(&o->line, " ");
}

static void row_line(struct out *o, const struct gpr_cli_ps_gpu *g,
		     const struct gpr_cli_ps_row *r, int uw)
{
	char mem[24] = "n/a", sh[16] = "n/a";
	if (r->bytes_known) {
		gpr__fmt_bytes(r->bytes, mem, sizeof(mem));
		gpr__fmt_percent(gpr_cli_ps_share(g, r), sh, sizeof(sh));
	}
	gpr__buf_printf(&o->line, "  %7u ", (unsigned)r->pid);
	gpr__text_put(&o->line, r->user_known ? r->user : "-", uw, 1);
	gpr__buf_printf(&o->line, " %10s %6s  ", mem, sh);
	/* the memory of a process that is not (or no longer) here */
	if (r->state != GPR_CLI_PID_ALIVE) {
		sgr(o, SGR_YELLOW);
		gpr__buf_puts(&o->line, r->state == GPR_CLI_PID_EXITED
					    ? "<exited>"
					    : "<not in this pid namespace>");
		sgr(o, SGR_RESET);
		if (r->cmd_known)
			gpr__buf_puts(&o->line, " ");
	}
	if (r->stray_of >= 0) {
		sgr(o, SGR_YELLOW);
		gpr__buf_printf(&o->line, "<stray context: works on GPU %d> ",
				r->stray_of);
		sgr(o, SGR_RESET);
	}
	if (r->recorded)
		suspended_marker(o, r);
	/* another user's command line may hold any byte: terminal-safe */
	if (r->cmd_known)
		gpr__text_put(&o->line, r->cmd, 0, 0);
	else if (r->state == GPR_CLI_PID_ALIVE)
		gpr__buf_puts(&o->line, "?");
	end_line(o);
}

static void more_line(struct out *o, size_t n, const char *one,
		      const char *many, const char *hint)
{
	char count[64];
	sgr(o, SGR_DIM);
	gpr__buf_printf(&o->line, "  +%s",
			gpr__fmt_count(n, one, many, count, sizeof(count)));
	gpr__buf_puts(&o->line, hint);
	sgr(o, SGR_RESET);
	end_line(o);
}

/*
 * The lines GPU g takes besides its process rows: its own, and the
 * column header ("no processes" when it has none); one for an error.
 */
static int fixed_lines(const struct gpr_cli_ps_gpu *g)
{
	return g->err ? 1 : 2;
}

/*
 * How much fits in `avail` rows: the GPUs listed (*shown; the others on
 * one "+N more" line), whether blank lines separate them (*sep), and
 * rows[g], the lines each GPU's processes get (a cut list spends one of
 * them on its "+N more" line).
 */
static void fit(const struct gpr_cli_ps_round *r, int avail, size_t *shown,
		int *sep, size_t *rows)
{
	size_t n = r->n;
	long need = 0, with_procs = 0;
	for (size_t g = 0; g < n; g++) {
		need += fixed_lines(&r->gpus[g]);
		with_procs += !r->gpus[g].err && r->gpus[g].n > 0;
	}
	*sep = need + (long)n - 1 + with_procs <= avail;
	size_t k = n;
	for (;;) {
		long used = 0;
		for (size_t g = 0; g < k; g++)
			used += fixed_lines(&r->gpus[g]);
		used += (k ? (long)k - 1 : 0) * *sep + (k < n);
		if (used <= avail || k <= 1) {
			need = used;
			break;
		}
		k--;
	}
	*shown = k;
	long budget = avail - need;
	for (size_t g = 0; g < n; g++)
		rows[g] = 0;
	for (int dealt = 1; budget > 0 && dealt;) {
		dealt = 0;
		for (size_t g = 0; g < k && budget > 0; g++) {
			if (r->gpus[g].err || rows[g] >= r->gpus[g].n)
				continue;
			rows[g]++;
			budget--;
			dealt = 1;
		}
	}
}

static void gpu_block(struct out *o, const struct gpr_cli_ps_gpu *g,
		      size_t lines, int all)
{
	if (g->err) {
		error_line(o, g);
		return;
	}
	gpu_line(o, g);
	if (g->n == 0) {
		gpr__buf_puts(&o->line, "  no processes");
		end_line(o);
		return;
	}
	size_t show = all || lines >= g->n ? g->n : lines ? lines - 1 : 0;
	if (show > 0 || all) {
		int uw = user_width(g, show);
		sgr(o, SGR_DIM);
		gpr__buf_printf(&o->line, "  %7s %-*s %10s %6s  %s", "PID", uw,
				"USER", "MEMORY", "SHARE", "COMMAND");
		sgr(o, SGR_RESET);
		end_line(o);
		for (size_t p = 0; p < show; p++)
			row_line(o, g, &g->rows[p], uw);
	}
	if (show < g->n)
		more_line(o, g->n - show, "more process", "more processes", "");
}

/* What a stray context is and what to do (a fitted listing leaves it out:
 * the row's marker says enough). */
#define STRAY_NOTE                                                             \
	"<stray context>: about a CUDA context on a GPU the process does not " \
	"work on, the missing torch.cuda.set_device(local_rank) before the "   \
	"first CUDA call (pytorch#135279); call it first in each rank"

static int any_stray(const struct gpr_cli_ps_round *r)
{
	for (size_t g = 0; g < r->n; g++)
		for (size_t p = 0; p < r->gpus[g].n; p++)
			if (r->gpus[g].rows[p].stray_of >= 0)
				return 1;
	return 0;
}

void gpr_cli_ps_text(struct gpr__buf *b, const struct gpr_cli_ps_round *r,
		     const struct gpr_cli_ps_layout *l)
{
	struct out o = {.b = b, .width = l->width, .color = l->color};
	if (l->watch > 0)
		watch_header(&o, r, l->watch);
	if (r->n == 0) {
		gpr__buf_puts(&o.line, "No GPU found.");
		end_line(&o);
	}
	size_t *rows = r->n ? calloc(r->n, sizeof(*rows)) : NULL;
	size_t shown = r->n;
	int sep = 1, all = l->height <= 0 || (r->n && !rows);
	/* the last row stays free: a newline there would scroll the screen */
	if (!all)
		fit(r, l->height - 1 - (l->watch > 0), &shown, &sep, rows);
	for (size_t g = 0; g < shown; g++) {
		if (g && sep)
			end_line(&o);
		gpu_block(&o, &r->gpus[g], all ? 0 : rows[g], all);
	}
	if (shown < r->n)
		more_line(&o, r->n - shown, "more GPU", "more GPUs",
			  " (-i INDEX lists one; a taller terminal, more)");
	if (all && any_stray(r)) {
		end_line(&o);
		gpr__buf_puts(&o.line, STRAY_NOTE);
		end_line(&o);
	}
	free(rows);
	if (o.line.oom)
		b->oom = 1;
	gpr__buf_free(&o.line);
}
