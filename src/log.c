/*
 * What the library says: messages to the handle's log callback, and
 * gpr_last_error, the detail of the last error per handle per thread. Each
 * thread keeps a few slots keyed by the handle's id (never reused, so a new
 * handle at a freed handle's address does not inherit its text); a thread
 * using more handles than slots loses the oldest detail ("" then).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

#define SLOTS 4
#define TEXT 512

struct slot {
	uint64_t ctx_id; /* 0: free */
	uint64_t stamp;	 /* last write, for replacing the oldest */
	char text[TEXT];
};

static _Thread_local struct slot slots[SLOTS];
static _Thread_local uint64_t clock_;

static struct slot *find(uint64_t id)
{
	for (int i = 0; i < SLOTS; i++)
		if (slots[i].ctx_id == id)
			return &slots[i];
	return NULL;
}

void gpr__log(const gpr_ctx *ctx, int level, const char *fmt, ...)
{
	if (!ctx || !ctx->log || level > ctx->log_level)
		return;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	ctx->log(ctx->log_user, level, msg);
}

int gpr__fail(const gpr_ctx *ctx, int err, const char *fmt, ...)
{
	if (!ctx)
		return err;
	struct slot *s = find(ctx->id);
	if (!s) {
		s = &slots[0];
		for (int i = 1; i < SLOTS; i++)
			if (slots[i].stamp < s->stamp)
				s = &slots[i];
		s->ctx_id = ctx->id;
	}
	s->stamp = ++clock_;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->text, sizeof s->text, fmt, ap);
	va_end(ap);
	gpr__log(ctx, GPR_LOG_DEBUG, "%s: %s", gpr_strerror(err), s->text);
	return err;
}

int gpr__fork_check(const gpr_ctx *ctx)
{
	if (!gpr__forked(ctx))
		return 0;
	return gpr__fail(ctx, GPR_E_FORKED, "handle opened by pid %ld",
			 (long)ctx->pid);
}

const char *gpr_last_error(const gpr_ctx *ctx)
{
	if (!ctx)
		return "";
	struct slot *s = find(ctx->id);
	return s ? s->text : "";
}
