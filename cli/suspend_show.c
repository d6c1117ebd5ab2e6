/*
 * What a suspend or resume did, for people (binary units, one decimal)
 * and as JSON (exact bytes): cli/suspend_run.h, docs/suspend.md. Only
 * what was measured is shown; a figure that could not be read says so.
 */
#include "suspend_run.h"

#include <stdio.h>
#include <string.h>

#include "out/fmt.h"
#include "out/text.h"

#define GiB (1024.0 * 1024.0 * 1024.0)

static char *fb(uint64_t v, char *out, size_t len)
{
	return gpr__fmt_bytes(v, out, len);
}

/* The bytes a step moved per second, or 0 when unknown. */
static double rate(const struct gpr_cli_suspend_result *res)
{
	const struct gpr__suspend_report *r = &res->r;
	double bytes = 0;
	if (!r->resume && r->host_known && r->host_bytes > 0)
		bytes = (double)r->host_bytes;
	else if (!r->resume && r->released_known && r->released > 0)
		bytes = (double)r->released;
	else if (r->resume && r->released_known && r->released < 0)
		bytes = (double)-r->released;
	return r->move_s > 0 && bytes > 0 ? bytes / GiB / r->move_s : 0;
}

/* "GPU 0 3.5 GiB, GPU 1 1.0 GiB (now 12.0 GiB / 80.0 GiB used)" */
static void per_gpu(struct gpr__buf *b, const struct gpr__suspend_report *r)
{
	int first = 1;
	for (size_t i = 0; i < r->before.n && i < r->after.n; i++) {
		const struct gpr__gpu_look *x = &r->before.gpu[i],
					   *y = &r->after.gpu[i];
		if (!x->listed && !y->listed)
			continue;
		int64_t d = (int64_t)x->bytes - (int64_t)y->bytes;
		char v[24], used[24], total[24];
		gpr__buf_printf(b, "%sGPU %d %s (now %s / %s used)",
				first ? "" : ", ", x->index,
				fb((uint64_t)(d < 0 ? -d : d), v, sizeof v),
				fb(y->used, used, sizeof used),
				fb(y->total, total, sizeof total));
		first = 0;
	}
}

static void command_of(struct gpr__buf *b,
		       const struct gpr_cli_suspend_result *res)
{
	if (!res->command[0])
		return;
	gpr__buf_puts(b, " (");
	gpr__text_put(b, res->command, 60, 0);
	if (gpr__text_len(res->command) > 60)
		gpr__buf_puts(b, "...");
	gpr__buf_puts(b, ")");
}

/* "Process N (command)", and when the dry run refused, the rest of the
 * line ("would not be <verb>: why"): 1 then, else 0. */
static int dry_refused(struct gpr__buf *b,
		       const struct gpr_cli_suspend_result *res,
		       const char *verb)
{
	gpr__buf_printf(b, "Process %d", res->r.pid);
	command_of(b, res);
	if (!res->r.rc)
		return 0;
	gpr__buf_printf(b, " would not be %s: ", verb);
	gpr__text_put(b, res->r.why, 0, 0);
	gpr__buf_puts(b, "\n");
	return 1;
}

static void dry_run(struct gpr__buf *b,
		    const struct gpr_cli_suspend_result *res)
{
	const struct gpr__suspend_report *r = &res->r;
	char need[24], room[24], avail[24];
	if (dry_refused(b, res, "suspended"))
		return;
	gpr__buf_printf(b,
			" can be suspended: %s would move (NVML's figure, "
			"its CUDA context included)\n",
			fb(r->need, need, sizeof need));
	char keep[24];
	gpr__buf_printf(
	    b,
	    "  host memory: %s may be filled (%s available, %s "
	    "of it kept free)\n",
	    fb(r->room.host_room, room, sizeof room),
	    fb(r->room.mem_available, avail, sizeof avail),
	    fb(r->room.mem_available - r->room.host_room, keep, sizeof keep));
	if (r->room.cg_limited)
		gpr__buf_printf(b,
				"  its memory cgroup %s: %s may be filled "
				"(%s free under its limit)\n",
				r->room.cg_path,
				fb(r->room.cg_room, room, sizeof room),
				fb(r->room.cg_free, avail, sizeof avail));
	else
		gpr__buf_puts(b, "  its memory cgroup: no limit\n");
}

/* Whether it resumes on demand, and how it is brought back now. */
static void on_demand(struct gpr__buf *b,
		      const struct gpr_cli_suspend_result *res)
{
	const char *line = res->on_demand_line;
	char head[64];
	int n = snprintf(head, sizeof head,
			 "Process %d resumes on demand: ", res->r.pid);
	if (res->on_demand == 1) {
		if (n > 0 && strncmp(line, head, (size_t)n) == 0)
			line += n;
		gpr__buf_puts(b, "  resumed at its next CUDA call: ");
		gpr__text_put(b, line, 0, 0);
		gpr__buf_printf(b,
				"\n  gpureclaim resume --pid %d brings it back "
				"now\n",
				res->r.pid);
		return;
	}
	if (res->on_demand == -1) {
		gpr__buf_puts(b, "  not resumed on demand: ");
		gpr__text_put(b, line, 0, 0);
		gpr__buf_puts(b, "\n");
	}
	gpr__buf_printf(b, "  gpureclaim resume --pid %d brings it back\n",
			res->r.pid);
}

static void suspended(struct gpr__buf *b,
		      const struct gpr_cli_suspend_result *res)
{
	const struct gpr__suspend_report *r = &res->r;
	char v[24], h[24], t[24], s1[24], s2[24];
	gpr__buf_printf(b, "Suspended process %d", r->pid);
	command_of(b, res);
	gpr__buf_puts(b, ".\n  ");
	const char *moved = r->host_known && r->host_bytes >= 0
				? fb((uint64_t)r->host_bytes, h, sizeof h)
				: NULL;
	if (res->agent == 1 && res->cache_known)
		gpr__buf_printf(
		    b, "released %s of cache, then ",
		    fb((uint64_t)(res->cache_released > 0 ? res->cache_released
							  : 0),
		       v, sizeof v));
	if (moved)
		gpr__buf_printf(b, "moved %s of %sdata to host memory\n", moved,
				res->agent == 1 ? "live " : "");
	else
		gpr__buf_puts(b, "moved its data to host memory (how much is "
				 "unknown: its resident memory could not be "
				 "read)\n");
	if (r->released_known) {
		gpr__buf_printf(
		    b, "  released %s on the GPU: ",
		    fb((uint64_t)(r->released > 0 ? r->released : 0), v,
		       sizeof v));
		per_gpu(b, r);
		gpr__buf_puts(b, r->after.listed
				     ? "\n"
				     : "; NVML no longer lists the process\n");
	} else {
		gpr__buf_puts(b,
			      "  what the GPU released is unknown (NVML's "
			      "figure could not be read before and after)\n");
	}
	double gibs = rate(res);
	gpr__buf_printf(
	    b, "  %s until the GPU had it back (lock %s, checkpoint %s",
	    gpr__fmt_secs(r->total_s, t, sizeof t),
	    gpr__fmt_secs(r->lock_s, s1, sizeof s1),
	    gpr__fmt_secs(r->move_s, s2, sizeof s2));
	if (gibs > 0)
		gpr__buf_printf(b, " at %.1f GiB/s", gibs);
	gpr__buf_puts(b, ")\n");
	on_demand(b, res);
}

static void resumed(struct gpr__buf *b,
		    const struct gpr_cli_suspend_result *res)
{
	const struct gpr__suspend_report *r = &res->r;
	char v[24], t[24], s1[24], s2[24];
	gpr__buf_printf(b, "Resumed process %d", r->pid);
	command_of(b, res);
	if (res->suspended_known)
		gpr__buf_printf(
		    b, ", suspended for %s",
		    gpr_cli_fmt_duration(res->suspended_s, t, sizeof t));
	gpr__buf_puts(b, ".\n");
	if (r->released_known) {
		gpr__buf_printf(
		    b, "  %s back on the GPU: ",
		    fb((uint64_t)(r->released < 0 ? -r->released : 0), v,
		       sizeof v));
		per_gpu(b, r);
		gpr__buf_puts(b, "\n");
	}
	if (r->host_known && r->host_bytes < 0)
		gpr__buf_printf(b, "  %s of host memory freed\n",
				fb((uint64_t)-r->host_bytes, v, sizeof v));
	double gibs = rate(res);
	gpr__buf_printf(b, "  %s until it ran again (",
			gpr__fmt_secs(r->total_s, t, sizeof t));
	if (r->state_before == GPR__PS_CHECKPOINTED) {
		gpr__buf_printf(b, "restore %s",
				gpr__fmt_secs(r->move_s, s1, sizeof s1));
		if (gibs > 0)
			gpr__buf_printf(b, " at %.1f GiB/s", gibs);
		gpr__buf_puts(b, ", ");
	}
	gpr__buf_printf(b, "unlock %s)\n",
			gpr__fmt_secs(r->unlock_s, s2, sizeof s2));
}

static void notes(struct gpr__buf *b, const struct gpr_cli_suspend_result *res)
{
	for (int i = 0; i < res->n_notes; i++) {
		gpr__buf_puts(b, "  note: ");
		gpr__text_put(b, res->notes[i], 0, 0);
		gpr__buf_puts(b, "\n");
	}
}

void gpr_cli_suspend_text(struct gpr__buf *b,
			  const struct gpr_cli_suspend_result *res)
{
	const struct gpr__suspend_report *r = &res->r;
	if (res->dry_run && !r->resume) {
		dry_run(b, res);
	} else if (res->dry_run) {
		if (!dry_refused(b, res, "resumed"))
			gpr__buf_printf(b, " can be resumed (it is %s)\n",
					gpr__pstate_name(r->state_before));
	} else if (r->rc == 0) {
		(r->resume ? resumed : suspended)(b, res);
	} else {
		gpr__buf_puts(b, "gpureclaim ");
		gpr__buf_puts(b, r->resume ? "resume: " : "suspend: ");
		gpr__text_put(b, r->why, 0, 0);
		gpr__buf_puts(b, "\n");
	}
	notes(b, res);
}

/* ---------------- JSON ---------------- */

static void kv_opt_i64(struct gpr__json *j, const char *k, int known, int64_t v)
{
	gpr__json_key(j, k);
	if (known)
		gpr__json_i64(j, v);
	else
		gpr__json_null(j);
}

static void kv_secs(struct gpr__json *j, const char *k, double v)
{
	gpr__json_key(j, k);
	gpr__json_double(j, v, 6);
}

static void gpus(struct gpr__json *j, const struct gpr__suspend_report *r)
{
	gpr__json_key(j, "gpus");
	gpr__json_array(j);
	for (size_t i = 0; i < r->before.n; i++) {
		const struct gpr__gpu_look *x = &r->before.gpu[i];
		const struct gpr__gpu_look *y =
		    i < r->after.n ? &r->after.gpu[i] : NULL;
		if (!x->listed && !(y && y->listed))
			continue;
		gpr__json_object(j);
		gpr__json_kv_i64(j, "gpu", x->index);
		gpr__json_kv_str(j, "uuid", x->uuid);
		gpr__json_kv_u64(j, "before", x->bytes);
		kv_opt_i64(j, "after", y != NULL, y ? (int64_t)y->bytes : 0);
		kv_opt_i64(j, "released", y && x->known && y->known,
			   y ? (int64_t)x->bytes - (int64_t)y->bytes : 0);
		gpr__json_kv_bool(j, "listed_after", y && y->listed);
		gpr__json_kv_u64(j, "used_before", x->used);
		kv_opt_i64(j, "used_after", y != NULL,
			   y ? (int64_t)y->used : 0);
		gpr__json_kv_u64(j, "total", x->total);
		gpr__json_object_end(j);
	}
	gpr__json_array_end(j);
}

void gpr_cli_suspend_json(struct gpr__json *j,
			  const struct gpr_cli_suspend_result *res)
{
	const struct gpr__suspend_report *r = &res->r;
	gpr__json_object(j);
	gpr__json_kv_i64(j, "pid", r->pid);
	gpr__json_kv_str(j, "user", res->user[0] ? res->user : NULL);
	gpr__json_kv_str(j, "command", res->command[0] ? res->command : NULL);
	gpr__json_kv_bool(j, "ok", r->rc == 0);
	gpr__json_kv_str(j, "error", r->rc ? r->why : NULL);
	gpr__json_kv_str(j, "state_before", gpr__pstate_name(r->state_before));
	gpr__json_kv_str(j, "state", gpr__pstate_name(r->state_after));
	if (!r->resume) {
		gpr__json_key(j, "agent");
		gpr__json_str(j, res->agent == 1    ? "released"
				 : res->agent == -1 ? "failed"
						    : NULL);
		kv_opt_i64(j, "cache_released",
			   res->agent == 1 && res->cache_known,
			   res->cache_released);
		gpr__json_kv_u64(j, "need", r->need);
		gpr__json_key(j, "host");
		if (r->room_known) {
			gpr__json_object(j);
			gpr__json_kv_u64(j, "mem_available",
					 r->room.mem_available);
			gpr__json_kv_u64(j, "room", r->room.room);
			gpr__json_kv_str(j, "cgroup",
					 r->room.cg_limited ? r->room.cg_path
							    : NULL);
			kv_opt_i64(j, "cgroup_free", r->room.cg_limited,
				   (int64_t)r->room.cg_free);
			gpr__json_object_end(j);
		} else {
			gpr__json_null(j);
		}
		kv_opt_i64(j, "released", r->released_known, r->released);
		kv_opt_i64(j, "host_bytes", r->host_known, r->host_bytes);
		gpr__json_kv_bool(j, "recorded", res->recorded);
		gpr__json_key(j, "resume_on_demand");
		if (res->on_demand) {
			gpr__json_object(j);
			gpr__json_key(j, "watcher");
			if (res->on_demand == 1 && res->watcher > 0)
				gpr__json_u64(j, (uint64_t)res->watcher);
			else
				gpr__json_null(j);
			gpr__json_key(j, "poll");
			gpr__json_double(j, res->on_demand_poll, 3);
			gpr__json_kv_str(j, "said", res->on_demand_line);
			gpr__json_kv_bool(j, "ok", res->on_demand == 1);
			gpr__json_object_end(j);
		} else {
			gpr__json_null(j);
		}
	} else {
		gpr__json_key(j, "suspended_seconds");
		if (res->suspended_known)
			gpr__json_double(j, res->suspended_s, 3);
		else
			gpr__json_null(j);
		kv_opt_i64(j, "restored", r->released_known, -r->released);
		kv_opt_i64(j, "host_freed", r->host_known, -r->host_bytes);
	}
	gpus(j, r);
	gpr__json_key(j, "seconds");
	gpr__json_object(j);
	kv_secs(j, "lock", r->lock_s);
	kv_secs(j, r->resume ? "restore" : "checkpoint", r->move_s);
	kv_secs(j, "unlock", r->unlock_s);
	kv_secs(j, "total", r->total_s);
	gpr__json_object_end(j);
	gpr__json_key(j, "gib_per_s");
	double g = rate(res);
	if (g > 0)
		gpr__json_double(j, g, 3);
	else
		gpr__json_null(j);
	gpr__json_key(j, "notes");
	gpr__json_array(j);
	for (int i = 0; i < res->n_notes; i++)
		gpr__json_str(j, res->notes[i]);
	gpr__json_array_end(j);
	gpr__json_object_end(j);
}
