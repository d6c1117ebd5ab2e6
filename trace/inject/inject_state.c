/*
 * The injection library's shared state (inject.h says who writes what and
 * when), the switches that set it at initialisation, and its one way to
 * speak, a line on stderr.
 */
#include "inject.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../format/trace_switch.h"

struct gpr_inj_state gpr_inj_state;

void gpr_inj_say(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = snprintf(line, sizeof(line), "gpureclaim-trace: ");
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	size_t len = strlen(line);
	if (len < sizeof(line) - 1)
		line[len++] = '\n';
	ssize_t k = write(2, line, len);
	(void)k;
}

int gpr_inj_switch(const char *name)
{
	const char *v = secure_getenv(name);
	int on = gpr_trace_switch_parse(v);
	if (on < 0) {
		gpr_inj_say("%s='%.64s' is not one of " GPR_TRACE_SWITCH_WORDS
			    "; taken as off",
			    name, v);
		on = 0;
	}
	return on;
}
