/*
 * The releaser registry, its listing, and the per-thread "inside a release"
 * marker that turns a releaser's call back into its own handle into
 * GPR_E_BUSY instead of a deadlock on the release lock. The array changes
 * only under both release_lock (so never during a release, which walks it
 * without reg_lock) and reg_lock (so readers outside a release need only
 * that one, for microseconds).
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "registry.h"
#include "sized.h"

static _Thread_local struct gpr__release_frame *frames;

void gpr__release_enter(const gpr_ctx *ctx, struct gpr__release_frame *f)
{
	f->ctx_id = ctx->id;
	f->prev = frames;
	frames = f;
}

void gpr__release_leave(struct gpr__release_frame *f)
{
	frames = f->prev;
}

int gpr__in_release(const gpr_ctx *ctx)
{
	for (struct gpr__release_frame *f = frames; f; f = f->prev)
		if (f->ctx_id == ctx->id)
			return 1;
	return 0;
}

static struct gpr__releaser *find(gpr_ctx *ctx, const char *name)
{
	for (size_t i = 0; i < ctx->n_rel; i++)
		if (strcmp(ctx->rel[i].name, name) == 0)
			return &ctx->rel[i];
	return NULL;
}

/* Fork and re-entry checks of register/unregister; 0 or the error. */
static int may_change(gpr_ctx *ctx, const char *what, const char *name)
{
	int rc = gpr__fork_check(ctx);
	if (rc)
		return gpr__fail(ctx, rc, "%s(%s)", what, name);
	if (gpr__in_release(ctx))
		return gpr__fail(ctx, GPR_E_BUSY,
				 "%s(%s) called from inside a releaser", what,
				 name);
	return 0;
}

static void free_entry(struct gpr__releaser *e)
{
	free(e->name);
	free(e->device_name);
}

int gpr_register(gpr_ctx *ctx, const struct gpr_releaser *r)
{
	if (!ctx || !r)
		return GPR_E_INVAL;
	struct gpr_releaser copy;
	if (gpr__opts_copy(&copy, sizeof copy, r, r->sz))
		return gpr__fail(ctx, GPR_E_INVAL, "releaser: bad sz %zu",
				 r->sz);
	if (!copy.name || !*copy.name)
		return gpr__fail(ctx, GPR_E_INVAL, "releaser without a name");
	if (copy.device_name && !*copy.device_name)
		return gpr__fail(ctx, GPR_E_INVAL,
				 "releaser %s: empty device_name (NULL for "
				 "CUDA GPUs)",
				 copy.name);
	int rc = may_change(ctx, "gpr_register", copy.name);
	if (rc)
		return rc;
	struct gpr__releaser e = {.name = strdup(copy.name)};
	if (copy.device_name)
		e.device_name = strdup(copy.device_name);
	if (!e.name || (copy.device_name && !e.device_name)) {
		free_entry(&e);
		return GPR_E_NOMEM;
	}
	e.r = copy;
	e.r.name = e.name;
	e.r.device_name = e.device_name;
	pthread_mutex_lock(&ctx->release_lock);
	pthread_mutex_lock(&ctx->reg_lock);
	if (find(ctx, e.name)) {
		rc = gpr__fail(ctx, GPR_E_EXISTS, "releaser %s", e.name);
	} else if (ctx->n_rel == ctx->cap_rel) {
		size_t cap = ctx->cap_rel ? ctx->cap_rel * 2 : 8;
		void *p = realloc(ctx->rel, cap * sizeof *ctx->rel);
		if (!p)
			rc = GPR_E_NOMEM;
		else {
			ctx->rel = p;
			ctx->cap_rel = cap;
		}
	}
	if (rc == 0)
		ctx->rel[ctx->n_rel++] = e;
	pthread_mutex_unlock(&ctx->reg_lock);
	pthread_mutex_unlock(&ctx->release_lock);
	if (rc)
		free_entry(&e);
	return rc;
}

int gpr_unregister(gpr_ctx *ctx, const char *name)
{
	if (!ctx || !name)
		return GPR_E_INVAL;
	int rc = may_change(ctx, "gpr_unregister", name);
	if (rc)
		return rc;
	pthread_mutex_lock(&ctx->release_lock);
	pthread_mutex_lock(&ctx->reg_lock);
	struct gpr__releaser *e = find(ctx, name);
	struct gpr__releaser gone = {0};
	if (e) {
		gone = *e;
		size_t i = (size_t)(e - ctx->rel);
		memmove(e, e + 1, (ctx->n_rel - i - 1) * sizeof *e);
		ctx->n_rel--;
	}
	pthread_mutex_unlock(&ctx->reg_lock);
	pthread_mutex_unlock(&ctx->release_lock);
	if (!e)
		return gpr__fail(ctx, GPR_E_NOT_FOUND, "no releaser named %s",
				 name);
	/* destroy runs outside the locks: it may take its own locks. */
	if (gone.r.destroy)
		gone.r.destroy(gone.r.data);
	free_entry(&gone);
	return 0;
}

int gpr_releaser_count(gpr_ctx *ctx, size_t *n)
{
	if (!ctx || !n)
		return GPR_E_INVAL;
	*n = 0;
	int rc = gpr__fork_check(ctx);
	if (rc)
		return rc;
	pthread_mutex_lock(&ctx->reg_lock);
	*n = ctx->n_rel;
	pthread_mutex_unlock(&ctx->reg_lock);
	return 0;
}

int gpr_releaser_name(gpr_ctx *ctx, size_t i, char **name)
{
	if (!ctx || !name)
		return GPR_E_INVAL;
	*name = NULL;
	int rc = gpr__fork_check(ctx);
	if (rc)
		return rc;
	size_t n;
	pthread_mutex_lock(&ctx->reg_lock);
	n = ctx->n_rel;
	if (i < n && !(*name = strdup(ctx->rel[i].name)))
		rc = GPR_E_NOMEM;
	pthread_mutex_unlock(&ctx->reg_lock);
	if (i >= n)
		return gpr__fail(ctx, GPR_E_RANGE, "releaser %zu of %zu", i, n);
	return rc;
}

void gpr__registry_clear(gpr_ctx *ctx)
{
	for (size_t i = 0; i < ctx->n_rel; i++) {
		if (ctx->rel[i].r.destroy)
			ctx->rel[i].r.destroy(ctx->rel[i].r.data);
		free_entry(&ctx->rel[i]);
	}
	free(ctx->rel);
	ctx->rel = NULL;
	ctx->n_rel = ctx->cap_rel = 0;
}
