/* What `reclaim --idle` did and why: for people, and as the "idle"
 * member of the reclaim's JSON (reclaim_idle.h). */
#include "reclaim_idle.h"
#include "reclaim_idle_result.h"

#include <stdio.h>

#include "cli.h"
#include "out/fmt.h"
#include "out/text.h"

/* JSON's words, then the text's */
static const char *const decision_words[] = {
    [D_SUSPENDED] = "suspended",
    [D_WOULD] = "would_suspend",
    [D_SKIPPED] = "skipped",
    [D_FAILED] = "failed",
};
static const char *const decision_text[] = {
    [D_SUSPENDED] = "suspended",
    [D_WOULD] = "would suspend",
    [D_SKIPPED] = "skipped",
    [D_FAILED] = "FAILED",
};

static void bytes_text(struct gpr__buf *b, uint64_t v)
{
	char x[32];
	gpr__buf_printf(b, "%s (%llu bytes)", gpr__fmt_bytes(v, x, sizeof x),
			(unsigned long long)v);
}

void gpr_cli_idle_text(struct gpr__buf *b, const struct gpr_cli_idle_result *r)
{
	char d[48], x[32], y[32];
	gpr__buf_printf(b, "Idle for at least %s: ",
			gpr_cli_fmt_duration(r->o.idle_s, d, sizeof d));
	if (r->o.dry_run) {
		int would = 0;
		for (size_t i = 0; i < r->n; i++)
			would += r->procs[i].decision == D_WOULD;
		gpr__buf_printf(b,
				"%d process%s would be suspended (--dry-run)\n",
				would, would != 1 ? "es" : "");
	} else {
		gpr__buf_printf(b, "%d process%s suspended, ", r->suspended,
				r->suspended != 1 ? "es" : "");
		bytes_text(b, r->released);
		gpr__buf_puts(b, " released\n");
	}
	for (size_t k = 0; k < r->n_gpus; k++) {
		const struct idle_gpu *g = &r->gpus[k];
		gpr__buf_printf(b, "GPU %d: ", g->index);
		if (g->err) {
			gpr__buf_puts(b, "not read\n");
			continue;
		}
		gpr__buf_printf(b, "%s / %s used",
				gpr__fmt_bytes(g->used_before, x, sizeof x),
				gpr__fmt_bytes(g->total, y, sizeof y));
		if (g->has_target)
			gpr__buf_printf(b, ", target %s",
					gpr__fmt_bytes(g->target, x, sizeof x));
		gpr__buf_printf(b, "; %s %s\n",
				r->o.dry_run ? "would be" : "now",
				gpr__fmt_bytes(g->used_after, x, sizeof x));
		for (size_t i = 0; i < r->n; i++) {
			const struct idle_proc *p = &r->procs[i];
			if (p->gpu != g->index)
				continue;
			gpr__buf_printf(b, "  %7u ", p->pid);
			gpr__text_put(b, p->user_known ? p->user : "-", 10, 1);
			gpr__buf_printf(
			    b, " %10s  ",
			    p->bytes_known
				? gpr__fmt_bytes(p->bytes, x, sizeof x)
				: "n/a");
			gpr__buf_printf(
			    b, "%-16s ",
			    p->idle_s < 0
				? "idle ?"
				: gpr_cli_fmt_duration(p->idle_s, d, sizeof d));
			gpr__buf_printf(b, "%s: ", decision_text[p->decision]);
			gpr__text_put(b, p->why, 0, 0);
			if (p->decision == D_SUSPENDED && p->released_known) {
				gpr__buf_puts(b, "; released ");
				bytes_text(b, (uint64_t)(p->released_here > 0
							     ? p->released_here
							     : 0));
				if (p->host_known && p->host_bytes >= 0) {
					char h[32];
					gpr__buf_printf(
					    b, ", %s in host memory",
					    gpr__fmt_bytes(
						(uint64_t)p->host_bytes, h,
						sizeof h));
				}
			}
			gpr__buf_puts(b, "  ");
			if (p->cmd_known)
				gpr__text_put(b, p->cmd, 60, 0);
			gpr__buf_puts(b, "\n");
		}
	}
	if (r->note[0]) {
		gpr__text_put(b, r->note, 0, 0);
		gpr__buf_puts(b, "\n");
	}
}

static void opt_i64(struct gpr__json *j, const char *k, int known, int64_t v)
{
	gpr__json_key(j, k);
	if (known)
		gpr__json_i64(j, v);
	else
		gpr__json_null(j);
}

void gpr_cli_idle_json(struct gpr__json *j, const struct gpr_cli_idle_result *r)
{
	gpr__json_object(j);
	gpr__json_key(j, "idle_seconds");
	gpr__json_double(j, r->o.idle_s, 3);
	gpr__json_key(j, "target");
	if (r->o.target) {
		gpr__json_object(j);
		opt_i64(j, "bytes", r->o.target == 1,
			(int64_t)r->o.target_bytes);
		gpr__json_key(j, "percent");
		if (r->o.target == 2)
			gpr__json_double(j, r->o.target_percent, 3);
		else
			gpr__json_null(j);
		gpr__json_object_end(j);
	} else {
		gpr__json_null(j);
	}
	gpr__json_kv_i64(j, "suspended", r->suspended);
	gpr__json_kv_u64(j, "released", r->released);
	gpr__json_key(j, "gpus");
	gpr__json_array(j);
	for (size_t k = 0; k < r->n_gpus; k++) {
		const struct idle_gpu *g = &r->gpus[k];
		gpr__json_object(j);
		gpr__json_kv_i64(j, "gpu", g->index);
		gpr__json_kv_bool(j, "read", !g->err);
		gpr__json_kv_u64(j, "total", g->total);
		gpr__json_kv_u64(j, "used_before", g->used_before);
		gpr__json_kv_u64(j,
				 r->o.dry_run ? "used_would_be" : "used_after",
				 g->used_after);
		opt_i64(j, "target_bytes", g->has_target, (int64_t)g->target);
		gpr__json_key(j, "processes");
		gpr__json_array(j);
		for (size_t i = 0; i < r->n; i++) {
			const struct idle_proc *p = &r->procs[i];
			if (p->gpu != g->index)
				continue;
			gpr__json_object(j);
			gpr__json_kv_u64(j, "pid", p->pid);
			gpr__json_kv_str(j, "user",
					 p->user_known ? p->user : NULL);
			gpr__json_kv_str(j, "command",
					 p->cmd_known ? p->cmd : NULL);
			opt_i64(j, "bytes", p->bytes_known, (int64_t)p->bytes);
			gpr__json_key(j, "idle_seconds");
			if (p->idle_s >= 0)
				gpr__json_double(j, p->idle_s, 3);
			else
				gpr__json_null(j);
			gpr__json_kv_str(j, "decision",
					 decision_words[p->decision]);
			gpr__json_kv_str(j, "why", p->why);
			int done = p->decision == D_SUSPENDED;
			opt_i64(j, "released", done && p->released_known,
				p->released_here);
			opt_i64(j, "released_all_gpus",
				done && p->released_known, p->released);
			opt_i64(j, "host_bytes", done && p->host_known,
				p->host_bytes);
			gpr__json_object_end(j);
		}
		gpr__json_array_end(j);
		gpr__json_object_end(j);
	}
	gpr__json_array_end(j);
	gpr__json_kv_str(j, "note", r->note[0] ? r->note : NULL);
	gpr__json_object_end(j);
}
