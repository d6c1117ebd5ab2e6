/*
 * The tracer's settings that take a word rather than on/off (the on/off
 * switches are trace/format/trace_switch.h): one table, read by the
 * tracer (tracer.h: gpr_inj_setting) and checked by `gpureclaim trace`
 * before the command runs, so a typo is refused in one line instead of
 * silently running the default. Header only: the command includes it
 * without linking the tracer.
 *
 * X(name, words): words separated by '/'; a setting's value is the index
 * of its word.
 */
#ifndef GPR_TRACE_INJECT_SETTINGS_H
#define GPR_TRACE_INJECT_SETTINGS_H

#include <string.h>

#define GPR_TRACE_SETTINGS(X)                                                  \
	X("GPURECLAIM_TRACE_WAIT", "perf/getrusage/none")                      \
	X("GPURECLAIM_TRACE_CLOCK", "clock_gettime")

/* GPURECLAIM_TRACE_WAIT's words, in the table's order. */
enum { GPR_TRACE_WAIT_PERF, GPR_TRACE_WAIT_GETRUSAGE, GPR_TRACE_WAIT_NONE };
/* GPURECLAIM_TRACE_CLOCK's. */
enum { GPR_TRACE_CLOCK_GETTIME };

/* The words of setting `name`, or NULL when it is not one. */
static inline const char *gpr_trace_setting_words(const char *name)
{
#define GPR_X_SETTING(n, w)                                                    \
	if (strcmp(name, n) == 0)                                              \
		return w;
	GPR_TRACE_SETTINGS(GPR_X_SETTING)
#undef GPR_X_SETTING
	return NULL;
}

/* The index of v among words ("a/b/c"); -1 for NULL or "" (unset), -2
 * for anything else. */
static inline int gpr_trace_setting_parse(const char *words, const char *v)
{
	if (!v || !*v)
		return -1;
	size_t n = strlen(v);
	int i = 0;
	for (const char *w = words; *w; i++) {
		size_t k = strcspn(w, "/");
		if (k == n && strncmp(w, v, n) == 0)
			return i;
		w += k;
		w += *w == '/';
	}
	return -2;
}

/* words ("a/b/c") for people: "a, b or c" into out. */
static inline void gpr_trace_setting_list(const char *words, char *out,
					  size_t len)
{
	size_t at = 0;
	if (len)
		out[0] = '\0';
	for (const char *w = words; *w && at + 1 < len;) {
		size_t k = strcspn(w, "/");
		const char *sep = w == words ? "" : w[k] ? ", " : " or ";
		for (const char *c = sep; *c && at + 1 < len; c++)
			out[at++] = *c;
		for (size_t i = 0; i < k && at + 1 < len; i++)
			out[at++] = w[i];
		out[at] = '\0';
		w += k;
		w += *w == '/';
	}
}

#endif /* GPR_TRACE_INJECT_SETTINGS_H */
