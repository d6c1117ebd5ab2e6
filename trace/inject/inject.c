/*
 * libgpureclaim_trace.so, the tracer: its exports (include/
 * gpureclaim_trace.h) and which front end records.
 *
 * Lifecycle:
 *   - Preloaded (`gpureclaim trace`, the default backend): the interposer
 *     (inject_preload.c) starts the session at the first driver call it
 *     records; nothing here runs before.
 *   - Loaded by the CUDA driver from CUDA_INJECTION64_PATH (`gpureclaim
 *     trace --backend=cupti`, and beside the interposer with
 *     --backend=auto): libcuda calls InitializeInjection() once, during
 *     cuInit. If the interposer is live in the process it records and
 *     CUPTI is left alone; otherwise (LD_PRELOAD was not applied: a
 *     launcher that scrubs the environment) CUPTI records: load,
 *     subscribe, enable the callbacks, open the log.
 *   - Loaded by a running program (gpureclaim.trace in Python): it calls
 *     gpureclaim_trace_start / _stop.
 * The writer flushes at exit and on SIGINT/SIGTERM (inject_writer.c).
 *
 * Any failure says one "gpureclaim-trace: ..." line (or, for a program's
 * gpureclaim_trace_start, returns it) and leaves the program running
 * untraced; this library never exits or aborts.
 *
 * A setuid or setgid program (secure execution, AT_SECURE) is never
 * traced: its environment belongs to the user who started it, and the
 * paths in it would make this library load code and create files with
 * the program's privileges (gpr_inj_session_secure). Paths are also read
 * with secure_getenv.
 */
#include "tracer.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../format/trace_ops.h"
#include "gpureclaim_trace.h"
#include "sized.h"
#include "callers.h"
#include "frontend.h"
#include "session.h"
#include "sizes.h"

/* The result codes can be told from -errno (-1..-4095) and from the
 * core's GPR_E_* (-10001 and below, above -20000). */
#define GPR_INJ_X_APART(name, value, msg)                                      \
	_Static_assert((value) == 0 || (value) < -20000,                       \
		       #name " collides with -errno or a GPR_E_* code");
GPURECLAIM_TRACE_RESULTS(GPR_INJ_X_APART)
#undef GPR_INJ_X_APART

/*
 * The session's state besides the writer's, under the session lock:
 * whether it is paused, whether CUPTI records for it (so pausing has
 * callbacks to turn off).
 */
static int paused;
static int cupti_recording;

/* Makes this library's exports visible to dlsym(RTLD_DEFAULT, ...) when
 * it was loaded RTLD_LOCAL (by the driver, or by a program). */
static void make_global(void)
{
	Dl_info di;
	if (dladdr((const void *)make_global, &di) && di.dli_fname)
		dlopen(di.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
}

/* The CUPTI session `gpureclaim trace` asked for, in the driver's cuInit. */
static void init_injection(void)
{
	if (gpr_inj_session_secure())
		return;
	const char *be = secure_getenv("GPURECLAIM_TRACE_BACKEND");
	make_global();
	if (gpr_inj_preload_live() && !(be && strcmp(be, "cupti") == 0))
		return; /* the interposer records (or is dormant) */
	if (be && strcmp(be, "interpose") == 0) {
		gpr_inj_say("the interposer is not in this process "
			    "(LD_PRELOAD was not applied); nothing is "
			    "recorded: use --backend=cupti or auto");
		return;
	}
	char path[GPR_TRACE_MAX_PATH + 1];
	if (gpr_inj_session_default_path(path, sizeof(path)) < 0)
		return;
	/*
	 * GPURECLAIM_TRACE_INJECT_ONLY: loaded by the driver, the log open,
	 * CUPTI never loaded: what the injection alone costs, to tell it
	 * from what CUPTI's subscription costs (SUBSCRIBE_ONLY).
	 */
	int inject_only = gpr_inj_switch("GPURECLAIM_TRACE_INJECT_ONLY");
	gpr_inj_session_lock();
	if (!gpr_inj_session_open() &&
	    (inject_only || gpr_inj_cupti_attach(NULL) == 0)) {
		if (gpr_inj_session_start(GPR_INJ_CUPTI, path, 1,
					  "gpureclaim trace", NULL, NULL) < 0) {
			if (!inject_only)
				gpr_inj_cupti_detach();
		} else {
			cupti_recording =
			    !inject_only && !gpr_inj_cupti_subscribe_only();
		}
	}
	gpr_inj_session_unlock();
}

/*
 * Called by libcuda once it has loaded this library. Returns 1 in every
 * case: a tracing failure is reported on stderr and must not fail cuInit.
 */
GPR_EXPORT int InitializeInjection(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, init_injection);
	return 1;
}

/* 1 while a session records or is paused in this process. */
static int session(void)
{
	return gpr_inj_session_open() &&
	       (paused || atomic_load(&gpr_inj_state.active) != GPR_INJ_NONE);
}

GPR_EXPORT int gpureclaim_trace_pause(void)
{
	int rc = 1;
	gpr_inj_session_lock();
	if (!session() ||
	    (gpr_inj_state.backend == GPR_INJ_CUPTI && !cupti_recording)) {
		rc = GPURECLAIM_TRACE_E_NOT_TRACED;
	} else if (!paused) {
		atomic_store(&gpr_inj_state.active, GPR_INJ_NONE);
		if (gpr_inj_state.backend == GPR_INJ_CUPTI)
			gpr_inj_cupti_pause();
		paused = 1;
		rc = 0;
	}
	gpr_inj_session_unlock();
	return rc;
}

GPR_EXPORT int gpureclaim_trace_resume(void)
{
	int rc = 1;
	gpr_inj_session_lock();
	if (!session() ||
	    (gpr_inj_state.backend == GPR_INJ_CUPTI && !cupti_recording)) {
		rc = GPURECLAIM_TRACE_E_NOT_TRACED;
	} else if (paused) {
		rc = 0;
		if (gpr_inj_state.backend == GPR_INJ_CUPTI &&
		    gpr_inj_cupti_resume() < 0)
			rc = GPURECLAIM_TRACE_E_UNAVAILABLE;
		if (rc == 0) {
			paused = 0;
			atomic_store(&gpr_inj_state.active,
				     gpr_inj_state.backend);
		}
	}
	gpr_inj_session_unlock();
	return rc;
}

/* The end of a session: the front end let go, the log closed. */
static int stop_locked(char *path, size_t len)
{
	char p[4096];
	if (!gpr_inj_writer_path(p, sizeof(p)))
		return GPURECLAIM_TRACE_E_NOT_TRACED;
	int backend = gpr_inj_state.backend;
	gpr_inj_session_stop();
	if (backend == GPR_INJ_CUPTI)
		gpr_inj_cupti_detach();
	paused = 0;
	cupti_recording = 0;
	if (path && len)
		snprintf(path, len, "%s", p);
	return 0;
}

/* Is the file at path there (a session must create its log)? */
static int exists(const char *path)
{
	return access(path, F_OK) == 0 || errno != ENOENT;
}

GPR_EXPORT int
gpureclaim_trace_start(const struct gpureclaim_trace_start_opts *o)
{
	if (!o || !gpr_inj_sized_valid(o, o->sz, sizeof(*o)) ||
	    !GPR_INJ_GET(o, path, NULL) || !*o->path)
		return GPURECLAIM_TRACE_E_ARGS;
	int backend = GPR_INJ_GET(o, backend, GPURECLAIM_TRACE_AUTO);
	const char *cupti = GPR_INJ_GET(o, cupti, NULL);
	char *why_buf = GPR_INJ_GET(o, why, NULL);
	size_t why_buf_len = GPR_INJ_GET(o, why_len, 0);
	char scratch[512];
	int has_why = why_buf && why_buf_len;
	char *why = has_why ? why_buf : scratch;
	size_t why_len = has_why ? why_buf_len : sizeof(scratch);
	why[0] = '\0';
	gpr_inj_session_lock();
	gpr_inj_say_into(why, why_len);
	int rc = GPURECLAIM_TRACE_OK;
	char open_log[4096];
	int live = gpr_inj_preload_live();
	if (gpr_inj_session_secure()) {
		rc = GPURECLAIM_TRACE_E_UNAVAILABLE;
	} else if (strlen(o->path) > GPR_TRACE_MAX_PATH) {
		snprintf(why, why_len,
			 "the log's path is %zu bytes, more than %d: it is "
			 "refused, never cut",
			 strlen(o->path), GPR_TRACE_MAX_PATH);
		rc = GPURECLAIM_TRACE_E_ARGS;
	} else if (gpr_inj_session_forked()) {
		snprintf(why, why_len,
			 "this process was forked from a traced one: it is "
			 "not traced");
		rc = GPURECLAIM_TRACE_E_FORKED;
	} else if (gpr_inj_writer_path(open_log, sizeof(open_log))) {
		snprintf(why, why_len, "already tracing to %s", open_log);
		rc = GPURECLAIM_TRACE_E_ACTIVE;
	} else if (exists(o->path)) {
		snprintf(why, why_len,
			 "%s exists: a trace log is never "
			 "written over",
			 o->path);
		rc = GPURECLAIM_TRACE_E_LOG;
	} else if (backend == GPURECLAIM_TRACE_INTERPOSE && !live) {
		snprintf(why, why_len,
			 "the interposer is not in this process: start the "
			 "program under `gpureclaim trace --dormant -- ...`");
		rc = GPURECLAIM_TRACE_E_UNAVAILABLE;
	} else if (live && backend != GPURECLAIM_TRACE_CUPTI) {
		if (gpr_inj_session_start(GPR_INJ_INTERPOSE, o->path, 0,
					  "program", gpr_inj_preload_meta,
					  gpr_inj_preload_driver()) < 0)
			rc = GPURECLAIM_TRACE_E_LOG;
	} else if (gpr_inj_cupti_attach(cupti) < 0) {
		rc = GPURECLAIM_TRACE_E_UNAVAILABLE;
	} else if (gpr_inj_session_start(GPR_INJ_CUPTI, o->path, 0, "program",
					 NULL, NULL) < 0) {
		gpr_inj_cupti_detach();
		rc = GPURECLAIM_TRACE_E_LOG;
	} else {
		cupti_recording = 1;
	}
	if (rc == GPURECLAIM_TRACE_OK) {
		make_global();
		why[0] = '\0';
	}
	gpr_inj_say_into(NULL, 0);
	gpr_inj_session_unlock();
	return rc;
}

GPR_EXPORT int gpureclaim_trace_stop(char *path, size_t len)
{
	gpr_inj_session_lock();
	int rc = stop_locked(path, len);
	gpr_inj_session_unlock();
	return rc;
}

GPR_EXPORT int gpureclaim_trace_status(struct gpureclaim_trace_status *st)
{
	if (!st || !GPR_INJ_HAS(st, session))
		return GPURECLAIM_TRACE_E_ARGS;
	struct gpureclaim_trace_status s;
	memset(&s, 0, sizeof(s));
	s.sz = st->sz;
	gpr_inj_session_lock();
	if (gpr_inj_writer_path(s.path, sizeof(s.path))) {
		s.session = paused ? 2 : 1;
		s.backend = gpr_inj_state.backend == GPR_INJ_INTERPOSE
				? GPURECLAIM_TRACE_INTERPOSE
				: GPURECLAIM_TRACE_CUPTI;
		s.wait = gpr_inj_state.wait;
	}
	s.interposer = gpr_inj_preload_live();
	gpr_inj_session_unlock();
	memcpy(st, &s, st->sz < sizeof(s) ? st->sz : sizeof(s));
	return 0;
}

/* ---- the live query ---- */

struct group {
	int device, kind;
	uint32_t lib;
	uint64_t bytes, count;
};

struct live {
	struct group *g;
	size_t n, cap;
	int oom;
};

static void add_live(void *ctx, uint64_t size, uintptr_t ip, uint32_t meta)
{
	struct live *l = ctx;
	uint32_t lib, site;
	gpr_inj_resolve(ip, &lib, &site);
	int kind = GPR_INJ_META_KIND(meta);
	int device = kind == 1 ? -1 : GPR_INJ_META_DEVICE(meta);
	for (size_t i = 0; i < l->n; i++)
		if (l->g[i].device == device && l->g[i].kind == kind &&
		    l->g[i].lib == lib) {
			l->g[i].bytes += size;
			l->g[i].count++;
			return;
		}
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 32;
		struct group *g = realloc(l->g, cap * sizeof(*g));
		if (!g) {
			l->oom = 1;
			return;
		}
		l->g = g;
		l->cap = cap;
	}
	l->g[l->n++] = (struct group){device, kind, lib, size, 1};
}

static int by_bytes(const void *a, const void *b)
{
	const struct group *x = a, *y = b;
	return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

GPR_EXPORT int gpureclaim_trace_live(struct gpureclaim_trace_live *rows,
				     size_t cap, size_t *n)
{
	if (!n || (cap && (!rows || !GPR_INJ_HAS(&rows[0], kind))))
		return GPURECLAIM_TRACE_E_ARGS;
	*n = 0;
	if (atomic_load(&gpr_inj_state.active) == GPR_INJ_NONE)
		return GPURECLAIM_TRACE_E_NOT_TRACED;
	struct live l = {0};
	gpr_inj_map_each(add_live, &l);
	if (l.n)
		qsort(l.g, l.n, sizeof(*l.g), by_bytes);
	size_t stride = cap ? rows[0].sz : 0;
	for (size_t i = 0; i < l.n && i < cap; i++) {
		const char *lib = gpr_inj_string(l.g[i].lib);
		struct gpureclaim_trace_live r = {
		    stride,	  l.g[i].device,
		    l.g[i].kind,  lib ? lib : "[unknown]",
		    l.g[i].bytes, l.g[i].count};
		memcpy((char *)rows + i * stride, &r,
		       stride < sizeof(r) ? stride : sizeof(r));
	}
	*n = l.n;
	free(l.g);
	return 0;
}
