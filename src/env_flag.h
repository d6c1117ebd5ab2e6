/*
 * On/off environment variables: one list of every GPURECLAIM_* switch of
 * the project and one parser, used by the injection library (which cannot
 * fail the traced program, so it warns and takes the switch as off) and by
 * the CLI (which refuses a bad value before it runs anything).
 */
#ifndef GPR_ENV_FLAG_H
#define GPR_ENV_FLAG_H

/* X(name): every switch; each is off unless set to an "on" word. */
#define GPR_ENV_SWITCHES(X)                                                    \
	X("GPURECLAIM_TRACE_SELFTIME")                                         \
	X("GPURECLAIM_TRACE_SUBSCRIBE_ONLY")                                   \
	X("GPURECLAIM_TRACE_INJECT_ONLY")                                      \
	X("GPURECLAIM_TRACE_NO_CALLSITE")                                      \
	X("GPURECLAIM_TRACE_FULL_WALK")                                        \
	X("GPURECLAIM_TRACE_NO_SCHEDSTAT")

/* What gpr__flag_parse accepts, for messages. */
#define GPR_FLAG_WORDS "1/0/yes/no/true/false"

/*
 * The value of an on/off variable: 1 for 1, yes, true; 0 for 0, no, false,
 * and for NULL or "" (unset); -1 for anything else (blanks included).
 * Letters in any case.
 */
int gpr__flag_parse(const char *value);

#endif /* GPR_ENV_FLAG_H */
