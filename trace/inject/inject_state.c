/*
 * The tracer's shared state (tracer.h says who writes what and when), the
 * switches and settings that set it when a session starts, and its one
 * way to speak: a line on stderr, or into the message buffer of a
 * program's call that asked for it (gpureclaim_trace_start gives its
 * caller the line instead of printing it: a notebook shows a Python
 * warning, not the kernel's stderr).
 */
#include "tracer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../format/trace_switch.h"
#include "settings.h"

struct gpr_inj_state gpr_inj_state;

static __thread char *say_buf;
static __thread size_t say_len;

void gpr_inj_say_into(char *buf, size_t len)
{
	say_buf = len ? buf : NULL;
	say_len = len;
	if (say_buf)
		say_buf[0] = '\0';
}

void gpr_inj_say(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	if (say_buf) {
		/* the first line is the reason: keep it */
		if (!say_buf[0])
			vsnprintf(say_buf, say_len, fmt, ap);
		va_end(ap);
		return;
	}
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
	const char *word = gpr_trace_switch_word(name);
	int on = gpr_trace_switch_parse(v, word);
	if (on < 0) {
		gpr_inj_say("%s='%.64s' is not one of " GPR_TRACE_SWITCH_WORDS
			    "%s%s; taken as off",
			    name, v, word ? "/" : "", word ? word : "");
		on = 0;
	}
	return on;
}

int gpr_inj_setting(const char *name)
{
	const char *v = secure_getenv(name);
	const char *words = gpr_trace_setting_words(name);
	int i = words ? gpr_trace_setting_parse(words, v) : -1;
	if (i == -2) {
		char list[96];
		gpr_trace_setting_list(words, list, sizeof(list));
		gpr_inj_say("%s='%.64s' is not %s%s; the default is used", name,
			    v, strchr(words, '/') ? "one of " : "", list);
		i = -1;
	}
	return i;
}
