/*
 * How `gpureclaim ps` starts and ends, where a one-shot listing spends
 * most of its time (issue 12: <= 0.75x nvidia-smi).
 *
 * - NVML's load and nvmlInit_v2 (~12 ms on an H200) run on a thread of
 *   their own, started once the options are read, while the main thread
 *   does the rest of its preparation and loads what the per-process
 *   look-ups need (the NSS modules and files behind getpwuid_r, the pid
 *   namespace test), which would otherwise come after NVML's answer.
 * - A one-shot listing ends as soon as its output is written: it leaves
 *   its handle open (nvmlShutdown is work the exit makes moot) and hands
 *   the kernel's release of NVML's files and mappings (~4.5 ms) to a
 *   detached process (cli/util_exit.c).
 * - GPURECLAIM_PS_VARIANT, a measurement switch for bench/ps_bench.sh
 *   (docs/ps.md, Benchmarks), picks other ways, so that one GPU run can
 *   compare them: `start=serial` initialises NVML on the main thread at
 *   the first query and warms nothing (the way before); `exit=wait`
 *   _exits without the detached process (the release is waited for),
 *   `exit=fork` makes that process with fork(), `exit=libc` ends through
 *   exit(); `gpu=split` reads each GPU's facts (MIG mode among them,
 *   0.2-0.4 ms) and its process list (0.2-0.3 ms) from two threads at
 *   once.
 *
 * (`nvml=noattach`, nvmlInitWithFlags(NVML_INIT_FLAG_NO_ATTACH) first, was
 * tried and removed: on driver 580.159.04 NVML then counts no GPU at all,
 * docs/ps.md says more.)
 */
#include "ps.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sets *flag from "key=value" if value is `a` (0) or `b` (1). */
static int choose(const char *value, const char *a, const char *b, int *flag)
{
	if (strcmp(value, a) == 0)
		*flag = 0;
	else if (strcmp(value, b) == 0)
		*flag = 1;
	else
		return -1;
	return 0;
}

/* Sets *end from the value of "exit=". */
static int choose_end(const char *value, enum gpr_cli_end *end)
{
	static const struct {
		const char *name;
		enum gpr_cli_end end;
	} ends[] = {
	    {"detach", GPR_CLI_END_DETACH},
	    {"wait", GPR_CLI_END_WAIT},
	    {"fork", GPR_CLI_END_FORK},
	    {"libc", GPR_CLI_END_LIBC},
	};
	for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
		if (strcmp(value, ends[i].name) == 0) {
			*end = ends[i].end;
			return 0;
		}
	}
	return -1;
}

int gpr_cli_ps_variant(struct gpr_cli_ps_variant *v)
{
	memset(v, 0, sizeof *v);
	const char *s = getenv("GPURECLAIM_PS_VARIANT");
	if (!s || !*s)
		return 0;
	char buf[256];
	if (strlen(s) >= sizeof buf)
		goto bad;
	snprintf(buf, sizeof buf, "%s", s);
	/* strsep, not strtok: an empty item is a mistake, not nothing */
	char *rest = buf;
	for (char *item; (item = strsep(&rest, ",")) != NULL;) {
		char *value = strchr(item, '=');
		if (!value)
			goto bad;
		*value++ = '\0';
		int rc = -1;
		if (strcmp(item, "start") == 0)
			rc = choose(value, "thread", "serial", &v->serial);
		else if (strcmp(item, "exit") == 0)
			rc = choose_end(value, &v->end);
		else if (strcmp(item, "gpu") == 0)
			rc = choose(value, "whole", "split", &v->split);
		if (rc != 0)
			goto bad;
	}
	return 0;
bad:
	fprintf(stderr,
		"gpureclaim ps: GPURECLAIM_PS_VARIANT is a list of "
		"start=thread|serial, exit=detach|wait|fork|libc, "
		"gpu=whole|split (docs/ps.md), not '%s'\n",
		s);
	return -1;
}

static void *start_nvml(void *arg)
{
	struct gpr_cli_ps_start *s = arg;
	const char *was = gpr_cli_prof_thread_name();
	gpr_cli_prof_thread("nvml");
	double t0 = gpr_cli_prof_clock();
	int n = 0;
	/* the outcome is the core's to keep: the first round asks again and
	 * gets the same answer (an NVML that failed is not tried twice) */
	(void)gpr_gpu_count(s->ctx, &n);
	gpr_cli_prof_step(t0, "NVML started (load, init, count)");
	gpr_cli_prof_thread(was); /* run here when no thread could start */
	return NULL;
}

void gpr_cli_ps_start(struct gpr_cli_ps_start *s, gpr_ctx *ctx,
		      const struct gpr_cli_ps_variant *v)
{
	memset(s, 0, sizeof *s);
	s->ctx = ctx;
	s->variant = *v;
	if (v->serial)
		return;
	s->running = pthread_create(&s->thread, NULL, start_nvml, s) == 0;
	if (!s->running) /* no thread: the same, in order */
		start_nvml(s);
}

void gpr_cli_ps_started(struct gpr_cli_ps_start *s)
{
	if (!s->running)
		return;
	double t0 = gpr_cli_prof_clock();
	pthread_join(s->thread, NULL);
	s->running = 0;
	gpr_cli_prof_step(t0, "waited for NVML's start");
}

int gpr_cli_ps_end(const struct gpr_cli_ps_start *s, int code, int one_shot)
{
	gpr_cli_prof_print();
	if (!one_shot)
		return code;
	return gpr_cli_end(code, s->variant.end);
}
