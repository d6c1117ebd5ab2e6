/*
 * How `gpureclaim ps` starts and ends, where a one-shot listing spends
 * most of its time (issue 12: <= 0.75x nvidia-smi).
 *
 * - NVML's load and nvmlInit_v2 (~10 ms on an H200) run on a thread of
 *   their own, started once the options are read, while the main thread
 *   does the rest of its preparation and loads what the per-process
 *   look-ups need (the NSS modules and files behind getpwuid_r, the pid
 *   namespace test), which would otherwise come after NVML's answer.
 * - A one-shot listing ends with _exit once its output is flushed: the
 *   exit handlers and library destructors (NVML's among them) clean up
 *   what the exit makes moot. Builds with AddressSanitizer keep exit(),
 *   so the leak check still runs.
 * - GPURECLAIM_PS_VARIANT, a measurement switch for bench/ps_bench.sh
 *   (docs/ps.md, Benchmarks), picks other ways, so that one GPU run can
 *   compare them: `nvml=noattach` initialises NVML with
 *   NVML_INIT_FLAG_NO_ATTACH first (its flags then hold for the core's
 *   nvmlInit_v2); should a GPU fail under it, NVML is started again as
 *   usual and the round read again, so the output is the same.
 *   `start=serial` initialises NVML on the main thread at the first query
 *   and warms nothing (the way before); `exit=libc` ends through exit();
 *   `gpu=split` reads each GPU's facts (MIG mode among them, 0.2-0.4 ms)
 *   and its process list (0.2-0.3 ms) from two threads at once.
 */
#include "ps.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvml_abi.h"

#if defined(__SANITIZE_ADDRESS__)
#define ASAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN_BUILD 1
#endif
#endif
#ifndef ASAN_BUILD
#define ASAN_BUILD 0
#endif

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
		if (strcmp(item, "nvml") == 0)
			rc = choose(value, "attach", "noattach", &v->noattach);
		else if (strcmp(item, "start") == 0)
			rc = choose(value, "thread", "serial", &v->serial);
		else if (strcmp(item, "exit") == 0)
			rc = choose(value, "quick", "libc", &v->libc_exit);
		else if (strcmp(item, "gpu") == 0)
			rc = choose(value, "whole", "split", &v->split);
		if (rc != 0)
			goto bad;
	}
	return 0;
bad:
	fprintf(stderr,
		"gpureclaim ps: GPURECLAIM_PS_VARIANT is a list of "
		"nvml=attach|noattach, start=thread|serial, exit=quick|libc, "
		"gpu=whole|split (docs/ps.md), not '%s'\n",
		s);
	return -1;
}

/* NVML with NO_ATTACH first, when asked; then, on a thread, the core's. */
static void flags_first(struct gpr_cli_ps_start *s)
{
	if (!s->variant.noattach)
		return;
	double t0 = gpr_cli_prof_clock();
	int r = 0;
	s->flagged = gpr_cli_nvml_init_flags(GPR_NVML_INIT_FLAG_NO_ATTACH, &r);
	gpr_cli_prof_step(t0,
			  "nvmlInitWithFlags(NO_ATTACH) by the tool (%s %d)",
			  s->flagged ? "ok" : "refused, as usual then; rc", r);
}

static void *start_nvml(void *arg)
{
	struct gpr_cli_ps_start *s = arg;
	const char *was = gpr_cli_prof_thread_name();
	gpr_cli_prof_thread("nvml");
	double t0 = gpr_cli_prof_clock();
	flags_first(s);
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
	if (v->serial) {
		flags_first(s);
		return;
	}
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

void gpr_cli_ps_unflag(struct gpr_cli_ps_start *s)
{
	gpr_cli_nvml_done(s->flagged);
	s->flagged = NULL;
}

int gpr_cli_ps_end(const struct gpr_cli_ps_start *s, int code, int one_shot)
{
	gpr_cli_prof_print();
	if (!one_shot || s->variant.libc_exit || ASAN_BUILD)
		return code;
	/* stdout was flushed with the listing; a failed flush is no news
	 * now that the exit code is chosen */
	fflush(stdout);
	fflush(stderr);
	_exit(code);
}
