/*
 * The releasers of a handle and the "inside a release" marker
 * (registry.c), for the release (release.c) and the handle's close
 * (ctx.c). Internal.
 */
#ifndef GPR_REGISTRY_H
#define GPR_REGISTRY_H

#include <stdint.h>

#include "core.h"

struct gpr__releaser {
	char *name;
	char *device_name;     /* NULL: a CUDA releaser */
	struct gpr_releaser r; /* r.name, r.device_name point to the above */
};

/* Per-thread marker of the releases in progress on this thread. */
struct gpr__release_frame {
	uint64_t ctx_id;
	struct gpr__release_frame *prev;
};
void gpr__release_enter(const gpr_ctx *ctx, struct gpr__release_frame *f);
void gpr__release_leave(struct gpr__release_frame *f);
/* 1 if this thread is inside a release of ctx (a releaser callback). */
int gpr__in_release(const gpr_ctx *ctx);

/* Calls every releaser's destroy and empties the registry (gpr_close). */
void gpr__registry_clear(gpr_ctx *ctx);

#endif /* GPR_REGISTRY_H */
