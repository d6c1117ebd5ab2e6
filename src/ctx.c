/*
 * The handle: options, the lazy opening of the CUDA driver and NVML, and
 * gpr_cuda_loaded, the one query that needs nothing else. With a log at
 * GPR_LOG_DEBUG, each NVML call and each look-up of libcuda is logged with
 * its time (`gpureclaim ps`'s profile shows where a listing's time goes).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "registry.h"
#include "sized.h"

static atomic_uint_fast64_t next_id = 1;

int gpr_open(const struct gpr_opts *opts, gpr_ctx **out)
{
	if (!out)
		return GPR_E_INVAL;
	*out = NULL;
	struct gpr_opts o;
	if (gpr__opts_copy(&o, sizeof o, opts, opts ? opts->sz : 0))
		return GPR_E_INVAL;
	gpr_ctx *ctx = calloc(1, sizeof *ctx);
	if (!ctx)
		return GPR_E_NOMEM;
	ctx->id = atomic_fetch_add(&next_id, 1);
	ctx->pid = getpid();
	/* the driver layer's one rule (option, else variable, else soname),
	 * applied now: a variable changed later does not move an open handle */
	ctx->cuda_path = strdup(gpr__cuda_library(o.cuda_library));
	ctx->nvml_path = strdup(gpr__nvml_library(o.nvml_library));
	if (!ctx->cuda_path || !ctx->nvml_path) {
		free(ctx->cuda_path);
		free(ctx->nvml_path);
		free(ctx);
		return GPR_E_NOMEM;
	}
	ctx->log = o.log;
	ctx->log_user = o.log_user;
	ctx->log_level = o.log_level;
	pthread_mutex_init(&ctx->init_lock, NULL);
	pthread_mutex_init(&ctx->map_lock, NULL);
	pthread_mutex_init(&ctx->release_lock, NULL);
	pthread_mutex_init(&ctx->reg_lock, NULL);
	atomic_init(&ctx->cuda_ready, 0);
	atomic_init(&ctx->nvml_state, 0);
	for (int i = 0; i < GPR__MAP_CAP; i++)
		ctx->nvml_of[i] = GPR__MAP_UNKNOWN;
	*out = ctx;
	return 0;
}

void gpr_close(gpr_ctx *ctx)
{
	if (!ctx)
		return;
	int forked = gpr__forked(ctx);
	gpr__registry_clear(ctx);
	/* In a forked child the vendor libraries' state is the parent's, and
	 * a lock a parent thread held at fork stays held: touch neither. */
	if (!forked) {
		if (atomic_load(&ctx->nvml_state) == 1)
			gpr__nvml_close(&ctx->nvml);
		if (atomic_load(&ctx->cuda_ready))
			gpr__cuda_close(&ctx->cuda);
		pthread_mutex_destroy(&ctx->init_lock);
		pthread_mutex_destroy(&ctx->map_lock);
		pthread_mutex_destroy(&ctx->release_lock);
		pthread_mutex_destroy(&ctx->reg_lock);
	}
	free(ctx->cuda_path);
	free(ctx->nvml_path);
	free(ctx);
}

static int timed(const gpr_ctx *ctx)
{
	return ctx->log && ctx->log_level >= GPR_LOG_DEBUG;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int gpr__ensure_cuda(gpr_ctx *ctx, char *err, size_t errlen)
{
	if (atomic_load_explicit(&ctx->cuda_ready, memory_order_acquire))
		return 0;
	pthread_mutex_lock(&ctx->init_lock);
	int rc = 0;
	double t0 = 0, ms = -1;
	if (!atomic_load_explicit(&ctx->cuda_ready, memory_order_relaxed)) {
		t0 = timed(ctx) ? now_ms() : 0;
		rc = gpr__cuda_open(&ctx->cuda, ctx->cuda_path, err, errlen);
		ms = timed(ctx) ? now_ms() - t0 : -1;
		if (rc == 0)
			atomic_store_explicit(&ctx->cuda_ready, 1,
					      memory_order_release);
	}
	pthread_mutex_unlock(&ctx->init_lock);
	/* after the unlock, as in gpr__ensure_nvml */
	if (ms >= 0)
		gpr__log(ctx, GPR_LOG_DEBUG,
			 "CUDA look-up of %s (RTLD_NOLOAD): %.3f ms, %s",
			 ctx->cuda.path, ms,
			 rc == 0		  ? "loaded"
			 : rc == GPR_E_NOT_LOADED ? "not loaded"
						  : gpr_errname(rc));
	return rc;
}

int gpr__cuda_count(gpr_ctx *ctx, int *count)
{
	char err[GPR__ERRLEN] = "";
	*count = 0;
	int rc = gpr__ensure_cuda(ctx, err, sizeof err);
	if (rc)
		return rc == GPR_E_NOT_LOADED
			   ? rc
			   : gpr__fail(ctx, rc, "CUDA driver: %s", err);
	rc = gpr__cuda_device_count(&ctx->cuda, count, err, sizeof err);
	if (rc)
		return gpr__fail(ctx, rc, "cuDeviceGetCount: %s", err);
	return 0;
}

/* NVML's steps, as debug messages: "NVML <call>[ GPU i]: <ms> ms[, why]". */
static void nvml_step(void *user, const char *call, int index, double ms,
		      nvmlReturn_t r)
{
	gpr_ctx *ctx = user;
	if (ctx->nvml_opening) {
		/* the opening thread, under init_lock: kept for later */
		if (ctx->n_nvml_notes < 2) {
			struct gpr__nvml_note *n =
			    &ctx->nvml_notes[ctx->n_nvml_notes++];
			snprintf(n->call, sizeof n->call, "%s", call);
			n->ms = ms;
			n->r = r;
		}
		return;
	}
	char gpu[24] = "", why[GPR__ERRLEN + 2] = "";
	if (index >= 0)
		snprintf(gpu, sizeof gpu, " GPU %d", index);
	if (r != NVML_SUCCESS) {
		char what[GPR__ERRLEN];
		gpr__nvml_describe(&ctx->nvml, r, what, sizeof what);
		snprintf(why, sizeof why, ", %s", what);
	}
	gpr__log(ctx, GPR_LOG_DEBUG, "NVML %s%s: %.3f ms%s", call, gpu, ms,
		 why);
}

int gpr__ensure_nvml(gpr_ctx *ctx, char *err, size_t errlen)
{
	int st = atomic_load_explicit(&ctx->nvml_state, memory_order_acquire);
	if (st == 0) {
		int failed = 0, notes = 0;
		pthread_mutex_lock(&ctx->init_lock);
		st = atomic_load_explicit(&ctx->nvml_state,
					  memory_order_relaxed);
		if (st == 0) {
			ctx->nvml_opening = 1;
			int rc = gpr__nvml_open_timed(
			    &ctx->nvml, ctx->nvml_path,
			    timed(ctx) ? nvml_step : NULL, ctx, ctx->nvml_error,
			    sizeof ctx->nvml_error);
			ctx->nvml_opening = 0;
			notes = ctx->n_nvml_notes;
			st = rc == 0 ? 1 : rc;
			failed = rc != 0;
			atomic_store_explicit(&ctx->nvml_state, st,
					      memory_order_release);
		}
		pthread_mutex_unlock(&ctx->init_lock);
		for (int i = 0; i < notes; i++)
			nvml_step(ctx, ctx->nvml_notes[i].call, -1,
				  ctx->nvml_notes[i].ms, ctx->nvml_notes[i].r);
		/* Logged after the unlock: the callback may query this handle,
		 * which would otherwise wait on the lock this thread holds. */
		if (failed)
			gpr__log(ctx, GPR_LOG_INFO, "NVML: %s (%s)",
				 gpr_strerror(st), ctx->nvml_error);
	}
	if (st == 1)
		return 0;
	if (err && errlen)
		snprintf(err, errlen, "%s", ctx->nvml_error);
	return st;
}

int gpr_cuda_loaded(gpr_ctx *ctx)
{
	if (!ctx)
		return GPR_E_INVAL;
	int rc = gpr__fork_check(ctx);
	if (rc)
		return rc;
	char err[GPR__ERRLEN] = "";
	rc = gpr__ensure_cuda(ctx, err, sizeof err);
	if (rc == GPR_E_NOT_LOADED)
		return 0;
	if (rc)
		return gpr__fail(ctx, rc, "%s", err);
	return 1;
}
