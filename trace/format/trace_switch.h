/*
 * The tracer's on/off environment variables: one list of every
 * GPURECLAIM_TRACE_* switch and one parser, shared by the injection
 * library (which cannot fail the traced program, so it warns and takes the
 * switch as off) and by `gpureclaim trace` (which refuses a bad value
 * before it runs anything).
 */
#ifndef GPR_TRACE_SWITCH_H
#define GPR_TRACE_SWITCH_H

/* X(name): every switch; each is off unless set to an "on" word. */
#define GPR_TRACE_SWITCHES(X)                                                  \
	X("GPURECLAIM_TRACE_SELFTIME")                                         \
	X("GPURECLAIM_TRACE_SUBSCRIBE_ONLY")                                   \
	X("GPURECLAIM_TRACE_INJECT_ONLY")                                      \
	X("GPURECLAIM_TRACE_NO_CALLSITE")                                      \
	X("GPURECLAIM_TRACE_FULL_WALK")                                        \
	X("GPURECLAIM_TRACE_NO_SCHEDSTAT")

/* What gpr_trace_switch_parse accepts, for messages. */
#define GPR_TRACE_SWITCH_WORDS "1/0/yes/no/true/false"

/*
 * The value of an on/off variable: 1 for 1, yes, true; 0 for 0, no, false,
 * and for NULL or "" (unset); -1 for anything else (blanks included).
 * Letters in any case.
 */
int gpr_trace_switch_parse(const char *value);

#endif /* GPR_TRACE_SWITCH_H */
