/*
 * A recording session: what starting one sets up (the back end once per
 * process, the waiting-time source, the driver functions the records ask,
 * the size maps emptied) and the META lines its log begins with; stopping
 * it closes the log. One session at a time, under the session lock; a
 * process may run several in turn (gpureclaim_trace_start/stop).
 */
#include "session.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "gpureclaim.h"
#include "callers.h"
#include "clock.h"
#include "recorder.h"
#include "sizes.h"
#include "threads.h"
#include "wait.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

void gpr_inj_session_lock(void)
{
	pthread_mutex_lock(&mu);
}

void gpr_inj_session_unlock(void)
{
	pthread_mutex_unlock(&mu);
}

/* The back end, once per process: 0, or -1 (said why). */
static int back_end(void)
{
	static int state; /* 0 not tried, 1 ready, -1 failed */
	if (state == 0)
		state = gpr_inj_tt_init() == 0 && gpr_inj_map_init() == 0 &&
				gpr_inj_callsite_init() == 0
			    ? 1
			    : -1;
	if (state < 0)
		gpr_inj_say("out of memory; this run is not traced");
	return state > 0 ? 0 : -1;
}

int gpr_inj_session_default_path(char *out, size_t len)
{
	const char *env = secure_getenv("GPURECLAIM_TRACE_OUTPUT");
	if (env && strlen(env) > GPR_TRACE_MAX_PATH) {
		gpr_inj_say(
		    "GPURECLAIM_TRACE_OUTPUT is %zu bytes, more than %d; "
		    "this run is not traced",
		    strlen(env), GPR_TRACE_MAX_PATH);
		return -1;
	}
	if (env && *env)
		snprintf(out, len, "%s", env);
	else
		snprintf(out, len, "gpureclaim-%d.trace", (int)getpid());
	return 0;
}

int gpr_inj_session_secure(void)
{
	if (!getauxval(AT_SECURE))
		return 0;
	gpr_inj_say("not tracing a setuid or setgid program (secure "
		    "execution); it runs untraced");
	return 1;
}

int gpr_inj_session_open(void)
{
	char path[8];
	return gpr_inj_writer_path(path, sizeof(path));
}

int gpr_inj_session_forked(void)
{
	return gpr_inj_writer_forked();
}

int gpr_inj_session_start(int backend, const char *path, int shared,
			  const char *started_by, gpr_inj_meta_fn closing,
			  const void *in_driver)
{
	if (back_end() < 0)
		return -1;
	gpr_inj_callsite_exclude((const void *)gpr_inj_session_start);
	int st = gpr_inj_switch("GPURECLAIM_TRACE_SELFTIME");
	gpr_inj_state.selftime = st == 2   ? GPR_INJ_SELFTIME_PARTS
				 : st == 1 ? GPR_INJ_SELFTIME_TOTAL
					   : GPR_INJ_SELFTIME_OFF;
	gpr_inj_state.backend = backend;
	gpr_inj_state.wait = gpr_inj_wait_probe();
	gpr_inj_clock_start();
	gpr_inj_rec_driver(in_driver);
	gpr_inj_map_clear();
	char b[5][96];
	snprintf(b[0], sizeof(b[0]), "backend=%s",
		 backend == GPR_INJ_INTERPOSE ? "interpose" : "cupti");
	snprintf(b[1], sizeof(b[1]), "wait=%s",
		 gpr_inj_wait_name(gpr_inj_state.wait));
	snprintf(b[2], sizeof(b[2]), "started_by=%s", started_by);
	snprintf(b[3], sizeof(b[3]), "tracer=%s", GPR_VERSION_STRING);
	snprintf(b[4], sizeof(b[4]), "clock=%s", gpr_inj_clock_name());
	const char *kv[] = {
	    "format=" GPR_TRACE_META_FORMAT, b[0], b[1], b[2], b[3], b[4]};
	return gpr_inj_writer_start(path, shared, kv, 6, closing);
}

int gpr_inj_session_stop(void)
{
	return gpr_inj_writer_stop();
}
