/* The one parser of the tracer's on/off variables (trace_switch.h). */
#include "trace_switch.h"

#include <stddef.h>
#include <strings.h>

int gpr_trace_switch_parse(const char *value)
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
	return -1;
}
