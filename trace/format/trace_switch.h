/*
 * The tracer's on/off environment variables: one list of every
 * GPURECLAIM_TRACE_* switch and one parser, shared by the injection
 * library (which cannot fail the traced program, so it warns and takes the
 * switch as off) and by `gpureclaim trace` (which refuses a bad value
 * before it runs anything).
 */
#ifndef GPR_TRACE_SWITCH_H
#define GPR_TRACE_SWITCH_H

/*
 * X(name, word): every switch; each is off unless set to an "on" word, or
 * to its own further `word` (NULL: none), which sets it another way.
 */
#define GPR_TRACE_SWITCHES(X)                                                  \
	X("GPURECLAIM_TRACE_SELFTIME", "parts")                                \
	X("GPURECLAIM_TRACE_SUBSCRIBE_ONLY", NULL)                             \
	X("GPURECLAIM_TRACE_INJECT_ONLY", NULL)                                \
	X("GPURECLAIM_TRACE_NO_CALLSITE", NULL)                                \
	X("GPURECLAIM_TRACE_FULL_WALK", NULL)                                  \
	X("GPURECLAIM_TRACE_NO_SCHEDSTAT", NULL)                               \
	X("GPURECLAIM_TRACE_DORMANT", NULL)                                    \
	X("GPURECLAIM_TRACE_CROSSCHECK", NULL)

/* What gpr_trace_switch_parse accepts, for messages. */
#define GPR_TRACE_SWITCH_WORDS "1/0/yes/no/true/false"

/*
 * The value of an on/off variable: 1 for 1, yes, true; 0 for 0, no, false,
 * and for NULL or "" (unset); 2 for `word` when not NULL; -1 for anything
 * else (blanks included). Letters in any case.
 */
int gpr_trace_switch_parse(const char *value, const char *word);

/* The further word of the switch called name (NULL: none, or no such
 * switch). */
const char *gpr_trace_switch_word(const char *name);

#endif /* GPR_TRACE_SWITCH_H */
