/*
 * `ps` and the processes gpureclaim suspended: NVML no longer lists
 * them, so they come from gpureclaim's records (src/suspend_record.h),
 * each shown under the GPUs it held with the driver's state of it, read
 * now (cuCheckpointProcessGetState), never taken from the record. A
 * record whose pid is gone, is another process now, or runs again is
 * removed (where it is ours to remove).
 *
 * The cost stays with those who have records: without one, this is a
 * look at the records folder (microseconds); with one, the driver is
 * loaded and initialised once per run (~0.2 s on an H200), and kept for
 * the later rounds of --watch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ps.h"
#include "suspend_host.h"
#include "suspend_run.h"

static struct gpr_cli_suspender ctl;
static int ctl_state; /* 0 not tried, 1 open, -1 cannot be */

static int driver_state(int pid)
{
	if (ctl_state == 0) {
		char err[512];
		double t0 = gpr_cli_prof_clock();
		ctl_state =
		    gpr_cli_suspend_open(&ctl, err, sizeof err) == GPR_CLI_OK
			? 1
			: -1;
		gpr_cli_prof_step(t0, "driver loaded for the records (cuInit)");
	}
	int st = GPR__PS_UNKNOWN;
	char err[256];
	if (ctl_state != 1 ||
	    gpr__suspend_state(ctl.s, pid, &st, err, sizeof err) != 0)
		return GPR__PS_UNKNOWN;
	return st;
}

/* GPU index of the round whose NVML index and UUID match, or NULL. */
static struct gpr_cli_ps_gpu *gpu_of(struct gpr_cli_ps_round *r, int index,
				     const char *uuid)
{
	for (size_t k = 0; k < r->n; k++) {
		struct gpr_cli_ps_gpu *g = &r->gpus[k];
		if (g->index == index && !g->err &&
		    (!uuid[0] || strcmp(uuid, g->info.uuid) == 0))
			return g;
	}
	return NULL;
}

static struct gpr_cli_ps_row *row_of(struct gpr_cli_ps_gpu *g, int pid)
{
	for (size_t p = 0; p < g->n; p++)
		if (g->rows[p].pid == (uint32_t)pid)
			return &g->rows[p];
	return NULL;
}

/* The record's process under each GPU it held. */
static int add_rows(struct gpr_cli_ps_round *r, const struct gpr__record *rec,
		    int state)
{
	for (size_t i = 0; i < rec->n_gpus; i++) {
		struct gpr_cli_ps_gpu *g =
		    gpu_of(r, rec->gpu[i].index, rec->gpu[i].uuid);
		if (!g)
			continue;
		struct gpr_cli_ps_row *row = row_of(g, rec->pid);
		if (!row) {
			struct gpr_cli_ps_row *rows =
			    realloc(g->rows, (g->n + 1) * sizeof *rows);
			if (!rows)
				return -1;
			g->rows = rows;
			row = &g->rows[g->n++];
			memset(row, 0, sizeof *row);
			row->pid = (uint32_t)rec->pid;
			row->bytes_known = 1;
			row->stray_of = -1;
			row->state = gpr_cli_proc_state(row->pid);
			row->user_known =
			    gpr_cli_proc_user(rec->pid, row->user,
					      sizeof row->user) == 0;
			row->cmd_known =
			    gpr_cli_proc_cmdline(rec->pid, row->cmd,
						 sizeof row->cmd) == 0;
		}
		row->suspend = state;
		row->recorded = 1;
		row->released = rec->gpu[i].bytes;
		row->host_known = rec->host_known;
		row->host_bytes = rec->host_bytes;
		row->watcher =
		    rec->watcher > 0 &&
			    gpr__proc_start(rec->watcher) == rec->watcher_start
			? rec->watcher
			: 0;
		row->wake_error_time = rec->wake_error_time;
		snprintf(row->wake_error, sizeof row->wake_error, "%s",
			 rec->wake_error);
	}
	return 0;
}

static int one_folder(struct gpr_cli_ps_round *r,
		      const struct gpr__record_folder *f)
{
	int *pids = NULL;
	size_t n = 0;
	int rc = gpr__record_pids(f->path, &pids, &n);
	int mine = f->uid == (long)getuid();
	for (size_t i = 0; rc == 0 && i < n; i++) {
		struct gpr__record rec;
		if (gpr__record_read(f->path, pids[i], &rec) != 0)
			continue; /* not a record: never trusted */
		if (!gpr__record_current(&rec, f->uid)) {
			if (mine)
				gpr__record_remove(f->path, rec.pid);
			continue;
		}
		int state = driver_state(rec.pid);
		if (state == GPR__PS_RUNNING) {
			if (mine)
				gpr__record_remove(f->path, rec.pid);
			continue;
		}
		rc = add_rows(r, &rec, state);
	}
	free(pids);
	return rc;
}

int gpr_cli_ps_suspended(struct gpr_cli_ps_round *r)
{
	struct gpr__record_folder *dirs = NULL;
	size_t n = 0;
	int rc = gpr__record_dirs(&dirs, &n);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = one_folder(r, &dirs[i]);
	free(dirs);
	return rc ? -1 : 0;
}
