/*
 * The releaser registry and the per-thread "inside a release" marker that
 * turns a releaser's call back into its own handle into GPR_E_BUSY instead
 * of a deadlock on the release lock.
 */
#include <stdlib.h>
#include <string.h>

#include "ctx.h"

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
	if (gpr__forked(ctx))
		return gpr__fail(ctx, GPR_E_FORKED, "gpr_register(%s)",
				 copy.name);
	if (gpr__in_release(ctx))
		return gpr__fail(ctx, GPR_E_BUSY,
				 "gpr_register(%s) from inside a release",
				 copy.name);
	char *name = strdup(copy.name);
	if (!name)
		return GPR_E_NOMEM;
	pthread_mutex_lock(&ctx->release_lock);
	int rc = 0;
	if (find(ctx, name)) {
		rc = gpr__fail(ctx, GPR_E_EXISTS, "releaser %s", name);
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
	if (rc == 0) {
		struct gpr__releaser *e = &ctx->rel[ctx->n_rel++];
		e->name = name;
		e->r = copy;
		e->r.name = name;
		name = NULL;
	}
	pthread_mutex_unlock(&ctx->release_lock);
	free(name);
	return rc;
}

int gpr_unregister(gpr_ctx *ctx, const char *name)
{
	if (!ctx || !name)
		return GPR_E_INVAL;
	if (gpr__forked(ctx))
		return gpr__fail(ctx, GPR_E_FORKED, "gpr_unregister(%s)", name);
	if (gpr__in_release(ctx))
		return gpr__fail(ctx, GPR_E_BUSY,
				 "gpr_unregister(%s) from inside a release",
				 name);
	pthread_mutex_lock(&ctx->release_lock);
	struct gpr__releaser *e = find(ctx, name);
	struct gpr__releaser gone = {0};
	if (e) {
		gone = *e;
		size_t i = (size_t)(e - ctx->rel);
		memmove(e, e + 1, (ctx->n_rel - i - 1) * sizeof *e);
		ctx->n_rel--;
	}
	pthread_mutex_unlock(&ctx->release_lock);
	if (!e)
		return gpr__fail(ctx, GPR_E_NOT_FOUND, "no releaser named %s",
				 name);
	/* destroy runs outside the lock: it may take its own locks. */
	if (gone.r.destroy)
		gone.r.destroy(gone.r.data);
	free(gone.name);
	return 0;
}

void gpr__registry_clear(gpr_ctx *ctx)
{
	for (size_t i = 0; i < ctx->n_rel; i++) {
		if (ctx->rel[i].r.destroy)
			ctx->rel[i].r.destroy(ctx->rel[i].r.data);
		free(ctx->rel[i].name);
	}
	free(ctx->rel);
	ctx->rel = NULL;
	ctx->n_rel = ctx->cap_rel = 0;
}
