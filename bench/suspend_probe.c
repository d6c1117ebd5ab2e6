/*
 * The driver's bare checkpoint and restore of other processes, through
 * the driver layer (src/driver/checkpoint.c), each step timed, with what
 * the target's threads did meanwhile: for bench/suspend_bench.py and the
 * speed experiments of docs/suspend.md (GPU machine).
 *
 *   suspend_probe --info
 *       the driver's version, which checkpoint calls it has (custom
 *       storage: cuCheckpointOperationComplete, CUDA 13.4), the THP mode,
 *       one JSON line
 *   suspend_probe [--lock-timeout MS] [--hold SECONDS] PID [PID...]
 *       lock and checkpoint every PID at once (a thread each), then
 *       restore and unlock them at once; one JSON line per PID:
 *       {"pid", "lock", "checkpoint", "restore", "unlock" (seconds),
 *        "rss_before", "rss_checkpointed", "rss_after" (VmRSS bytes),
 *        "checkpoint_cpu" / "restore_cpu": {"utime", "stime" (seconds of
 *        its threads' CPU during the step), "minflt", "majflt"},
 *        "state": the driver's after it all, "error": null or the line}
 *       and a last line {"wall_checkpoint", "wall_restore"} of the
 *       concurrent steps. --hold waits that long while checkpointed.
 *   suspend_probe --only checkpoint|restore PID...
 *       one half (lock+checkpoint, or restore+unlock), for a bench that
 *       does the other with gpureclaim.
 *
 * The target's CPU and page faults say where the copy's time goes: a
 * checkpoint that faults once per 4 KiB page and burns one core in
 * system time is bound by the target's page faults, not by the link.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"
#include "gpureclaim.h"
#include "suspend_host.h"

#define MAX_PIDS 64

struct cpu {
	double utime, stime;
	unsigned long long minflt, majflt;
};

struct job {
	int pid;
	unsigned lock_ms;
	int only; /* 0 both, 1 checkpoint, 2 restore */
	double lock, checkpoint, restore, unlock;
	unsigned long long rss_before, rss_mid, rss_after;
	struct cpu c0, c1, c2, c3;
	int state;
	char error[512];
};

static struct gpr__cuda cuda;
static pthread_barrier_t barrier;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The CPU time and faults of every thread of pid (/proc/PID/stat sums
 * its threads). */
static void cpu_of(int pid, struct cpu *c)
{
	memset(c, 0, sizeof *c);
	char path[64], buf[2048];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	if (!p)
		return;
	/* after ") ": state(3) ... minflt(10) cminflt(11) majflt(12)
	 * cmajflt(13) utime(14) stime(15) */
	unsigned long long v[16] = {0};
	p += 2;
	for (int field = 3; field <= 15 && p; field++) {
		v[field] = strtoull(p, NULL, 10);
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	double hz = (double)sysconf(_SC_CLK_TCK);
	c->minflt = v[10];
	c->majflt = v[12];
	c->utime = (double)v[14] / hz;
	c->stime = (double)v[15] / hz;
}

static unsigned long long rss(int pid)
{
	uint64_t b = 0;
	return gpr__proc_rss(pid, &b) == 0 ? b : 0;
}

/* One target's steps; every thread meets the barriers whatever fails,
 * so the steps of all start together. */
static void *run(void *arg)
{
	struct job *j = arg;
	CUresult res;
	char e[GPR__ERRLEN];
	double t;
	int ok = 1;
	j->rss_before = rss(j->pid);
	cpu_of(j->pid, &j->c0);
	if (j->only != 2) {
		pthread_barrier_wait(&barrier);
		t = now();
		ok = gpr__ckpt_lock(&cuda, j->pid, j->lock_ms, &res, e,
				    sizeof e) == 0;
		j->lock = now() - t;
		t = now();
		if (ok && gpr__ckpt_checkpoint(&cuda, j->pid, &res, e,
					       sizeof e) != 0) {
			ok = 0;
			char ue[GPR__ERRLEN];
			gpr__ckpt_unlock(&cuda, j->pid, &res, ue, sizeof ue);
		}
		j->checkpoint = ok ? now() - t : 0;
		if (!ok)
			snprintf(j->error, sizeof j->error, "%s", e);
	}
	j->rss_mid = rss(j->pid);
	cpu_of(j->pid, &j->c1);
	if (j->only != 1) {
		pthread_barrier_wait(&barrier);
		cpu_of(j->pid, &j->c2);
		t = now();
		if (ok && gpr__ckpt_restore(&cuda, j->pid, NULL, 0, &res, e,
					    sizeof e) != 0) {
			ok = 0;
			snprintf(j->error, sizeof j->error, "%s", e);
		}
		j->restore = ok ? now() - t : 0;
		cpu_of(j->pid, &j->c3);
		t = now();
		if (ok &&
		    gpr__ckpt_unlock(&cuda, j->pid, &res, e, sizeof e) != 0)
			snprintf(j->error, sizeof j->error, "%s", e);
		j->unlock = ok ? now() - t : 0;
	}
	j->rss_after = rss(j->pid);
	gpr__ckpt_state(&cuda, j->pid, &j->state, &res, e, sizeof e);
	return NULL;
}

static void print_cpu(const char *name, const struct cpu *a,
		      const struct cpu *b)
{
	printf(",\"%s\":{\"utime\":%.3f,\"stime\":%.3f,\"minflt\":%llu,"
	       "\"majflt\":%llu}",
	       name, b->utime - a->utime, b->stime - a->stime,
	       b->minflt - a->minflt, b->majflt - a->majflt);
}

static int info(void)
{
	int v = 0;
	char e[GPR__ERRLEN], thp[128] = "?";
	gpr__cuda_driver_version(&cuda, &v, e, sizeof e);
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
	if (f) {
		if (!fgets(thp, sizeof thp, f))
			thp[0] = '\0';
		thp[strcspn(thp, "\n")] = '\0';
		fclose(f);
	}
	const char *missing = gpr__ckpt_missing(&cuda);
	printf("{\"cuda_version\":%d,\"checkpoint_api\":%s,\"missing\":", v,
	       missing ? "false" : "true");
	if (missing)
		printf("\"%s\"", missing);
	else
		printf("null");
	/* CUDA 13.4's custom storage: the controller copies the memory */
	printf(",\"custom_storage\":%s,\"thp\":\"%s\"}\n",
	       dlsym(cuda.lib, "cuCheckpointOperationComplete") ? "true"
								: "false",
	       thp);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned lock_ms = 30000;
	double hold = 0;
	int only = 0, n = 0, want_info = 0;
	static struct job jobs[MAX_PIDS];
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--info") == 0)
			want_info = 1;
		else if (strcmp(argv[i], "--lock-timeout") == 0 && i + 1 < argc)
			lock_ms = (unsigned)atoi(argv[++i]);
		else if (strcmp(argv[i], "--hold") == 0 && i + 1 < argc)
			hold = atof(argv[++i]);
		else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
			only = strcmp(argv[++i], "checkpoint") == 0 ? 1 : 2;
		else if (n < MAX_PIDS && atoi(argv[i]) > 0)
			jobs[n++].pid = atoi(argv[i]);
		else {
			fprintf(stderr,
				"usage: suspend_probe --info | [--lock-timeout "
				"MS] [--hold S] [--only checkpoint|restore] "
				"PID...\n");
			return 2;
		}
	}
	char e[GPR__ERRLEN];
	if (gpr__cuda_load(&cuda, NULL, e, sizeof e) != 0 ||
	    gpr__cuda_init(&cuda, e, sizeof e) != 0) {
		printf("{\"error\":\"%s\"}\n", e);
		return 1;
	}
	if (want_info)
		return info();
	if (!n || gpr__ckpt_missing(&cuda)) {
		printf("{\"error\":\"no pid, or no checkpoint API\"}\n");
		return 1;
	}
	pthread_barrier_init(&barrier, NULL, (unsigned)n + 1);
	pthread_t th[MAX_PIDS];
	for (int i = 0; i < n; i++) {
		jobs[i].lock_ms = lock_ms;
		jobs[i].only = only;
		pthread_create(&th[i], NULL, run, &jobs[i]);
	}
	double t0 = now(), t1 = t0, t2;
	if (only != 2) {
		pthread_barrier_wait(&barrier); /* all start the checkpoint */
		t0 = now();
	}
	if (only != 1) {
		pthread_barrier_wait(&barrier); /* all have checkpointed */
		t1 = now();
		if (hold > 0)
			usleep((useconds_t)(hold * 1e6));
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	t2 = now();
	for (int i = 0; i < n; i++) {
		struct job *j = &jobs[i];
		printf("{\"pid\":%d,\"lock\":%.6f,\"checkpoint\":%.6f,"
		       "\"restore\":%.6f,\"unlock\":%.6f,\"rss_before\":%llu,"
		       "\"rss_checkpointed\":%llu,\"rss_after\":%llu",
		       j->pid, j->lock, j->checkpoint, j->restore, j->unlock,
		       j->rss_before, j->rss_mid, j->rss_after);
		print_cpu("checkpoint_cpu", &j->c0, &j->c1);
		print_cpu("restore_cpu", &j->c2, &j->c3);
		printf(",\"state\":%d,\"error\":", j->state);
		if (j->error[0])
			printf("\"%s\"}\n", j->error);
		else
			printf("null}\n");
	}
	printf("{\"wall_checkpoint\":%.6f,\"wall_restore\":%.6f}\n",
	       only == 2 ? 0 : (only == 1 ? t2 : t1) - t0,
	       only == 1 ? 0 : t2 - t1);
	gpr__cuda_close(&cuda);
	return 0;
}
