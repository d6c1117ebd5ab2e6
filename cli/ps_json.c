/*
 * `gpureclaim ps --json`: one document per round on one line, so that
 * `ps --json --watch > gpu.jsonl` is a time series (docs/ps.md, "JSON
 * shape").
 */
#include "ps.h"

#include <stdio.h>
#include <time.h>

#include "out/json.h"
#include "ps_explain.h"
#include "suspend.h"

static const char *const state_names[] = {
    [GPR_CLI_PID_ALIVE] = "alive",
    [GPR_CLI_PID_EXITED] = "exited",
    [GPR_CLI_PID_OUTSIDE] = "not_in_namespace",
};

/* UTC ISO 8601 with milliseconds ("2026-11-30T11:38:41.525Z"). */
static void iso8601(const struct timespec *ts, char *iso, size_t len)
{
	struct tm tm;
	gmtime_r(&ts->tv_sec, &tm);
	size_t n = strftime(iso, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(iso + n, len - n, ".%03ldZ", ts->tv_nsec / 1000000);
}

void gpr_cli_json_when(struct gpr__json *j, const struct timespec *ts)
{
	char iso[48];
	iso8601(ts, iso, sizeof(iso));
	gpr__json_kv_str(j, "time", iso);
	gpr__json_key(j, "unix_time");
	gpr__json_ufixed(
	    j, (uint64_t)ts->tv_sec * 1000 + (uint64_t)ts->tv_nsec / 1000000,
	    3);
}

/* ps --explain: "agent", null, {"kind", "error"} or {"parts", "driver"} */
static void agent(struct gpr__json *j, const struct gpr_cli_ps_gpu *g,
		  const struct gpr_cli_ps_row *r,
		  const struct gpr_cli_ps_agents *s)
{
	const struct gpr_cli_ps_agent *a = gpr_cli_ps_agent_of(s, r->pid);
	gpr__json_key(j, "agent");
	if (!a) {
		gpr__json_null(j);
		return;
	}
	gpr__json_object(j);
	if (!a->ok) {
		gpr__json_kv_str(j, "kind", a->kind);
		gpr__json_kv_str(j, "error", a->error);
		gpr__json_object_end(j);
		return;
	}
	long long parts[GPR_CLI_PS_GROUPS], driver;
	int found = gpr_cli_ps_agent_parts(a, g->index, parts, &driver);
	gpr__json_key(j, "parts");
	gpr__json_object(j);
	for (int i = 0; i < GPR_CLI_PS_GROUPS; i++)
		gpr__json_kv_i64(j, gpr_cli_ps_group_keys[i], parts[i]);
	for (int i = 0; i < GPR_CLI_PS_GROUPS; i++) /* deprecated */
		if (gpr_cli_ps_group_old_keys[i])
			gpr__json_kv_i64(j, gpr_cli_ps_group_old_keys[i],
					 parts[i]);
	gpr__json_object_end(j);
	gpr__json_key(j, "driver");
	if (found && driver >= 0)
		gpr__json_i64(j, driver);
	else
		gpr__json_null(j);
	gpr__json_object_end(j);
}

/* ps --explain: "activity", null where NVML cannot tell, else the
 * latest sample that showed GPU work (all null: none the driver kept) */
static void activity(struct gpr__json *j, const struct gpr_cli_ps_round *rd,
		     const struct gpr_cli_ps_row *r)
{
	gpr__json_key(j, "activity");
	if (r->work != 1) {
		gpr__json_null(j);
		return;
	}
	gpr__json_object(j);
	gpr__json_key(j, "time");
	if (r->work_us) {
		struct timespec ts = {(time_t)(r->work_us / 1000000u),
				      (long)(r->work_us % 1000000u) * 1000};
		char iso[48];
		iso8601(&ts, iso, sizeof(iso));
		gpr__json_str(j, iso);
	} else {
		gpr__json_null(j);
	}
	gpr__json_key(j, "sm_util");
	if (r->work_us)
		gpr__json_u64(j, r->sm);
	else
		gpr__json_null(j);
	double idle = gpr_cli_ps_idle(rd, r);
	gpr__json_key(j, "idle_seconds");
	if (idle >= 0)
		gpr__json_double(j, idle, 3);
	else
		gpr__json_null(j);
	gpr__json_object_end(j);
}

static void process(struct gpr__json *j, const struct gpr_cli_ps_round *rd,
		    const struct gpr_cli_ps_gpu *g,
		    const struct gpr_cli_ps_row *r,
		    const struct gpr_cli_ps_agents *s)
{
	gpr__json_object(j);
	gpr__json_kv_u64(j, "pid", r->pid);
	/* a process gpureclaim suspended: the driver's state of it */
	gpr__json_kv_str(j, "state",
			 r->recorded && r->state == GPR_CLI_PID_ALIVE
			     ? gpr__pstate_name(r->suspend)
			     : state_names[r->state]);
	gpr__json_kv_str(j, "user", r->user_known ? r->user : NULL);
	gpr__json_kv_str(j, "command", r->cmd_known ? r->cmd : NULL);
	gpr__json_key(j, "bytes");
	if (r->bytes_known)
		gpr__json_u64(j, r->bytes);
	else
		gpr__json_null(j);
	gpr__json_kv_bool(j, "bytes_known", r->bytes_known);
	gpr__json_key(j, "share");
	if (r->bytes_known)
		gpr__json_double(j, gpr_cli_ps_share(g, r), 3);
	else
		gpr__json_null(j);
	gpr__json_kv_bool(j, "compute", r->compute);
	gpr__json_kv_bool(j, "graphics", r->graphics);
	/* about a context here while it works on another GPU (cli/ps.h) */
	gpr__json_key(j, "stray_context");
	if (r->stray_of >= 0) {
		gpr__json_object(j);
		gpr__json_kv_i64(j, "works_on", r->stray_of);
		gpr__json_object_end(j);
	} else {
		gpr__json_null(j);
	}
	gpr__json_key(j, "released");
	if (r->recorded)
		gpr__json_u64(j, r->released);
	else
		gpr__json_null(j);
	gpr__json_key(j, "host_bytes");
	if (r->recorded && r->host_known)
		gpr__json_u64(j, r->host_bytes);
	else
		gpr__json_null(j);
	/* its resume on demand: the watcher, the last failure */
	gpr__json_key(j, "resume_on_demand");
	if (r->recorded) {
		gpr__json_object(j);
		gpr__json_key(j, "watcher");
		if (r->watcher)
			gpr__json_u64(j, (uint64_t)r->watcher);
		else
			gpr__json_null(j);
		gpr__json_kv_str(j, "error",
				 r->wake_error_time > 0 ? r->wake_error : NULL);
		gpr__json_object_end(j);
	} else {
		gpr__json_null(j);
	}
	if (s) {
		agent(j, g, r, s);
		activity(j, rd, r);
	}
	gpr__json_object_end(j);
}

void gpr_cli_ps_json(struct gpr__buf *b, const struct gpr_cli_ps_round *r)
{
	gpr_cli_ps_json_agents(b, r, NULL);
}

void gpr_cli_ps_json_agents(struct gpr__buf *b,
			    const struct gpr_cli_ps_round *r,
			    const struct gpr_cli_ps_agents *s)
{
	struct gpr__json j;
	gpr__json_init(&j, b);
	gpr__json_object(&j);
	gpr_cli_json_when(&j, &r->when);
	gpr__json_kv_str(&j, "host", r->host);
	gpr__json_kv_str(&j, "driver_version", r->driver);
	gpr__json_key(&j, "gpus");
	gpr__json_array(&j);
	for (size_t k = 0; k < r->n; k++) {
		const struct gpr_cli_ps_gpu *g = &r->gpus[k];
		const struct gpr_gpu *i = &g->info;
		gpr__json_object(&j);
		gpr__json_kv_i64(&j, "gpu", g->index);
		gpr__json_kv_i64(&j, "index", g->index); /* deprecated */
		if (g->err) {
			char msg[768];
			gpr_cli_ps_describe(g->err, g->detail, msg,
					    sizeof(msg));
			gpr__json_kv_str(&j, "error", msg);
			gpr__json_object_end(&j);
			continue;
		}
		gpr__json_kv_str(&j, "name", i->name);
		gpr__json_kv_str(&j, "uuid", i->uuid);
		gpr__json_kv_str(&j, "pci_bus_id", i->pci_bus_id);
		gpr__json_kv_u64(&j, "total", i->total);
		gpr__json_kv_u64(&j, "used", i->used);
		gpr__json_kv_u64(&j, "free", i->free);
		gpr__json_kv_bool(&j, "mig", i->mig);
		gpr__json_kv_str(&j, "memory_info",
				 i->memory_info_v2 ? "v2" : "v1");
		gpr__json_key(&j, "processes");
		gpr__json_array(&j);
		for (size_t p = 0; p < g->n; p++)
			process(&j, r, g, &g->rows[p], s);
		gpr__json_array_end(&j);
		if (s) {
			uint64_t releasable;
			int with, silent;
			gpr_cli_ps_agents_tally(s, g, &releasable, &with,
						&silent);
			gpr__json_kv_u64(&j, "releasable", releasable);
			gpr__json_kv_u64(&j, "returnable", /* deprecated */
					 releasable);
			gpr__json_kv_i64(&j, "agents", with);
			gpr__json_kv_i64(&j, "agents_silent", silent);
		}
		gpr__json_object_end(&j);
	}
	gpr__json_array_end(&j);
	gpr__json_object_end(&j);
	gpr__buf_puts(b, "\n");
}
