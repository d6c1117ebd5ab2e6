/* The one parser of the tracer's on/off variables (trace_switch.h). */
#include "trace_switch.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

int gpr_trace_switch_parse(const char *value, const char *word)
{
	static const struct {
		const char *word;
		int on;
	} words[] = {{"1", 1}, {"yes", 1}, {"true", 1},
		     {"0", 0}, {"no", 0},  {"false", 0}};
	if (!value || !*value)
		return 0;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strcasecmp(value, words[i].word) == 0)
			return words[i].on;
	if (word && strcasecmp(value, word) == 0)
		return 2;
	return -1;
}

const char *gpr_trace_switch_word(const char *name)
{
	static const struct {
		const char *name, *word;
	} all[] = {
#define GPR_X_SWITCH(name, word) {name, word},
	    GPR_TRACE_SWITCHES(GPR_X_SWITCH)
#undef GPR_X_SWITCH
	};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (strcmp(all[i].name, name) == 0)
			return all[i].word;
	return NULL;
}
